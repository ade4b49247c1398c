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
"""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from ..errors import SpaceError, TuneboxError
from ..params import Config, TemplateSpaces
from ..records import EvalRecord, Status, Timing, canonical_json
from ..store.evallog import EvalLog
from ..sweep_spec import load_sweep
from .strategy_selection import leave_one_out, warm_start_gain
from .surrogate import SurrogateOptions, SurrogateStrategy
from .warm_start import DEFAULT_LIMIT, Tuned, warm_seeds

TARGET_FRACTION = 0.05  # the target: this fraction of the way from the optimum to the median
BUDGET_FACTOR = 10.0  # each seed runs for at most this many times random's expectation
DEFAULT_SEEDS = 20
SEEDS_PER_TASK = 5  # a strategy's seeds on a problem run in tasks of this many (spread over the workers)

# the sweeps whose recordings hold every valid configuration of each problem (or, for gather and
# scatter, every one their sweep measured: see ReplayProblem.complete)
DEFAULT_SWEEPS = ("gather", "scatter", "gather_elements", "ragged3d", "gemm_wgmma", "gemm_skinny")

DEFAULT_STRATEGY = "tunebox:surrogate"  # SurrogateOptions() as the default strategy runs it
WARM_STRATEGY = "tunebox:surrogate+warm"  # the same, seeded with the nearest other problems' winners
# the settings the leave-one-problem-out check chooses among (tuned on the other problems)
SURROGATE_VARIANTS: dict[str, SurrogateOptions] = {
    "surrogate:initial3": SurrogateOptions(initial=3),
    "surrogate:plain": SurrogateOptions(ratios=False),
    "surrogate:xi0.1": SurrogateOptions(xi=0.1),
}

Trace = list[float]  # median ms of each distinct configuration evaluated, in order (inf: failed)
StrategyRun = Callable[["ReplayProblem", int, int], Trace]


@dataclass(frozen=True)
class ReplayProblem:
    """One recorded problem: the valid configurations its recording measured, with their times."""

    sweep: str
    name: str
    family: str
    problem: dict[str, Any]
    space: TemplateSpaces
    configs: tuple[Config, ...]  # valid and measured, in the space's order
    times: tuple[float, ...]  # median ms of each (inf where the variant failed)
    valid: int  # configurations of the sweep's space breaking no validity rule, measured or not
    device: str = ""
    warm: tuple[Config, ...] = ()  # warm start's seeds: the nearest other problems' winners (warm_start)

    @property
    def label(self) -> str:
        return f"{self.sweep}/{self.name}"

    @property
    def complete(self) -> bool:
        """Whether the recording measured every valid configuration (an exhaustive recording)."""
        return len(self.configs) == self.valid

    def lookup(self) -> dict[str, float]:
        """Median ms by configuration (canonical JSON)."""
        return {canonical_json(c.as_dict()): t for c, t in zip(self.configs, self.times, strict=True)}


def load_problems(sweep: Path, recording: Path | None = None) -> list[ReplayProblem]:
    """The problems of a sweep file, each restricted to the valid configurations its recording
    (default ``results/recordings/<name>.jsonl`` beside the sweep file's folder) measured in the
    screening phase. A configuration's time is the median of its screening samples."""
    spec = load_sweep(sweep)
    path = recording or spec.source.resolve().parent.parent / "results" / "recordings" / f"{spec.name}.jsonl"
    if not path.exists():
        raise SpaceError(f"{sweep}: no recording at {path} (record the sweep on a GPU host, or pass its recording)")
    records = EvalLog(path).read()
    problems = []
    for named in spec.problems:
        key = named.problem.key()
        measured: dict[str, EvalRecord] = {}
        for r in records:
            if r.phase == "screen" and r.config and canonical_json(r.problem) == key:
                measured[canonical_json(r.config)] = r
        valid = [c for c in spec.space if not spec.family.violations(named.problem, c)]
        configs, times = [], []
        for c in valid:
            record = measured.get(canonical_json(c.as_dict()))
            if record is None:
                continue
            configs.append(c)
            ok = record.status is Status.OK and record.timing is not None
            times.append(record.timing.median_ms if ok and record.timing else math.inf)
        if not any(math.isfinite(t) for t in times):
            raise SpaceError(f"{path}: no valid configuration of {named.name} was measured")
        devices = {r.device.name for r in measured.values() if r.device is not None}
        problems.append(
            ReplayProblem(
                spec.name,
                named.name,
                spec.family.name,
                named.problem.to_dict(),
                spec.space,
                tuple(configs),
                tuple(times),
                len(valid),
                ", ".join(sorted(devices)),
            )
        )
    return problems


def with_warm_seeds(problems: Sequence[ReplayProblem], limit: int = DEFAULT_LIMIT) -> list[ReplayProblem]:
    """The problems, each with ``warm`` set to warm start's seeds leave-one-problem-out: the
    winners (best recorded configuration) of the other problems of its family, nearest first by the
    family's ``distance``, re-validated against the problem's valid configurations
    (``warm_start.warm_seeds``)."""
    from .. import families

    out = []
    for p in problems:
        family = families.get(p.family)
        tuned = [
            Tuned(q.problem, q.configs[min(range(len(q.times)), key=q.times.__getitem__)].as_dict())
            for q in problems
            if q.family == p.family and q.label != p.label
        ]
        seeds = warm_seeds(family, family.parse_problem(p.problem), tuned, p.configs, limit)
        out.append(replace(p, warm=tuple(seeds)))
    return out


# ---------------------------------------------------------------------------------------------
# The protocol's arithmetic


@dataclass(frozen=True)
class Target:
    optimum: float
    median: float
    target: float
    n: int  # configurations
    m: int  # of them at or below the target

    @property
    def random_expectation(self) -> float:
        return random_expectation(self.n, self.m)


def random_expectation(n: int, m: int) -> float:
    """Expected draws, uniform without replacement from n configurations of which m are good, until
    the first good one: (n + 1) / (m + 1)."""
    if not 0 < m <= n:
        raise ValueError(f"need 0 < m <= n, got n={n}, m={m}")
    return (n + 1) / (m + 1)


def target_of(times: Sequence[float], fraction: float = TARGET_FRACTION) -> Target:
    """The target of a problem whose configurations take ``times`` (inf: failed, counted in n, not
    in the median)."""
    finite = sorted(t for t in times if math.isfinite(t))
    if not finite:
        raise ValueError("no configuration has a time")
    optimum, median = finite[0], statistics.median(finite)
    target = optimum + fraction * (median - optimum)
    return Target(optimum, median, target, len(times), sum(t <= target for t in finite))


def evaluations_to_target(trace: Sequence[float], target: float) -> int | None:
    """1-based position of the first evaluation at or below ``target``; None if none is."""
    for i, t in enumerate(trace, start=1):
        if t <= target:
            return i
    return None


def best_so_far(trace: Sequence[float]) -> list[float]:
    best, out = math.inf, []
    for t in trace:
        best = min(best, t)
        out.append(best)
    return out


def budget_of(target: Target, factor: float = BUDGET_FACTOR) -> int:
    return min(target.n, math.ceil(factor * target.random_expectation))


def geomean(values: Iterable[float]) -> float:
    logs = [math.log(v) for v in values]
    return math.exp(sum(logs) / len(logs)) if logs else math.nan


# ---------------------------------------------------------------------------------------------
# Tunebox's strategies (and Optuna samplers over the same valid tree), driven by ask / tell


def _drive(problem: ReplayProblem, strategy: Any, budget: int) -> Trace:
    """Ask up to ``budget`` configurations, telling each its recorded time."""
    times = problem.lookup()
    trace: Trace = []
    while len(trace) < budget:
        ask = strategy.ask()
        if ask is None:
            break
        ms = times[canonical_json(ask.values)]
        ok = math.isfinite(ms)
        record = EvalRecord(
            problem.family,
            problem.problem,
            dict(ask.values),
            Status.OK if ok else Status.RUNTIME_ERROR,
            timing=Timing((ms,)) if ok else None,
        )
        strategy.tell(ask, record)
        trace.append(ms)
    return trace


def _surrogate(options: SurrogateOptions, warm: bool = False) -> StrategyRun:
    """The surrogate strategy with ``options``; ``warm``: seeded with the problem's warm seeds."""

    def run(problem: ReplayProblem, seed: int, budget: int) -> Trace:
        strategy = SurrogateStrategy(
            problem.space, problem.configs, seed, options=options, seeds=problem.warm if warm else ()
        )
        return _drive(problem, strategy, budget)

    return run


def _tunebox(kind: str) -> StrategyRun:
    def run(problem: ReplayProblem, seed: int, budget: int) -> Trace:
        from .strategy import ExhaustiveStrategy, RandomStrategy, TpeStrategy

        strategy: Any
        if kind == "exhaustive":
            strategy = ExhaustiveStrategy(problem.configs)
        elif kind == "random":
            strategy = RandomStrategy(problem.configs, seed)
        else:
            strategy = TpeStrategy(problem.space, problem.configs, seed)
        return _drive(problem, strategy, budget)

    return run


def _optuna(sampler: str, **options: Any) -> StrategyRun:
    """Tunebox's TpeStrategy (the valid tree, its repeat handling) with another Optuna sampler."""

    def run(problem: ReplayProblem, seed: int, budget: int) -> Trace:
        import optuna

        from .strategy import TpeStrategy

        strategy = TpeStrategy(problem.space, problem.configs, seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            chosen = getattr(optuna.samplers, sampler)(seed=seed, **options)
        strategy.study = optuna.create_study(sampler=chosen, direction="minimize")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return _drive(problem, strategy, budget)

    return run


TUNEBOX_STRATEGIES: dict[str, StrategyRun] = {
    DEFAULT_STRATEGY: _surrogate(SurrogateOptions()),
    WARM_STRATEGY: _surrogate(SurrogateOptions(), warm=True),
    **{name: _surrogate(options) for name, options in SURROGATE_VARIANTS.items()},
    "tunebox:tpe": _tunebox("tpe"),
    "tunebox:random": _tunebox("random"),
    "tunebox:exhaustive": _tunebox("exhaustive"),
}
OPTUNA_STRATEGIES: dict[str, StrategyRun] = {
    # multivariate TPE, the tree's conditional decisions as groups (Optuna's ``group=True``)
    "optuna:tpe_multivariate": _optuna("TPESampler", multivariate=True, group=True),
    # univariate TPE modelling after 4 random trials instead of Optuna's default 10
    "optuna:tpe_startup4": _optuna("TPESampler", n_startup_trials=4),
    # no model: every decision of the tree drawn uniformly (what TPE does in its first 10 trials),
    # so the template first, 1 / (number of templates) each, however many variants each template has
    "optuna:random_tree": _optuna("RandomSampler"),
}


def strategies(
    names: Sequence[str] | None = None, kernel_tuner: bool | None = None, folder: Path | None = None
) -> dict[str, StrategyRun]:
    """The strategies by name: tunebox's, the Optuna variants and (``kernel_tuner`` True, or None
    and Kernel Tuner installed) Kernel Tuner's, on cache files in ``folder`` (see
    ``kernel_tuner_cache.cache_file``). ``names`` picks some (unknown names raise)."""
    from . import kernel_tuner_cache

    known = dict(TUNEBOX_STRATEGIES) | OPTUNA_STRATEGIES
    use_kt = kernel_tuner_cache.available() if kernel_tuner is None else kernel_tuner
    if use_kt or (names and any(n.startswith("kernel_tuner:") for n in names)):
        known |= {
            f"kernel_tuner:{s}": kernel_tuner_cache.strategy_run(s, folder) for s in kernel_tuner_cache.STRATEGIES
        }
    if not names:
        if not use_kt:
            known = {k: v for k, v in known.items() if not k.startswith("kernel_tuner:")}
        return known
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown strategies {unknown}; known: {sorted(known)}")
    return {n: known[n] for n in names}


# ---------------------------------------------------------------------------------------------
# Running and summarising


@dataclass
class StrategyResult:
    """One strategy on one problem, over its seeds."""

    strategy: str
    evaluations: list[int | None] = field(default_factory=list)  # per seed; None: not within the budget
    curves: list[list[float]] = field(default_factory=list)  # per seed: best so far after each evaluation
    seconds: float = 0.0
    error: str = ""  # the strategy failed on this problem (its message)


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


def _quantiles(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)
    q = statistics.quantiles(ordered, n=4, method="inclusive") if len(ordered) > 1 else [ordered[0]] * 3
    return {"min": ordered[0], "q1": q[0], "median": q[1], "q3": q[2], "max": ordered[-1]}


def _round(x: float, digits: int = 5) -> float:
    return float(f"{x:.{digits}g}") if math.isfinite(x) else x


def summarise(problem: ReplayProblem, result: StrategyResult, budget: int) -> dict[str, Any]:
    """A strategy's figures on a problem (see the module's docstring)."""
    target = target_of(problem.times)
    expected = target.random_expectation
    if result.error or not result.evaluations:
        return {"strategy": result.strategy, "error": result.error or "no run", "seconds": result.seconds}
    counted = [e if e is not None else budget for e in result.evaluations]
    mean = statistics.fmean(counted)
    spread = statistics.stdev(counted) if len(counted) > 1 else 0.0
    length = max(len(c) for c in result.curves)
    best_mean, reached = [], []
    for k in range(length):
        at_k = [c[min(k, len(c) - 1)] for c in result.curves]
        finite = [x for x in at_k if math.isfinite(x)]
        best_mean.append(_round(statistics.fmean(finite)) if len(finite) == len(at_k) else None)
        reached.append(_round(sum(x <= target.target for x in at_k) / len(at_k), 4))
    return {
        "strategy": result.strategy,
        "seeds": len(counted),
        "evaluations_to_target": counted,
        "mean": _round(mean),
        "std": _round(spread),
        **{k: _round(v) for k, v in _quantiles(counted).items()},
        "censored": sum(e is None for e in result.evaluations),
        # seeds that stopped short of the budget without reaching the target (a strategy that ends
        # on its own, or a Kernel Tuner run stopped for looping on configurations it had seen)
        "stopped_short": sum(
            e is None and len(c) < budget for e, c in zip(result.evaluations, result.curves, strict=True)
        ),
        "ratio_to_random": _round(mean / expected),
        "within_random_expectation": _round(sum(c <= expected for c in counted) / len(counted), 4),
        "seconds": round(result.seconds, 3),
        "curve": {"best_mean_ms": best_mean, "reached_fraction": reached},
    }


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
        **_selection(per_problem, chosen),
        "seconds": round(time.perf_counter() - start, 1),
    }


def _selection(per_problem: Sequence[Mapping[str, Any]], chosen: Sequence[str]) -> dict[str, Any]:
    """The leave-one-problem-out check of the default's settings and warm start's gain, where the
    strategies they need ran."""
    out: dict[str, Any] = {}
    candidates = [DEFAULT_STRATEGY, *SURROGATE_VARIANTS]
    if all(c in chosen for c in candidates):
        out["leave_one_out"] = leave_one_out(per_problem, candidates)
    if DEFAULT_STRATEGY in chosen and WARM_STRATEGY in chosen:
        out["warm_start"] = warm_start_gain(per_problem, DEFAULT_STRATEGY, WARM_STRATEGY)
    return out


def aggregate(per_problem: Sequence[Mapping[str, Any]], names: Sequence[str]) -> list[dict[str, Any]]:
    """Per strategy: the geometric mean of its ratios over the complete problems and over all, and
    the mean fraction of seeds within random's expectation; sorted by the complete geomean."""
    rows = []
    for name in names:
        ratios: dict[str, list[float]] = {"complete": [], "all": []}
        within: list[float] = []
        failed = []
        for p in per_problem:
            s = next(s for s in p["strategies"] if s["strategy"] == name)
            if "error" in s:
                failed.append(p["problem"])
                continue
            ratios["all"].append(s["ratio_to_random"])
            within.append(s["within_random_expectation"])
            if p["complete"]:
                ratios["complete"].append(s["ratio_to_random"])
        rows.append(
            {
                "strategy": name,
                "geomean_ratio_complete": _or_none(geomean(ratios["complete"])),
                "geomean_ratio_all": _or_none(geomean(ratios["all"])),
                "problems_complete": len(ratios["complete"]),
                "problems_all": len(ratios["all"]),
                "mean_within_random_expectation": _or_none(statistics.fmean(within) if within else math.nan),
                "failed_on": failed,
            }
        )
    return sorted(rows, key=lambda r: (r["geomean_ratio_complete"] is None, r["geomean_ratio_complete"] or 0.0))


def _or_none(x: float, digits: int = 4) -> float | None:
    return _round(x, digits) if math.isfinite(x) else None


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def provenance(command: str, root: Path | None = None) -> dict[str, Any]:
    """The command, date, versions and code the benchmark ran with."""
    commit = None
    if root is not None:
        try:
            head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
            dirty = subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"],
                cwd=root,
                capture_output=True,
                text=True,
                timeout=10,
            )
            if head.returncode == 0:
                commit = head.stdout.strip() + (" (with uncommitted changes)" if dirty.stdout.strip() else "")
        except (OSError, subprocess.SubprocessError):
            pass
    packages = ("tunebox", "optuna", "numpy", "kernel_tuner", "scipy", "scikit-learn", "matplotlib")
    return {
        "command": command,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit,
        "host": {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count()},
        "versions": {p: v for p in packages if (v := _version(p)) is not None},
    }


def table(doc: Mapping[str, Any]) -> str:
    """The aggregate as a Markdown table."""
    lines = [
        "| strategy | geomean ratio (complete problems) | geomean ratio (all) | seeds within random's expectation |",
        "|---|---:|---:|---:|",
    ]

    def cell(x: float | None, form: str) -> str:
        return "-" if x is None else format(x, form)

    for row in doc["aggregate"]:
        failed = f" (failed on {len(row['failed_on'])})" if row["failed_on"] else ""
        lines.append(
            f"| {row['strategy']}{failed} | {cell(row['geomean_ratio_complete'], '.2f')} "
            f"| {cell(row['geomean_ratio_all'], '.2f')} | {cell(row['mean_within_random_expectation'], '.0%')} |"
        )
    if "leave_one_out" in doc:
        loo = doc["leave_one_out"]
        lines.append(
            f"| {DEFAULT_STRATEGY}, settings chosen leave-one-problem-out | "
            f"{cell(loo['geomean_ratio_complete'], '.2f')} | {cell(loo['geomean_ratio_all'], '.2f')} | - |"
        )
    if "warm_start" in doc:
        warm = doc["warm_start"]
        lines.append(
            f"\nwarm start: mean evaluations to target with / without, geometric mean "
            f"{cell(warm['geomean_warm_over_cold_seeded'], '.2f')} over the {warm['problems_seeded']} problems "
            f"with warm seeds, {cell(warm['geomean_warm_over_cold_all'], '.2f')} over all"
        )
    return "\n".join(lines)


def plot(doc: Mapping[str, Any], path: Path) -> Path:
    """Best found versus evaluations, per problem: the mean over seeds of (best - optimum) / (median -
    optimum), the target at 0.05, random's expectation as a vertical line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    problems = doc["problems"]
    cols = 4
    rows = math.ceil((len(problems) + 1) / cols)  # and a panel of the aggregate
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    names = [s["strategy"] for s in problems[0]["strategies"]] if problems else []
    cmap = plt.get_cmap("tab20")
    colors = {name: cmap(i % 20) for i, name in enumerate(names)}
    for ax, p in zip(axes.flat, problems, strict=False):
        span = p["median_ms"] - p["optimum_ms"]
        for s in p["strategies"]:
            if "curve" not in s:
                continue
            ys = [
                max((y - p["optimum_ms"]) / span, 1e-4) if y is not None and span > 0 else math.nan
                for y in s["curve"]["best_mean_ms"]
            ]
            style = "-" if s["strategy"].startswith(("tunebox:", "optuna:")) else "--"
            width = 2.2 if s["strategy"] in (DEFAULT_STRATEGY, WARM_STRATEGY, "tunebox:random") else 1.1
            ax.plot(range(1, len(ys) + 1), ys, style, color=colors[s["strategy"]], lw=width, label=s["strategy"])
        ax.axhline(TARGET_FRACTION, color="k", lw=0.8, ls=":")
        ax.axvline(p["random_expectation"], color="grey", lw=0.8, ls=":")
        ax.set_yscale("log")
        ax.set_title(f"{p['problem']}{'' if p['complete'] else ' (partial)'}", fontsize=8)
        ax.set_xlabel("evaluations", fontsize=7)
        ax.set_ylabel("(best - opt) / (median - opt)", fontsize=7)
        ax.tick_params(labelsize=7)
    spare = list(axes.flat)[len(problems) :]
    rows_ = [r for r in doc["aggregate"] if r["geomean_ratio_complete"] is not None]
    if spare and rows_:
        ax = spare.pop(0)
        ax.barh(
            [r["strategy"] for r in rows_],
            [r["geomean_ratio_complete"] for r in rows_],
            color=[colors.get(r["strategy"], "grey") for r in rows_],
        )
        ax.axvline(1.0, color="k", lw=0.8, ls=":")
        ax.invert_yaxis()
        ax.set_title("geomean ratio to random, complete problems", fontsize=8)
        ax.tick_params(labelsize=6)
    for ax in spare:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(5, max(1, len(labels))), fontsize=8)
    fig.suptitle("Best found vs evaluations (mean over seeds; dotted: the target, random's expectation)", fontsize=10)
    fig.tight_layout(rect=(0, 0.06 + 0.01 * math.ceil(len(labels) / 5), 1, 0.97))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


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
    """``tunebox strategies``: load the sweeps' recordings (``recordings``/<sweep name>.jsonl, or each
    beside its sweep file), run the benchmark, write ``out`` (JSON: provenance, protocol, per problem
    and strategy, the aggregate) and the plot."""
    if seeds < 2:
        raise TuneboxError("--seeds must be at least 2 (the spread needs two)")
    if budget_factor < 1:
        raise TuneboxError("--budget-factor must be at least 1")
    try:
        strategies(names, kernel_tuner)
    except ValueError as exc:
        raise TuneboxError(str(exc)) from None
    if kernel_tuner and not _kernel_tuner_available():
        raise TuneboxError("Kernel Tuner is not installed: pip install '.[bench]'")
    problems: list[ReplayProblem] = []
    for sweep in sweeps:
        recording = recordings / f"{load_sweep(sweep).name}.jsonl" if recordings else None
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


def _kernel_tuner_available() -> bool:
    from . import kernel_tuner_cache

    return kernel_tuner_cache.available()
