"""Wall time of one verification compare (the worker's ``_count``: memsets, the kernel, the
download of its two counters) on two equal 1.66 GB buffers, the size of issue 15's throughput
problem (float16 7919 x 104729: outputs compared as 2-byte words, inputs as 4-byte words), for
``kernels/runtime/compare.cu`` and an earlier version of it; L2 flushed before each, median of 10
after 2 warm-ups. Needs a GPU.

    git show COMMIT:kernels/runtime/compare.cu > old.cu; python scripts/verify_speed.py old.cu OUT.json
"""

import json
import sys
import time
from pathlib import Path

import numpy as np

from tunebox.build.nvrtc import NvrtcBuilder
from tunebox.cuda_api import load_kernel
from tunebox.families.base import KernelSource
from tunebox.runner.gpu_session import GpuSession

s = GpuSession()
old = Path(sys.argv[1]).read_text()
b = NvrtcBuilder(s.arch, cache_dir=None, workers=1)
kern = {}
for tag, code in (("old", old), ("new", Path("kernels/runtime/compare.cu").read_text())):
    for w, c in ((2, "unsigned short"), (4, "unsigned int")):
        r = b.build_one(KernelSource(code, f"mismatches<{c}>", ()))
        kern[tag, w] = load_kernel(r.cubin, r.lowered_name, 0, s.device.device_id)
b.close()
nbytes = 7919 * 104729 * 2
A = s.device.allocate(nbytes, stream=s.stream)
B = s.device.allocate(nbytes, stream=s.stream)
s.fill(A, 0x3C00, 2, nbytes // 2)
s.fill(B, 0x3C00, 2, nbytes // 2)
out = {}
for (tag, w), k in kern.items():
    n = nbytes // w
    times = []
    for _ in range(12):
        s.flush_l2()
        s.stream.sync()
        t0 = time.perf_counter()
        r = s._count(k, A, B, n)
        times.append((time.perf_counter() - t0) * 1e3)
    med = float(np.median(times[2:]))
    out[f"{tag} {w}-byte words"] = {"wall_ms_median": med, "gbps": 2 * nbytes / med / 1e6, "result": list(r)}
    print(tag, w, out[f"{tag} {w}-byte words"], flush=True)
Path(sys.argv[2]).write_text(json.dumps({"bytes_each": nbytes, "old": sys.argv[1], "cases": out}, indent=1))
