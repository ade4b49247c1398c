"""What a sweep run reports: each problem's outcome, the run's result and throughput, its progress
as it goes, and the runs a sweep directory's ``summary.json`` keeps (appended, never overwritten)."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..families.base import Problem
from ..records import EvalRecord
from ..runner.sanitizer import Check

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProblemOutcome:
    name: str
    problem: Problem
    winner: EvalRecord | None
    baseline: EvalRecord | None  # the fastest torch form re-timed with the finalists
    default: EvalRecord | None  # the default config's re-timing where it was a finalist, else its screening
    stored: bool
    counts: dict[str, int]
    sanitized: tuple[Check, ...] = ()  # the finalists checked under compute-sanitizer, fastest first


@dataclass(frozen=True)
class SweepResult:
    name: str
    replayed: bool
    problems: tuple[ProblemOutcome, ...]
    evaluated: int  # evaluations run in this invocation (not counting ones read from the log)
    seconds: float
    breakdown: dict[str, float] = field(default_factory=dict)  # seconds per stage
    log_path: Path | None = None
    db_path: Path | None = None
    answers: tuple[tuple[float, float], ...] = ()  # per device answer: (s since the start, verify + time s)
    storage: str | None = None  # a sweep shared through PostgreSQL: the database (its password left out)

    def summary(self) -> dict[str, float | int | str | bool]:
        """Throughput of this invocation: variants per second, and the share of the wall time the
        GPU worker spent verifying and timing (``device_busy``; compile time is summed over the
        pool's threads, so it can exceed the wall time). ``first_answer_seconds``: from the start to
        the first device answer (the first problem's inputs and reference, the pipeline's filling).
        The ``steady_`` figures count from the first device answer to the last (the pipeline full).
        ``sanitized_variants``: finalists checked under compute-sanitizer, ``sanitizer_rejected`` of them
        reported on (never stored), ``sanitizer_skipped`` with a tool that could not run;
        ``sanitize_share``: the share of the wall time the checks took."""
        device = self.breakdown.get("verify", 0.0) + self.breakdown.get("time", 0.0)
        steady: dict[str, float] = {}
        if len(self.answers) > 1:
            window = self.answers[-1][0] - self.answers[0][0]
            steady = {
                "first_answer_seconds": self.answers[0][0],
                "steady_seconds": window,
                "steady_variants_per_second": (len(self.answers) - 1) / window if window else 0.0,
                "steady_device_busy": sum(d for _, d in self.answers[1:]) / window if window else 0.0,
            }
        checks = [c for p in self.problems for c in p.sanitized]
        sanitize = self.breakdown.get("sanitize", 0.0)
        return {
            "name": self.name,
            "replayed": self.replayed,
            "evaluated": self.evaluated,
            "seconds": self.seconds,
            "variants_per_second": self.evaluated / self.seconds if self.seconds else 0.0,
            "device_busy": device / self.seconds if self.seconds else 0.0,
            **steady,
            **{f"{stage}_seconds": value for stage, value in self.breakdown.items()},
            "sanitized_variants": len(checks),
            "sanitizer_rejected": sum(c.reported is not None for c in checks),
            "sanitizer_skipped": sum(bool(c.skipped) for c in checks),
            "sanitize_share": sanitize / self.seconds if self.seconds else 0.0,
        }


@dataclass(frozen=True)
class SweepProgress:
    """Where a sweep stands: sent as each problem starts (``record`` None) and after each variant.
    Counts include the variants read from the evaluation log when a sweep resumes."""

    problem: str  # the problem's name
    index: int  # 1-based
    problems: int
    done: int  # this problem's variants evaluated (at most its budget)
    budget: int  # this problem's: the trials, or every valid variant (exhaustive)
    sweep_done: int
    sweep_budget: int  # finished problems' counts, this one's budget, the trials (or, exhaustive, the
    # mean budget so far) of each problem to come
    run_done: int  # variants evaluated by this invocation (a shared sweep: by every worker since this one started)
    elapsed_s: float  # since this invocation started
    best_ms: float | None  # this problem's best verified median so far
    deadline_s: float  # seconds left of the sweep's time budget
    record: EvalRecord | None = None
    sweep_estimated: bool = False  # problems are to come, whose budgets are estimated (sweep_budget)

    @property
    def rate(self) -> float | None:
        """Variants per second in this invocation (a shared sweep's worker: every worker's since it started)."""
        return self.run_done / self.elapsed_s if self.run_done and self.elapsed_s > 0 else None

    @property
    def seconds_left(self) -> float | None:
        """Estimated time to the sweep's end (re-timing the finalists not counted), within its budget."""
        rate = self.rate
        if rate is None:
            return None
        return max(0.0, min((self.sweep_budget - self.sweep_done) / rate, self.deadline_s))


def write_json_atomically(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def earlier_runs(path: Path) -> list[dict[str, Any]]:
    """The runs a ``summary.json`` holds: its ``runs``, or the file itself when written before runs
    were kept (one run). A damaged file is moved aside (``.damaged``) and counts as none."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        aside = path.with_name(path.name + ".damaged")
        log.warning("%s is unreadable (%s): moved to %s, starting a new list of runs", path, exc, aside)
        os.replace(path, aside)
        return []
    if not isinstance(data, dict):
        return []
    runs = data.get("runs")
    if runs is None:
        return [data]
    return [r for r in runs if isinstance(r, dict)] if isinstance(runs, list) else []


def append_run(path: Path, run: dict[str, Any]) -> None:
    """Add ``run`` to ``path``'s runs; the top level repeats the latest run's figures (as a one-run
    summary had them) beside ``runs``, every run in order."""
    write_json_atomically(path, {**run, "runs": [*earlier_runs(path), run]})
