"""Search strategies behind one small adapter (``ask`` / ``tell``), so all share one loop.

TPE and random search are Optuna studies kept in a journal file: an interrupted sweep reloads the
study and continues; trials left RUNNING by a killed process are failed on open. Exhaustive search
enumerates the valid configurations in order (Optuna would only add a journal write per config);
on resume the loop answers the ones already in the evaluation log without running them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import optuna
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock
from optuna.trial import Trial, TrialState

from ..params import Config, Space
from ..records import EvalRecord, Status

log = logging.getLogger(__name__)
optuna.logging.set_verbosity(optuna.logging.WARNING)


@dataclass(frozen=True)
class Ask:
    trial: Trial | None  # None for strategies without an Optuna study
    values: dict[str, object]


class Strategy(Protocol):
    def seed(self, config: Config) -> None:
        """Try a known configuration (the family default, a past winner) first."""

    def ask(self) -> Ask | None:
        """The next configuration to evaluate; None when the strategy has no more."""

    def tell(self, ask: Ask, record: EvalRecord) -> None: ...


class OptunaStrategy:
    """TPE or random search, one study per (sweep, problem), resumable from the journal."""

    def __init__(self, journal: Path, study_name: str, space: Space, sampler: str, seed: int) -> None:
        journal.parent.mkdir(parents=True, exist_ok=True)
        storage = JournalStorage(JournalFileBackend(str(journal),
                                                    lock_obj=JournalFileOpenLock(str(journal))))
        chosen = (optuna.samplers.TPESampler(seed=seed) if sampler == "tpe"
                  else optuna.samplers.RandomSampler(seed=seed))
        self.space = space
        self.study = optuna.create_study(study_name=study_name, storage=storage, sampler=chosen,
                                         direction="minimize", load_if_exists=True)
        for frozen in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            self.study.tell(frozen.number, state=TrialState.FAIL)  # left by a killed sweep

    def seed(self, config: Config) -> None:
        self.study.enqueue_trial(config.as_dict(), skip_if_exists=True)

    def ask(self) -> Ask | None:
        trial = self.study.ask()
        values = {p.name: trial.suggest_categorical(p.name, list(p.choices)) for p in self.space.params}
        return Ask(trial, values)

    def tell(self, ask: Ask, record: EvalRecord) -> None:
        assert ask.trial is not None
        if record.status is Status.OK and record.timing is not None:
            self.study.tell(ask.trial, record.timing.median_ms)
        elif record.status is Status.INVALID:
            self.study.tell(ask.trial, state=TrialState.PRUNED)
        else:
            self.study.tell(ask.trial, state=TrialState.FAIL)


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

    def tell(self, ask: Ask, record: EvalRecord) -> None:
        pass
