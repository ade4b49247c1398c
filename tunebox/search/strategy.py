"""Optuna ask/tell behind one small adapter, so TPE, random and exhaustive share one loop.

The study lives in an Optuna journal file: an interrupted sweep reloads it and continues. Trials
left RUNNING by a killed process are failed on open. Exhaustive search enqueues every valid
configuration once (``skip_if_exists``), so a resumed exhaustive sweep does not repeat any.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

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
    trial: Trial
    values: dict[str, object]


class OptunaStrategy:
    """One study per (sweep, problem). ``ask`` returns None when an exhaustive study is exhausted."""

    def __init__(self, journal: Path, study_name: str, space: Space, strategy: str, seed: int,
                 valid_configs: Iterable[Config] = ()) -> None:
        journal.parent.mkdir(parents=True, exist_ok=True)
        storage = JournalStorage(JournalFileBackend(str(journal),
                                                    lock_obj=JournalFileOpenLock(str(journal))))
        sampler = (optuna.samplers.TPESampler(seed=seed) if strategy == "tpe"
                   else optuna.samplers.RandomSampler(seed=seed))
        self.space = space
        self.exhaustive = strategy == "exhaustive"
        self.study = optuna.create_study(study_name=study_name, storage=storage, sampler=sampler,
                                         direction="minimize", load_if_exists=True)
        for frozen in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            self.study.tell(frozen.number, state=TrialState.FAIL)  # left by a killed sweep
        if self.exhaustive:
            for config in valid_configs:
                self.study.enqueue_trial(config.as_dict(), skip_if_exists=True)

    def seed(self, config: Config) -> None:
        """Queue a known configuration (the family default, a past winner) to be tried first."""
        self.study.enqueue_trial(config.as_dict(), skip_if_exists=True)

    def ask(self) -> Ask | None:
        if self.exhaustive and not self.study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
            return None
        trial = self.study.ask()
        values = {p.name: trial.suggest_categorical(p.name, list(p.choices)) for p in self.space.params}
        return Ask(trial, values)

    def tell(self, ask: Ask, record: EvalRecord) -> None:
        if record.status is Status.OK and record.timing is not None:
            self.study.tell(ask.trial, record.timing.median_ms)
        elif record.status is Status.INVALID:
            self.study.tell(ask.trial, state=TrialState.PRUNED)
        else:
            self.study.tell(ask.trial, state=TrialState.FAIL)
