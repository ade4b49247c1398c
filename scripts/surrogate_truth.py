"""The default surrogate and its variants on the ground truths, each seed stopped at the target: a check
of a change of the default's settings on problems recorded after they were chosen (issue 15).

    python scripts/surrogate_truth.py OUT.json [--seeds 20] [--jobs 2]
        (OUT: results/benchmarks/surrogate_truth.json)

`tunebox strategies` on the ground truths (results/benchmarks/search_truth.json) runs every seed to its
budget, up to 3,450 evaluations on the bfloat16 transpose, for every strategy (68 minutes on 2 CPUs);
evaluations to the target need a seed only until it reaches the target (a seed that never does counts
as its budget, as there). Same protocol otherwise: target, budget and random's expectation from
``tunebox.search.methodology``, seeds 0 .. seeds - 1.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tunebox.search.benchmark_strategies import evaluations_until, surrogate
from tunebox.search.methodology import Target, geomean, target_of
from tunebox.search.replay_problems import ReplayProblem, load_problems
from tunebox.search.surrogate import SurrogateOptions

SWEEPS = ("spaces/truth_gemm.toml", "spaces/truth_tile_copy.toml")
# name: (settings, whether the family default goes first as in a sweep), as benchmark_strategies names them
VARIANTS = {
    "tunebox:surrogate": (SurrogateOptions(), True),
    "surrogate:no_default": (SurrogateOptions(), False),
    "surrogate:log": (SurrogateOptions(answers="log"), True),
}


def evaluations(args: tuple[ReplayProblem, tuple[SurrogateOptions, bool], int, Target]) -> int:
    """Evaluations until the first at or below the target (the budget when none is within it)."""
    problem, (options, seeded), seed, target = args
    return evaluations_until(problem, surrogate(problem, seed, options, seeded=seeded), target)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    problems = [p for sweep in SWEEPS for p in load_problems(Path(sweep))]
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in VARIANTS}
    with ProcessPoolExecutor(args.jobs) as pool:
        for problem in problems:
            target = target_of(problem.times)
            for name, variant in VARIANTS.items():
                tasks = [(problem, variant, seed, target) for seed in range(args.seeds)]
                counts = list(pool.map(evaluations, tasks))
                mean = statistics.fmean(counts)
                rows[name].append(
                    {
                        "problem": problem.name,
                        "evaluations_to_target": counts,
                        "mean": mean,
                        "random_expectation": target.random_expectation,
                        "ratio_to_random": round(mean / target.random_expectation, 4),
                    }
                )
                print(f"{name:20s} {problem.name:32s} {mean:7.2f} / {target.random_expectation:7.2f}", flush=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    doc = {
        "command": f"python scripts/surrogate_truth.py {args.out} --seeds {args.seeds} --jobs {args.jobs}",
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "commit": commit,
        "sweeps": list(SWEEPS),
        "strategies": {
            name: {"geomean_ratio": round(geomean(float(r["ratio_to_random"]) for r in found), 4), "problems": found}
            for name, found in rows.items()
        },
    }
    args.out.write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
