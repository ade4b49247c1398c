"""SQLite winners database: the best verified variant per ``WinnerKey``.

Contracts:

* Writable opens use WAL with ``synchronous=FULL`` (a committed winner survives power loss) and short
  ``BEGIN IMMEDIATE`` transactions retried with jittered backoff, so concurrent writers never fail
  with "database is locked". Read-only opens use ``mode=ro`` (and ``immutable`` where the folder
  cannot be written), ``query_only`` and, where Python exposes it, ``SQLITE_DBCONFIG_DEFENSIVE``. Both
  turn ``trusted_schema`` off.
* Opening checks the file before anything is written: a non-SQLite, damaged, foreign or newer-schema
  file raises ``DatabaseError`` and is left byte-identical.
* Only ``Status.OK`` records with a timing are stored; every row read back is validated, so a
  tampered row raises ``DatabaseError`` instead of yielding a wrong kernel.
* Every value is bound with ``?``; no SQL text is built from data.
"""

from __future__ import annotations

import logging
import os
import random
import sqlite3
import textwrap
import time
from collections.abc import Callable
from dataclasses import astuple
from pathlib import Path
from typing import Any, TypeVar

from ..errors import DatabaseError
from ..records import DeviceInfo, EvalRecord, WinnerKey
from .winner_rows import (
    KEY_COLUMNS,
    VALUE_COLUMNS,
    Winner,
    refuse_mixing,
    refuse_other_kind,
    validated_winner,
    winner_row,
)

log = logging.getLogger(__name__)

SCHEMA_VERSION = 2  # 2: the library call's name and time beside each winner (1 is read, and upgraded on a write)
_RETRIES = 8
_T = TypeVar("_T")

_SELECT = f"SELECT {', '.join(KEY_COLUMNS + VALUE_COLUMNS)} FROM winners"
_SELECT_V1 = _SELECT.replace("library, library_ms", "NULL, NULL")  # a version-1 file read as it is
_LIBRARY_COLUMNS = ("library TEXT", "library_ms REAL CHECK (library_ms IS NULL OR library_ms > 0)")
_KEY_WHERE = " AND ".join(f"{c} = ?" for c in KEY_COLUMNS)
_UPSERT = (
    f"INSERT OR REPLACE INTO winners ({', '.join(KEY_COLUMNS + VALUE_COLUMNS)}) "
    f"VALUES ({', '.join('?' * (len(KEY_COLUMNS) + len(VALUE_COLUMNS)))})"
)
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS winners ("
    + ", ".join(f"{c} TEXT NOT NULL" for c in KEY_COLUMNS)
    + ", config_json TEXT NOT NULL, median_ms REAL NOT NULL CHECK (median_ms > 0),"
    " noise REAL NOT NULL CHECK (noise >= 0), bandwidth_gbps REAL,"
    " replayed INTEGER NOT NULL CHECK (replayed IN (0, 1)), record_json TEXT NOT NULL,"
    f" created_at TEXT NOT NULL, {', '.join(_LIBRARY_COLUMNS)}, PRIMARY KEY ({', '.join(KEY_COLUMNS)}))",
)


def check_writable(path: Path) -> None:
    """Raise ``DatabaseError`` unless winners can be stored at ``path``: the file (if any) and its folder
    writable (SQLite writes its journal files beside it)."""
    if not (os.access(path.parent, os.W_OK) and (not path.exists() or os.access(path, os.W_OK))):
        raise DatabaseError(
            f"{path}: winners cannot be stored there (a read-only file, folder or file system); give a winners "
            "database where they can (--db); nothing was changed."
        )


class EmptyDatabase(DatabaseError):
    """A database file without tables, opened read-only (a writable open makes the schema): SQLite made
    the file and nothing more, or it was never a database."""


def check_before_sweep(path: Path, replayed: bool) -> None:
    """Before a sweep's work: a damaged winners database at ``path``, one holding winners of the other kind
    (measured where the sweep replays, or the reverse), or one that cannot be written raises
    ``DatabaseError``. A missing one is made by the first winner, and so is an empty one (a sweep killed
    while SQLite made it), which nothing else changes before then: a failed sweep leaves the file as it was."""
    check_writable(path)
    if not path.exists():
        return
    try:
        with WinnersDB(path, read_only=True) as db:  # opening checks the file
            refuse_other_kind(db, str(path), replayed)
    except EmptyDatabase:
        return


class WinnersDB:
    """The winners database at ``path``. Use as a context manager or call ``open``/``close``."""

    def __init__(self, path: str | os.PathLike[str], read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self._conn: sqlite3.Connection | None = None
        self._select = _SELECT  # version 1 files have no library columns (read as NULL)

    def __enter__(self) -> WinnersDB:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> WinnersDB:
        """Connect and check the file (see module doc); creates the schema when writable and new."""
        if self._conn is not None:
            return self
        if self.path.is_dir():
            raise DatabaseError(
                f"{self.path} is a directory: give the winners database's file (e.g. {self.path / 'winners.sqlite'})"
            )
        try:
            if self.read_only:
                # a reader may serve several threads (``Lookup`` serialises its use of the connection)
                conn = sqlite3.connect(
                    self._read_only_uri(),
                    uri=True,
                    timeout=60,
                    isolation_level=None,
                    check_same_thread=False,
                )
            else:
                conn = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        except sqlite3.Error as exc:
            raise DatabaseError(f"{self.path}: cannot open the winners database ({exc})") from exc
        self._conn = conn
        try:
            self._setup(conn)
        except BaseException:
            self.close()
            raise
        return self

    def _read_only_uri(self) -> str:
        """``mode=ro``; where the folder cannot be written (an installed package, a read-only mount) also
        ``immutable``: SQLite cannot make there the shared-memory file even a reader of a WAL database needs,
        and nothing can change the file there. A WAL file holding writes not yet in the database cannot be
        applied by such a reader: refused, saying what to do."""
        uri = self.path.resolve().as_uri() + "?mode=ro"
        if not self.path.is_file() or os.access(self.path.parent, os.W_OK):
            return uri
        wal = self.path.with_name(self.path.name + "-wal")
        if wal.is_file() and wal.stat().st_size > 0:
            raise DatabaseError(
                f"{self.path}: its folder cannot be written, and {wal.name} beside it holds writes not yet in "
                f"the database, which a reader cannot apply there. Open it once where the folder can be written "
                f"(or copy the database with {wal.name} to such a folder); nothing was changed."
            )
        return uri + "&immutable=1"

    def _setup(self, conn: sqlite3.Connection) -> None:
        try:
            conn.execute("PRAGMA busy_timeout = 60000")
            conn.execute("PRAGMA trusted_schema = OFF")
            if self.read_only:
                conn.execute("PRAGMA query_only = ON")
                if hasattr(conn, "setconfig") and hasattr(sqlite3, "SQLITE_DBCONFIG_DEFENSIVE"):
                    conn.setconfig(sqlite3.SQLITE_DBCONFIG_DEFENSIVE, True)
            version = self._check_existing(conn)
            problems = [row[0] for row in conn.execute("PRAGMA quick_check")]
        except sqlite3.DatabaseError as exc:
            raise DatabaseError(
                f"{self.path}: not a readable SQLite database ({exc}); the file is damaged or is "
                "not a winners database. Restore it from a backup or move it aside; nothing was "
                "changed."
            ) from exc
        if problems != ["ok"]:
            raise DatabaseError(
                f"{self.path}: integrity check failed ({textwrap.shorten('; '.join(map(str, problems)), 300)}); the "
                "file is damaged. Restore it from a backup or move it aside; nothing was changed."
            )
        if self.read_only:
            self._select = _SELECT if version is None or version >= 2 else _SELECT_V1
            return
        self._retry(lambda: conn.execute("PRAGMA journal_mode = WAL"))
        conn.execute("PRAGMA synchronous = FULL")
        if version is None:
            self._write(self._create_schema)
        elif version < 2:
            self._write(self._upgrade_to_2)

    def _check_existing(self, conn: sqlite3.Connection) -> int | None:
        """The schema version of a tunebox database, None for an empty one; raises for anything else
        (another file, a missing, malformed or newer version)."""
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not tables:
            if self.read_only:
                raise EmptyDatabase(f"{self.path}: the winners database is empty; tune first.")
            return None
        if not {"meta", "winners"} <= tables:
            raise DatabaseError(
                f"{self.path}: not a tunebox winners database (tables: {sorted(tables)}); point "
                "tunebox at another file. Nothing was changed."
            )
        row = conn.execute("SELECT value FROM meta WHERE key = ?", ("schema_version",)).fetchone()
        try:
            version = int(row[0])
            if version < 1:
                raise ValueError(version)
        except (TypeError, ValueError):
            raise DatabaseError(
                f"{self.path}: schema_version is missing or malformed ({row!r}); the database was "
                "tampered with or damaged. Restore it or move it aside."
            ) from None
        if version > SCHEMA_VERSION:
            raise DatabaseError(
                f"{self.path}: schema version {version} was written by a newer tunebox (this one "
                f"reads version {SCHEMA_VERSION}); open it with a newer version; nothing was changed."
            )
        return version

    @staticmethod
    def _upgrade_to_2(conn: sqlite3.Connection) -> None:
        """Version 1 -> 2: the library columns, empty for the winners stored before (one transaction)."""
        columns = {row[1] for row in conn.execute("PRAGMA table_info(winners)")}
        for column in _LIBRARY_COLUMNS:
            if column.split()[0] not in columns:
                conn.execute(f"ALTER TABLE winners ADD COLUMN {column}")
        conn.execute("UPDATE meta SET value = ? WHERE key = ?", ("2", "schema_version"))

    @staticmethod
    def _create_schema(conn: sqlite3.Connection) -> None:
        for statement in _SCHEMA:
            conn.execute(statement)
        conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", ("schema_version", str(SCHEMA_VERSION)))

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @property
    def conn(self) -> sqlite3.Connection:
        """The open connection (for inspection; go through ``put`` to write)."""
        if self._conn is None:
            raise DatabaseError(f"{self.path}: the winners database is not open; call open() first")
        return self._conn

    def _retry(self, action: Callable[[], _T]) -> _T:
        """Run ``action``, retrying with jittered exponential backoff while the database is locked.

        Any other SQLite error (and the last locked one) becomes a DatabaseError.
        """
        for attempt in range(_RETRIES):
            try:
                return action()
            except sqlite3.Error as exc:
                locked = isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc))
                if not locked or attempt == _RETRIES - 1:
                    raise DatabaseError(f"{self.path}: write failed ({exc})") from exc
                delay = random.uniform(0.5, 1.5) * 0.05 * 2**attempt
                log.warning("%s: database is locked, retrying in %.2f s", self.path, delay)
                time.sleep(delay)
        raise AssertionError("unreachable")

    def _write(self, body: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``body`` inside one short BEGIN IMMEDIATE transaction (retried when locked)."""
        if self.read_only:
            raise DatabaseError(f"{self.path}: opened read-only; open it writable to store winners")
        conn = self.conn

        def attempt() -> _T:
            try:
                conn.execute("BEGIN IMMEDIATE")
                result = body(conn)
                conn.execute("COMMIT")
                return result
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

        return self._retry(attempt)

    def put(self, key: WinnerKey, record: EvalRecord, library: EvalRecord | None = None) -> bool:
        """Store ``record`` as the winner for ``key`` unless a row with a median <= its median exists,
        with ``library``, the library call's record timed beside it (its time kept when it has one: a
        race times the caller's library call even where its result is outside the tolerance).

        Returns whether it was stored. Raises ValueError for a record that is not OK, has no timing,
        a non-finite time, or belongs to another family or device than ``key``, or a library record
        that is not a baseline's; ``DatabaseError`` where the stored row is replayed and the record
        measured, or the reverse (``refuse_mixing``), or damaged (``validated_winner``).
        """
        row = winner_row(key, record, library)
        median = row[len(KEY_COLUMNS) + 1]

        def compare_and_set(conn: sqlite3.Connection) -> bool:
            old = self.get(key)  # validated: a damaged row is never compared with
            if old is not None:
                refuse_mixing(str(self.path), old.replayed, record.replayed)
                if old.median_ms <= median:
                    return False
            conn.execute(_UPSERT, row)
            return True

        stored = self._write(compare_and_set)
        log.debug(
            "%s %s: %s %.4g ms",
            key.family,
            key.problem_key,
            "stored" if stored else "kept the better stored winner over",
            median,
        )
        return stored

    def prune_stale(self, family: str, family_hash: str) -> int:
        """Delete ``family``'s winners stored under sources other than ``family_hash`` (its current ones:
        stale winners, never served as exact), once a re-recording has measured them again; the number
        deleted."""
        return self._write(
            lambda conn: (
                conn.execute(
                    "DELETE FROM winners WHERE family = ? AND family_hash != ?", (family, family_hash)
                ).rowcount
            )
        )

    def get(self, key: WinnerKey) -> Winner | None:
        rows = self._query(f"{self._select} WHERE {_KEY_WHERE}", astuple(key))
        return rows[0] if rows else None

    def candidates(
        self, family: str, family_hash: str, device_name: str, compute_capability: str, dtype: str | None = None
    ) -> list[Winner]:
        """Winners of the same family, sources and device (any toolchain), for nearest fallback."""
        sql = f"{self._select} WHERE family = ? AND family_hash = ? AND device_name = ? AND compute_capability = ?"
        params: tuple[str, ...] = (family, family_hash, device_name, compute_capability)
        if dtype is not None:
            sql += " AND dtype = ?"
            params += (dtype,)
        return self._query(sql + " ORDER BY problem_key, median_ms", params)

    def kind_count(self, replayed: bool) -> int:
        """How many winners are replayed (``replayed``) or measured (not)."""
        return int(self.conn.execute("SELECT COUNT(*) FROM winners WHERE replayed = ?", (int(replayed),)).fetchone()[0])

    def stale_count(self, family: str, family_hash: str, device_name: str) -> int:
        """How many of ``family``'s winners on ``device_name`` were stored under other sources than
        ``family_hash`` (never served; ``prune_stale`` deletes them)."""
        sql = "SELECT COUNT(*) FROM winners WHERE family = ? AND family_hash != ? AND device_name = ?"
        return int(self.conn.execute(sql, (family, family_hash, device_name)).fetchone()[0])

    def devices(self, family: str) -> list[DeviceInfo]:
        """The devices (with their toolchains) that hold winners of ``family``, without decoding rows."""
        sql = (
            "SELECT DISTINCT device_name, compute_capability, driver_version, nvrtc_version FROM winners "
            "WHERE family = ? ORDER BY device_name, compute_capability, driver_version, nvrtc_version"
        )
        try:
            rows = self.conn.execute(sql, (family,)).fetchall()
        except sqlite3.Error as exc:
            raise DatabaseError(
                f"{self.path}: query failed ({exc}); the database is damaged or of "
                "another layout. Restore it or move it aside."
            ) from exc
        if not all(isinstance(v, str) for row in rows for v in row):
            raise DatabaseError(
                f"{self.path}: a device column of {family} holds a non-text value; the "
                "database was tampered with or damaged. Restore it or move it aside."
            )
        return [DeviceInfo(*row) for row in rows]

    def all(self) -> list[Winner]:
        return self._query(f"{self._select} ORDER BY {', '.join(KEY_COLUMNS)}", ())

    def _query(self, sql: str, params: tuple[Any, ...]) -> list[Winner]:
        try:
            rows = self.conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise DatabaseError(
                f"{self.path}: query failed ({exc}); the database is damaged or of "
                "another layout. Restore it or move it aside."
            ) from exc
        return [self._winner(row) for row in rows]

    def _winner(self, row: tuple[Any, ...]) -> Winner:
        return validated_winner(str(self.path), row)
