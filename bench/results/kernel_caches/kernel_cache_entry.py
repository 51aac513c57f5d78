import ctypes
import gc
import sys

import torch


class MI(ctypes.Structure):
    _fields_ = [
        (n, ctypes.c_size_t)
        for n in "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()
    ]


libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MI
used = lambda: (libc.mallinfo2().uordblks + libc.mallinfo2().hblkhd) / 2**20
K, N = int(sys.argv[1]), int(sys.argv[2])
w = torch.randn(N, K).to(torch.bfloat16)
a = torch.randn(4096, K).to(torch.bfloat16)
torch.nn.functional.linear(a[:7], w)
gc.collect()
before = used()
for m in range(100, 1100, 5):  # 200 new row counts
    torch.nn.functional.linear(a[:m], w)
gc.collect()
print(f"K={K} N={N}: {(used() - before) * 1024 / 200:.0f} KiB per new shape")
