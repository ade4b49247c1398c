"""The build cost's side effect on a sweep of several problems, on replay (CPU): a later problem's compile
cache holds what the sweep built for the problems before it, so the surrogate (``SurrogateOptions.build_cost``)
prefers those configurations where their sources are the same (tile_copy's and gemm's do not depend on the
shape).

    python scripts/build_cost_replay.py OUT.json [--seeds 10] [--trials 40] SWEEP.toml...
        (OUT: results/benchmarks/build_cost_replay.json)

For each problem of each sweep file with two or more recorded problems: the configurations the default
strategy asked in ``--trials`` evaluations of each other problem (same seed) whose rendered source is the
one this problem's would be, then evaluations to the target (``tunebox.search.methodology``, each seed
stopped at the target) without and with those counted as built.
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

from tunebox.families import get
from tunebox.params import Config
from tunebox.search.ask import Ask
from tunebox.search.benchmark_strategies import drive, evaluations_until, sweep_seeds
from tunebox.search.methodology import geomean, target_of
from tunebox.search.replay_problems import ReplayProblem, load_problems
from tunebox.search.surrogate import SurrogateStrategy


class Asked:
    """A strategy that keeps what it was asked."""

    def __init__(self, strategy: SurrogateStrategy) -> None:
        self.strategy, self.values = strategy, list[dict[str, Any]]()

    def ask(self) -> Ask | None:
        ask = self.strategy.ask()
        if ask is not None:
            self.values.append(dict(ask.values))
        return ask

    def tell(self, ask: Ask, record: Any) -> None:
        self.strategy.tell(ask, record)


def built_by_others(problem: ReplayProblem, others: list[ReplayProblem], seed: int, trials: int) -> list[Config]:
    """What a sweep of ``others`` (``trials`` each, the default strategy) leaves in the cache for ``problem``."""
    family = get(problem.family)
    own = family.parse_problem(problem.problem)
    built: list[Config] = []
    for other in others:
        asked = Asked(SurrogateStrategy(other.space, other.configs, seed, seeds=sweep_seeds(other)))
        drive(other, asked, trials)
        theirs = family.parse_problem(other.problem)
        for values in asked.values:
            config = family.config(values)
            if config in problem.configs and family.render(own, config).code == family.render(theirs, config).code:
                built.append(config)
    return built


def evaluations(args: tuple[ReplayProblem, list[ReplayProblem], int, int]) -> tuple[int, int, int]:
    """(evaluations to target with nothing built, with the others' builds, how many configurations those are)."""
    problem, others, seed, trials = args
    built = built_by_others(problem, others, seed, trials)
    target = target_of(problem.times)

    def count(cache: list[Config]) -> int:
        strategy = SurrogateStrategy(problem.space, problem.configs, seed, seeds=sweep_seeds(problem), built=cache)
        return evaluations_until(problem, strategy, target)

    alone, after = count([]), count(built)
    return alone, after, len(set(built))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("sweeps", nargs="+", type=Path)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    rows = []
    with ProcessPoolExecutor(args.jobs) as pool:
        for sweep in args.sweeps:
            problems = load_problems(sweep)
            for problem in problems if len(problems) > 1 else ():
                others = [p for p in problems if p is not problem]
                tasks = [(problem, others, seed, args.trials) for seed in range(args.seeds)]
                counts = list(pool.map(evaluations, tasks))
                cold, warm = (statistics.fmean(c[i] for c in counts) for i in (0, 1))
                rows.append(
                    {
                        "sweep": sweep.stem,
                        "problem": problem.name,
                        "random_expectation": round(target_of(problem.times).random_expectation, 2),
                        "nothing_built": cold,
                        "others_built": warm,
                        "built_configurations": statistics.fmean(c[2] for c in counts),
                        "ratio": round(warm / cold, 4),
                    }
                )
                print(json.dumps(rows[-1]), flush=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    options = " ".join(str(s) for s in args.sweeps) + f" --seeds {args.seeds} --trials {args.trials}"
    doc = {
        "command": f"python scripts/build_cost_replay.py {args.out} {options}",
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "commit": commit,
        "geomean_ratio": round(geomean(r["ratio"] for r in rows), 4),
        "problems": rows,
    }
    args.out.write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
