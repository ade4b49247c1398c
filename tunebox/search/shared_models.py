"""The model a worker of a shared sweep proposes from (``distributed.py``): its own, in memory, fed
every worker's stored records of the problem, so that the workers search as one.

``tpe``: an Optuna TPE study over the tree of valid configurations (the template first), each stored
record added as a finished trial. ``surrogate``: tunebox's default strategy (``surrogate.py``), each
stored record told to it. Exhaustive and random sweeps have no model (an order of configurations).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Protocol

import optuna
from optuna.trial import TrialState

from ..params import Config, TemplateSpaces, Value
from ..records import EvalRecord
from .strategy import Ask, ValidTree
from .surrogate import SurrogateStrategy


class SharedModel(Protocol):
    def learn(self, record: EvalRecord) -> None:
        """Take a stored screening record (any worker's; each once)."""

    def propose(self) -> dict[str, Value] | None:
        """A configuration to claim (possibly one another worker claimed meanwhile: the caller
        checks); None when the model has nothing left to propose."""


class TpeModel:
    """An in-memory TPE study; proposals are told failed at once (their records come back through
    ``learn`` when stored, by whichever worker evaluated them)."""

    def __init__(self, space: TemplateSpaces, valid: Sequence[Config], seed: int) -> None:
        self.tree = ValidTree(space, valid)
        self.study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed), direction="minimize")

    def learn(self, record: EvalRecord) -> None:
        trial = self.tree.finished_trial(record)
        if trial is not None:
            self.study.add_trial(trial)

    def propose(self) -> dict[str, Value] | None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            trial = self.study.ask()
            values = self.tree.suggest(trial)
            self.study.tell(trial, state=TrialState.FAIL)
        return values


class SurrogateModel:
    """The surrogate strategy, told every stored record; it never proposes a configuration twice, so
    one another worker claimed first is simply passed over (and modelled once its record is stored)."""

    def __init__(self, space: TemplateSpaces, valid: Sequence[Config], seed: int, first: Config | None = None) -> None:
        self.strategy = SurrogateStrategy(space, valid, seed, seeds=(first,) if first is not None else ())

    def learn(self, record: EvalRecord) -> None:
        self.strategy.tell(Ask(None, dict(record.config)), record)

    def propose(self) -> dict[str, Value] | None:
        ask = self.strategy.ask()
        return None if ask is None else dict(ask.values)


def shared_model(
    strategy: str, space: TemplateSpaces, valid: Sequence[Config], seed: int, first: Config | None
) -> SharedModel | None:
    """The model of ``strategy`` (None for exhaustive and random); ``first``: proposed first (the
    family default) where the model takes seeds."""
    if strategy == "tpe":
        return TpeModel(space, valid, seed)
    if strategy == "surrogate":
        return SurrogateModel(space, valid, seed, first)
    return None
