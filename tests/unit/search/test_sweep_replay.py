"""The sweep loop on the replay backend: winners, exhaustive optimum, resume, breaker, kill -9."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sweep_fixtures import DEVICE, fake_ms, replay_argv, write_recording, write_sweep

from tunebox.api import tune
from tunebox.errors import DatabaseError, ReplayMiss
from tunebox.records import EvalRecord, Status, Timing, WinnerKey, canonical_json
from tunebox.search.loop import SweepAborted
from tunebox.store.evallog import EvalLog
from tunebox.store.winners import WinnersDB
from tunebox.sweep_spec import load_sweep


def screen_configs(results: Path) -> list[str]:
    records = EvalLog(results / "sweeps" / "small-replay" / "evals.jsonl").read()
    return [
        canonical_json(r.problem) + canonical_json(r.config)
        for r in records
        if r.phase == "screen" and r.status is not Status.INVALID
    ]


def test_replay_sweep_stores_replayed_winners(sweep_file, recording, tmp_path):
    result = tune(sweep_file, backend="replay", recording=recording, results=tmp_path / "r")
    assert result.replayed
    assert [p.name for p in result.problems] == ["copy", "transpose"]
    for p in result.problems:
        assert p.winner is not None and p.winner.replayed and p.winner.phase == "final"
        assert p.baseline is not None and p.baseline.baseline == "torch: fake"
        assert p.stored
    with WinnersDB(tmp_path / "r" / "winners-replay.sqlite", read_only=True) as db:
        rows = db.all()
    assert len(rows) == 2 and all(w.replayed for w in rows)
    summary = json.loads((tmp_path / "r" / "sweeps" / "small-replay" / "summary.json").read_text())
    assert summary["evaluated"] == result.evaluated == 24 and summary["replayed"] is True
    assert summary["variants_per_second"] == pytest.approx(24 / summary["seconds"])
    assert 0 <= summary["final_seconds"] <= summary["seconds"]  # the finalists' re-timing, in the breakdown
    waits = [summary[f"{stage}_seconds"] for stage in ("search", "compile_wait", "device_wait")]
    assert all(0 <= w <= summary["seconds"] for w in waits) and sum(waits) <= summary["seconds"]


def test_exhaustive_search_finds_the_optimum_and_never_stores_a_wrong_result(tmp_path):
    sweep = write_sweep(tmp_path, strategy="exhaustive", trials=10_000)
    spec = load_sweep(sweep)
    fastest = min(
        (c.as_dict() for c in spec.space if not spec.family.violations(spec.problems[0].problem, c)), key=fake_ms
    )
    # the truly fastest configuration gives a wrong result: it must never win
    recording = write_recording(
        sweep, tmp_path / "rec.jsonl", lambda c: Status.WRONG_RESULT if c == fastest else Status.OK
    )
    result = tune(sweep, backend="replay", recording=recording, results=tmp_path / "r")
    copy = result.problems[0]
    assert copy.winner is not None and copy.winner.config != fastest
    ok = [
        c.as_dict()
        for c in spec.space
        if not spec.family.violations(spec.problems[0].problem, c) and c.as_dict() != fastest
    ]
    assert fake_ms(copy.winner.config) == min(fake_ms(c) for c in ok)
    assert copy.counts["wrong_result"] == 1


def test_resume_never_reruns_an_evaluation(sweep_file, recording, tmp_path):
    results = tmp_path / "r"
    first = tune(sweep_file, backend="replay", recording=recording, results=results, trials=6)
    assert first.evaluated == 12
    second = tune(sweep_file, backend="replay", recording=recording, results=results, trials=10)
    assert second.evaluated == 8
    configs = screen_configs(results)
    assert len(configs) == len(set(configs)) == 20


def test_a_winners_database_left_empty_by_a_kill_is_completed_on_resume(sweep_file, recording, tmp_path):
    """A sweep killed after SQLite made the file but before the schema: the next run finishes the file."""
    results = tmp_path / "r"
    results.mkdir()
    with sqlite3.connect(results / "winners-replay.sqlite") as conn:
        conn.execute("PRAGMA journal_mode = WAL")
    result = tune(sweep_file, backend="replay", recording=recording, results=results)
    assert all(p.stored for p in result.problems)


def test_a_winners_database_that_cannot_be_written_is_refused_before_any_work(
    sweep_file, recording, tmp_path, monkeypatch
):
    """A read-only folder was reported as a damaged file ('restore it from a backup'); a directory
    as a disk I/O error."""
    with pytest.raises(DatabaseError, match="is a directory: give the winners database's file"):
        tune(sweep_file, backend="replay", recording=recording, results=tmp_path / "r", db=tmp_path)
    folder = tmp_path / "mounted"
    folder.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == folder else real(p, mode))
    with pytest.raises(DatabaseError, match="winners cannot be stored there .*--db"):
        tune(sweep_file, backend="replay", recording=recording, results=tmp_path / "r", db=folder / "w.sqlite")
    assert not (tmp_path / "r" / "sweeps" / "small-replay" / "evals.jsonl").exists()


def test_a_refused_sweep_leaves_an_old_winners_database_as_it_was(sweep_file, recording, tmp_path):
    """Opening it for writing upgraded a version-1 file that an older tunebox could then no longer read,
    though the sweep stored nothing."""
    db = tmp_path / "measured.sqlite"
    with WinnersDB(db) as winners:  # one measured winner: a replayed sweep is refused beside it
        rec = EvalRecord("tile_copy", {"n": 1}, {}, Status.OK, timing=Timing((1.0,)), device=DEVICE)
        winners.put(WinnerKey.of(rec, "h", '{"n":1}', "float32"), rec)
    with sqlite3.connect(db) as raw:
        raw.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    raw.close()
    before = db.read_bytes()
    with pytest.raises(DatabaseError, match="measured winner"):
        tune(sweep_file, backend="replay", recording=recording, results=tmp_path / "r", db=db)
    assert db.read_bytes() == before


def test_a_problem_the_recording_never_saw_is_refused_before_any_work(sweep_file, recording, tmp_path):
    """The problems before it ran and stored their winners first, where the README says at once."""
    text = sweep_file.read_text()
    sweep_file.write_text(
        text + '[[problems]]\nname = "new"\ndtype = "float32"\nsrc = [1000, 1001]\ndst = [1000, 1001]\n'
    )
    with pytest.raises(ReplayMiss, match='tile_copy .*"src":\\[1000,1001\\].* is not in the recording'):
        tune(sweep_file, backend="replay", recording=recording, results=tmp_path / "r")
    assert not (tmp_path / "r" / "winners-replay.sqlite").exists()
    assert not (tmp_path / "r" / "sweeps" / "small-replay" / "evals.jsonl").exists()


def test_more_trials_than_the_recording_holds_says_so(sweep_file, recording, tmp_path, caplog):
    """The problem's budget was capped to what the recording holds without a word."""
    with caplog.at_level("WARNING", logger="tunebox.search.loop"):
        result = tune(sweep_file, backend="replay", recording=recording, results=tmp_path / "r", trials=100_000)
    held = [m for m in caplog.messages if "fewer than the 100000 trials asked: every one is evaluated" in m]
    assert len(held) == 2 and held[0].startswith("copy: its recording holds ")
    assert result.evaluated == len(screen_configs(tmp_path / "r"))


def test_systematic_failures_trip_the_breaker(sweep_file, tmp_path):
    recording = write_recording(sweep_file, tmp_path / "rec.jsonl", lambda c: Status.RUNTIME_ERROR)
    with pytest.raises(SweepAborted, match="runtime_error"):
        tune(sweep_file, backend="replay", recording=recording, results=tmp_path / "r", trials=40)
    assert len(screen_configs(tmp_path / "r")) == 12


def test_kill_minus_nine_then_resume(sweep_file, recording, tmp_path):
    results = tmp_path / "r"
    command = [
        sys.executable,
        "-m",
        "tunebox",
        *replay_argv(sweep_file, recording, results, "--trials", "25", "--quiet"),
    ]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    log = results / "sweeps" / "small-replay" / "evals.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not log.exists() or log.read_text().count("\n") < 6):
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    _, stderr = proc.communicate()
    killed_at = len(screen_configs(results))
    assert 0 < killed_at < 50, f"{killed_at} configurations logged when killed (exit {proc.returncode}): {stderr}"
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    configs = screen_configs(results)
    assert len(configs) == len(set(configs)) == 50  # nothing lost, nothing evaluated twice
    with sqlite3.connect(results / "winners-replay.sqlite") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT COUNT(*) FROM winners").fetchone()[0] == 2


def test_a_config_asked_twice_while_in_flight_is_evaluated_once(tmp_path):
    sweep = write_sweep(tmp_path, strategy="random", trials=30)
    text = sweep.read_text().replace("BM = [1, 4, 8, 16]", "BM = [8]").replace("BN = [64, 128, 256]", "BN = [128]")
    sweep.write_text(text.replace("threads = [64, 128]", "threads = [128]"))
    recording = write_recording(sweep, tmp_path / "rec.jsonl")
    result = tune(sweep, backend="replay", recording=recording, results=tmp_path / "r")
    configs = screen_configs(tmp_path / "r")
    assert len(configs) == len(set(configs))
    assert result.evaluated == len(configs)


def test_every_recorded_baseline_is_replayed_in_order(sweep_file, recording, tmp_path):
    """A family with several torch equivalents records one final record each; a replay gives them all."""
    spec = load_sweep(sweep_file)
    log = EvalLog(recording)
    for named in spec.problems:
        log.append(
            EvalRecord(
                "tile_copy",
                named.problem.to_dict(),
                {},
                Status.OK,
                timing=Timing((9.0,) * 10),
                device=DEVICE,
                baseline="torch: second",
                phase="final",
            )
        )
    result = tune(sweep_file, backend="replay", recording=recording, results=tmp_path / "r", trials=3)
    finals = [
        r
        for r in EvalLog(tmp_path / "r" / "sweeps" / "small-replay" / "evals.jsonl").read()
        if r.phase == "final" and r.baseline
    ]
    assert [r.baseline for r in finals] == ["torch: fake", "torch: second"] * 2
    assert all(p.baseline is not None and p.baseline.baseline == "torch: fake" for p in result.problems)


def test_the_default_strategy_starts_from_the_nearest_tuned_winner(tmp_path):
    """Warm start: a new problem's search first tries the winner of the nearest problem the winners
    database holds (of the same family sources), then the family default."""
    first = write_sweep(tmp_path / "a", strategy="surrogate", trials=6)
    tune(first, backend="replay", recording=write_recording(first, tmp_path / "a.jsonl"), results=tmp_path / "r")
    with WinnersDB(tmp_path / "r" / "winners-replay.sqlite", read_only=True) as db:
        copy_winner = next(w.config for w in db.all() if '"transpose":false' in w.key.problem_key)
    second = tmp_path / "b" / "spaces" / "near.toml"
    second.parent.mkdir(parents=True)
    text = first.read_text().replace('name = "small"', 'name = "near"').replace("[1000, 1000]", "[1024, 1000]")
    second.write_text(text)
    assert load_sweep(second).search.strategy == "surrogate"
    tune(second, backend="replay", recording=write_recording(second, tmp_path / "b.jsonl"), results=tmp_path / "r")
    records = EvalLog(tmp_path / "r" / "sweeps" / "near-replay" / "evals.jsonl").read()
    copies = [r for r in records if r.phase == "screen" and not r.problem.get("transpose")]
    near = load_sweep(second)
    default = near.family.default_config(near.problems[0].problem).as_dict()
    first_two = [canonical_json(r.config) for r in copies[:2]]
    assert copy_winner != default
    assert canonical_json(copy_winner) in first_two, (first_two, copy_winner)


def test_a_sweep_file_without_a_strategy_gets_the_surrogate(tmp_path):
    sweep = write_sweep(tmp_path)
    sweep.write_text(sweep.read_text().replace('strategy = "tpe"\n', ""))
    assert load_sweep(sweep).search.strategy == "surrogate"


def test_the_strategy_asks_on_one_blas_thread(tmp_path, monkeypatch):
    """The surrogate's linear algebra runs with one BLAS thread during a sweep (beside the compile
    pool's threads) and the caller's limit is back afterwards."""
    from threadpoolctl import threadpool_info

    from tunebox.search.surrogate import SurrogateStrategy

    def blas_threads() -> set[int]:
        return {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}

    before = blas_threads()
    seen: list[set[int]] = []
    ask = SurrogateStrategy.ask

    def recording_ask(self):
        seen.append(blas_threads())
        return ask(self)

    monkeypatch.setattr(SurrogateStrategy, "ask", recording_ask)
    sweep = write_sweep(tmp_path, strategy="surrogate", trials=6)
    tune(sweep, backend="replay", recording=write_recording(sweep, tmp_path / "rec.jsonl"), results=tmp_path / "r")
    assert seen and all(threads == {1} for threads in seen)
    assert blas_threads() == before
