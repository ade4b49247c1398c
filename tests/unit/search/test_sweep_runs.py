"""A sweep directory over several runs: one sweep at a time (the lock), every run kept in the summary,
a lost or torn baseline re-timed on resume, progress with totals carried over a resume."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tunebox.api import tune
from tunebox.records import canonical_json
from tunebox.search.finalists import final_phases
from tunebox.search.runs import SweepProgress
from tunebox.store.evallog import EvalLog
from tunebox.store.lock import SweepLock, SweepLocked

REPO = Path(__file__).resolve().parents[3]


def sweep_dir(results: Path) -> Path:
    return results / "sweeps" / "small-replay"


def test_a_second_sweep_of_the_same_directory_is_refused(sweep_file, recording, tmp_path):
    results = tmp_path / "r"
    refused = pytest.raises(
        SweepLocked, match=f"another sweep is running in .*small-replay .lock .*sweep.lock held by pid {os.getpid()}"
    )
    with SweepLock(sweep_dir(results)), refused:
        tune(sweep_file, backend="replay", recording=recording, results=results, trials=2)
    assert not (sweep_dir(results) / "evals.jsonl").exists()
    assert tune(sweep_file, backend="replay", recording=recording, results=results, trials=2).evaluated == 4
    # a sweep's lock is released when it ends, however it ends
    with SweepLock(sweep_dir(results)):
        pass


def test_a_killed_holder_leaves_no_stale_lock(tmp_path):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from tunebox.store.lock import SweepLock; "
            "SweepLock(sys.argv[1]).acquire(); print('locked', flush=True); time.sleep(120)",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert holder.stdout.readline() == "locked\n"
        with pytest.raises(SweepLocked, match=f"pid {holder.pid}, since .*running `-c "):
            SweepLock(tmp_path).acquire()
    finally:
        holder.kill()
        holder.wait()
    lock = SweepLock(tmp_path).acquire()  # the kernel dropped the dead process's lock
    assert json.loads((tmp_path / "sweep.lock").read_text())["pid"] == os.getpid()
    lock.release()


def test_the_summary_keeps_every_run_and_reads_an_old_one(sweep_file, recording, tmp_path):
    results = tmp_path / "r"
    summary = sweep_dir(results) / "summary.json"
    summary.parent.mkdir(parents=True)
    old = {"name": "small", "replayed": True, "evaluated": 7, "seconds": 1.5}  # written before runs were kept
    summary.write_text(json.dumps(old))
    tune(sweep_file, backend="replay", recording=recording, results=results, trials=3)
    tune(sweep_file, backend="replay", recording=recording, results=results, trials=3)  # a no-op resume
    data = json.loads(summary.read_text())
    assert [r["evaluated"] for r in data["runs"]] == [7, 6, 0]
    assert data["runs"][0] == old and all("finished" in r for r in data["runs"][1:])
    assert data["evaluated"] == 0 and data["finished"] == data["runs"][-1]["finished"]  # the latest at the top


def final_records(results: Path) -> list:
    return [r for r in EvalLog(sweep_dir(results) / "evals.jsonl").read() if r.phase == "final"]


def test_a_lost_baseline_is_retimed_on_resume(sweep_file, recording, tmp_path):
    results = tmp_path / "r"
    tune(sweep_file, backend="replay", recording=recording, results=results, trials=3)
    log = sweep_dir(results) / "evals.jsonl"
    lines = log.read_text().splitlines(keepends=True)
    copy_problem = canonical_json(json.loads(lines[1])["problem"])
    kept = [
        line
        for line in lines
        if not ('"baseline": "torch' in line and canonical_json(json.loads(line)["problem"]) == copy_problem)
    ]
    assert len(kept) == len(lines) - 1
    log.write_text("".join(kept))  # copy's baseline record lost
    result = tune(sweep_file, backend="replay", recording=recording, results=results, trials=3)
    copy = result.problems[0]
    assert copy.baseline is not None and copy.baseline.baseline == "torch: fake" and copy.winner is not None
    assert len(final_phases(EvalLog(log).read(), copy_problem)) == 2  # re-timed: a new final phase
    before = len(final_records(results))
    again = tune(sweep_file, backend="replay", recording=recording, results=results, trials=3)
    assert again.problems[0].baseline is not None
    assert len(final_records(results)) == before  # complete now: not re-timed again


def test_a_torn_baseline_is_retimed_on_resume(sweep_file, recording, tmp_path):
    results = tmp_path / "r"
    tune(sweep_file, backend="replay", recording=recording, results=results, trials=3)
    log = sweep_dir(results) / "evals.jsonl"
    data = log.read_bytes()
    assert b'"baseline": "torch: fake"' in data.splitlines()[-1]  # the last problem's baseline comes last
    log.write_bytes(data[:-40])  # killed while writing it
    result = tune(sweep_file, backend="replay", recording=recording, results=results, trials=3)
    transpose = result.problems[1]
    assert transpose.baseline is not None and transpose.baseline.baseline == "torch: fake"
    assert [p.baseline is not None for p in result.problems] == [True, True]


def test_final_phases_split_a_torn_phase_from_its_retiming():
    from sweep_fixtures import DEVICE

    from tunebox.records import EvalRecord, Status, Timing

    def final(config: dict, baseline: str = "") -> EvalRecord:
        return EvalRecord(
            "tile_copy",
            {"n": 1},
            config,
            Status.OK,
            timing=Timing((1.0,)),
            device=DEVICE,
            baseline=baseline,
            phase="final",
        )

    a, b, c = {"BM": 1}, {"BM": 2}, {"BM": 3}
    history = [
        final(a),
        final(b),  # torn: no baseline
        final(a),
        final(b),
        final({}, "torch"),  # re-timed on resume
        final(c),
        final(a),
        final({}, "torch"),
        final({}, "torch: other"),
    ]  # other finalists later
    phases = final_phases(history, canonical_json({"n": 1}))
    assert [[r.config or r.baseline for r in p] for p in phases] == [
        [a, b],
        [a, b, "torch"],
        [c, a, "torch", "torch: other"],
    ]


def test_progress_has_totals_and_carries_over_a_resume(sweep_file, recording, tmp_path):
    results = tmp_path / "r"
    events: list[SweepProgress] = []
    tune(sweep_file, backend="replay", recording=recording, results=results, progress=events.append)
    first, last = events[0], events[-1]
    assert (
        first.index,
        first.problems,
        first.done,
        first.budget,
        first.sweep_done,
        first.sweep_budget,
        first.record,
        first.best_ms,
    ) == (1, 2, 0, 12, 0, 24, None, None)
    assert (last.index, last.problem, last.done, last.budget, last.sweep_done, last.sweep_budget) == (
        2,
        "transpose",
        12,
        12,
        24,
        24,
    )
    assert len(events) == 2 + 24 and last.run_done == 24 and last.rate and last.rate > 0
    assert last.seconds_left == 0.0 and last.best_ms == min(
        e.record.timing.median_ms for e in events[13:] if e.record and e.record.timing
    )
    assert [e.sweep_done for e in events if e.record] == list(range(1, 25))
    resumed: list[SweepProgress] = []
    tune(sweep_file, backend="replay", recording=recording, results=results, trials=14, progress=resumed.append)
    start = resumed[0]
    assert (start.done, start.budget, start.sweep_done, start.sweep_budget, start.run_done) == (12, 14, 12, 28, 0)
    assert start.best_ms == events[12].best_ms  # the best of the log, before anything ran again
    assert (resumed[-1].sweep_done, resumed[-1].sweep_budget, resumed[-1].run_done) == (28, 28, 4)


def test_time_left_comes_from_the_rate_within_the_budget():
    p = SweepProgress("copy", 1, 2, 10, 20, 10, 40, run_done=10, elapsed_s=5.0, best_ms=1.0, deadline_s=100.0)
    assert p.rate == 2.0 and p.seconds_left == 15.0
    assert SweepProgress("copy", 1, 2, 10, 20, 10, 40, 10, 5.0, 1.0, deadline_s=3.0).seconds_left == 3.0
    assert SweepProgress("copy", 1, 2, 10, 20, 10, 40, 0, 5.0, None, 100.0).seconds_left is None
