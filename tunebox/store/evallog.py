"""Append-only JSONL evaluation log: one ``EvalRecord.to_json()`` per line after a version header.

Layout: the first line is the header ``{"tunebox_evallog": 1}``; every later line is one record.
Each append is a single ``os.write`` on an ``O_APPEND`` descriptor followed by ``fsync``, so appenders
in different processes never interleave partial lines and a returned ``append`` survives a crash.
Reading tolerates a torn last line (a writer killed mid-append) and refuses damage anywhere else.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
from pathlib import Path

from ..errors import DatabaseError
from ..records import EvalRecord

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
_HEADER_KEY = "tunebox_evallog"
_HEADER = (json.dumps({_HEADER_KEY: SCHEMA_VERSION}) + "\n").encode()


class EvalLog:
    """An evaluation log file. The constructor does no I/O; the file is created on first append."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def append(self, record: EvalRecord) -> None:
        """Durably append one record (header first if the file is new or empty)."""
        line = (record.to_json() + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size == 0:
                self._write_header(fd)
            self._write_all(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    def _write_header(self, fd: int) -> None:
        # Appenders that find the file empty serialise here, so exactly one writes the header.
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            if os.fstat(fd).st_size == 0:
                self._write_all(fd, _HEADER)
                os.fsync(fd)
                self._sync_dir()
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def _write_all(self, fd: int, data: bytes) -> None:
        written = os.write(fd, data)
        if written != len(data):
            raise DatabaseError(
                f"{self.path}: short write ({written} of {len(data)} bytes; disk full?); the last "
                "line is torn and will be skipped on read. Free space and run again.")

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
        if not data:
            return []
        lines = data.split(b"\n")
        complete = lines[:-1]  # the element after the final newline is b"" or a torn tail
        if lines[-1]:
            log.warning("%s: skipping a torn last line (%d bytes, no newline): a writer was "
                        "interrupted", self.path, len(lines[-1]))
        if not complete:
            return []
        self._check_header(complete[0])
        records: list[EvalRecord] = []
        last = len(complete) - 1
        for index, raw in enumerate(complete[1:], start=1):
            try:
                records.append(EvalRecord.from_json(raw.decode()))
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                if index == last and not lines[-1]:
                    log.warning("%s: skipping an undecodable last line %d (%s): a writer was "
                                "interrupted", self.path, index + 1, exc)
                    continue
                raise DatabaseError(
                    f"{self.path}: line {index + 1} is not a valid record ({exc}); the log is "
                    "damaged. Move it aside (e.g. rename it to *.damaged) and start a new log; "
                    "records before that line can still be read from the moved file.") from exc
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
                "evaluation log (or it is damaged). Point tunebox at another file or move this aside.")
        if version > SCHEMA_VERSION:
            raise DatabaseError(
                f"{self.path}: evaluation log version {version} was written by a newer tunebox "
                f"(this one reads version {SCHEMA_VERSION}); upgrade tunebox to read it.")
