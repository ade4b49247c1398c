"""What a decode GEMM's time is made of under tunebox's timing (issue 20's decode target): on the GPU host,

    python scripts/decode_floor.py OUT.json

times, with CUDA events, the median of 50 samples each, the L2 flushed before every sample as the
worker flushes it (a memset of twice the L2: it leaves the cache full of dirty lines) and, beside it,
by reading that buffer (a clean cache), with the GPU kept busy while the host enqueues:
- an empty kernel (torch.cuda._sleep(0)): the floor of any timed launch;
- torch.matmul (cuBLAS) of 16 x K by K x 4096 bfloat16, K from 256 to 16384 (B from 2 to 128 MiB);
- a pure read of the same B (B.sum in float32).
A least-squares line of time against B's bytes over K >= 1024 gives each call's fixed cost and its
streaming rate; the fixed cost plus B's bytes at the copy limit is the fastest time such a call
could take."""

from __future__ import annotations

import json
import statistics
import sys
from datetime import date
from pathlib import Path

import numpy as np
import torch

from tunebox.limits import COPY_LIMIT_GBPS

SAMPLES = 50
N = 4096
KS = (256, 1024, 2048, 4096, 8192, 16384)


def timed_us(fn, flush) -> float:
    """Median microseconds of ``fn`` between two events, each sample after ``flush``."""
    for _ in range(5):
        fn()
    times = []
    for _ in range(SAMPLES):
        flush()
        torch.cuda._sleep(200_000)  # about 100 us: the host enqueues the rest before the GPU reaches it
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        fn()
        end.record()
        end.synchronize()
        times.append(begin.elapsed_time(end) * 1e3)
    return statistics.median(times)


def fit(bytes_: list[float], us: list[float]) -> dict[str, float]:
    """Fixed cost (us) and streaming rate (GB/s) of the line through (bytes, us)."""
    slope, intercept = np.polyfit(bytes_, us, 1)
    return {"fixed_us": float(intercept), "rate_gbps": float(1e-3 / slope)}


def main(out: Path) -> None:
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    buffer = torch.empty(2 * l2 // 4, dtype=torch.float32, device="cuda")
    flushes = {"memset": buffer.zero_, "read": lambda: buffer.sum()}
    rows = []
    for k in KS:
        a = torch.randn(16, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, N, device="cuda", dtype=torch.bfloat16)
        d = torch.empty(16, N, device="cuda", dtype=torch.bfloat16)
        row = {"K": k, "b_bytes": b.numel() * 2, "b_at_copy_limit_us": b.numel() * 2 / COPY_LIMIT_GBPS * 1e-3}
        for name, flush in flushes.items():
            row[f"matmul_us_{name}"] = timed_us(lambda a=a, b=b, d=d: torch.matmul(a, b, out=d), flush)
            row[f"read_us_{name}"] = timed_us(lambda b=b: b.sum(dtype=torch.float32), flush)
        rows.append(row)
        print(json.dumps(row), flush=True)
    empty = {name: timed_us(lambda: torch.cuda._sleep(0), flush) for name, flush in flushes.items()}
    big = [r for r in rows if r["K"] >= 1024]
    lines = {
        f"{call}_{name}": fit([r["b_bytes"] for r in big], [r[f"{call}_us_{name}"] for r in big])
        for call in ("matmul", "read")
        for name in flushes
    }
    result = {
        "command": "python scripts/decode_floor.py " + str(out),
        "device": torch.cuda.get_device_name(0),
        "date": date.today().isoformat(),
        "versions": {"torch": torch.__version__, "numpy": np.__version__},
        "copy_limit_gbps": COPY_LIMIT_GBPS,
        "method": __doc__,
        "empty_kernel_us": empty,
        "fits_over_k_from_1024": lines,
        "rows": rows,
    }
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({"empty_kernel_us": empty, "fits": lines}, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
