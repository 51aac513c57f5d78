import ctypes
import gc
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
from common import load_scifact_docs, load_scifact_queries

from c2v_rag.core.memory import release_freed_memory
from c2v_rag.rerank import Causal2VecReranker


class MI(ctypes.Structure):
    _fields_ = [
        (n, ctypes.c_size_t)
        for n in "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()
    ]


libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MI


def st():
    m = libc.mallinfo2()
    rss = [int(line.split()[1]) // 1024 for line in open("/proc/self/status") if line.startswith("VmRSS")][0]
    return f"rss={rss} heap_used={(m.uordblks) >> 20} heap_free={m.fordblks >> 20}"


data = pathlib.Path(sys.argv[3] if len(sys.argv) > 3 else "../shared/data")
claims = load_scifact_queries(data, 200)
docs = load_scifact_docs(data, 300)
r = Causal2VecReranker(None, quantize="none")
print("loaded", st(), flush=True)
if sys.argv[1] == "trim":
    release_freed_memory()
    print("trimmed", st(), flush=True)
for i in range(int(sys.argv[2])):
    r.score(claims[i], docs[(i * 7) % 280 : (i * 7) % 280 + 20])  # other documents each query, as a server's are
    if i % 5 == 4:
        gc.collect()
        print(i + 1, st(), flush=True)
