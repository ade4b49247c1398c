"""Recorded problems as Kernel Tuner cache files, and Kernel Tuner's strategies run on them in its
simulation mode (benchmark only: Kernel Tuner is the optional extra ``bench``, imported only when a
strategy runs, never by tunebox otherwise).

A Kernel Tuner cache file is one JSON object: ``device_name``, ``kernel_name``, ``problem_size``,
``tune_params_keys`` (the parameters in order), ``tune_params`` (each parameter's values),
``objective`` and ``cache``, which maps a configuration's key (its values in ``tune_params_keys``
order, as text, joined by commas) to a record holding those parameters and ``time`` (ms; a failed
variant holds the name of its error class instead, e.g. ``"RuntimeFailedConfig"``), with the timing
fields ``times``, ``compile_time``, ``verification_time``, ``benchmark_time``, ``strategy_time`` and
``framework_time``. Kernel Tuner's ``tune_cache`` treats the configurations the cache holds without
an error as the valid space.

Kernel Tuner's parameters are flat, tunebox's conditional (a template, then that template's
parameters). The flat parameters are ``template`` and the union of every template's parameters (a
parameter several templates share keeps one name, its values the union of theirs, in declared
order); a parameter a configuration's template does not have takes that parameter's first value. So
each tunebox configuration is exactly one flat configuration, and the cache's valid set is exactly
the recorded valid configurations. The cache also holds ``tunebox`` (the family, the problem and
each template's parameters), which Kernel Tuner ignores and ``from_cache`` uses to read it back.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import json
import logging
import math
import os
import random
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from ..params import TEMPLATE, Config, TemplateSpaces, Value
from ..records import canonical_json
from .replay_problems import ReplayProblem, StrategyRun, Trace

# Kernel Tuner 1.x strategies benchmarked (its names); those whose module or dependency is missing
# are reported as failed by the benchmark
STRATEGIES = (
    "random_sample",
    "genetic_algorithm",
    "simulated_annealing",
    "mls",
    "pso",
    "bayes_opt",
    "dual_annealing",
    "greedy_ils",
    "diff_evo",
    "firefly_algorithm",
    "basinhopping",
)


def available() -> bool:
    """Whether Kernel Tuner can be imported (without importing it)."""
    return importlib.util.find_spec("kernel_tuner") is not None


def flat_params(space: TemplateSpaces) -> dict[str, list[Value]]:
    """Kernel Tuner's ``tune_params``: ``template``, then every template's parameters (shared names
    once, their values united in declared order)."""
    params: dict[str, list[Value]] = {TEMPLATE: list(space.names())}
    for _, template in space.templates:
        for p in template.params:
            values = params.setdefault(p.name, [])
            values += [v for v in p.choices if v not in values]
    for name, values in params.items():
        if len({type(v) for v in values}) > 1:
            raise ValueError(f"parameter {name} mixes value types across templates: {values}")
    return params


def flatten(config: Config, params: dict[str, list[Value]]) -> list[Value]:
    """A configuration's flat values, in ``params`` order."""
    values = config.as_dict()
    return [values.get(name, choices[0]) for name, choices in params.items()]


def cache_key(values: list[Value]) -> str:
    return ",".join(str(v) for v in values)


def to_cache(problem: ReplayProblem) -> dict[str, Any]:
    """The problem's recorded configurations as a Kernel Tuner cache (a JSON-ready dict)."""
    params = flat_params(problem.space)
    cache: dict[str, dict[str, Any]] = {}
    for config, ms in zip(problem.configs, problem.times, strict=True):
        flat = flatten(config, params)
        key = cache_key(flat)
        if key in cache:
            raise ValueError(f"two configurations flatten to one key {key}")
        ok = math.isfinite(ms)
        cache[key] = {
            **dict(zip(params, flat, strict=True)),
            "time": ms if ok else "RuntimeFailedConfig",
            "times": [ms] if ok else [],
            "compile_time": 0.0,
            "verification_time": 0.0,
            "benchmark_time": ms if ok else 0.0,
            "strategy_time": 0.0,
            "framework_time": 0.0,
            "timestamp": "",
        }
    return {
        "device_name": problem.device or "recorded device",
        "kernel_name": f"{problem.family}_{problem.name}",
        "problem_size": [len(problem.configs)],
        "tune_params_keys": list(params),
        "tune_params": params,
        "objective": "time",
        "cache": cache,
        "tunebox": {
            "sweep": problem.sweep,
            "family": problem.family,
            "problem": problem.problem,
            "templates": {name: [p.name for p in s.params] for name, s in problem.space.templates},
        },
    }


def write_cache(problem: ReplayProblem, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_cache(problem), indent=1) + "\n")
    return path


def from_cache(cache: dict[str, Any]) -> dict[str, float]:
    """A cache written by ``to_cache`` read back: median ms by tunebox configuration (canonical JSON;
    inf where the variant failed)."""
    templates: dict[str, list[str]] = cache["tunebox"]["templates"]
    times = {}
    for record in cache["cache"].values():
        template = record[TEMPLATE]
        config = {TEMPLATE: template, **{name: record[name] for name in templates[template]}}
        ms = record["time"]
        times[canonical_json(config)] = float(ms) if isinstance(ms, int | float) else math.inf
    return times


_CACHES: dict[str, Path] = {}  # per process, without a folder given: problem label -> its cache file


def cache_file(problem: ReplayProblem, folder: Path | None = None) -> Path:
    """The problem's cache file in ``folder`` (written there once; several processes may ask at
    once), or, without a folder, in a temporary folder of this process (``cleanup`` removes it)."""
    if folder is not None:
        path = folder / f"{problem.sweep}_{problem.name}.json"
        if not path.exists():
            tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            write_cache(problem, tmp)
            os.replace(tmp, path)
        return path
    known = _CACHES.get(problem.label)
    if known is not None and known.exists():
        return known
    made = write_cache(problem, Path(tempfile.mkdtemp(prefix="tunebox-kt-")) / f"{problem.sweep}_{problem.name}.json")
    _CACHES[problem.label] = made
    return made


# A Kernel Tuner strategy may propose configurations it has already evaluated without end (its
# revisits are free and do not count against its budget; a local search on a small or sparse space
# can loop): a run is stopped after this many proposals in all, or this many seconds.
MAX_PROPOSALS_PER_BUDGET = 100
MAX_SECONDS = 30.0


class _Watched:
    """Kernel Tuner's strategy ``name`` as a user-defined strategy object whose runner is watched:
    it records each distinct configuration the strategy evaluates, in order, and stops the run
    (Kernel Tuner's own StopCriterionReached) past ``max_proposals`` proposals or ``seconds``."""

    def __init__(self, kernel_tuner: Any, name: str, keys: list[str], max_proposals: int, seconds: float) -> None:
        self.module = importlib.import_module("kernel_tuner.interface").strategy_map[name]
        self.stop = importlib.import_module("kernel_tuner.util").StopCriterionReached
        self.keys = keys
        self.max_proposals = max_proposals
        self.seconds = seconds
        self.order: list[str] = []  # distinct configurations (cache keys), in evaluation order
        self.stopped = ""

    def tune(self, searchspace: Any, runner: Any, tuning_options: Any) -> Any:
        run = runner.run
        seen: set[str] = set()
        proposals = 0
        deadline = time.monotonic() + self.seconds

        def watched(parameter_space: Any, options: Any) -> Any:
            nonlocal proposals
            results = run(parameter_space, options)
            for r in results:
                if r:
                    key = cache_key([r[k] for k in self.keys])
                    if key not in seen:
                        seen.add(key)
                        self.order.append(key)
            proposals += len(results)
            if proposals > self.max_proposals or time.monotonic() > deadline:
                self.stopped = f"stopped after {proposals} proposals ({len(seen)} distinct)"
                raise self.stop(self.stopped)
            return results

        runner.run = watched
        try:
            return self.module.tune(searchspace, runner, tuning_options)
        except self.stop:  # a strategy that does not catch it itself
            return []


# Kernel Tuner 1.5's strategies whose first population (or initial sample) is drawn from the space
# without replacement, failing on a space no larger than it: (option, default, whether multiplied by
# the number of parameters with more than one value)
_POPULATIONS = {"bayes_opt": ("popsize", 20, False), "firefly_algorithm": ("popsize", 20, False)}
_POPULATIONS |= {"diff_evo": ("popsize", 16, True)}


def options_for(strategy: str, problem: ReplayProblem, budget: int) -> dict[str, Any]:
    """Kernel Tuner's strategy options on a problem: the budget (``max_fevals``) and, for a strategy
    whose first population would not fit in the space (Kernel Tuner fails then), that population
    set to half the space; Kernel Tuner's defaults otherwise."""
    options: dict[str, Any] = {"max_fevals": budget}
    if strategy in _POPULATIONS:
        name, default, per_dimension = _POPULATIONS[strategy]
        dimensions = sum(len(values) > 1 for values in flat_params(problem.space).values())
        size = default * dimensions if per_dimension else default
        n = len(problem.configs)
        if size >= n:
            options[name] = max(2, n // 2)
            if per_dimension:
                options["popsize_times_dimensions"] = False
    return options


def simulate(problem: ReplayProblem, strategy: str, seed: int, budget: int, folder: Path | None = None) -> Trace:
    """Kernel Tuner's ``strategy`` in simulation mode on the problem's cache, at most ``budget``
    distinct configurations: their times in the order it first evaluated them (its revisits are
    served from its cache and not counted, as its own budget does). A run that loops on revisits is
    stopped (``MAX_PROPOSALS_PER_BUDGET``, ``MAX_SECONDS``): its trace is then shorter."""
    kernel_tuner: Any = importlib.import_module("kernel_tuner")
    import numpy as np

    path = cache_file(problem, folder)
    random.seed(seed)
    np.random.seed(seed)
    params = flat_params(problem.space)
    lookup = {cache_key(flatten(c, params)): t for c, t in zip(problem.configs, problem.times, strict=True)}
    watched = _Watched(kernel_tuner, strategy, list(params), MAX_PROPOSALS_PER_BUDGET * budget, MAX_SECONDS)
    root = logging.getLogger()  # Kernel Tuner logs each evaluation to the root logger at debug level
    level = root.level
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        root.setLevel(max(level, logging.WARNING))
        try:
            kernel_tuner.tune_cache(
                str(path),
                strategy=watched,
                strategy_options=options_for(strategy, problem, budget),
                quiet=True,
                verbose=False,
            )
        finally:
            root.setLevel(level)
    return [lookup[key] for key in watched.order if key in lookup][:budget]


def strategy_run(strategy: str, folder: Path | None = None) -> StrategyRun:
    """A benchmark strategy running Kernel Tuner's ``strategy`` (cache files in ``folder``, see
    ``cache_file``)."""

    def run(problem: ReplayProblem, seed: int, budget: int) -> Trace:
        return simulate(problem, strategy, seed, budget, folder)

    return run


def cleanup() -> None:
    """Remove this process's temporary cache files."""
    for path in _CACHES.values():
        with contextlib.suppress(OSError):
            os.remove(path)
            os.rmdir(path.parent)
    _CACHES.clear()
