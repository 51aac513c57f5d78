"""Where a server's resident memory goes: the app of ``c2v-rag serve`` in a ``ServerThread`` of this process, the
cycles of ``bench/server_memory.py``, and after each cycle glibc's ``malloc_info`` over every arena (its bytes from
the system and its free bytes) and /proc/self/smaps by kind (the main heap, executable anonymous memory, i.e.
compiled kernels, other anonymous memory, files). ``TRIM=1``: ``malloc_trim(0)`` after each cycle, timed.

    taskset -c 0 env OMP_NUM_THREADS=1 python bench/results/server_memory_release/arenas_probe.py 8 ../shared/data NAME

Writes ``arenas_NAME.json`` in the working directory; prints one line a cycle.
"""

import ctypes
import json
import os
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import httpx  # noqa: E402
from common import load_scifact_docs, load_scifact_queries  # noqa: E402

from c2v_rag import Causal2Vec  # noqa: E402
from c2v_rag.serving import ServerConfig, ServerThread, create_app  # noqa: E402

libc = ctypes.CDLL("libc.so.6")
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.fclose.argtypes = [ctypes.c_void_p]
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]


def arenas() -> tuple[list[tuple[int, int, int]], tuple[int, int] | None]:
    """(arena, MiB from the system, MiB free) for each arena; (count, MiB) of blocks mapped on their own."""
    path = os.path.join(tempfile.gettempdir(), f"malloc_info_{os.getpid()}.xml")
    handle = libc.fopen(path.encode(), b"w")
    libc.malloc_info(0, handle)
    libc.fclose(handle)
    xml = Path(path).read_text()
    out = []
    for number, body in re.findall(r'<heap nr="(\d+)">(.*?)</heap>', xml, re.S):
        free = sum(int(s) for s in re.findall(r'<total type="(?:fast|rest)" count="\d+" size="(\d+)"', body))
        system = int(re.search(r'<system type="current" size="(\d+)"', body).group(1))
        out.append((int(number), system >> 20, free >> 20))
    mapped = re.search(r'<total type="mmap" count="(\d+)" size="(\d+)"', xml.split("</heap>")[-1])
    return out, (int(mapped.group(1)), int(mapped.group(2)) >> 20) if mapped else None


def smaps() -> dict[str, int]:
    """Resident MiB by kind of mapping."""
    kinds = {"heap": 0, "anon_x": 0, "anon_rw": 0, "file": 0}
    kind = None
    for line in open("/proc/self/smaps"):
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            parts = line.split()
            name = parts[5] if len(parts) > 5 else ""
            if name == "[heap]":
                kind = "heap"
            elif name.startswith("/"):
                kind = "file"
            else:
                kind = "anon_x" if "x" in parts[1] else "anon_rw"
        elif line.startswith("Rss:") and kind:
            kinds[kind] += int(line.split()[1])
    return {k: v >> 10 for k, v in kinds.items()}


def rss() -> int:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) >> 10
    return 0


cycles, data, label = int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
claims, abstracts = load_scifact_queries(data, 32), load_scifact_docs(data, 84)
app = create_app(Causal2Vec.from_pretrained(), ServerConfig(threads=1, max_wait_ms=5))
log = []
with ServerThread(app) as server, httpx.Client(base_url=server.url, timeout=600) as http:
    for cycle in range(cycles):
        cpu = time.process_time()
        for claim in claims:
            http.post("/v1/embeddings", json={"input": claim}).raise_for_status()
        http.post("/v1/embeddings", json={"input": abstracts[:64]}).raise_for_status()
        http.post("/v1/rerank", json={"query": claims[cycle % 32], "documents": abstracts[64:84]}).raise_for_status()
        trim = None
        if os.environ.get("TRIM"):
            before, started = rss(), time.perf_counter()
            libc.malloc_trim(0)
            trim = (before, rss(), round((time.perf_counter() - started) * 1000, 1))  # MiB before, after; ms
        heaps, mapped = arenas()
        record = {
            "cycle": cycle,
            "rss": rss(),
            "cpu": round(time.process_time() - cpu, 1),
            "arenas": heaps,
            "mmap": mapped,
            "trim": trim,
            "smaps": smaps(),
            "threads": sorted(t.name for t in threading.enumerate()),
        }
        log.append(record)
        print(label, json.dumps({k: v for k, v in record.items() if k != "threads"}), flush=True)
Path(f"arenas_{label}.json").write_text(json.dumps(log))
