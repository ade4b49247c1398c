"""A replay that takes the time the recorded evaluations took: each answer waits ``factor`` times the
recorded verify + time seconds (the GPU worker's busy time; replayed compile time is not recorded).
For scaling figures and tests of several workers on a CPU, where a plain replay answers in
microseconds and the workers' Python and database round trips would be all that is measured."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from typing import Any

from ..build.nvrtc import BuildResult
from ..families.base import Problem
from ..families.contract import Family
from ..params import Config
from ..records import DeviceInfo
from .backends import Evaluation, ReplayBackend
from .protocol import Outcome

PACED_STAGES = ("verify", "time")


class PacedReplay:
    """``ReplayBackend`` answers, each ``factor`` x its recorded busy seconds (at least ``floor_s``)
    after the device would have started it, as a GPU does: an evaluation starts when it is submitted
    or when the one before it ends, whichever is later, so work queued ahead overlaps the sweep's own."""

    replayed = True

    def __init__(self, inner: ReplayBackend, factor: float = 1.0, floor_s: float = 0.0) -> None:
        self.inner, self.factor, self.floor_s = inner, factor, floor_s
        self.device: DeviceInfo = inner.device
        self._submitted: deque[float] = deque()  # submit times of the evaluations not yet answered
        self._free_at = 0.0  # when the device finishes the last evaluation answered

    def prepare(self, family: Family[Any], problem: Problem, seed: int) -> None:
        self.inner.prepare(family, problem, seed)

    def answerable(self, family: Family[Any], problem: Problem) -> set[str]:
        return self.inner.answerable(family, problem)

    def submit(self, evaluation: Evaluation) -> None:
        self.inner.submit(evaluation)
        self._submitted.append(time.monotonic())

    def next_outcome(self) -> Outcome:
        outcome = self.inner.next_outcome()
        busy = sum(outcome.stage_seconds.get(stage, 0.0) for stage in PACED_STAGES)
        self._free_at = max(self._free_at, self._submitted.popleft()) + max(self.floor_s, self.factor * busy)
        time.sleep(max(0.0, self._free_at - time.monotonic()))
        return outcome

    def retime(
        self, family: Family[Any], problem: Problem, items: Sequence[tuple[Config, BuildResult | None]], seed: int
    ) -> list[Outcome]:
        return self.inner.retime(family, problem, items, seed)

    def close(self) -> None:
        self.inner.close()

    def check_resume(self, log: Any) -> None:
        self.inner.check_resume(log)
