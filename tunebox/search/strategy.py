"""Search strategies behind one small adapter (``ask`` / ``tell``), so all share one loop.

Every strategy draws only from the problem's valid configurations (the conditional space's
configurations that break no validity rule; on replay, those the recording answers), so no invalid
or unanswerable configuration is ever proposed:

- ``exhaustive`` enumerates them in order, seeded ones first;
- ``random`` draws them uniformly without replacement (Kernel Tuner's ``random_sample``);
- ``tpe`` is Optuna's TPE, define-by-run over a tree of the valid configurations: it chooses the
  template first, then each of that template's parameters in declared order, each among the values
  that still have a valid completion. A parameter whose remaining values are its whole domain keeps
  one name (``template.param``); a narrower set gets a name of its own (``template.param[a|b]``),
  since a distribution's values may not change under one name.

The Gaussian-process strategy over the configurations' own features, which wins the strategy
benchmark and takes warm-start seeds, is ``surrogate.SurrogateStrategy`` (same protocol).

The Optuna study is in memory and rebuilt from the evaluation log when a sweep starts: the log is the
one durable record, so an interrupted sweep continues with the sampler knowing every evaluation.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.trial import FrozenTrial, Trial, TrialState, create_trial

from ..params import TEMPLATE, Config, TemplateSpaces, Value
from ..records import EvalRecord, Status, canonical_json
from .ask import Ask as Ask  # re-exported: the loop imports it from here

log = logging.getLogger(__name__)
optuna.logging.set_verbosity(optuna.logging.WARNING)


class Strategy(Protocol):
    def seed(self, config: Config) -> None:
        """Try a known valid configuration (the family default, a past winner) first."""

    def ask(self) -> Ask | None:
        """The next configuration to evaluate; None when the strategy has no more."""

    def ask_built(self) -> Ask | None:
        """The next configuration among those whose CUBIN the compile cache held when the search began,
        by the strategy's own rule; None when it keeps no such set or none is left. The loop asks it
        only when the device would otherwise wait for compiles."""

    def tell(self, ask: Ask, record: EvalRecord) -> None: ...


class TimedStrategy:
    """``strategy`` with the wall time of its asks and tells added to ``breakdown["search"]``."""

    def __init__(self, strategy: Strategy, breakdown: dict[str, float]) -> None:
        self._strategy, self._breakdown = strategy, breakdown

    def seed(self, config: Config) -> None:
        self._strategy.seed(config)

    def ask(self) -> Ask | None:
        return self._timed(self._strategy.ask)

    def ask_built(self) -> Ask | None:
        return self._timed(self._strategy.ask_built)

    def _timed(self, asking: Callable[[], Ask | None]) -> Ask | None:
        start = time.perf_counter()
        try:
            return asking()
        finally:
            self._breakdown["search"] += time.perf_counter() - start

    def tell(self, ask: Ask, record: EvalRecord) -> None:
        start = time.perf_counter()
        try:
            self._strategy.tell(ask, record)
        finally:
            self._breakdown["search"] += time.perf_counter() - start


class ExhaustiveStrategy:
    """Every given configuration once, seeded ones first."""

    def __init__(self, configs: Iterable[Config]) -> None:
        self._queue = list(configs)
        self._given: set[Config] = set()

    def seed(self, config: Config) -> None:
        self._queue.insert(0, config)

    def ask(self) -> Ask | None:
        while self._queue:
            config = self._queue.pop(0)
            if config not in self._given:
                self._given.add(config)
                return Ask(None, config.as_dict())
        return None

    def ask_built(self) -> Ask | None:
        return None  # an enumeration's order is the point: it keeps none aside

    def tell(self, ask: Ask, record: EvalRecord) -> None:
        pass


class RandomStrategy(ExhaustiveStrategy):
    """The valid configurations in a seeded random order (uniform, without replacement)."""

    def __init__(self, configs: Iterable[Config], seed: int) -> None:
        shuffled = list(configs)
        random.Random(seed).shuffle(shuffled)
        super().__init__(shuffled)


@dataclass
class _Node:
    """A decision of the valid-configuration tree: ``name`` chosen among ``children``'s keys."""

    name: str = ""
    children: dict[Value, _Node] = field(default_factory=dict)


class ValidTree:
    """The valid configurations as a tree of decisions: the template, then its parameters in order."""

    def __init__(self, space: TemplateSpaces, configs: Iterable[Config]) -> None:
        self.domains = {(t, p.name): p.choices for t, s in space.templates for p in s.params}
        self.order = {t: [p.name for p in s.params] for t, s in space.templates}
        self.root = _Node(TEMPLATE)
        rank: dict[Value, int] = {name: i for i, name in enumerate(space.names())}
        for config in sorted(configs, key=lambda c: rank[c[TEMPLATE]]):
            template = config[TEMPLATE]
            node = self.root.children.setdefault(template, _Node())
            for name in self.order[str(template)]:
                node.name = name
                node = node.children.setdefault(config[name], _Node())

    def __bool__(self) -> bool:
        return bool(self.root.children)

    def distribution(self, template: str | None, node: _Node) -> tuple[str, CategoricalDistribution]:
        """The Optuna parameter name and distribution of a decision."""
        values = tuple(node.children)
        if template is None:
            return TEMPLATE, CategoricalDistribution(values)
        domain = self.domains[(template, node.name)]
        ordered = tuple(v for v in domain if v in node.children)
        name = f"{template}.{node.name}"
        if ordered != domain:
            name += "[" + "|".join(map(str, ordered)) + "]"
        return name, CategoricalDistribution(ordered)

    def walk(self, config: dict[str, Value]) -> dict[str, tuple[Value, BaseDistribution]] | None:
        """The decisions that lead to ``config`` (None when it is not in the tree)."""
        node, template = self.root, None
        path: dict[str, tuple[Value, BaseDistribution]] = {}
        while node.children:
            value = config.get(node.name)
            if value not in node.children:
                return None
            name, dist = self.distribution(template, node)
            path[name] = (value, dist)
            template = template or str(value)
            node = node.children[value]
        return path

    def suggest(self, trial: Trial) -> dict[str, Value]:
        """The configuration ``trial`` suggests, decision by decision (template first)."""
        node, template, values = self.root, None, {}
        while node.children:
            name, dist = self.distribution(template, node)
            value: Any = trial.suggest_categorical(name, dist.choices)
            values[node.name] = value
            template = template or str(value)
            node = node.children[value]
        return values

    def finished_trial(self, record: EvalRecord) -> FrozenTrial | None:
        """An evaluation as a finished trial (complete with its median, pruned when it failed); None
        when the tree does not hold its configuration."""
        path = self.walk(record.config)
        if path is None:
            return None
        params = {name: value for name, (value, _) in path.items()}
        distributions = {name: dist for name, (_, dist) in path.items()}
        if record.status is Status.OK and record.timing is not None:
            return create_trial(params=params, distributions=distributions, value=record.timing.median_ms)
        return create_trial(params=params, distributions=distributions, state=TrialState.PRUNED)


class TpeStrategy:
    """Optuna's TPE over the valid-configuration tree, primed with the evaluations already logged.
    Each decision is modelled on its own (univariate TPE): the multivariate, grouped sampler was
    several times slower per proposal on tile_copy's space, and the strategy benchmark
    (``tunebox strategies``, results/benchmarks/search.json) finds the two alike in evaluations.
    A proposal of a configuration already given is told as failed (TPE ignores failed trials) and
    asked again; after ``patience`` such repeats in a row an unexplored configuration is drawn at
    random, so every ask gives a new configuration until none is left. Evaluations that failed are
    told as pruned: TPE counts them among the worst."""

    def __init__(
        self,
        space: TemplateSpaces,
        valid: Sequence[Config],
        seed: int,
        history: Iterable[EvalRecord] = (),
        patience: int = 3,
    ) -> None:
        self.tree = ValidTree(space, valid)
        self.valid = list(valid)
        self.patience = patience
        self._random = random.Random(seed)
        sampler = optuna.samplers.TPESampler(seed=seed)
        self.study = optuna.create_study(sampler=sampler, direction="minimize")
        self._given: set[str] = set()
        self.study.add_trials([t for t in map(self._past_trial, history) if t is not None])

    def _past_trial(self, record: EvalRecord) -> FrozenTrial | None:
        """A logged evaluation as a finished trial, its configuration given; None when the tree does
        not hold it."""
        trial = self.tree.finished_trial(record)
        if trial is not None:
            self._given.add(canonical_json(record.config))
        return trial

    def seed(self, config: Config) -> None:
        self._enqueue(config.as_dict())

    def _enqueue(self, config: dict[str, Value]) -> None:
        path = self.tree.walk(config)
        if path is not None:
            self.study.enqueue_trial({name: value for name, (value, _) in path.items()}, skip_if_exists=True)

    def _sample(self) -> tuple[Trial, dict[str, Value]]:
        trial = self.study.ask()
        return trial, self.tree.suggest(trial)

    def ask(self) -> Ask | None:
        if not self.tree:
            return None
        for _ in range(self.patience):
            trial, values = self._sample()
            key = canonical_json(values)
            if key not in self._given:
                self._given.add(key)
                return Ask(trial, values)
            self.study.tell(trial, state=TrialState.FAIL)
        unexplored = [c for c in self.valid if canonical_json(c.as_dict()) not in self._given]
        if not unexplored:
            return None
        self._enqueue(self._random.choice(unexplored).as_dict())
        trial, values = self._sample()
        self._given.add(canonical_json(values))
        return Ask(trial, values)

    def ask_built(self) -> Ask | None:
        return None  # TPE samples its own trials; it keeps no set of built configurations

    def tell(self, ask: Ask, record: EvalRecord) -> None:
        assert ask.trial is not None
        if record.status is Status.OK and record.timing is not None:
            self.study.tell(ask.trial, record.timing.median_ms)
        else:
            self.study.tell(ask.trial, state=TrialState.PRUNED)
