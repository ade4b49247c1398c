"""The strategies a strategy benchmark runs, by name: tunebox's own (the surrogate and its variants,
TPE, random, exhaustive; the surrogate and TPE as a sweep runs them, the family default first) and
Optuna samplers over the same valid tree, driven through ask / tell with the recorded times as the
objective, and Kernel Tuner's in its simulation mode."""

from __future__ import annotations

import math
import warnings
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..families import get
from ..params import Config
from ..records import EvalRecord, Status, Timing, canonical_json
from .loop_settings import LoopSettings
from .methodology import Target, budget_of, evaluations_to_target
from .replay_problems import ReplayProblem, StrategyRun, Trace
from .surrogate import SurrogateOptions, SurrogateStrategy

DEFAULT_STRATEGY = "tunebox:surrogate"  # SurrogateOptions() as a sweep runs it: the family default first
WARM_STRATEGY = "tunebox:surrogate+warm"  # the same, seeded with the nearest other problems' winners
PIPELINED_STRATEGY = "tunebox:surrogate+pipeline"  # the default, asked ahead as a GPU sweep asks it
UNSEEDED_STRATEGY = "surrogate:no_default"  # the default without the family default first (the row until 2026-12-03)
# the settings the leave-one-problem-out check chooses among (tuned on the other problems)
SURROGATE_VARIANTS: dict[str, SurrogateOptions] = {
    "surrogate:log": SurrogateOptions(answers="log"),  # the default until 2026-12-03: the log-times modelled
    "surrogate:initial3": SurrogateOptions(initial=3),
    "surrogate:plain": SurrogateOptions(ratios=False),
    "surrogate:xi0.1": SurrogateOptions(xi=0.1),
}


def drive(
    problem: ReplayProblem,
    strategy: Any,
    budget: int,
    pipeline: LoopSettings | None = None,
    target: float | None = None,
) -> Trace:
    """Ask up to ``budget`` configurations, telling each its recorded time: one ask per answer, or,
    with ``pipeline``, as the sweep loop asks (``LoopSettings.ahead``), answered in order; with
    ``target`` (ms), stopped at the first time at or below it (evaluations to the target need no more)."""
    times = problem.lookup()
    trace: Trace = []
    pending: deque[Any] = deque()
    while len(trace) < budget:
        depth, refill_at = pipeline.ahead(len(trace)) if pipeline else (1, 0)
        if len(pending) <= refill_at:
            while len(pending) < depth and len(trace) + len(pending) < budget:
                asked = strategy.ask()
                if asked is None:
                    break
                pending.append(asked)
        if not pending:
            break
        ask = pending.popleft()
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
        if target is not None and ms <= target:
            break
    return trace


def evaluations_until(problem: ReplayProblem, strategy: Any, target: Target) -> int:
    """Evaluations ``strategy`` needs to reach ``target`` on ``problem``, driven only that far; the
    budget (``methodology.budget_of``) when it never does, as the protocol counts a miss."""
    budget = budget_of(target)
    return evaluations_to_target(drive(problem, strategy, budget, target=target.target), target.target) or budget


def sweep_seeds(problem: ReplayProblem, warm: bool = False) -> tuple[Config, ...]:
    """What a sweep gives a strategy before it proposes (``search.loop``): with ``warm``, warm start's
    seeds (the nearest other problems' winners), then the family default where the recording holds it."""
    family = get(problem.family)
    default = family.default_config(family.parse_problem(problem.problem))
    return (*(problem.warm if warm else ()), *((default,) if default in problem.configs else ()))


def surrogate(
    problem: ReplayProblem, seed: int, options: SurrogateOptions, warm: bool = False, seeded: bool = True
) -> SurrogateStrategy:
    """The surrogate strategy with ``options`` on ``problem`` as a sweep runs it (``sweep_seeds``; no
    seeds when not ``seeded``); ``warm``: the problem's warm seeds first."""
    seeds = sweep_seeds(problem, warm) if seeded else ()
    return SurrogateStrategy(problem.space, problem.configs, seed, options=options, seeds=seeds)


def _surrogate(
    options: SurrogateOptions, warm: bool = False, pipeline: LoopSettings | None = None, seeded: bool = True
) -> StrategyRun:
    """``surrogate`` driven to the budget; ``pipeline``: asked ahead as the sweep loop asks (``drive``)."""

    def run(problem: ReplayProblem, seed: int, budget: int) -> Trace:
        return drive(problem, surrogate(problem, seed, options, warm, seeded), budget, pipeline)

    return run


def _tunebox(kind: str) -> StrategyRun:
    def run(problem: ReplayProblem, seed: int, budget: int) -> Trace:
        from .strategy import ExhaustiveStrategy, RandomStrategy, TpeStrategy

        strategy: Any
        if kind == "exhaustive":
            strategy = ExhaustiveStrategy(problem.configs)
        elif kind == "random":
            strategy = RandomStrategy(problem.configs, seed)
        else:  # as a sweep runs it: the family default first
            strategy = TpeStrategy(problem.space, problem.configs, seed)
            for config in sweep_seeds(problem):
                strategy.seed(config)
        return drive(problem, strategy, budget)

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
            return drive(problem, strategy, budget)

    return run


TUNEBOX_STRATEGIES: dict[str, StrategyRun] = {
    DEFAULT_STRATEGY: _surrogate(SurrogateOptions()),
    WARM_STRATEGY: _surrogate(SurrogateOptions(), warm=True),
    PIPELINED_STRATEGY: _surrogate(SurrogateOptions(), pipeline=LoopSettings()),
    UNSEEDED_STRATEGY: _surrogate(SurrogateOptions(), seeded=False),
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
