"""What the L2 flush before each timed sample costs the timed kernel (issue 17's 80% of the copy limit on
64 MB tensors).

    python scripts/flush_effect.py OUT.json FAMILY PROBLEM CONFIG [FAMILY PROBLEM CONFIG ...]

tunebox's harness flushes by writing a buffer of twice the L2 (``cuMemsetD32Async``; the serving
benchmark zeroes 512 MiB): the L2 is then full of dirty lines, which the timed kernel writes back to
memory as it evicts them. Each variant (PROBLEM and CONFIG as JSON objects, as the winners database
holds them) is timed here with that flush, with a read-only flush (a sum over twice the L2, which
leaves the L2 clean) and with no flush, one flush after the other, medians of 200 samples; beside it
``cuMemcpyDtoDAsync`` of the same bytes (half the variant's bytes moved each way) under each flush,
and an empty kernel. Outputs are not verified here (the variants' sweeps and GPU tests did). Needs a
GPU and torch.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch
from cuda.core import LaunchConfig, Program, ProgramOptions, Stream, launch
from launch_variant import variant_launcher  # scripts/, beside this one
from serving_benchmark import median_ms

from tunebox.benchmark import versions
from tunebox.families import get

SAMPLES = 200
ALIVE: list[Any] = []  # the variants' buffers, kept for the script's life


def main(out: Path, specs: list[str]) -> None:
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    buffer = torch.empty(2 * l2 // 4, dtype=torch.int32, device="cuda")
    flushes = {
        "memset (the harness's)": lambda: buffer.zero_(),
        "read (sum, L2 left clean)": lambda: buffer.sum(),
        "none": lambda: None,
    }
    empty = Program('extern "C" __global__ void empty() {}', "c++", ProgramOptions(arch="sm_90"))
    empty_kernel = empty.compile("cubin").get_kernel("empty")
    stream = Stream.from_handle(torch.cuda.current_stream().cuda_stream)
    cases: list[dict[str, Any]] = [
        {"case": "empty kernel", "run": lambda: launch(stream, LaunchConfig(grid=1, block=32), empty_kernel)}
    ]
    for i in range(0, len(specs), 3):
        family, problem, config = specs[i], json.loads(specs[i + 1]), json.loads(specs[i + 2])
        run, buffers = variant_launcher(family, problem, config)
        ALIVE.append(buffers)
        operation = get(family)
        moved = operation.work(operation.parse_problem(problem)).bytes_moved
        src = torch.empty(moved // 2, dtype=torch.uint8, device="cuda").random_(0, 255)
        dst = torch.empty_like(src)
        cases.append({"case": f"{specs[i]} {specs[i + 1]} {specs[i + 2]}", "bytes": moved, "run": run})
        cases.append({"case": f"copy of {moved // 2} bytes", "bytes": moved, "run": lambda d=dst, s=src: d.copy_(s)})
    rows = []
    for case in cases:
        case["run"]()
        torch.cuda.synchronize()
        ms = {name: median_ms(case["run"], SAMPLES, flush) for name, flush in flushes.items()}
        row = {"case": case["case"], "median_ms": ms}
        if "bytes" in case:
            row["gbps"] = {name: case["bytes"] / (t * 1e-3) / 1e9 for name, t in ms.items()}
        rows.append(row)
        print(json.dumps(row))
    out.write_text(
        json.dumps(
            {
                "device": torch.cuda.get_device_name(0),
                "command": "python scripts/flush_effect.py " + " ".join(f"'{s}'" for s in specs),
                "versions": versions(),
                "samples": SAMPLES,
                "l2_bytes": l2,
                "rows": rows,
            },
            indent=1,
        )
        + "\n"
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
