"""What the L2 flush before each timed sample costs the timed kernel (issue 17's 80% of the copy limit on
64 MB tensors).

    python scripts/flush_effect.py OUT.json FAMILY PROBLEM CONFIG [FAMILY PROBLEM CONFIG ...]

tunebox's harness flushes by writing a buffer of twice the L2 (``cuMemsetD32Async``; the serving
benchmark zeroes 512 MiB): the L2 is then full of dirty lines, which the timed kernel writes back to
memory as it evicts them. Each variant (PROBLEM and CONFIG as JSON objects, as the winners database
holds them) is timed here with that flush, with a read-only flush (a sum over twice the L2, which
leaves the L2 clean) and with no flush, interleaved, medians of 200 samples; beside it
``cuMemcpyDtoDAsync`` of the same bytes (half the variant's bytes moved each way) under each flush,
and an empty kernel. Outputs are not verified here (the variants' sweeps and GPU tests did). Needs a
GPU and torch.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

import torch
from cuda.core import LaunchConfig, Program, ProgramOptions, Stream, launch
from serving_benchmark import tensors  # scripts/, beside this one

from tunebox.benchmark import versions
from tunebox.cuda_api import pack, steps_launcher
from tunebox.families import get
from tunebox.runtime.launch import Launcher

SAMPLES = 200
ALIVE: list[Any] = []  # the variants' buffers, kept for the script's life


def variant_run(family_name: str, problem_json: dict[str, Any], config_json: dict[str, Any]) -> tuple[Any, int]:
    """A closure launching the variant on seeded inputs, and its bytes moved."""
    family = get(family_name)
    problem = family.parse_problem(problem_json)
    config = family.config(config_json)
    family.check(problem, config)
    arrays, _ = tensors(family, problem, seed=1)
    workspace = {
        b.name: torch.zeros(max(1, b.nbytes), dtype=torch.uint8, device="cuda")
        for b in family.buffers(problem)
        if b.role == "workspace"
    }
    pointers = {name: t.data_ptr() for name, t in {**arrays, **workspace}.items()}
    stream = Stream.from_handle(torch.cuda.current_stream().cuda_stream)
    steps = Launcher().steps(family, problem, config)
    run = steps_launcher(stream, [(kernel, geometry, pack(a, pointers)) for kernel, geometry, a in steps])
    ALIVE.append((arrays, workspace))
    return run, family.work(problem).bytes_moved


def timed(run: Any, flush: Any) -> float:
    """Median ms of ``run`` over SAMPLES samples, ``flush`` before each (outside the events)."""
    times = []
    for _ in range(SAMPLES):
        flush()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


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
        run, moved = variant_run(specs[i], json.loads(specs[i + 1]), json.loads(specs[i + 2]))
        src = torch.empty(moved // 2, dtype=torch.uint8, device="cuda").random_(0, 255)
        dst = torch.empty_like(src)
        cases.append({"case": f"{specs[i]} {specs[i + 1]} {specs[i + 2]}", "bytes": moved, "run": run})
        cases.append({"case": f"copy of {moved // 2} bytes", "bytes": moved, "run": lambda d=dst, s=src: d.copy_(s)})
    rows = []
    for case in cases:
        case["run"]()
        torch.cuda.synchronize()
        ms = {name: timed(case["run"], flush) for name, flush in flushes.items()}
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
