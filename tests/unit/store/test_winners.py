"""WinnersDB: compare-and-set, refusal of bad records, hostile files and concurrent writers."""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import sqlite3
from pathlib import Path

import pytest

from tunebox.errors import DatabaseError
from tunebox.records import DeviceInfo, EvalRecord, Status, Timing, WinnerKey, canonical_json
from tunebox.store.winner_rows import Winner
from tunebox.store.winners import WinnersDB

DEVICE = DeviceInfo("NVIDIA H200", "9.0", "13000", "13.0")


def record(
    n: int, median: float = 1.1, block: int = 64, status: Status = Status.OK, replayed: bool = False
) -> EvalRecord:
    timing = Timing((median - 0.1, median, median + 0.1)) if status is Status.OK else None
    return EvalRecord(
        "toy", {"n": n}, {"BLOCK": block}, status, timing=timing, bytes_moved=8 * n, device=DEVICE, replayed=replayed
    )


def key_of(rec: EvalRecord, problem_key: str | None = None) -> WinnerKey:
    return WinnerKey.of(rec, "abc123", problem_key or canonical_json(rec.problem), "float32")


def fill(path: Path) -> None:
    with WinnersDB(path) as db:
        rec = record(1024)
        db.put(key_of(rec), rec)


def test_round_trip(tmp_path: Path) -> None:
    rec = record(1024, replayed=True)
    with WinnersDB(tmp_path / "w.sqlite") as db:
        assert db.put(key_of(rec), rec)
        got = db.get(key_of(rec))
    assert isinstance(got, Winner)
    assert got.key == key_of(rec) and got.record == rec and got.config == {"BLOCK": 64}
    assert got.median_ms == pytest.approx(1.1) and got.replayed is True
    assert got.bandwidth_gbps == pytest.approx(rec.bandwidth_gbps)
    assert got.created_at.endswith("+00:00")
    with WinnersDB(tmp_path / "w.sqlite", read_only=True) as db:
        assert db.all() == [got]
        assert db.get(dataclasses.replace(key_of(rec), driver_version="12000")) is None


def test_put_keeps_the_better_median_only(tmp_path: Path) -> None:
    with WinnersDB(tmp_path / "w.sqlite") as db:
        first = record(1024, median=2.0, block=64)
        key = key_of(first)
        assert db.put(key, first)
        assert not db.put(key, record(1024, median=3.0, block=128))
        assert not db.put(key, record(1024, median=2.0, block=256))
        assert db.get(key).config == {"BLOCK": 64}
        assert db.put(key, record(1024, median=1.5, block=256))
        winner = db.get(key)
        assert winner.config == {"BLOCK": 256} and winner.median_ms == pytest.approx(1.5)
        assert len(db.all()) == 1


@pytest.mark.parametrize("status", [s for s in Status if s is not Status.OK])
def test_non_ok_record_is_refused(tmp_path: Path, status: Status) -> None:
    bad = dataclasses.replace(record(1024), status=status)  # even one that carries a timing
    with WinnersDB(tmp_path / "w.sqlite") as db:
        with pytest.raises(ValueError, match="only OK"):
            db.put(key_of(bad), bad)
        assert db.all() == []


def test_record_without_timing_or_of_another_device_is_refused(tmp_path: Path) -> None:
    rec = record(1024)
    with WinnersDB(tmp_path / "w.sqlite") as db:
        with pytest.raises(ValueError, match="timing"):
            db.put(key_of(rec), dataclasses.replace(rec, timing=None))
        with pytest.raises(ValueError, match="device"):
            db.put(dataclasses.replace(key_of(rec), device_name="NVIDIA A100"), rec)


@pytest.mark.parametrize("hostile", ["x'); DROP TABLE winners;--", "' OR 1=1 --", '"; DELETE FROM meta; --'])
def test_injection_looking_keys_are_plain_data(tmp_path: Path, hostile: str) -> None:
    rec = dataclasses.replace(record(1), family=hostile)
    key = dataclasses.replace(key_of(rec, problem_key=canonical_json({"n": hostile})), dtype=hostile)
    key = dataclasses.replace(key, device_name=DEVICE.name)
    with WinnersDB(tmp_path / "w.sqlite") as db:
        fill_rec = record(2)
        db.put(key_of(fill_rec), fill_rec)
        assert db.put(key, rec)
        assert db.get(key).key == key
        assert db.get(dataclasses.replace(key, problem_key="' OR 1=1 --x")) is None
        assert len(db.candidates(hostile, "abc123", DEVICE.name, "9.0", dtype=hostile)) == 1
    with sqlite3.connect(tmp_path / "w.sqlite") as raw:
        tables = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert tables == {"meta", "winners"}
        assert raw.execute("SELECT COUNT(*) FROM winners").fetchone() == (2,)
        stored = raw.execute("SELECT problem_key FROM winners WHERE family = ?", (hostile,)).fetchone()
        assert stored == (canonical_json({"n": hostile}),)


def test_candidates_filter_family_device_and_dtype(tmp_path: Path) -> None:
    with WinnersDB(tmp_path / "w.sqlite") as db:
        for n in (128, 1024):
            rec = record(n)
            db.put(key_of(rec), rec)
        other_driver = record(4096)
        db.put(
            dataclasses.replace(key_of(other_driver), driver_version="12000"),
            dataclasses.replace(other_driver, device=dataclasses.replace(DEVICE, driver_version="12000")),
        )
        half = record(256)
        db.put(dataclasses.replace(key_of(half), dtype="float16"), half)
        assert len(db.candidates("toy", "abc123", DEVICE.name, "9.0")) == 4
        assert len(db.candidates("toy", "abc123", DEVICE.name, "9.0", dtype="float32")) == 3
        assert db.candidates("toy", "other", DEVICE.name, "9.0") == []
        assert db.candidates("toy", "abc123", "NVIDIA A100", "8.0") == []


def digest(path: Path) -> bytes:
    return path.read_bytes()


def test_newer_schema_raises_and_is_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "w.sqlite"
    fill(path)
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    raw.close()
    before = digest(path)
    for read_only in (False, True):
        with pytest.raises(DatabaseError, match="newer tunebox.*nothing was changed"):
            WinnersDB(path, read_only=read_only).open()
    assert digest(path) == before


@pytest.mark.parametrize(
    "content", [b"\xff" * 4096, b"not a database at all\n" * 100, b"SQLite format 3\x00" + b"\x00" * 30]
)
def test_garbage_file_raises_and_is_left_untouched(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "w.sqlite"
    path.write_bytes(content)
    before = digest(path)
    for read_only in (False, True):
        with pytest.raises(DatabaseError):
            WinnersDB(path, read_only=read_only).open()
    assert digest(path) == before


def many_pages(path: Path) -> bytes:
    with WinnersDB(path) as db:
        for n in range(300):  # dozens of pages, so damage hits real data
            rec = record(n + 1)
            db.put(key_of(rec), rec)
    return path.read_bytes()


def test_truncated_database_raises_and_is_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "w.sqlite"
    path.write_bytes(many_pages(path)[: path.stat().st_size // 2])
    before = digest(path)
    for read_only in (False, True):
        with pytest.raises(DatabaseError, match="damaged.*move it aside"):
            WinnersDB(path, read_only=read_only).open()
    assert digest(path) == before


def test_corrupt_page_fails_quick_check_and_is_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "w.sqlite"
    data = bytearray(many_pages(path))
    page = 4096
    data[len(data) - 3 * page + 8 : len(data) - 2 * page] = b"\x5a" * (page - 8)  # keep page 1 intact
    path.write_bytes(bytes(data))
    before = digest(path)
    for read_only in (False, True):
        with pytest.raises(DatabaseError, match="damaged.*move it aside"):
            WinnersDB(path, read_only=read_only).open()
    assert digest(path) == before


def test_foreign_sqlite_database_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as raw:
        raw.execute("CREATE TABLE songs (title TEXT)")
    raw.close()
    before = digest(path)
    with pytest.raises(DatabaseError, match="not a tunebox winners database"):
        WinnersDB(path).open()
    assert digest(path) == before


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("config_json", "not json"),
        ("config_json", "[1, 2]"),
        ("median_ms", -1.0),
        ("record_json", "{}"),
        ("noise", float("inf")),
        ("replayed", 7),
        ("problem_key", "{bad"),
        ("problem_key", "[1]"),
    ],
)
def test_tampered_row_raises_on_read(tmp_path: Path, column: str, value: object) -> None:
    path = tmp_path / "w.sqlite"
    fill(path)
    with sqlite3.connect(path) as raw:  # a tamperer rebuilds the table without the CHECK constraints
        raw.execute("PRAGMA ignore_check_constraints = ON")
        raw.execute(f"UPDATE winners SET {column} = ?", (value,))
    raw.close()
    with WinnersDB(path, read_only=True) as db, pytest.raises(DatabaseError, match="tampered"):
        db.all()


def test_wrong_status_record_json_raises_on_read(tmp_path: Path) -> None:
    path = tmp_path / "w.sqlite"
    fill(path)
    bad = dataclasses.replace(record(1024), status=Status.WRONG_RESULT)
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE winners SET record_json = ?", (bad.to_json(),))
    raw.close()
    with WinnersDB(path, read_only=True) as db, pytest.raises(DatabaseError, match="toy .*tampered"):
        db.all()


def test_read_only_cannot_write_and_leaves_file_identical(tmp_path: Path) -> None:
    path = tmp_path / "w.sqlite"
    fill(path)
    before = digest(path)
    rec = record(2048, median=0.5)
    with WinnersDB(path, read_only=True) as db:
        with pytest.raises(DatabaseError, match="read-only"):
            db.put(key_of(rec), rec)
        with pytest.raises(sqlite3.OperationalError):  # query_only holds even for raw SQL
            db.conn.execute("DELETE FROM winners")
        assert len(db.all()) == 1
    assert digest(path) == before


def test_read_only_missing_file_raises_and_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(DatabaseError):
        WinnersDB(tmp_path / "absent.sqlite", read_only=True).open()
    assert list(tmp_path.iterdir()) == []


def test_pragmas_on_writable_open(tmp_path: Path) -> None:
    with WinnersDB(tmp_path / "w.sqlite") as db:
        assert db.conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert db.conn.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
        assert db.conn.execute("PRAGMA busy_timeout").fetchone() == (60000,)
        assert db.conn.execute("PRAGMA trusted_schema").fetchone() == (0,)


def _writer(path: str, worker: int, start: multiprocessing.synchronize.Event) -> None:
    start.wait(60)
    with WinnersDB(path) as db:
        for i in range(50):
            rec = record(worker * 1000 + i + 1, median=1.0 + i / 100)
            assert db.put(key_of(rec), rec)


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "w.sqlite"  # does not exist yet: the writers also race to create the schema
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_writer, args=(str(path), w, start)) for w in range(4)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(timeout=240)
        assert p.exitcode == 0
    with WinnersDB(path, read_only=True) as db:
        keys = {w.key.problem_key for w in db.all()}
        assert db.conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert keys == {canonical_json({"n": w * 1000 + i + 1}) for w in range(4) for i in range(50)}


def test_devices_of_a_family_without_decoding_rows(tmp_path: Path) -> None:
    a100 = DeviceInfo("NVIDIA A100", "8.0", "13000", "13.0")
    with WinnersDB(tmp_path / "w.sqlite") as db:
        for n, device in ((128, DEVICE), (256, DEVICE), (512, a100)):
            rec = dataclasses.replace(record(n), device=device)
            db.put(WinnerKey.of(rec, "abc123", canonical_json(rec.problem), "float32"), rec)
    with WinnersDB(tmp_path / "w.sqlite", read_only=True) as db:
        assert db.devices("toy") == [a100, DEVICE]
        assert db.devices("other") == []


def library_record(median: float | None, status: Status = Status.OK) -> EvalRecord:
    timing = Timing((median, median, median)) if median is not None else None
    return EvalRecord("toy", {"n": 1024}, {}, status, timing=timing, device=DEVICE, baseline="torch: copy_")


def test_the_library_time_is_kept_beside_the_winner(tmp_path: Path) -> None:
    rec = record(1024, median=1.1)
    with WinnersDB(tmp_path / "w.sqlite") as db:
        db.put(key_of(rec), rec, library=library_record(2.5))
        got = db.get(key_of(rec))
    assert (got.library, got.library_ms, got.beats_library) == ("torch: copy_", 2.5, True)
    with WinnersDB(tmp_path / "v.sqlite") as db:  # a library call that failed verification: no time
        db.put(key_of(rec), rec, library=library_record(None, Status.WRONG_RESULT))
        got = db.get(key_of(rec))
    assert (got.library, got.library_ms, got.beats_library) == (None, None, False)
    with WinnersDB(tmp_path / "u.sqlite") as db:  # timed, outside the tolerance (a race's library call)
        db.put(key_of(rec), rec, library=library_record(3.0, Status.WRONG_RESULT))
        assert db.get(key_of(rec)).library_ms == 3.0
    with WinnersDB(tmp_path / "x.sqlite") as db, pytest.raises(ValueError, match="baseline"):
        db.put(key_of(rec), rec, library=record(1024))


def version_1(path: Path) -> None:
    """A winners database as tunebox wrote it before the library columns (schema version 1)."""
    fill(path)
    with sqlite3.connect(path) as raw:
        raw.execute("CREATE TABLE old AS SELECT * FROM winners")
        raw.execute("DROP TABLE winners")
        raw.execute("CREATE TABLE winners AS SELECT * FROM old")
        raw.execute("DROP TABLE old")
        raw.execute("ALTER TABLE winners DROP COLUMN library")
        raw.execute("ALTER TABLE winners DROP COLUMN library_ms")
        raw.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    raw.close()


def test_a_version_1_database_is_read_as_it_is_and_upgraded_on_a_write(tmp_path: Path) -> None:
    path = tmp_path / "w.sqlite"
    version_1(path)
    before = digest(path)
    with WinnersDB(path, read_only=True) as db:
        (old,) = db.all()
    assert (old.library, old.library_ms) == (None, None)
    assert digest(path) == before  # reading changes nothing
    rec = record(2048, median=0.5)
    with WinnersDB(path) as db:
        db.put(key_of(rec), rec, library=library_record(0.9))
        assert [w.library_ms for w in db.all()] == [None, 0.9]
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("2",)
    raw.close()


@pytest.mark.parametrize("values", [("torch: copy_", None), (None, 1.0), ("torch: copy_", -1.0), ("", 1.0)])
def test_a_tampered_library_time_is_refused(tmp_path: Path, values: tuple[object, object]) -> None:
    path = tmp_path / "w.sqlite"
    fill(path)
    with sqlite3.connect(path) as raw:
        raw.execute("PRAGMA ignore_check_constraints = ON")
        raw.execute("UPDATE winners SET library = ?, library_ms = ?", values)
    raw.close()
    with WinnersDB(path, read_only=True) as db, pytest.raises(DatabaseError, match="tampered"):
        db.all()


def unwritable_folder(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``folder`` unwritable to this process: by its mode, or where that does not bind (root), by what
    ``os.access`` answers for it."""
    folder.chmod(0o555)
    if os.access(folder, os.W_OK):  # root writes anyway
        real = os.access
        monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == folder else real(p, mode))


def test_a_database_in_a_folder_that_cannot_be_written_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "installed"
    folder.mkdir()
    fill(folder / "w.sqlite")  # a WAL database, closed: as shipped
    assert sorted(p.name for p in folder.iterdir()) == ["w.sqlite"]
    unwritable_folder(folder, monkeypatch)
    try:
        with WinnersDB(folder / "w.sqlite", read_only=True) as db:
            assert len(db.all()) == 1
        assert sorted(p.name for p in folder.iterdir()) == ["w.sqlite"]  # no shared-memory file made
    finally:
        folder.chmod(0o755)


def test_unapplied_writes_in_a_folder_that_cannot_be_written_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "installed"
    folder.mkdir()
    fill(folder / "w.sqlite")
    (folder / "w.sqlite-wal").write_bytes(b"\x37\x7f\x06\x82" + bytes(28))  # a WAL file's header: writes pending
    before = digest(folder / "w.sqlite")
    unwritable_folder(folder, monkeypatch)
    try:
        with pytest.raises(DatabaseError, match="where the folder can be written"):
            WinnersDB(folder / "w.sqlite", read_only=True).open()
    finally:
        folder.chmod(0o755)
    assert digest(folder / "w.sqlite") == before


@pytest.mark.parametrize("stored_replayed", [False, True], ids=["measured stored", "replayed stored"])
def test_replayed_and_measured_winners_never_replace_each_other(tmp_path: Path, stored_replayed: bool) -> None:
    path = tmp_path / "w.sqlite"
    stored = record(1024, median=0.9, replayed=stored_replayed)
    with WinnersDB(path) as db:
        db.put(key_of(stored), stored)
    faster = record(1024, median=0.5, replayed=not stored_replayed)
    with WinnersDB(path) as db, pytest.raises(DatabaseError, match="never stored beside them"):
        db.put(key_of(faster), faster)
    with WinnersDB(path, read_only=True) as db:
        assert [(w.replayed, w.median_ms) for w in db.all()] == [(stored_replayed, pytest.approx(0.9))]


def test_a_problem_key_that_is_no_json_object_is_refused(tmp_path: Path) -> None:
    rec = record(1024)
    with WinnersDB(tmp_path / "w.sqlite") as db, pytest.raises(ValueError, match="not a JSON object"):
        db.put(key_of(rec, problem_key="{bad"), rec)


@pytest.mark.parametrize("column, value", [("median_ms", "fast"), ("median_ms", b"\x00"), ("config_json", "{not json")])
def test_a_damaged_stored_winner_is_refused_not_compared_with(tmp_path: Path, column: str, value: object) -> None:
    """A text median raised a TypeError from the comparison; a damaged config was 'kept as the better
    stored winner', the new one thrown away and the row still unreadable."""
    path = tmp_path / "w.sqlite"
    fill(path)
    with sqlite3.connect(path) as raw:
        raw.execute("PRAGMA ignore_check_constraints = ON")
        raw.execute(f"UPDATE winners SET {column} = ?", (value,))
    raw.close()
    before = digest(path)
    faster = record(1024, median=0.5)
    with WinnersDB(path) as db, pytest.raises(DatabaseError, match="bad winner row .*Restore it or move it aside"):
        db.put(key_of(faster), faster)
    assert digest(path) == before


@pytest.mark.parametrize("read_only", [True, False])
def test_a_directory_is_not_taken_for_a_damaged_database(tmp_path: Path, read_only: bool) -> None:
    """It was 'cannot open the winners database (disk I/O error)'."""
    with pytest.raises(DatabaseError, match="is a directory: give the winners database's file"):
        WinnersDB(tmp_path, read_only=read_only).open()
