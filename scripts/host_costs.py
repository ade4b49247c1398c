"""Host-side costs behind two changes of 2026-12-02, measured on a CPU (no GPU needed):

- the surrogate's asks (``scripts/surrogate_speed.py``) with OpenBLAS's own threads and with one
  (``threadpoolctl``, as ``Sweep.run`` limits them), alone and beside busy processes standing in for the
  compile pool's threads on every core, in interleaved rounds;
- the gemm tolerance's mean magnitudes of an 8000 x 8000 bfloat16 operand: ``abs(decode(bits)).mean()``
  (float64 copies, as before) against ``ElementType.mean_magnitude``, each the first in a fresh process.

    python scripts/host_costs.py OUT.json [--asks N] [--rounds R]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from surrogate_speed import ask_seconds  # scripts/, beside this one
from threadpoolctl import threadpool_info, threadpool_limits

from tunebox.dtypes import element_type

SWEEP = Path("spaces/throughput_default.toml")


def _spin() -> None:
    while True:
        pass


def asks_total(asks: int, blas_threads: int | None) -> float:
    """Seconds of ``asks`` surrogate asks, OpenBLAS limited to ``blas_threads`` (None: its own count)."""
    if blas_threads is None:
        return sum(ask_seconds(SWEEP, asks)[2])
    with threadpool_limits(limits=blas_threads, user_api="blas"):
        return sum(ask_seconds(SWEEP, asks)[2])


def surrogate(asks: int, rounds: int) -> dict[str, Any]:
    cores = os.cpu_count() or 1
    result: dict[str, Any] = {}
    for busy in (0, cores):
        spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(busy)]
        for p in spinners:
            p.start()
        try:
            runs: dict[str, list[float]] = {"openblas_threads": [], "one_thread": []}
            for _ in range(rounds):  # interleaved, so that a drift of the machine reaches both alike
                runs["openblas_threads"].append(asks_total(asks, None))
                runs["one_thread"].append(asks_total(asks, 1))
        finally:
            for p in spinners:
                p.terminate()
        result[f"{busy}_busy_processes"] = {k: {"seconds": v, "median": statistics.median(v)} for k, v in runs.items()}
    return result


def _means_once(form: str, queue: Any) -> None:
    """In a fresh process: one mean magnitude of an 8000 x 8000 bfloat16 operand, by ``form``, timed."""
    bf16 = element_type("bfloat16")
    bits = bf16.encode(np.random.default_rng(0).standard_normal((8000, 8000)))
    started = time.perf_counter()
    value = float(np.abs(bf16.decode(bits)).mean()) if form == "decode" else bf16.mean_magnitude(bits)
    queue.put((time.perf_counter() - started, value))


def tolerance_means(rounds: int) -> dict[str, Any]:
    """Each form ``rounds`` times, each time first in a fresh process (as a race's first tolerance is:
    its float64 copies of the operand fault in fresh pages), interleaved."""
    context = multiprocessing.get_context("spawn")
    runs: dict[str, list[float]] = {"decode": [], "mean_magnitude": []}
    values = {}
    for _ in range(rounds):
        for form in runs:
            queue = context.Queue()
            process = context.Process(target=_means_once, args=(form, queue))
            process.start()
            seconds, values[form] = queue.get()
            process.join()
            runs[form].append(seconds)
    return {
        "decode_abs_mean_seconds": runs["decode"],
        "mean_magnitude_seconds": runs["mean_magnitude"],
        "median_speedup": statistics.median(runs["decode"]) / statistics.median(runs["mean_magnitude"]),
        "values": [values["decode"], values["mean_magnitude"]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--asks", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    blas = [p for p in threadpool_info() if p["user_api"] == "blas"]
    doc = {
        "command": f"python scripts/host_costs.py OUT.json --asks {args.asks} --rounds {args.rounds}",
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "blas": [{k: p[k] for k in ("internal_api", "version", "num_threads")} for p in blas],
        "surrogate_asks": {"sweep": str(SWEEP), "asks": args.asks, **surrogate(args.asks, args.rounds)},
        "gemm_tolerance_8000x8000": tolerance_means(args.rounds),
    }
    args.out.write_text(json.dumps(doc, indent=1))
    print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
