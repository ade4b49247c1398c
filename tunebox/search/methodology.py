"""The arithmetic of the autotuning_methodology protocol (Willemsen et al.; ``strategy_benchmark``'s
docstring states it): the target, random search's expected evaluations to it, evaluations to target,
best-so-far curves, budgets, one strategy's results on one problem over its seeds, and the interval
the seeds leave its geometric mean ratio over problems."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

TARGET_FRACTION = 0.05  # the target: this fraction of the way from the optimum to the median
BUDGET_FACTOR = 10.0  # each seed runs for at most this many times random's expectation


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


INTERVAL_LEVEL = 0.95
INTERVAL_DRAWS = 4000


def geomean_interval(
    problems: Sequence[tuple[Sequence[float], float]], draws: int = INTERVAL_DRAWS, level: float = INTERVAL_LEVEL
) -> tuple[float, float]:
    """How far the seeds leave the geometric mean of (mean evaluations to target / random's
    expectation) over ``problems`` (each: its seeds' evaluations, random's expectation): a percentile
    bootstrap, every problem's seeds drawn again with replacement (fixed draws: the same interval each
    run). NaNs when there are no problems."""
    if not problems:
        return math.nan, math.nan
    rng = np.random.default_rng(0)
    logs = np.zeros(draws)
    for evaluations, expected in problems:
        e = np.asarray(evaluations, dtype=float)
        logs += np.log(e[rng.integers(0, len(e), (draws, len(e)))].mean(axis=1) / expected)
    spread = np.exp(logs / len(problems))
    tail = (1.0 - level) / 2.0
    return float(np.quantile(spread, tail)), float(np.quantile(spread, 1.0 - tail))


@dataclass
class StrategyResult:
    """One strategy on one problem, over its seeds."""

    strategy: str
    evaluations: list[int | None] = field(default_factory=list)  # per seed; None: not within the budget
    curves: list[list[float]] = field(default_factory=list)  # per seed: best so far after each evaluation
    seconds: float = 0.0
    error: str = ""  # the strategy failed on this problem (its message)
