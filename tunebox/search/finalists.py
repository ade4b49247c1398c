"""A problem's last stage: its finalists re-timed interleaved with the library baselines (taken from
the log where a resumed sweep did that already), then the winner: the fastest re-timed finalist that
compute-sanitizer passes."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from ..build.nvrtc import BuildResult
from ..families.base import Problem
from ..families.contract import Family
from ..params import Config, TemplateSpaces
from ..records import EvalRecord, Status, Timing, canonical_json
from ..runner.backends import Backend
from ..runner.protocol import Outcome, harness_checked
from ..runner.sanitizer import Check, Sanitizer
from ..store.evallog import RecordLog

log = logging.getLogger(__name__)

SANITIZE = "sanitize"  # the phase of a finalist's record when compute-sanitizer reported on it


def final_phases(history: list[EvalRecord], problem_key: str) -> list[list[EvalRecord]]:
    """The problem's final phases in the log, in order: each its finalists' records, then those of
    the baselines (records without a configuration). A finalist's record after a baseline's, or one
    repeating a configuration of the phase, starts the next phase (a resumed sweep re-timed)."""
    phases: list[list[EvalRecord]] = []
    for r in history:
        if r.phase != "final" or canonical_json(r.problem) != problem_key:
            continue
        current = phases[-1] if phases else None
        if current is None or r.config and any(not x.config or x.config == r.config for x in current):
            phases.append([r])
        else:
            current.append(r)
    return phases


@dataclass(frozen=True)
class FinalStage:
    """What the last stage uses of its sweep: the family and space, the backend that re-times, the
    log, the sanitizer (None: finalists are not checked), and the sweep's ``record`` (a record of an
    outcome: problem, config or None for a baseline, outcome, input seed, phase) and ``compile``
    (configurations to their builds, through the sweep's pool and cache)."""

    family: Family[Any]
    space: TemplateSpaces
    backend: Backend
    log: RecordLog
    sanitizer: Sanitizer | None
    record: Callable[[Problem, Config | None, Outcome, int, str], EvalRecord]
    compile: Callable[[Problem, list[Config]], list[BuildResult]]

    def retime(
        self, problem: Problem, finalists: list[EvalRecord], history: list[EvalRecord], seed: int
    ) -> list[EvalRecord]:
        wanted = {canonical_json(r.config) for r in finalists}
        for phase in reversed(final_phases(history, problem.key())):
            if {canonical_json(r.config) for r in phase if r.config} == wanted and any(not r.config for r in phase):
                return phase  # resumed after the finalists and the baselines were re-timed
        # not re-timed yet, other finalists, or a baseline's record torn or lost: re-time them all
        configs = [self.space.validate(r.config) for r in finalists]
        builds: list[BuildResult | None] = [None] * len(configs)
        if not self.backend.replayed:
            builds = list(self.compile(problem, configs))
        outcomes = [
            harness_checked(o)
            for o in self.backend.retime(self.family, problem, list(zip(configs, builds, strict=True)), seed)
        ]
        records = [self.record(problem, c, o, seed, "final") for c, o in zip(configs, outcomes, strict=False)]
        records += [self.record(problem, None, o, seed, "final") for o in outcomes[len(configs) :]]  # baselines
        self.log.append_all(records)  # one write: the phase is in the log whole, or its tail torn
        return records

    def winner(
        self, problem: Problem, final: list[EvalRecord], history: list[EvalRecord], seed: int
    ) -> tuple[EvalRecord | None, tuple[Check, ...]]:
        """The re-timed finalist to store, and the sanitizer's checks. Without a sanitizer the fastest;
        with one, the fastest none of its tools reports on: one reported on is logged (status
        SANITIZER_ERROR, phase SANITIZE, the report in its message) and the next is tried. A finalist
        logged so before (a resumed sweep) is passed over unchecked."""
        ranked = sorted(
            (r for r in final if not r.baseline and r.status is Status.OK and r.timing),
            key=lambda r: cast(Timing, r.timing).median_ms,
        )
        if self.sanitizer is None:
            return next(iter(ranked), None), ()
        rejected = {
            canonical_json(r.config)
            for r in history
            if r.phase == SANITIZE and r.status is Status.SANITIZER_ERROR and canonical_json(r.problem) == problem.key()
        }
        checks: list[Check] = []
        for record in ranked:
            if canonical_json(record.config) in rejected:
                continue
            config = self.space.validate(record.config)
            (build,) = self.compile(problem, [config])
            checks.append(self.sanitizer.check(self.family, problem, config, build, seed))
            if checks[-1].reported is None:
                if checks[-1].skipped:
                    log.warning("%s: stored unsanitized: %s", config.label(), checks[-1].describe())
                return record, tuple(checks)
            outcome = Outcome(Status.SANITIZER_ERROR, checks[-1].describe()[:2000])
            self.log.append(self.record(problem, config, outcome, seed, SANITIZE))
        return None, tuple(checks)
