"""How fast search strategies reach a near-optimal variant, on replayed exhaustive recordings (no GPU).

The protocol follows the autotuning_methodology of Willemsen et al.: per recorded problem, over the
valid configurations the recording measured (n of them),

- ``optimum`` is the best median time, ``median`` the median of all of them, and the **target** is
  ``optimum + 5% of (median - optimum)``;
- **random search's expectation** of the evaluations it takes to reach the target is
  ``(n + 1) / (m + 1)``, for the m configurations at or below the target (drawing uniformly without
  replacement);
- every strategy runs with several seeds, each seed for at most ``budget = min(n, ceil(factor x
  expectation))`` distinct evaluations; a seed's **evaluations to target** is the position of its
  first evaluation at or below the target. A seed that does not reach it within the budget counts as
  the budget (a lower bound: the count of such seeds is reported, ``censored``);
- the **ratio** of a strategy on a problem is its mean evaluations to target over random's
  expectation; the aggregate is the geometric mean of the ratios over problems (below 1: better than
  random search).

A strategy is a function ``(problem, seed, budget) -> [median ms of each distinct configuration, in
the order it evaluated them]``. Tunebox's own strategies are driven through their ``ask`` / ``tell``
protocol with the recorded times as the objective (nothing is compiled or run); Kernel Tuner's run in
its simulation mode (``tunebox.search.kernel_tuner_cache``; an optional extra, imported only when one
of its strategies runs).

This module runs the benchmark; the protocol's arithmetic is in ``methodology``, the replayed
problems in ``replay_problems``, the strategies by name in ``benchmark_strategies``, and the
summaries, table and plot in ``strategy_tables``.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import TuneboxError
from ..store.recordings import recording_in
from ..sweep_spec import load_sweep
from .benchmark_strategies import strategies
from .methodology import (
    BUDGET_FACTOR,
    TARGET_FRACTION,
    StrategyResult,
    best_so_far,
    budget_of,
    evaluations_to_target,
    target_of,
)
from .replay_problems import ReplayProblem, StrategyRun, load_problems, with_warm_seeds
from .strategy_tables import aggregate, plot, provenance, selection, summarise

DEFAULT_SEEDS = 20
SEEDS_PER_TASK = 5  # a strategy's seeds on a problem run in tasks of this many (spread over the workers)

# the sweeps whose recordings hold every valid configuration of each problem (or, for gather and
# scatter, every one their sweep measured: see ReplayProblem.complete)
DEFAULT_SWEEPS = ("gather", "scatter", "gather_elements", "ragged3d", "gemm_wgmma", "gemm_skinny", "truth_windows")


def _run_one(name: str, run: StrategyRun, problem: ReplayProblem, seeds: Sequence[int], budget: int) -> StrategyResult:
    target = target_of(problem.times)
    result = StrategyResult(name)
    start = time.perf_counter()
    try:
        for seed in seeds:
            trace = run(problem, seed, budget)[:budget]
            result.evaluations.append(evaluations_to_target(trace, target.target))
            result.curves.append(best_so_far(trace))
    except Exception as exc:  # a peer's strategy that cannot run here is reported, not fatal
        result.error = f"{type(exc).__name__}: {exc}"
    result.seconds = time.perf_counter() - start
    return result


_Task = tuple[str, ReplayProblem, range, int, bool | None, Path]


def _task(args: _Task) -> StrategyResult:
    name, problem, seeds, budget, kernel_tuner, folder = args
    run = strategies([name], kernel_tuner, folder)[name]
    return _run_one(name, run, problem, seeds, budget)


def _run_tasks(tasks: Sequence[_Task], jobs: int, progress: Callable[[str], None] | None) -> list[StrategyResult]:
    def report(task: _Task, r: StrategyResult) -> None:
        if progress:
            seeds = f"seeds {task[2][0]}-{task[2][-1]}"
            failed = f" FAILED: {r.error}" if r.error else ""
            progress(f"{task[1].label} {task[0]} {seeds}: {r.seconds:.1f} s{failed}")

    results = []
    if jobs > 1 and len(tasks) > 1:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            for task, r in zip(tasks, pool.map(_task, tasks), strict=True):
                report(task, r)
                results.append(r)
    else:
        for task in tasks:
            r = _task(task)
            report(task, r)
            results.append(r)
    return results


def _merge(parts: Sequence[StrategyResult]) -> StrategyResult:
    """One strategy's results on one problem, its seeds run in several tasks, in seed order."""
    merged = StrategyResult(parts[0].strategy)
    for part in parts:
        merged.evaluations += part.evaluations
        merged.curves += part.curves
        merged.seconds += part.seconds
        merged.error = merged.error or part.error
    return merged


def run_benchmark(
    problems: Sequence[ReplayProblem],
    names: Sequence[str] | None = None,
    seeds: int = DEFAULT_SEEDS,
    budget_factor: float = BUDGET_FACTOR,
    jobs: int = 1,
    kernel_tuner: bool | None = None,
    progress: Callable[[str], None] | None = None,
    caches: Path | None = None,
) -> dict[str, Any]:
    """Every strategy on every problem with seeds 0 .. seeds - 1: the document search.json holds
    (less its provenance, see ``provenance``). Kernel Tuner's cache files go to ``caches`` (kept),
    else to a temporary folder."""
    chosen = list(strategies(names, kernel_tuner))
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tunebox-strategies-") as scratch:
        folder = caches or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        tasks: list[_Task] = []
        chunks = [range(i, min(i + SEEDS_PER_TASK, seeds)) for i in range(0, seeds, SEEDS_PER_TASK)]
        for problem in problems:
            budget = budget_of(target_of(problem.times), budget_factor)
            tasks += [(name, problem, c, budget, kernel_tuner, folder) for name in chosen for c in chunks]
        results = iter(_run_tasks(tasks, jobs, progress))
    per_problem = []
    for problem in problems:
        target = target_of(problem.times)
        budget = budget_of(target, budget_factor)
        summaries = []
        for name in chosen:
            merged = _merge([next(results) for _ in chunks])
            summary = summarise(problem, merged, budget)
            if name.startswith("kernel_tuner:"):
                from . import kernel_tuner_cache

                summary["options"] = kernel_tuner_cache.options_for(name.split(":", 1)[1], problem, budget)
            summaries.append(summary)
        per_problem.append(
            {
                "sweep": problem.sweep,
                "problem": problem.name,
                "family": problem.family,
                "device": problem.device,
                "valid": problem.valid,
                "n": target.n,
                "complete": problem.complete,
                "m": target.m,
                "optimum_ms": target.optimum,
                "median_ms": target.median,
                "target_ms": target.target,
                "random_expectation": target.random_expectation,
                "budget": budget,
                "warm_seeds": [c.as_dict() for c in problem.warm],
                "strategies": summaries,
            }
        )
    return {
        "protocol": {
            "target_fraction": TARGET_FRACTION,
            "budget_factor": budget_factor,
            "seeds": seeds,
            "description": (
                "per problem, over the valid configurations the recording measured (n): target = optimum + "
                f"{TARGET_FRACTION:g} x (median - optimum); random's expected evaluations to the target (n + 1) / "
                "(m + 1) for the m at or below it; each seed runs at most budget = min(n, ceil(budget_factor x "
                "expectation)) distinct evaluations, a seed that misses the target counts as the budget "
                "(censored); ratio_to_random = mean evaluations to target / expectation; aggregate: geometric "
                "mean of the ratios over problems (complete: the problems whose recording measured every "
                "valid configuration)"
            ),
        },
        "problems": per_problem,
        "aggregate": aggregate(per_problem, chosen),
        **selection(per_problem, chosen),
        "seconds": round(time.perf_counter() - start, 1),
    }


def benchmark(
    sweeps: Sequence[Path],
    out: Path,
    plot_path: Path | None,
    command: str,
    recordings: Path | None = None,
    names: Sequence[str] | None = None,
    seeds: int = DEFAULT_SEEDS,
    budget_factor: float = BUDGET_FACTOR,
    jobs: int = 1,
    kernel_tuner: bool | None = None,
    caches: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """``tunebox strategies``: load the sweeps' recordings (``recordings``/<sweep name>.jsonl.gz or .jsonl,
    else each sweep's shipped one, ``results/recordings/``), run the benchmark, write ``out`` (JSON:
    provenance, protocol, per problem and strategy, the aggregate) and the plot. The outputs' folders are
    made, and checked writable, before the run."""
    if not seeds >= 2:
        raise TuneboxError("--seeds must be at least 2 (the spread needs two)")
    if not budget_factor >= 1:  # NaN too
        raise TuneboxError("--budget-factor must be at least 1")
    try:
        strategies(names, kernel_tuner)
    except ValueError as exc:
        raise TuneboxError(str(exc)) from None
    named_kt = any(n.startswith("kernel_tuner:") for n in names or ())
    if named_kt and kernel_tuner is False:
        raise TuneboxError("--kernel-tuner no, but Kernel Tuner strategies are named in --strategies")
    if (kernel_tuner or named_kt) and not _kernel_tuner_available():
        raise TuneboxError("Kernel Tuner is not installed: pip install '.[bench]'")
    _check_outputs(out, plot_path)
    firsts: dict[Path, Path] = {}
    for given in sweeps:  # a sweep named twice runs once, where it was first named
        firsts.setdefault(Path(given).resolve(), given)
    sweeps = list(firsts.values())
    problems: list[ReplayProblem] = []
    for sweep in sweeps:
        recording = recording_in(recordings, load_sweep(sweep).name) if recordings else None
        problems += load_problems(sweep, recording)
    problems = with_warm_seeds(problems)
    start = datetime.now(UTC)
    doc = run_benchmark(problems, names, seeds, budget_factor, jobs, kernel_tuner, progress, caches)
    root = Path(__file__).resolve().parents[2]
    head = provenance(command, root if (root / ".git").exists() else None)
    head["date"] = start.isoformat(timespec="seconds")
    head["sweeps"] = [str(s) for s in sweeps]
    doc = {**head, **doc}
    if plot_path is not None:
        doc["plot"] = str(plot_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")
    if plot_path is not None:
        plot(doc, plot_path)
    return doc


def _check_outputs(out: Path, plot_path: Path | None) -> None:
    """Before the benchmark runs (an hour by default): the files it writes can be written (their folders
    are made here)."""
    if plot_path is not None and plot_path.suffix.lower() != ".png":
        raise TuneboxError(f"--plot {plot_path}: the plot is a PNG; give a path ending in .png")
    for path in (out, plot_path):
        if path is None:
            continue
        if path.is_dir():
            raise TuneboxError(f"{path} is a directory: give the file to write")
        path.parent.mkdir(parents=True, exist_ok=True)  # an OSError says what stands in the way
        with tempfile.TemporaryFile(dir=path.parent):
            pass


def _kernel_tuner_available() -> bool:
    from . import kernel_tuner_cache

    return kernel_tuner_cache.available()
