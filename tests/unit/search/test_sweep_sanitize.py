"""Sanitized winners (issue 19 item 10) in the sweep loop, with a stand-in device and sanitizer: a
finalist a tool reports on is never stored, its record says why, the next finalist is tried, a
resumed sweep does not check a rejected one again, and the time spent is in the summary. Also: the
clocks a timing carries reach the log and the report."""

from __future__ import annotations

import json
from concurrent.futures import Future

import pytest
from sweep_fixtures import DEVICE

from tunebox import api
from tunebox.build.nvrtc import BuildResult
from tunebox.errors import SpaceError
from tunebox.families.faults import SANITIZER_FINDS
from tunebox.records import Clocks, ClockSample, Status
from tunebox.report.clocks import clocks_frame
from tunebox.report.data import ReportInputs
from tunebox.runner.protocol import Outcome
from tunebox.runner.sanitizer import TOOLS, Check, ComputeSanitizer
from tunebox.runner.sanitizer_report import ToolRun, Verdict
from tunebox.search.finalists import SANITIZE
from tunebox.search.loop import Sweep
from tunebox.store.evallog import EvalLog
from tunebox.store.winners import WinnersDB
from tunebox.sweep_spec import load_sweep

SWEEP = """
name = "planted"
family = "faults"
[search]
strategy = "exhaustive"
finalists = 3
[space]
block = [256]
passes = [1]
fault = {faults}
[[problems]]
name = "words"
n = 4000037
"""
MS = {"smem_race": 1.0, "oob_read": 1.1, "none": 1.2}  # the planted faults time fastest
CLOCKS = Clocks((ClockSample(1980, 3201, 40, 300.0, 0), ClockSample(1960, 3201, 44, 320.0, 0x40)), 1, True)


class Builder:
    def submit(self, source, label=None) -> Future[BuildResult]:
        future: Future[BuildResult] = Future()
        future.set_result(BuildResult(source, "sm_90", Status.OK, cubin=source.code.encode(), lowered_name="k"))
        return future

    def labelled(self, prefix) -> set[str]:
        return set()

    def cached(self, source) -> bool:
        return False


class Device:
    """Times each variant by its fault (``MS``), with ``CLOCKS`` observed."""

    replayed = False
    device = DEVICE

    def __init__(self) -> None:
        self.queue: list[str] = []

    def answerable(self, family, problem) -> None:
        return None

    def prepare(self, family, problem, seed) -> None:
        pass

    def submit(self, evaluation) -> None:
        self.queue.append(evaluation.config.as_dict()["fault"])

    def _timed(self, fault: str) -> Outcome:
        return Outcome(Status.OK, samples_ms=(MS[fault],) * 10, clocks=CLOCKS)

    def next_outcome(self) -> Outcome:
        return self._timed(self.queue.pop(0))

    def retime(self, family, problem, items, seed):
        return [self._timed(c.as_dict()["fault"]) for c, _ in items] + [Outcome(Status.INVALID, "no torch")]

    def close(self) -> None:
        pass


class Sanitizer:
    """Reports the planted faults with the tool that finds each (``SANITIZER_FINDS``)."""

    def __init__(self) -> None:
        self.checked: list[str] = []

    def check(self, family, problem, config, build, seed) -> Check:
        fault = config.as_dict()["fault"]
        self.checked.append(fault)
        assert build.status is Status.OK and build.cubin  # the finalist's binary, compiled (the cache answers)
        tool = SANITIZER_FINDS.get(fault)
        if tool is None:
            return Check(tuple(ToolRun(t, Verdict.PASSED, seconds=0.01) for t in TOOLS))
        return Check((ToolRun(tool, Verdict.REPORTED, 1, (f"planted {fault}", "at faulty_copy+0x90"), 0.01),))


def run(tmp_path, faults=("none", "smem_race", "oob_read"), sanitizer=None):
    path = tmp_path / "planted.toml"
    path.write_text(SWEEP.format(faults=json.dumps(list(faults))))
    sweep = Sweep(load_sweep(path), Device(), Builder(), tmp_path / "out", tmp_path / "w.sqlite", sanitizer=sanitizer)
    return sweep.run(), EvalLog(tmp_path / "out" / "evals.jsonl").read()


def stored(tmp_path) -> list[str]:
    with WinnersDB(tmp_path / "w.sqlite", read_only=True) as db:
        return [w.config["fault"] for w in db.all()]


def test_a_finalist_the_sanitizer_reports_on_is_never_stored_and_says_why(tmp_path):
    sanitizer = Sanitizer()
    result, records = run(tmp_path, sanitizer=sanitizer)
    assert sanitizer.checked == ["smem_race", "oob_read", "none"]  # fastest first, until one passes
    (problem,) = result.problems
    assert problem.winner.config["fault"] == "none" and problem.stored and stored(tmp_path) == ["none"]
    rejected = [r for r in records if r.phase == SANITIZE]
    assert [(r.config["fault"], r.status) for r in rejected] == [
        ("smem_race", Status.SANITIZER_ERROR),
        ("oob_read", Status.SANITIZER_ERROR),
    ]
    assert rejected[0].message == "racecheck: 1 error(s): planted smem_race | at faulty_copy+0x90"
    assert rejected[1].message.startswith("memcheck: 1 error(s): planted oob_read")
    summary = result.summary()
    assert (summary["sanitized_variants"], summary["sanitizer_rejected"], summary["sanitizer_skipped"]) == (3, 2, 0)
    assert summary["sanitize_seconds"] >= 0 and 0 <= summary["sanitize_share"] < 1


def test_a_resumed_sweep_passes_over_the_rejected_finalists(tmp_path):
    run(tmp_path, sanitizer=Sanitizer())
    again = Sanitizer()
    result, records = run(tmp_path, sanitizer=again)
    assert again.checked == ["none"] and result.problems[0].winner.config["fault"] == "none"
    assert len([r for r in records if r.phase == SANITIZE]) == 2  # not logged twice


def test_when_every_finalist_is_reported_nothing_is_stored(tmp_path):
    result, records = run(tmp_path, faults=("smem_race", "oob_read"), sanitizer=Sanitizer())
    assert result.problems[0].winner is None and not result.problems[0].stored
    assert not (tmp_path / "w.sqlite").exists() or stored(tmp_path) == []
    assert sum(r.status is Status.SANITIZER_ERROR for r in records) == 2


def test_without_a_sanitizer_the_fastest_finalist_is_stored(tmp_path):
    result, records = run(tmp_path)
    assert result.problems[0].winner.config["fault"] == "smem_race" and stored(tmp_path) == ["smem_race"]
    assert result.summary()["sanitized_variants"] == 0 and not any(r.phase == SANITIZE for r in records)


def test_the_sanitizer_runs_when_asked_for_on_the_gpu_and_is_refused_on_replay():
    gpu, replay = Device(), Device()
    replay.replayed = True
    assert isinstance(api._sanitizer(True, gpu), ComputeSanitizer)
    assert api._sanitizer(None, gpu) is None and api._sanitizer(False, gpu) is None
    assert api._sanitizer(None, replay) is None
    with pytest.raises(SpaceError, match="replay"):
        api._sanitizer(True, replay)


def test_the_clocks_of_a_timing_reach_the_log_and_the_report(tmp_path):
    _, records = run(tmp_path, faults=("none", "smem_race"))
    assert all(r.timing.clocks == CLOCKS for r in records if r.timing)
    (row,) = clocks_frame(ReportInputs("faults", tuple(records))).to_dict("records")
    assert (row["sm_mhz"], row["mem_mhz"], row["temperature_c"], row["power_w"]) == (1970, 3201, 42, 310)
    assert (row["observed"], row["retaken"], row["flagged"]) == (4, 4, 4)  # 2 screened + 2 re-timed
