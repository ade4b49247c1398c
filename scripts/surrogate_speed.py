"""Time the surrogate strategy's asks on a sweep file's first problem, without a GPU: each ask is
answered at once with a synthetic time (uniform in [1, 3) ms, seeded), so what is timed is the
strategy alone (the model's fit and its scores), as in a sweep whose answers arrive one by one.

    python scripts/surrogate_speed.py [SWEEP] [--asks N]   (default spaces/throughput_default.toml, 300)

Prints the valid configurations and the median, 90th percentile and largest ask, in milliseconds.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from tunebox.records import EvalRecord, Status, Timing
from tunebox.search.surrogate import SurrogateStrategy
from tunebox.sweep_spec import load_sweep


def ask_seconds(sweep: Path, asks: int) -> tuple[str, int, list[float]]:
    """(sweep name, valid configurations, seconds of each of up to ``asks`` asks) on the sweep's first
    problem, each answered at once with a synthetic time."""
    spec = load_sweep(sweep)
    problem = spec.problems[0].problem
    valid = [c for c in spec.space if not spec.family.violations(problem, c)]
    strategy = SurrogateStrategy(spec.space, valid, seed=1)
    rng = np.random.default_rng(0)
    seconds = []
    for _ in range(min(asks, len(valid))):
        start = time.perf_counter()
        ask = strategy.ask()
        seconds.append(time.perf_counter() - start)
        assert ask is not None
        timing = Timing((float(rng.uniform(1.0, 3.0)),))
        strategy.tell(ask, EvalRecord(spec.family.name, problem.to_dict(), dict(ask.values), Status.OK, timing=timing))
    return spec.name, len(valid), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep", nargs="?", type=Path, default=Path("spaces/throughput_default.toml"))
    parser.add_argument("--asks", type=int, default=300)
    args = parser.parse_args()
    name, valid, seconds = ask_seconds(args.sweep, args.asks)
    ms = sorted(s * 1e3 for s in seconds)
    p90 = ms[int(0.9 * (len(ms) - 1))]
    print(
        f"{name}: {valid} valid configurations, {len(ms)} asks: median {statistics.median(ms):.1f} ms, "
        f"p90 {p90:.1f} ms, largest {ms[-1]:.1f} ms, total {sum(ms) / 1e3:.1f} s"
    )


if __name__ == "__main__":
    main()
