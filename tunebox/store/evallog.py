"""Append-only JSONL evaluation log: one ``EvalRecord.to_json()`` per line after a version header.

Layout: the first line is the header ``{"tunebox_evallog": 1}``; every later line is one record.
Each append is a single ``os.write`` on an ``O_APPEND`` descriptor, under an exclusive ``flock``,
followed by ``fsync``: appenders in different processes never interleave partial lines, and a returned
``append`` survives a crash. Reading tolerates a torn last line (a writer killed mid-append), which the
next append cuts off; damage anywhere else raises ``DatabaseError``. A log whose name ends in ``.gz``
is read through gzip (a compressed recording, ``store.recordings``) and cannot be appended to.
"""

from __future__ import annotations

import fcntl
import gzip
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from ..errors import DatabaseError
from ..records import EvalRecord

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
_HEADER_KEY = "tunebox_evallog"
_HEADER = (json.dumps({_HEADER_KEY: SCHEMA_VERSION}) + "\n").encode()
_DAMAGED_RECORDING = "the recording is damaged: restore it (git checkout) or record the sweep again"


class RecordLog(Protocol):
    """Where a sweep's evaluation records go: the JSONL ``EvalLog``, or a table shared by the workers
    of a sweep on PostgreSQL (``tunebox.store.postgres.PgRecords``)."""

    def append(self, record: EvalRecord) -> None: ...

    def append_all(self, records: Sequence[EvalRecord]) -> None: ...

    def read(self) -> list[EvalRecord]: ...


class EvalLog:
    """An evaluation log file. The constructor does no I/O; the file is created on first append."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def append(self, record: EvalRecord) -> None:
        """Durably append one record; returns once the line is fsynced.

        Appenders hold an exclusive ``flock`` while they write, so the one that finds the file empty
        writes the header, and one that finds a torn tail (a writer killed mid-line) cuts it off
        first, instead of gluing its own line to the fragment.
        """
        self._append_lines((record.to_json() + "\n").encode())

    def append_all(self, records: Sequence[EvalRecord]) -> None:
        """Durably append ``records`` as one write: a reader finds all of them or, when the writer
        was killed mid-write, a prefix of them (a torn last line is skipped, as for ``append``)."""
        if records:
            self._append_lines("".join(r.to_json() + "\n" for r in records).encode())

    def _append_lines(self, lines: bytes) -> None:
        if self.path.suffix == ".gz":
            raise DatabaseError(
                f"{self.path} is a compressed recording, read-only: write the sweep's log elsewhere "
                "(a results directory) and compress it into the recordings when it is complete"
            )
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    size = self._drop_torn_tail(fd, size)
                if size == 0:
                    self._write_all(fd, _HEADER)
                self._write_all(fd, lines)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.fsync(fd)
            if size == 0:
                self._sync_dir()  # make the new file's directory entry durable too
        finally:
            os.close(fd)

    def _drop_torn_tail(self, fd: int, size: int) -> int:
        """Truncate the file after its last newline; return the new size."""
        end = size
        while end > 0:
            start = max(0, end - 4096)
            newline = os.pread(fd, end - start, start).rfind(b"\n")
            if newline >= 0:
                end = start + newline + 1
                break
            end = start
        log.warning("%s: cutting off a torn last line (%d bytes) left by an interrupted writer", self.path, size - end)
        os.ftruncate(fd, end)
        return end

    def _write_all(self, fd: int, data: bytes) -> None:
        written = os.write(fd, data)  # one write: a line is never split around another's
        if written != len(data):
            raise DatabaseError(
                f"{self.path}: short write ({written} of {len(data)} bytes; disk full?); the torn "
                "line is skipped on read and cut off by the next append. Free space and run again."
            )

    def _sync_dir(self) -> None:
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def read(self) -> list[EvalRecord]:
        """All records in order. A missing or empty file gives []; see the module doc for damage."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        if self.path.suffix == ".gz":
            if not data:
                raise DatabaseError(f"{self.path}: an empty file, not a gzip recording; {_DAMAGED_RECORDING}")
            try:
                data = gzip.decompress(data)
            except (OSError, EOFError) as exc:
                raise DatabaseError(f"{self.path}: not a complete gzip file ({exc}); {_DAMAGED_RECORDING}") from exc
        if not data:
            return []
        lines = data.split(b"\n")
        complete = lines[:-1]  # the element after the final newline is b"" or a torn tail
        if complete:
            self._check_header(complete[0])
        elif not _HEADER.startswith(lines[-1]):  # one line, and not a header a writer was cut off in
            self._check_header(lines[-1])
        if lines[-1]:
            log.warning(
                "%s: skipping a torn last line (%d bytes, no newline): a writer was interrupted",
                self.path,
                len(lines[-1]),
            )
        if not complete:
            return []
        records: list[EvalRecord] = []
        last = len(complete) - 1
        for index, raw in enumerate(complete[1:], start=1):
            try:
                records.append(EvalRecord.from_json(raw.decode()))
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                if index == last and not lines[-1]:
                    log.warning(
                        "%s: skipping an undecodable last line %d (%s): a writer was interrupted",
                        self.path,
                        index + 1,
                        exc,
                    )
                    continue
                advice = (
                    _DAMAGED_RECORDING
                    if self.path.suffix == ".gz"
                    else "the log is damaged. Move it aside (e.g. rename it to *.damaged) and start a new log; "
                    "records before that line can still be read from the moved file."
                )
                raise DatabaseError(f"{self.path}: line {index + 1} is not a valid record ({exc}); {advice}") from exc
        return records

    def _check_header(self, raw: bytes) -> None:
        try:
            header = json.loads(raw)
            version = header[_HEADER_KEY] if isinstance(header, dict) else None
        except (ValueError, KeyError):
            version = None
        if type(version) is not int or version < 1:
            raise DatabaseError(
                f"{self.path}: line 1 is not a tunebox evaluation log header; this is not an "
                "evaluation log (or it is damaged). Point tunebox at another file or move this aside."
            )
        if version > SCHEMA_VERSION:
            raise DatabaseError(
                f"{self.path}: evaluation log version {version} was written by a newer tunebox; "
                f"upgrade tunebox to read it (this one reads version {SCHEMA_VERSION})."
            )


def check_log_family(path: Path, records: Sequence[EvalRecord], family: str) -> None:
    """A sweep's log holds its family's records only: another family's raise ``DatabaseError`` saying to
    move the log aside (a results directory reused by a sweep of the same name and another family)."""
    others = sorted({r.family for r in records} - {family})
    if others:
        raise DatabaseError(
            f"{path} holds records of {', '.join(others)}, not of {family} only: a sweep directory holds one "
            "sweep's log. Move it aside, or give another --results; nothing was changed."
        )
