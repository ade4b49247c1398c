"""Serving benchmark (issue 16): ``tunebox.launch`` at shapes no sweep file tuned, against the library call.

    python scripts/serving_benchmark.py results/benchmarks/serving_grid.json OUT.json [--samples N]

For each shape of the grid (chosen and committed before measuring): seeded inputs on the GPU as torch tensors;
the first ``launch`` (what it served: kernel from an exact / nearest / default answer, or the library call;
its wall time, compilation included); its output verified against the family's numpy reference (bit for bit;
gemm within the family's tolerance); then, interleaved on the same inputs with the L2 flushed before every
sample, the median of what ``launch`` serves, of the library call a user makes (the operation's main torch
baseline, in place where it has that form), and of the tunebox kernel forced (``use="tunebox"``); and the host
time per cached launch (``host_us``: 200 calls in batches of 20) beside the library call's and beside the same
call bound to its tensors (``tunebox.bind``: ``bound_host_us``). ``--tune`` is the launcher's first-use policy
(default first_call: the first launch of an untuned shape races, within ``--race-budget`` seconds, keeping
results in ``--raced``); the race's entrants are recorded. Needs a GPU and torch."""

from __future__ import annotations

import functools
import json
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch

from tunebox.benchmark import versions
from tunebox.dtypes import buffer_type
from tunebox.families import get
from tunebox.limits import BF16_TENSOR_TFLOPS, COPY_LIMIT_GBPS
from tunebox.runner.worker import disagreement
from tunebox.runtime.arrays import device_array
from tunebox.runtime.launch import Launcher

INT = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}  # how torch holds a width's bits


@functools.cache
def flush_buffer() -> Any:
    return torch.empty(512 * 2**20, dtype=torch.uint8, device="cuda")  # well past the 60 MiB L2


def tensors(family: Any, problem: Any, seed: int) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The problem's buffers as typed torch tensors (inputs seeded, outputs NaN-ish poison) and the
    numpy inputs."""
    inputs = family.make_inputs(problem, np.random.default_rng(seed))
    out: dict[str, Any] = {}
    for spec in family.buffers(problem):
        if spec.role == "workspace":
            continue
        dtype = getattr(torch, spec.dtype)
        if spec.name in inputs:
            bits = inputs[spec.name]
            signed = bits.view({1: np.uint8, 2: np.int16, 4: np.int32, 8: np.int64}[bits.dtype.itemsize])
            out[spec.name] = torch.from_numpy(np.ascontiguousarray(signed)).cuda().view(dtype)
        else:  # outputs start as the poison the references expect where nothing is written
            et = buffer_type(spec.dtype)
            wraps = et.itemsize > 1 and et.poison >= 1 << (8 * et.itemsize - 1)  # INT's wider types are signed
            poison = et.poison - (1 << (8 * et.itemsize)) if wraps else et.poison
            out[spec.name] = torch.full(spec.shape, poison, dtype=INT[et.itemsize], device="cuda").view(dtype)
    return out, inputs


def median_ms(run: Any, samples: int, flush: Any = None) -> float:
    """Median ms of ``run`` between two events over ``samples`` samples, ``flush`` before each (outside
    the events; default: zeroing 512 MiB)."""
    times = []
    for _ in range(samples):
        if flush is None:
            flush_buffer().zero_()
        else:
            flush()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def host_us(run: Any, calls: int = 200, warmups: int = 1, batch: int = 20) -> float:
    """Host time per call of ``run`` (us): ``calls`` calls (in whole batches, at least one) after
    ``warmups``, in batches of ``batch`` with the device synchronised between them; the median over
    batches of the mean call. A batch never
    fills the launch queue, so a long kernel's queue does not make the host wait for the device (a
    mean over 200 calls in a row counted that wait: serving.json before 2026-12-02)."""
    for _ in range(warmups):
        run()
    means = []
    for _ in range(max(1, calls // batch)):
        torch.cuda.synchronize()
        started = time.perf_counter()
        for _ in range(batch):
            run()
        means.append((time.perf_counter() - started) / batch * 1e6)
    torch.cuda.synchronize()
    return statistics.median(means)


def measure(launcher: Launcher, entry: dict[str, Any], samples: int) -> dict[str, Any]:
    family = get(entry["family"])
    problem = family.parse_problem(entry["problem"])
    options = family.launch_options(problem)
    arrays, inputs = tensors(family, problem, seed=1)
    races = len(launcher.races)
    started = time.perf_counter()
    served = launcher(family.name, arrays, **options)
    torch.cuda.synchronize()
    first_call_s = time.perf_counter() - started
    raced = launcher.races[races:]
    expected = family.reference(problem, inputs)
    tolerance = family.tolerance(problem, inputs)
    wrong = {}
    for name, ref in expected.items():
        got = arrays[name].contiguous().view(INT[arrays[name].element_size()])
        signed = ref.view({1: np.uint8, 2: np.int16, 4: np.int32, 8: np.int64}[ref.dtype.itemsize])
        wrong[name] = disagreement(got, torch.from_numpy(np.ascontiguousarray(signed)).cuda(), tolerance)
    # the library call for the problem launch serves (a caller's indices unpromised: the checked form)
    served_problem = family.problem_from_arrays({k: device_array(v) for k, v in arrays.items()}, **options)
    library = family.torch_baselines(served_problem)[0]
    bits = {k: v.view(INT[v.element_size()]) for k, v in arrays.items()}
    in_names = [b.name for b in family.buffers(problem) if b.role == "input"]
    out_names = [b.name for b in family.buffers(problem) if b.role == "output"]
    lib_in = {k: bits[k] for k in in_names}
    typed_in, typed_out = {k: arrays[k] for k in in_names}, {k: arrays[k] for k in out_names}
    library_run = (lambda: library.into(typed_in, typed_out)) if library.into else (lambda: library.run(lib_in))
    runs = {
        "served": lambda: launcher(family.name, arrays, **options),
        "library": library_run,
        "tunebox": lambda: launcher(family.name, arrays, use="tunebox", **options),
    }
    for run in runs.values():
        run()
    torch.cuda.synchronize()
    timed: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(samples):  # interleaved: each sample of each, in turn
        for name, run in runs.items():
            timed[name].append(median_ms(run, 1))
    ms = {k: statistics.median(v) for k, v in timed.items()}
    work = family.work(problem)
    result = {
        "family": family.name,
        "problem": problem.to_dict(),
        "served": served.source,
        "ran": served.ran,
        "config": served.config if served.ran == "kernel" else None,
        "library": library.name + ("" if library.into else " (then compared as run: its own output)"),
        "explanation": served.explanation,
        "verified": all(not w for w in wrong.values()),
        "disagreement": {k: w for k, w in wrong.items() if w},
        "served_ms": ms["served"],
        "library_ms": ms["library"],
        "tunebox_ms": ms["tunebox"],
        "ratio": ms["library"] / ms["served"],
        "tunebox_ratio": ms["library"] / ms["tunebox"],
        "first_call_s": first_call_s,
        "race": [
            {
                "seconds": r.seconds,
                "setup_s": r.setup_s,
                "entrants": [{"label": e.label, "verdict": e.verdict, "median_ms": e.median_ms} for e in r.entrants],
            }
            for r in raced
        ],
        "host_us_per_launch": host_us(runs["served"]),
        "bound_host_us": host_us(launcher.bind(family.name, arrays, **options)),  # tunebox.bind's calls
        "library_host_us": host_us(library_run),
        "noise": {k: (max(v) - min(v)) / statistics.median(v) for k, v in timed.items()},
    }
    if work.flops:
        result["served_tflops"] = work.flops / (ms["served"] * 1e9)
        result["served_of_peak"] = result["served_tflops"] / BF16_TENSOR_TFLOPS
    else:
        result["served_gbps"] = work.bytes_moved / (ms["served"] * 1e6)
        result["served_of_copy_limit"] = result["served_gbps"] / COPY_LIMIT_GBPS
    return result


def main(grid: Path, out: Path, samples: int, tune: str, budget_s: float, raced: Path) -> None:
    shapes = json.loads(grid.read_text())["shapes"]
    launcher = Launcher(cache_dir=Path("/tmp/tunebox-cubins"), tune=tune, raced=raced, race_budget_s=budget_s)  # type: ignore[arg-type]
    cases = []
    for entry in shapes:
        try:
            case = measure(launcher, entry, samples)
        except Exception as exc:  # recorded, never hidden: the case says what failed
            case = {"family": entry["family"], "problem": entry["problem"], "error": f"{type(exc).__name__}: {exc}"}
        cases.append(case)
        print(
            json.dumps(
                {k: case.get(k) for k in ("family", "served", "ratio", "tunebox_ratio", "host_us_per_launch", "error")}
            ),
            flush=True,
        )
        out.write_text(json.dumps(document(grid, cases, samples, tune, budget_s), indent=1))


def document(grid: Path, cases: list[dict[str, Any]], samples: int, tune: str, budget_s: float) -> dict[str, Any]:
    return {
        "device": torch.cuda.get_device_name(),
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "command": f"python scripts/serving_benchmark.py {grid} <out> --samples {samples} --tune {tune} "
        f"--race-budget {budget_s:g} --raced <a new database>",
        "tune": tune,
        "race_budget_s": budget_s,
        "versions": versions(),
        "samples": samples,
        "cases": cases,
    }


def option(args: list[str], name: str, default: str) -> str:
    return args[args.index(name) + 1] if name in args else default


if __name__ == "__main__":
    args = sys.argv[1:]
    main(
        Path(args[0]),
        Path(args[1]),
        int(option(args, "--samples", "15")),
        option(args, "--tune", "first_call"),
        float(option(args, "--race-budget", "0.5")),
        Path(option(args, "--raced", "/tmp/tunebox-raced.sqlite")),
    )
