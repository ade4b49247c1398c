"""Backends answer evaluations: on a GPU (through the worker) or from a recorded GPU sweep."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, cast

from ..build.nvrtc import BuildResult
from ..errors import ReplayMiss
from ..families.base import Problem
from ..families.contract import Family
from ..params import Config
from ..records import DeviceInfo, EvalRecord, Status, canonical_json
from ..store.evallog import EvalLog
from .gpu_runner import GpuRunner
from .protocol import EvaluateJob, Outcome, PrepareJob, RetimeJob, variant_of
from .timing import FINAL, SCREEN

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Evaluation:
    """One variant to verify and then screen-time: ``build`` is None on replay, which compiles nothing
    and answers as recorded; with ``cutoff_ms``, a variant slower on its verification launch and its
    probe keeps those samples (``EvaluateJob``)."""

    family: Family[Any]
    problem: Problem
    config: Config
    build: BuildResult | None
    seed: int
    cutoff_ms: float | None = None


class Backend(Protocol):
    """Evaluates compiled variants. Evaluations are queued (``submit``) and answered in order
    (``next_outcome``), so a device can start the next one while the sweep does its bookkeeping.
    ``retime`` returns one Outcome per item, then one per torch baseline (at least one)."""

    device: DeviceInfo
    replayed: bool

    def prepare(self, family: Family[Any], problem: Problem, seed: int) -> None:
        """Start making the problem's inputs and reference ahead of its first evaluation (a hint:
        an evaluation prepares its problem itself when this did not)."""

    def answerable(self, family: Family[Any], problem: Problem) -> set[str] | None:
        """The canonical JSON of every configuration this backend can evaluate for ``problem``: None
        for all (a GPU); a recording's recorded ones (ReplayMiss when it never saw the problem)."""

    def submit(self, evaluation: Evaluation) -> None:
        """Queue an evaluation. Raises ReplayMiss when a recording has no answer."""

    def next_outcome(self) -> Outcome:
        """The outcome of the oldest queued evaluation."""

    def retime(
        self, family: Family[Any], problem: Problem, items: Sequence[tuple[Config, BuildResult | None]], seed: int
    ) -> list[Outcome]: ...

    def close(self) -> None: ...


class GpuBackend:
    """Runs variants on the local GPU through a replaceable worker process."""

    replayed = False

    def __init__(self, runner: GpuRunner | None = None) -> None:
        self.runner = runner or GpuRunner()
        self.device = self.runner.start()
        self._preparing = 0  # PrepareJob replies not yet read (they come before any later reply)
        self._prepared_seconds = 0.0  # worker seconds spent preparing, not yet reported

    def answerable(self, family: Family[Any], problem: Problem) -> None:
        return None

    def prepare(self, family: Family[Any], problem: Problem, seed: int) -> None:
        self.runner.submit(PrepareJob(family.name, problem.to_dict(), seed))
        self._preparing += 1

    def submit(self, evaluation: Evaluation) -> None:
        e = evaluation
        variant = variant_of(e.family, e.problem, e.config, _compiled(e.build))
        job = EvaluateJob(e.family.name, e.problem.to_dict(), variant, SCREEN, e.seed, cutoff_ms=e.cutoff_ms)
        self.runner.submit(job)

    def next_outcome(self) -> Outcome:
        """The next evaluation's outcome; worker seconds spent preparing ahead are added to its
        ``prepare`` stage, so the sweep's breakdown still counts them."""
        self._read_prepared()
        outcome = cast(Outcome, self.runner.next_reply())  # an EvaluateJob's reply
        if not self._prepared_seconds:
            return outcome
        stages = {**outcome.stage_seconds}
        stages["prepare"] = stages.get("prepare", 0.0) + self._prepared_seconds
        self._prepared_seconds = 0.0
        return replace(outcome, stage_seconds=stages)

    def _read_prepared(self) -> None:
        """Read the replies of PrepareJobs sent ahead. A failed one is dropped: the evaluation that
        follows prepares again and reports the failure as its own."""
        while self._preparing:
            reply = cast(Outcome, self.runner.next_reply())  # a PrepareJob's reply
            self._preparing -= 1
            if reply.status is Status.OK:
                self._prepared_seconds += reply.stage_seconds.get("prepare", 0.0)

    def retime(
        self, family: Family[Any], problem: Problem, items: Sequence[tuple[Config, BuildResult | None]], seed: int
    ) -> list[Outcome]:
        self._read_prepared()
        job = RetimeJob(
            family.name,
            problem.to_dict(),
            tuple(variant_of(family, problem, c, _compiled(b)) for c, b in items),
            FINAL,
            seed,
        )
        return self.runner.run(job, timeout_s=self.runner.job_timeout_s * (len(items) + 2))

    def close(self) -> None:
        self.runner.close()


def _compiled(build: BuildResult | None) -> BuildResult:
    """The GPU runs compiled variants (only a replay passes none)."""
    if build is None:
        raise ValueError("the GPU backend needs the variant's compiled binary")
    return build


class ReplayBackend:
    """Answers from a recorded evaluation log of a real GPU sweep (clearly marked as replayed).

    Checked at start: the recording holds evaluations of one device; of ``family`` when one is given
    (the sweep's: a recording of another family is refused, naming the families it holds); and of
    ``expected_device`` when one is given (the device of the sweep's evaluation log, which a resumed
    replay must not mix with another). Each refusal is a ReplayMiss."""

    replayed = True

    def __init__(
        self,
        recording: Path,
        records: Sequence[EvalRecord],
        family: str | None = None,
        expected_device: DeviceInfo | None = None,
    ) -> None:
        self.recording = recording
        if not records:
            raise ReplayMiss(f"{recording} holds no recorded evaluations: record the sweep on a GPU host first")
        families = sorted({r.family for r in records})
        if family is not None and family not in families:
            raise ReplayMiss(
                f"{recording} is a recording of {_names(families)}, not of {family}: replay a recording of "
                f"a {family} sweep (--recording; the default is results/recordings/<sweep name>.jsonl.gz), "
                "or measure on a GPU (--backend gpu)"
            )
        self._index: dict[tuple[str, str, str, str], EvalRecord] = {}
        self._baselines: dict[tuple[str, str], list[EvalRecord]] = {}  # (family, problem) -> in recorded order
        self._screened: dict[tuple[str, str], set[str]] = {}  # (family, problem) -> recorded configurations
        for r in records:
            if r.phase == "final" and not r.config:
                self._baselines.setdefault((r.family, canonical_json(r.problem)), []).append(r)
            else:
                self._index[(r.family, canonical_json(r.problem), canonical_json(r.config), r.phase)] = r
                if r.phase == "screen":
                    screened = self._screened.setdefault((r.family, canonical_json(r.problem)), set())
                    screened.add(canonical_json(r.config))
        devices = {r.device for r in records if r.device is not None}
        if len(devices) != 1:
            raise ReplayMiss(f"{recording}: a recording must come from exactly one device, found {len(devices)}")
        self.device = devices.pop()
        if expected_device is not None:
            self.expect_device(expected_device, "this sweep's evaluation log")
        self._answers: deque[Outcome] = deque()

    def expect_device(self, device: DeviceInfo, holder: str) -> None:
        """Raise ReplayMiss unless the recording was measured on ``device`` (that ``holder`` holds)."""
        if device != self.device:
            raise ReplayMiss(
                f"{self.recording} was measured on {self.device.describe()}, but {holder} holds measurements "
                f"of {device.describe()}: replay the recording it was made from, or give the sweep another "
                "results directory (--results)"
            )

    def check_resume(self, log: Path) -> None:
        """Before a replayed sweep resumes its evaluation log ``log``: the log's measurements must come
        from the recording's device (a log of another device's replay is never continued with this one)."""
        devices = {r.device for r in EvalLog(log).read() if r.device is not None}
        for device in sorted(devices, key=str):
            self.expect_device(device, str(log))

    def prepare(self, family: Family[Any], problem: Problem, seed: int) -> None:
        pass  # recorded outcomes need no inputs

    def answerable(self, family: Family[Any], problem: Problem) -> set[str]:
        configs = self._screened.get((family.name, problem.key()))
        if not configs:
            raise ReplayMiss(
                f"{family.name} {problem.key()} is not in the recording {self.recording}: replay answers "
                "only the recorded problems (measure a new one on a GPU: --backend gpu)"
            )
        return configs

    def _find(self, family: Family[Any], problem: Problem, config: dict[str, Any], phase: str) -> EvalRecord | None:
        return self._index.get((family.name, problem.key(), canonical_json(config), phase))

    def submit(self, evaluation: Evaluation) -> None:
        config = evaluation.config
        record = self._find(evaluation.family, evaluation.problem, config.as_dict(), "screen")
        if record is None:
            raise ReplayMiss(f"{config.label()} is not in the recording {self.recording}")
        self._answers.append(_outcome(record))

    def next_outcome(self) -> Outcome:
        return self._answers.popleft()

    def retime(
        self, family: Family[Any], problem: Problem, items: Sequence[tuple[Config, BuildResult | None]], seed: int
    ) -> list[Outcome]:
        outcomes: list[Outcome] = []
        for config, _ in items:
            record = self._find(family, problem, config.as_dict(), "final") or self._find(
                family, problem, config.as_dict(), "screen"
            )
            outcomes.append(_outcome(record) if record else Outcome(Status.INVALID, "finalist not in the recording"))
        baselines = self._baselines.get((family.name, problem.key()))
        outcomes += (
            [_outcome(b) for b in baselines] if baselines else [Outcome(Status.INVALID, "no baseline in the recording")]
        )
        return outcomes

    def close(self) -> None:
        pass


def _names(families: Sequence[str]) -> str:
    return families[0] if len(families) == 1 else "the families " + ", ".join(families)


def _outcome(record: EvalRecord) -> Outcome:
    return Outcome(
        record.status,
        record.message,
        record.timing.samples_ms if record.timing else (),
        record.metrics,
        stage_seconds=dict(record.stage_seconds),
        baseline=record.baseline,
        clocks=record.timing.clocks if record.timing else None,
    )
