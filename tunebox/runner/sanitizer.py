"""Runs one compiled variant under compute-sanitizer (memcheck, racecheck, synccheck) before it may
be stored as a winner.

Each tool runs a child process, ``python -m tunebox.runner.sanitizer``, under ``compute-sanitizer
--tool T --report-api-errors no --error-exitcode 86``. The child reads an untimed ``EvaluateJob``
(the variant's CUBIN, geometry and arguments, its problem and input seed; pickled over its stdin, a
private pipe), answers it on a fresh ``GpuSession`` through the worker's own ``handle`` (seeded
inputs, one launch, verification), and prints the outcome on a line of its own. The tool's report
is parsed (``sanitizer_report.parse``). Where compute-sanitizer is not on PATH, a tool run past its timeout
or a child that failed outside any report, the tool is *skipped* with the reason: never a silent
pass.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from subprocess import PIPE, STDOUT
from typing import Any, Protocol

from ..build.nvrtc import BuildResult
from ..families.base import Problem
from ..families.contract import Family
from ..params import Config
from ..records import Status
from .protocol import EvaluateJob, variant_of
from .sanitizer_report import OUTCOME_MARK, ToolRun, Verdict, parse
from .timing import SCREEN

TOOLS = ("memcheck", "racecheck", "synccheck")
ERROR_EXIT = 86  # compute-sanitizer's exit status when its tool reported an error


@dataclass(frozen=True)
class Check:
    """One variant's tool runs, in ``TOOLS`` order, stopped at the first that reported."""

    runs: tuple[ToolRun, ...]

    @property
    def reported(self) -> ToolRun | None:
        """The run that reported an error (the variant must not be stored), else None."""
        return next((r for r in self.runs if r.verdict is Verdict.REPORTED), None)

    @property
    def skipped(self) -> tuple[ToolRun, ...]:
        return tuple(r for r in self.runs if r.verdict is Verdict.SKIPPED)

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.runs)

    def describe(self) -> str:
        """One line: the report (tool, error count, its first lines), else which tools passed and
        which were skipped, and why."""
        reported = self.reported
        if reported is not None:
            return f"{reported.tool}: {reported.errors} error(s): " + " | ".join(reported.lines)
        passed = [r.tool for r in self.runs if r.verdict is Verdict.PASSED]
        parts = [f"{', '.join(passed)} passed"] if passed else []
        parts += [f"{r.tool} skipped ({'; '.join(r.lines)})" for r in self.skipped]
        return "; ".join(parts)


class Sanitizer(Protocol):
    """Checks a compiled variant of ``family`` for ``problem`` on its seeded inputs (tests pass fakes)."""

    def check(self, family: Family[Any], problem: Problem, config: Config, build: BuildResult, seed: int) -> Check: ...


class ComputeSanitizer:
    """``Sanitizer`` running ``tools`` of compute-sanitizer (``executable``, default: the one on PATH),
    each bounded by ``timeout_s`` seconds."""

    def __init__(self, tools: Sequence[str] = TOOLS, timeout_s: float = 600.0, executable: str | None = None) -> None:
        self.tools = tuple(tools)
        self.timeout_s = timeout_s
        self.executable = executable or shutil.which("compute-sanitizer")

    def check(self, family: Family[Any], problem: Problem, config: Config, build: BuildResult, seed: int) -> Check:
        if self.executable is None or build.status is not Status.OK:
            why = "not on PATH" if self.executable is None else f"the variant did not compile ({build.status.value})"
            return Check(tuple(ToolRun(t, Verdict.SKIPPED, lines=(f"compute-sanitizer: {why}",)) for t in self.tools))
        variant = variant_of(family, problem, config, build)
        job = EvaluateJob(family.name, problem.to_dict(), variant, SCREEN, seed, time=False)
        runs: list[ToolRun] = []
        for tool in self.tools:
            runs.append(self._run(self.executable, tool, job))
            if runs[-1].verdict is Verdict.REPORTED:
                break
        return Check(tuple(runs))

    def _run(self, executable: str, tool: str, job: EvaluateJob) -> ToolRun:
        """``job`` answered in a child process under ``tool``."""
        command = [executable, "--tool", tool, "--report-api-errors", "no", "--error-exitcode", str(ERROR_EXIT)]
        command += [sys.executable, "-m", __name__]
        here = str(Path(__file__).resolve().parents[2])  # the child imports this very tunebox
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)}
        start = time.perf_counter()
        child = subprocess.Popen(command, stdin=PIPE, stdout=PIPE, stderr=STDOUT, env=env, start_new_session=True)
        try:
            output, _ = child.communicate(pickle.dumps(job), timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)  # the sanitizer and the Python it runs
            child.communicate()
            why = f"timed out after {self.timeout_s:.0f} s"
            return ToolRun(tool, Verdict.SKIPPED, lines=(why,), seconds=time.perf_counter() - start)
        return parse(tool, output.decode(errors="replace"), child.returncode == ERROR_EXIT, time.perf_counter() - start)


def _child() -> None:
    """In the sanitized process: answer the job read from stdin; print its outcome on a marked line."""
    job = pickle.load(sys.stdin.buffer)
    from .gpu_session import GpuSession
    from .worker import handle

    outcome = handle(GpuSession(), job)
    assert not isinstance(outcome, list)  # an EvaluateJob has one outcome
    print(OUTCOME_MARK + json.dumps({"status": outcome.status.value, "message": outcome.message}), flush=True)
    os._exit(0)  # no CUDA destructors on a context a fault may have poisoned (the sanitizer sets the status)


if __name__ == "__main__":
    _child()
