"""A sweep shared through PostgreSQL by replay workers in separate processes, on a real (embedded)
PostgreSQL server: every evaluation recorded exactly once, kill -9 of a worker, a late worker, and
the winners of a single-process sweep."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import psycopg
import pytest
import sqlalchemy.exc
from sweep_fixtures import DEVICE, replay_argv, write_recording, write_sweep

from tunebox.api import tune
from tunebox.errors import DatabaseError
from tunebox.records import EvalRecord, Status, Timing, WinnerKey, canonical_json
from tunebox.search.shared_models import shared_model
from tunebox.store.evallog import EvalLog
from tunebox.store.postgres import SCHEMA_VERSION, PgRecords, PgWinnersDB, redacted, sqlalchemy_url, storage_error
from tunebox.store.winners import WinnersDB
from tunebox.sweep_spec import load_sweep

REPO = Path(__file__).resolve().parents[3]
PACE_S = 0.02  # recorded verify + time of every evaluation: what a paced replay waits


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    pgserver = pytest.importorskip("pgserver")  # the test extra installs it: never skipped in CI
    srv = pgserver.get_server(tmp_path_factory.mktemp("pg"), cleanup_mode="stop")
    yield srv
    srv.cleanup()


@pytest.fixture
def url(server) -> str:
    """A fresh database on the module's server."""
    base = server.get_uri()
    name = f"t_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return base.replace("/postgres?", f"/{name}?")


def paced_recording(sweep: Path, path: Path, pace_s: float = PACE_S) -> Path:
    """The small sweep's recording, every median distinct (so that the winners are unique) and every
    evaluation recorded as taking ``pace_s``."""
    raw = write_recording(sweep, path.with_suffix(".raw.jsonl"))
    records = []
    for i, r in enumerate(EvalLog(raw).read()):
        timing = Timing(tuple(ms * (1 + 1e-5 * i) for ms in r.timing.samples_ms)) if r.timing else None
        records.append(
            dataclasses.replace(r, timing=timing, stage_seconds={"verify": pace_s / 4, "time": pace_s * 3 / 4})
        )
    EvalLog(path).append_all(records)
    return path


def start_worker(url: str, sweep: Path, recording: Path, results: Path, *extra: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [
        sys.executable, "-m", "tunebox",
        *replay_argv(sweep, recording, results, "--storage", url, "--heartbeat", "1", "--replay-pace", "1", "--quiet"),
        *extra,
    ]  # fmt: skip
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def finish(workers: list[subprocess.Popen[bytes]], timeout: float = 60) -> None:
    for w in workers:
        out, _ = w.communicate(timeout=timeout)
        assert w.returncode == 0, out.decode()[-3000:]


def stored(url: str) -> list[tuple[str, str, str, str, str]]:
    """(problem, config, phase, baseline, worker) of every stored record."""
    with psycopg.connect(url) as conn:
        try:
            rows = conn.execute(
                "SELECT problem_key, config_key, phase, baseline, worker FROM tunebox_evals ORDER BY id"
            ).fetchall()
        except psycopg.errors.UndefinedTable:  # no worker has started yet
            return []
    return [tuple(r) for r in rows]


def valid_counts(sweep: Path) -> dict[str, int]:
    spec = load_sweep(sweep)
    return {
        p.problem.key(): sum(1 for c in spec.space if not spec.family.violations(p.problem, c)) for p in spec.problems
    }


def assert_exactly_once(url: str, budgets: dict[str, int]) -> list[tuple[str, str, str, str, str]]:
    rows = stored(url)
    screen = Counter((p, c) for p, c, phase, _, _ in rows if phase == "screen")
    assert max(screen.values()) == 1  # no configuration evaluated twice
    per_problem = Counter(p for p, _ in screen)
    assert dict(per_problem) == budgets  # nothing lost: every problem's whole budget
    finals = Counter((p, c, b) for p, c, phase, b, _ in rows if phase == "final")
    assert finals and max(finals.values()) == 1  # one re-timing per problem
    assert {p for p, _, _ in finals} == set(budgets)
    return rows


def winners_of(db) -> dict[str, tuple[dict, float]]:
    return {w.key.problem_key: (w.config, w.median_ms) for w in db.all()}


def test_four_workers_share_one_sweep_and_find_the_single_process_winners(url, tmp_path):
    """Each evaluation paced at 3 x PACE_S: at PACE_S the sweep's 302 screens took about 2 s over four
    workers, and on a busy 2-core machine a worker still starting then found none left (2 of 6 runs)."""
    sweep = write_sweep(tmp_path, strategy="exhaustive", trials=10_000)
    recording = paced_recording(sweep, tmp_path / "rec.jsonl", pace_s=3 * PACE_S)
    workers = [start_worker(url, sweep, recording, tmp_path / f"w{i}") for i in range(4)]
    finish(workers)
    budgets = valid_counts(sweep)
    rows = assert_exactly_once(url, budgets)
    by_worker = Counter(w for _, _, phase, _, w in rows if phase == "screen")
    assert len(by_worker) == 4  # all four took part
    with PgWinnersDB(url) as db:
        shared = winners_of(db)
        libraries = {(w.library, w.library_ms) for w in db.all()}
    single = tune(sweep, backend="replay", recording=recording, results=tmp_path / "single")
    with WinnersDB(tmp_path / "single" / "winners-replay.sqlite", read_only=True) as db:
        assert shared == winners_of(db)
    for i in range(4):  # each worker copied them into its local winners database, for `tunebox query`
        with WinnersDB(tmp_path / f"w{i}" / "winners-replay.sqlite", read_only=True) as db:
            assert winners_of(db) == shared and {(w.library, w.library_ms) for w in db.all()} == libraries
    assert len(shared) == 2 and all(p.stored for p in single.problems)


def running_claims(url: str, pid: int) -> list[tuple[int, str, str]]:
    """(trial id, problem, configuration) of the claims whose trial is running in worker process ``pid``."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT t.trial_id, c.problem_key, c.config_key FROM trials t"
            " JOIN tunebox_claims c ON c.trial_id = t.trial_id WHERE t.state = 'RUNNING' AND c.worker LIKE %s",
            (f"%:{pid}:%",),
        ).fetchall()
    return [(int(r[0]), str(r[1]), str(r[2])) for r in rows]


def test_a_worker_killed_mid_sweep_loses_and_repeats_nothing(url, tmp_path):
    sweep = write_sweep(tmp_path, strategy="exhaustive", trials=10_000)
    recording = paced_recording(sweep, tmp_path / "rec.jsonl")
    workers = [start_worker(url, sweep, recording, tmp_path / f"w{i}") for i in range(4)]
    victim = workers[0]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and victim.poll() is None:
        # mid-sweep (some records stored), the victim evaluating (a claim of its trial running)
        if sum(1 for r in stored(url) if r[2] == "screen") > 40 and running_claims(url, victim.pid):
            break
        time.sleep(0.005)
    assert victim.poll() is None
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    time.sleep(0.5)  # a commit the victim sent just before it died is applied by the server after its death
    orphans = running_claims(url, victim.pid)  # what it was evaluating when it died: claimed, no record
    finish(workers[1:])
    rows = assert_exactly_once(url, valid_counts(sweep))
    with psycopg.connect(url) as conn:
        states = dict(conn.execute("SELECT trial_id, state::text FROM trials").fetchall())
        retried = conn.execute("SELECT count(*) FROM trial_system_attributes WHERE key = 'failed_trial'").fetchone()
    for trial_id, problem, config in orphans:  # its trial went stale, was failed, queued again and taken over
        assert states[trial_id] == "FAIL"
        # evaluated once: by a worker that took it over, or by the victim itself when it stored the
        # record and died before telling the trial
        assert sum(1 for p, c, phase, _, _ in rows if (p, c, phase) == (problem, config, "screen")) == 1
    assert retried is not None and retried[0] >= len(orphans)
    print(f"kill -9 left {len(orphans)} claimed evaluation(s) running; {retried[0]} trial(s) queued again")


def test_a_late_worker_joins_and_tpe_keeps_the_budget(url, tmp_path):
    sweep = write_sweep(tmp_path, strategy="tpe", trials=40)
    recording = paced_recording(sweep, tmp_path / "rec.jsonl")
    first = start_worker(url, sweep, recording, tmp_path / "w0")
    while sum(1 for r in stored(url) if r[2] == "screen") < 10:
        assert first.poll() is None
        time.sleep(0.05)
    late = [start_worker(url, sweep, recording, tmp_path / f"w{i}") for i in (1, 2)]
    finish([first, *late])
    rows = assert_exactly_once(url, {k: 40 for k in valid_counts(sweep)})  # the budget, not a trial more
    writers = {w.split(":")[1] for _, _, phase, _, w in rows if phase == "screen"}
    assert {str(w.pid) for w in late} & writers  # a late worker evaluated some of it
    again = start_worker(url, sweep, recording, tmp_path / "w3")  # a worker after the end: nothing to do
    finish([again])
    assert len(stored(url)) == len(rows)


def test_surrogate_workers_share_one_model_each_and_keep_the_budget(url, tmp_path):
    """Each worker's surrogate is told every worker's records: three workers evaluate the budget once."""
    sweep = write_sweep(tmp_path, strategy="surrogate", trials=30)
    recording = paced_recording(sweep, tmp_path / "rec.jsonl")
    finish([start_worker(url, sweep, recording, tmp_path / f"w{i}") for i in range(3)])
    rows = assert_exactly_once(url, {k: 30 for k in valid_counts(sweep)})
    assert len({w for _, _, phase, _, w in rows if phase == "screen"}) >= 2  # shared out


def test_shared_models_propose_valid_configurations_and_the_surrogate_never_repeats(tmp_path) -> None:
    spec = load_sweep(write_sweep(tmp_path, strategy="surrogate", trials=30))
    problem = spec.problems[0].problem
    valid = [c for c in spec.space if not spec.family.violations(problem, c)]
    for strategy in ("surrogate", "tpe"):
        model = shared_model(strategy, spec.space, valid, 0, valid[3])
        assert model is not None
        proposed = []
        for i in range(12):
            values = model.propose()
            assert values is not None and spec.space.validate(values) in valid
            proposed.append(canonical_json(values))
            timing = Timing((1.0 + i,))
            model.learn(EvalRecord("tile_copy", problem.to_dict(), values, Status.OK, timing=timing))
        if strategy == "surrogate":
            assert proposed[0] == canonical_json(valid[3].as_dict()) and len(set(proposed)) == 12
    assert shared_model("random", spec.space, valid, 0, None) is None


def record(median: float, config: dict | None = None) -> EvalRecord:
    return EvalRecord(
        "tile_copy", {"dtype": "float32"}, config or {"BM": 8}, Status.OK, timing=Timing((median,) * 10), device=DEVICE
    )


def test_pg_winners_compare_and_set_and_records_stored_once(url):
    key = WinnerKey(
        "tile_copy", "h", '{"dtype":"float32"}', "float32", *dataclasses.astuple(DEVICE)[:2], "13.0", "13000"
    )
    with PgWinnersDB(url) as db:
        assert db.put(key, record(2.0))
        assert not db.put(key, record(2.0, {"BM": 4}))  # not faster: kept
        assert not db.put(key, record(3.0, {"BM": 4}))
        assert db.put(key, record(1.0, {"BM": 16}))
        winner = db.get(key)
        assert winner is not None and winner.config == {"BM": 16} and winner.median_ms == 1.0
        with pytest.raises(ValueError):
            db.put(key, dataclasses.replace(record(0.5), status=Status.WRONG_RESULT))
    log = PgRecords(url, "s", "me")
    try:
        assert log.add(record(1.0)) and not log.add(record(5.0))  # one record per configuration and phase
        log.append_all([record(1.0), record(2.0, {"BM": 4})])
        assert [r.config for r in log.read()] == [{"BM": 8}, {"BM": 4}]
        assert [canonical_json(r.config) for _, r in log.read_since("tile_copy", '{"dtype":"float32"}', 0)] == [
            '{"BM":8}',
            '{"BM":4}',
        ]
    finally:
        log.close()


@pytest.mark.parametrize(("stored", "message"), [("99", "newer than this tunebox"), ("x", "damaged or tampered")])
def test_tables_of_a_newer_or_damaged_schema_are_refused_and_kept(url, stored, message):
    key = WinnerKey(
        "tile_copy", "h", '{"dtype":"float32"}', "float32", *dataclasses.astuple(DEVICE)[:2], "13.0", "13000"
    )
    with PgWinnersDB(url) as db:
        assert db.put(key, record(2.0))
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("SELECT value FROM tunebox_meta").fetchall() == [(str(SCHEMA_VERSION),)]
        conn.execute("UPDATE tunebox_meta SET value = %s WHERE key = 'schema_version'", (stored,))
    with pytest.raises(DatabaseError, match=message):
        PgWinnersDB(url).open()
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM tunebox_winners").fetchone() == (1,)
        assert conn.execute("SELECT value FROM tunebox_meta").fetchone() == (stored,)


def test_urls_and_no_import_without_storage():
    url = "postgresql://me:secret@db.example:5432/tune"
    assert redacted(url) == "postgresql://me:***@db.example:5432/tune"
    assert sqlalchemy_url(url).startswith("postgresql+psycopg://") and sqlalchemy_url(
        "postgresql+psycopg2://h/d"
    ).startswith("postgresql+psycopg://")
    code = (
        "import sys, tunebox.api, tunebox.cli\n"
        "print(sorted(m for m in sys.modules if 'psycopg' in m or 'distributed' in m or 'sqlalchemy' in m))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]"


def test_storage_must_be_postgresql(tmp_path, recording, sweep_file):
    out = subprocess.run(
        [sys.executable, "-m", "tunebox", *replay_argv(sweep_file, recording, tmp_path, "--storage", "sqlite:///x.db")],
        capture_output=True, text=True, cwd=REPO,
    )  # fmt: skip
    assert out.returncode == 2 and "PostgreSQL URL" in out.stderr


def test_a_gpu_worker_compiles_ahead_and_queues_on_the_device(url, tmp_path):
    """The GPU path in process (a stand-in builder and device): identical binaries reach the device
    once, compile failures never, the device queue holds two, and the winner is stored once."""
    from test_sweep_pipeline import SWEEP as QUEUE_SWEEP
    from test_sweep_pipeline import QueueBackend, StubBuilder

    from tunebox.search.distributed import DistributedSweep, Heartbeat
    from tunebox.search.loop_settings import LoopSettings

    path = tmp_path / "queue.toml"
    path.write_text(QUEUE_SWEEP)
    backend = QueueBackend()
    settings = LoopSettings(device_queue=2)
    result = DistributedSweep(
        load_sweep(path), backend, StubBuilder(distinct=True), url, settings=settings, heartbeat=Heartbeat(1, 3)
    ).run()
    records = [r for r in PgRecords(url, "queue", "reader").read() if r.phase == "screen"]
    assert len(records) == 6 and sum(r.status is Status.COMPILE_ERROR for r in records) == 2
    assert len(backend.submitted) == result.evaluated == 4 and backend.deepest == 2
    assert result.problems[0].stored and result.storage == redacted(url)
    again = DistributedSweep(load_sweep(path), QueueBackend(), StubBuilder(distinct=True), url).run()
    assert again.evaluated == 0 and not again.problems[0].stored  # done: nothing evaluated or stored twice
    with PgWinnersDB(url) as db:
        assert len(db.all()) == 1


def test_devices_start_one_worker_per_gpu_sharing_the_sweep(url, tmp_path):
    """--devices 0,1: two worker processes, each seeing only its device (CUDA_VISIBLE_DEVICES), share
    the sweep through the storage; every evaluation is recorded once, by both workers together."""
    sweep = write_sweep(tmp_path, strategy="exhaustive", trials=10_000)
    recording = paced_recording(sweep, tmp_path / "rec.jsonl")
    launcher = start_worker(url, sweep, recording, tmp_path / "w", "--devices", "0,1")
    out, _ = launcher.communicate(timeout=90)
    text = out.decode()
    assert launcher.returncode == 0, text[-3000:]
    assert "[gpu 0] sweep small:" in text and "[gpu 1] sweep small:" in text
    rows = assert_exactly_once(url, valid_counts(sweep))
    assert len({w for _, _, phase, _, w in rows if phase == "screen"}) == 2


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--devices", "0,1"], "give --storage"),
        (["--devices", "0,x"], "distinct GPU indices"),
        (["--heartbeat", "5"], "--heartbeat paces the workers of a shared sweep: give --storage"),  # was ignored
    ],
)
def test_devices_needs_storage_and_indices(tmp_path, extra, message, capsys):
    from tunebox.cli import main

    sweep = write_sweep(tmp_path)
    assert main(["tune", str(sweep), "--backend", "replay", *extra]) == 2
    assert message in capsys.readouterr().err


def test_a_user_without_the_right_to_create_tables_is_told_what_to_grant(url, tmp_path, recording, sweep_file):
    """It ended in a psycopg InsufficientPrivilege traceback."""
    role = f"ro_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'pw'")
        admin.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
    limited = url.replace("://postgres:@", f"://{role}:pw@")
    out = subprocess.run(
        [sys.executable, "-m", "tunebox", *replay_argv(sweep_file, recording, tmp_path, "--storage", limited)],
        capture_output=True, text=True, cwd=REPO,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr[-2000:]
    assert "may not create or use tunebox's tables" in out.stderr and "GRANT CREATE ON SCHEMA public" in out.stderr
    assert "Traceback" not in out.stderr and ":pw@" not in out.stderr


def test_a_lost_server_is_one_line_saying_the_sweep_resumes():
    lost = psycopg.OperationalError("terminating connection due to administrator command")
    told = storage_error("postgresql://me:secret@db/tune", lost)
    assert isinstance(told, DatabaseError) and "secret" not in str(told)
    assert "lost the PostgreSQL server (terminating connection" in str(told)
    assert "run the same command again" in str(told)
    wrapped = sqlalchemy.exc.OperationalError("SELECT 1", {}, lost)  # as Optuna's storage raises it
    assert "lost the PostgreSQL server" in str(storage_error("postgresql://db/tune", wrapped))
    assert storage_error("postgresql://db/tune", ValueError("a bug")) is None
    # a failed commit, re-raised by Optuna's storage with the driver's error as its cause: a heartbeat
    # warned "invalid data in the commit, e.g. exceeding max length"
    try:
        try:
            raise wrapped
        except sqlalchemy.exc.OperationalError as inner:
            raise sqlalchemy.exc.StatementError("An exception is raised during the commit", None, {}, None) from inner
    except sqlalchemy.exc.StatementError as commit:
        assert "lost the PostgreSQL server" in str(storage_error("postgresql://db/tune", commit))


def test_a_worker_joins_only_its_own_sweep_device_and_kind_of_winners(url, tmp_path, sweep_file, recording):
    """Found by an audit: a sweep file of the same name but another space shared the claims and said its
    time budget had run out; a recording of another device joined the sweep; replayed winners replaced
    measured ones in tunebox_winners and were copied into a measured database."""
    results = tmp_path / "r"
    tune(sweep_file, backend="replay", recording=recording, results=results, storage=url, trials=3)
    narrow = tmp_path / "other" / "small.toml"  # the same name, another space
    narrow.parent.mkdir()
    narrow.write_text(sweep_file.read_text().replace("threads = [64, 128]", "threads = [64]"))
    before = stored(url)
    with pytest.raises(DatabaseError, match="its sweep 'small-replay' was started from another sweep file"):
        tune(narrow, backend="replay", recording=recording, results=results, storage=url, trials=3)
    elsewhere = tmp_path / "h100.jsonl"
    h100 = dataclasses.replace(DEVICE, name="NVIDIA H100 80GB HBM3")
    EvalLog(elsewhere).append_all([dataclasses.replace(r, device=h100) for r in EvalLog(recording).read()])
    with pytest.raises(DatabaseError, match="there was measured on NVIDIA H200 .* worker's is NVIDIA H100"):
        tune(sweep_file, backend="replay", recording=elsewhere, results=results, storage=url, trials=3)
    assert stored(url) == before  # nothing was changed
    with PgWinnersDB(url) as db:
        replayed = db.all()[0]
        measured = dataclasses.replace(replayed.record, replayed=False)
        with pytest.raises(
            DatabaseError, match=r"holds 1 replayed winner\(s\); measured winners are never .*--storage"
        ):
            db.put(replayed.key, measured)
        assert db.kind_count(True) == 2 and db.kind_count(False) == 0


def test_a_workers_time_left_counts_every_workers_progress():
    """With three workers, one worker's rate made its time left about three times too long (an audit:
    '~1 min 57 s left' at 10 s of a sweep that ended at 41 s)."""
    from types import SimpleNamespace

    from tunebox.search.distributed import DistributedSweep

    worker = SimpleNamespace(_first_done={}, _since={}, _run_done=0)
    assert DistributedSweep._paced_by(worker, "copy", 12) == 0  # its first report: the sweep's progress so far
    worker._run_done = 2
    assert DistributedSweep._paced_by(worker, "copy", 18) == 6  # others stored 4 more meanwhile
    # moving on to a problem others had screened already adds nothing (a review: it added that whole problem)
    assert DistributedSweep._paced_by(worker, "transpose", 40) == 6
    assert DistributedSweep._paced_by(worker, "transpose", 43) == 9


def test_a_bug_in_tunebox_sql_is_not_told_as_the_servers_refusal():
    """Any psycopg error became 'PostgreSQL refused the sweep's request' without a traceback (a review)."""
    assert storage_error("postgresql://db/tune", psycopg.errors.UndefinedColumn('column "x" does not exist')) is None
