"""EvalLog: round trip, torn tail, damaged middle, header versions, concurrent appenders, compressed
recordings (read-only)."""

from __future__ import annotations

import gzip
import logging
import multiprocessing
from pathlib import Path

import pytest

from tunebox.errors import DatabaseError
from tunebox.records import DeviceInfo, EvalRecord, Status, Timing
from tunebox.store.evallog import EvalLog

DEVICE = DeviceInfo("NVIDIA H200", "9.0", "13000", "13.0")


def record(i: int, status: Status = Status.OK) -> EvalRecord:
    timing = Timing((1.0 + i, 1.1 + i, 1.2 + i)) if status is Status.OK else None
    return EvalRecord(
        "toy",
        {"n": i},
        {"BLOCK": 64},
        status,
        timing=timing,
        bytes_moved=8 * i,
        device=DEVICE,
        stage_seconds={"compile": 0.5},
    )


def test_missing_file_reads_empty_and_constructor_does_no_io(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    assert EvalLog(path).read() == []
    assert not path.exists()


def test_round_trip_with_header(tmp_path: Path) -> None:
    log = EvalLog(tmp_path / "log.jsonl")
    records = [record(0), record(1, Status.WRONG_RESULT), record(2)]
    for r in records:
        log.append(r)
    assert log.read() == records
    lines = (tmp_path / "log.jsonl").read_text().splitlines()
    assert lines[0] == '{"tunebox_evallog": 1}'
    assert len(lines) == 4


def test_empty_file_gets_a_header(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.touch()
    assert EvalLog(path).read() == []
    EvalLog(path).append(record(0))
    assert EvalLog(path).read() == [record(0)]


@pytest.mark.parametrize("tail", [b'{"family": "to', b"garbage\n"])
def test_torn_tail_is_skipped_with_warning(tmp_path: Path, tail: bytes, caplog: pytest.LogCaptureFixture) -> None:
    log = EvalLog(tmp_path / "log.jsonl")
    log.append(record(0))
    log.append(record(1))
    with open(log.path, "ab") as f:
        f.write(tail)
    with caplog.at_level(logging.WARNING):
        assert log.read() == [record(0), record(1)]
    assert "torn" in caplog.text or "interrupted" in caplog.text


def test_append_after_torn_tail_cuts_the_fragment(tmp_path: Path) -> None:
    """Resuming after kill -9: the next append removes the fragment instead of gluing onto it."""
    log = EvalLog(tmp_path / "log.jsonl")
    log.append(record(0))
    with open(log.path, "ab") as f:
        f.write(b'{"family": "to')
    log.append(record(1))
    log.append(record(2))
    assert log.read() == [record(0), record(1), record(2)]


def test_torn_header_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'{"tunebox_ev')
    assert EvalLog(path).read() == []
    EvalLog(path).append(record(0))
    assert EvalLog(path).read() == [record(0)]


def test_corrupt_middle_raises_naming_file_and_line(tmp_path: Path) -> None:
    log = EvalLog(tmp_path / "log.jsonl")
    for i in range(3):
        log.append(record(i))
    lines = log.path.read_bytes().split(b"\n")
    lines[2] = b'{"not": "a record"}'
    log.path.write_bytes(b"\n".join(lines))
    with pytest.raises(DatabaseError) as info:
        log.read()
    message = str(info.value)
    assert str(log.path) in message and "line 3" in message
    assert "damaged" in message and "Move it aside" in message


def test_newer_header_raises(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text('{"tunebox_evallog": 2}\n' + record(0).to_json() + "\n")
    with pytest.raises(DatabaseError, match="newer tunebox; upgrade"):
        EvalLog(path).read()


@pytest.mark.parametrize("first", [record(0).to_json(), '{"tunebox_evallog": "1"}', "[1]", "hello"])
def test_missing_header_raises(tmp_path: Path, first: str) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text(first + "\n" + record(1).to_json() + "\n")
    with pytest.raises(DatabaseError, match="not a tunebox evaluation log header"):
        EvalLog(path).read()


@pytest.mark.parametrize("text", ['{"name": "not a log"}', "hello"])
def test_one_line_of_something_else_is_not_taken_for_a_torn_header(tmp_path: Path, text: str) -> None:
    """A JSON file written without a final newline was read as an empty log with a torn-line warning."""
    path = tmp_path / "other.json"
    path.write_text(text)
    with pytest.raises(DatabaseError, match="not a tunebox evaluation log header"):
        EvalLog(path).read()
    assert path.read_text() == text


def _append_many(path: str, worker: int, count: int) -> None:
    log = EvalLog(path)
    for i in range(count):
        log.append(record(worker * 1000 + i))


def test_concurrent_appenders_never_interleave(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append_many, args=(str(path), w, 50)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    got = EvalLog(path).read()
    assert sorted(r.problem["n"] for r in got) == sorted(w * 1000 + i for w in range(4) for i in range(50))
    assert path.read_text().count("tunebox_evallog") == 1


def test_append_all_is_one_write_read_back_in_order(tmp_path: Path) -> None:
    log = EvalLog(tmp_path / "log.jsonl")
    log.append(record(0))
    log.append_all([record(1), record(2), record(3)])
    log.append_all([])
    assert log.read() == [record(0), record(1), record(2), record(3)]
    data = log.path.read_bytes()
    log.path.write_bytes(data[:-10])  # killed mid-write: the lines before the torn one survive
    assert log.read() == [record(0), record(1), record(2)]
    log.append_all([record(4)])
    assert log.read() == [record(0), record(1), record(2), record(4)]


def test_a_compressed_log_reads_as_the_plain_one_and_refuses_appends(tmp_path: Path) -> None:
    plain = EvalLog(tmp_path / "log.jsonl")
    records = [record(0), record(1, Status.WRONG_RESULT), record(2)]
    plain.append_all(records)
    compressed = tmp_path / "log.jsonl.gz"
    compressed.write_bytes(gzip.compress(plain.path.read_bytes()))
    assert EvalLog(compressed).read() == records
    with pytest.raises(DatabaseError, match="compressed recording, read-only"):
        EvalLog(compressed).append(record(3))
    assert EvalLog(compressed).read() == records


def test_a_truncated_compressed_log_is_damaged(tmp_path: Path) -> None:
    plain = EvalLog(tmp_path / "log.jsonl")
    plain.append_all([record(i) for i in range(20)])
    compressed = tmp_path / "log.jsonl.gz"
    compressed.write_bytes(gzip.compress(plain.path.read_bytes())[:-12])
    with pytest.raises(DatabaseError, match="not a complete gzip file"):
        EvalLog(compressed).read()


def test_an_empty_compressed_log_is_damaged(tmp_path: Path) -> None:
    """A zero-byte recording read as an empty one: a replay then missed every configuration."""
    compressed = tmp_path / "log.jsonl.gz"
    compressed.write_bytes(b"")
    with pytest.raises(DatabaseError, match="an empty file, not a gzip recording"):
        EvalLog(compressed).read()


@pytest.mark.parametrize(
    "field, value, fragment",
    [
        ("timing", {"samples_ms": [-1.0, 1.0]}, "samples_ms must be finite times"),
        ("timing", {"samples_ms": [0.0]}, "samples_ms must be finite times"),
        ("timing", {"samples_ms": [1e-300]}, "samples_ms must be finite times"),
        ("timing", {"samples_ms": []}, "samples_ms must be finite times"),
        ("config", "BM=8", "config is not a JSON object"),
        ("problem", [4096, 4096], "problem is not a JSON object"),
    ],
)
def test_a_record_no_sweep_could_write_is_damage(tmp_path: Path, field: str, value: object, fragment: str) -> None:
    """A recording with a negative timing was replayed into the user's log, whose every later read then
    failed to store a winner; a config given as text crashed the search with an AttributeError."""
    import json

    log = EvalLog(tmp_path / "log.jsonl")
    log.append_all([record(0), record(1)])
    lines = log.path.read_text().splitlines()
    tampered = json.loads(lines[1])
    tampered[field] = value
    lines[1] = json.dumps(tampered)
    log.path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DatabaseError, match=f"line 2 is not a valid record \\({fragment}"):
        log.read()
