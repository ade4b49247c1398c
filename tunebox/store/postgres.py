"""A sweep shared through PostgreSQL: its evaluation records, the claims that share configurations out
among the workers, and its winners (the optional extra ``tunebox[distributed]``: psycopg 3).

Tables (created on first use, under a transaction-level advisory lock, so workers starting together
never race on ``CREATE TABLE``):

* ``tunebox_evals``: one row per evaluation record, the same ``EvalRecord.to_json()`` a JSONL log line
  holds, unique per (sweep, family, problem, configuration, phase, baseline): a record is stored once
  however many workers write it (a later copy is dropped, ``ON CONFLICT DO NOTHING``).
* ``tunebox_claims``: which Optuna trial evaluates which configuration of a problem; a configuration
  is claimed once. A claim whose trial has ended without a record (its worker died, the heartbeat went
  stale and Optuna failed the trial) is taken over by the trial that asks for the configuration next.
* ``tunebox_problems``: one row per problem of a sweep, locked (``FOR UPDATE``) while a claim is made,
  so a problem's claims never exceed its budget.
* ``tunebox_winners``: the winners, with the SQLite winners database's columns, key and
  compare-and-set (``PgWinnersDB``).
* ``tunebox_meta``: ``schema_version`` of these tables (``SCHEMA_VERSION``); a worker refuses tables of
  a newer version, or a damaged one, before it writes anything. Also ``space:<sweep>``: the digest of the
  space a sweep was started with (``bind_space``), which every later worker of that sweep must share.

A problem's finalists are re-timed by one worker at a time: ``finishing`` holds a session advisory
lock, which PostgreSQL drops when its connection ends, however the worker ends (kill -9 included).
Every value is bound as a parameter; no SQL text is built from data.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import astuple, dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from ..errors import DatabaseError
from ..records import DeviceInfo, EvalRecord, Status, Timing, WinnerKey, canonical_json
from .winner_rows import (
    KEY_COLUMNS,
    VALUE_COLUMNS,
    Winner,
    WinnerStore,
    refuse_mixing,
    validated_winner,
    winner_row,
)

if TYPE_CHECKING:
    import psycopg

_SCHEMA_LOCK = 0x7475_6E65_626F_7831  # "tunebox1": serialises schema creation across workers
SCHEMA_VERSION = 1  # of the tunebox_* tables, kept in tunebox_meta (tables without it are version 1)
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS tunebox_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS tunebox_evals ("
    " id BIGSERIAL PRIMARY KEY, sweep TEXT NOT NULL, family TEXT NOT NULL, problem_key TEXT NOT NULL,"
    " config_key TEXT NOT NULL, phase TEXT NOT NULL, baseline TEXT NOT NULL, record_json TEXT NOT NULL,"
    " worker TEXT NOT NULL, created_at TIMESTAMPTZ NOT NULL DEFAULT now(),"
    " UNIQUE (sweep, family, problem_key, config_key, phase, baseline))",
    "CREATE TABLE IF NOT EXISTS tunebox_claims ("
    " sweep TEXT NOT NULL, family TEXT NOT NULL, problem_key TEXT NOT NULL, config_key TEXT NOT NULL,"
    " trial_id BIGINT NOT NULL, worker TEXT NOT NULL, claimed_at TIMESTAMPTZ NOT NULL DEFAULT now(),"
    " seq BIGSERIAL, PRIMARY KEY (sweep, family, problem_key, config_key))",
    "CREATE TABLE IF NOT EXISTS tunebox_problems ("
    " sweep TEXT NOT NULL, family TEXT NOT NULL, problem_key TEXT NOT NULL,"
    " PRIMARY KEY (sweep, family, problem_key))",
    "CREATE TABLE IF NOT EXISTS tunebox_winners ("
    + ", ".join(f"{c} TEXT NOT NULL" for c in KEY_COLUMNS)
    + ", config_json TEXT NOT NULL, median_ms DOUBLE PRECISION NOT NULL CHECK (median_ms > 0),"
    " noise DOUBLE PRECISION NOT NULL CHECK (noise >= 0), bandwidth_gbps DOUBLE PRECISION,"
    " replayed INTEGER NOT NULL CHECK (replayed IN (0, 1)), record_json TEXT NOT NULL,"
    " created_at TEXT NOT NULL, library TEXT,"
    " library_ms DOUBLE PRECISION CHECK (library_ms IS NULL OR library_ms > 0),"
    f" PRIMARY KEY ({', '.join(KEY_COLUMNS)}))",
)
_WINNER_COLUMNS = ", ".join(KEY_COLUMNS + VALUE_COLUMNS)
_WINNER_SELECT = f"SELECT {_WINNER_COLUMNS} FROM tunebox_winners"
_WINNER_KEY_WHERE = " AND ".join(f"{c} = %s" for c in KEY_COLUMNS)
# compare-and-set in one statement: insert, or replace a stored winner that is slower
_WINNER_PUT = (
    f"INSERT INTO tunebox_winners ({_WINNER_COLUMNS}) VALUES ({', '.join(['%s'] * (len(KEY_COLUMNS) + 9))})"
    f" ON CONFLICT ({', '.join(KEY_COLUMNS)}) DO UPDATE SET "
    + ", ".join(f"{c} = EXCLUDED.{c}" for c in VALUE_COLUMNS)
    + " WHERE tunebox_winners.median_ms > EXCLUDED.median_ms AND tunebox_winners.replayed = EXCLUDED.replayed"
    " RETURNING 1"
)


def is_postgres_url(url: str) -> bool:
    return re.match(r"^postgres(ql)?(\+\w+)?://", url) is not None


def libpq_url(url: str) -> str:
    """``url`` as libpq (psycopg) reads it: without SQLAlchemy's ``+driver``."""
    return re.sub(r"^postgres(ql)?\+\w+://", "postgresql://", url)


def sqlalchemy_url(url: str) -> str:
    """``url`` as SQLAlchemy (Optuna's RDB storage) reads it, with the psycopg 3 driver."""
    return re.sub(r"^postgres(ql)?(\+\w+)?://", "postgresql+psycopg://", url)


def redacted(url: str) -> str:
    """``url`` without its password, for messages."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)


def storage_error(url: str, exc: BaseException) -> DatabaseError | None:
    """What to tell the user of a PostgreSQL or SQLAlchemy (Optuna's storage) error of a shared sweep on
    ``url``: a missing right, or a lost server or connection (resumable). None for any other exception, a
    bug in tunebox's SQL included (re-raised with its traceback), and, without psycopg installed, for every
    exception (``connect`` says to install it)."""
    try:
        import psycopg
    except ImportError:
        return None
    from sqlalchemy.exc import OperationalError, SQLAlchemyError  # Optuna's RDB storage: an Optuna dependency

    if not isinstance(exc, psycopg.Error | SQLAlchemyError):
        return None
    cause = _driver_error(exc, psycopg.Error) or exc  # SQLAlchemy's wraps the driver's
    first = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
    where = redacted(url)
    if isinstance(cause, psycopg.errors.InsufficientPrivilege):
        return DatabaseError(
            f"{where}: the user may not create or use tunebox's tables ({first}); a shared sweep needs them: "
            "GRANT CREATE ON SCHEMA public TO that user, or give a database it owns"
        )
    if isinstance(cause, psycopg.OperationalError | OperationalError):
        return DatabaseError(
            f"{where}: lost the PostgreSQL server ({first}); every evaluation stored there is kept: once it is "
            "back, run the same command again to resume"
        )
    return None


def _driver_error(exc: BaseException, kind: type[BaseException]) -> BaseException | None:
    """The first ``kind`` error behind ``exc``: SQLAlchemy's ``orig``, or a cause or context (Optuna's
    storage re-raises a failed commit as its own error, the driver's behind it)."""
    seen: set[int] = set()
    at: BaseException | None = exc
    while at is not None and id(at) not in seen:
        seen.add(id(at))
        if isinstance(at, kind):
            return at
        at = getattr(at, "orig", None) or at.__cause__ or at.__context__
    return None


def connect(url: str) -> psycopg.Connection[Any]:
    """An autocommit connection to ``url`` with tunebox's tables in place."""
    try:
        import psycopg
    except ImportError as exc:  # the optional extra
        raise DatabaseError("a sweep on PostgreSQL needs psycopg: pip install 'tunebox[distributed]'") from exc
    try:
        conn = psycopg.connect(libpq_url(url), autocommit=True)
    except psycopg.Error as exc:
        raise DatabaseError(f"{redacted(url)}: cannot connect to PostgreSQL ({exc})") from exc
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        for statement in _SCHEMA:
            conn.execute(statement)  # constant SQL text
        conn.execute(
            "INSERT INTO tunebox_meta (key, value) VALUES ('schema_version', %s) ON CONFLICT DO NOTHING",
            (str(SCHEMA_VERSION),),
        )
        row = conn.execute("SELECT value FROM tunebox_meta WHERE key = 'schema_version'").fetchone()
    try:
        _check_version(url, row[0] if row else None)
    except DatabaseError:
        conn.close()
        raise
    return conn


def _check_version(url: str, stored: object) -> None:
    """Refuse tables another tunebox wrote in a layout this one does not know (nothing is changed)."""
    if not (isinstance(stored, str) and stored.isdigit()):
        raise DatabaseError(
            f"{redacted(url)}: tunebox_meta holds schema_version {stored!r}, not a version number: the "
            "database was damaged or tampered with; restore it, or point --storage at another database"
        )
    if int(stored) > SCHEMA_VERSION:
        raise DatabaseError(
            f"{redacted(url)}: its tunebox tables are schema version {stored}, newer than this tunebox's "
            f"{SCHEMA_VERSION}: upgrade tunebox on this worker (nothing was changed)"
        )


class ClaimResult(Enum):
    MINE = "mine"  # this trial evaluates the configuration (a new claim, or one taken over)
    DONE = "done"  # evaluated already: its record is there
    BUSY = "busy"  # another live trial is evaluating it
    FULL = "full"  # the problem's budget is claimed


@dataclass(frozen=True)
class Claim:
    result: ClaimResult
    record: EvalRecord | None = None  # DONE
    taken_over: bool = False  # MINE: a dead trial's claim


class PgRecords:
    """The evaluation records and claims of one sweep (``sweep``: its name, ``-replay`` for a replay)
    on PostgreSQL, written by ``worker``. Also a ``RecordLog`` (append, append_all, read)."""

    def __init__(self, url: str, sweep: str, worker: str) -> None:
        self.url, self.sweep, self.worker = url, sweep, worker
        self.conn = connect(url)

    def close(self) -> None:
        self.conn.close()

    # -- records ----------------------------------------------------------------------------------
    def _insert(self, record: EvalRecord) -> bool:
        row = self.conn.execute(
            "INSERT INTO tunebox_evals (sweep, family, problem_key, config_key, phase, baseline, record_json, worker)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING id",
            (
                self.sweep,
                record.family,
                canonical_json(record.problem),
                canonical_json(record.config),
                record.phase,
                record.baseline,
                record.to_json(),
                self.worker,
            ),
        ).fetchone()
        return row is not None

    def append(self, record: EvalRecord) -> None:
        self.add(record)

    def add(self, record: EvalRecord) -> bool:
        """Store ``record`` unless its (problem, configuration, phase, baseline) is stored: whether it was."""
        return self._insert(record)

    def append_all(self, records: Sequence[EvalRecord]) -> None:
        """Store ``records`` in one transaction: all of them, or none when the worker dies first."""
        with self.conn.transaction():
            for record in records:
                self._insert(record)

    def read(self, family: str | None = None, problem_key: str | None = None) -> list[EvalRecord]:
        """The sweep's records in the order they were stored (of one problem when given)."""
        sql = "SELECT record_json FROM tunebox_evals WHERE sweep = %s"
        params: tuple[str, ...] = (self.sweep,)
        if family is not None and problem_key is not None:
            sql += " AND family = %s AND problem_key = %s"
            params += (family, problem_key)
        rows = self.conn.execute(sql + " ORDER BY id", params).fetchall()
        try:
            return [EvalRecord.from_json(r[0]) for r in rows]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise DatabaseError(f"{redacted(self.url)}: a record of sweep {self.sweep} is damaged ({exc})") from exc

    def devices(self) -> set[DeviceInfo]:
        """The devices (with their toolchains) the sweep's records were measured on."""
        rows = self.conn.execute(
            "SELECT DISTINCT (record_json::jsonb -> 'device')::text FROM tunebox_evals WHERE sweep = %s"
            " AND record_json::jsonb -> 'device' != 'null'::jsonb",
            (self.sweep,),
        ).fetchall()
        try:
            return {DeviceInfo.from_dict(json.loads(r[0])) for r in rows}
        except (ValueError, KeyError, TypeError) as exc:
            raise DatabaseError(f"{redacted(self.url)}: a record of sweep {self.sweep} is damaged ({exc})") from exc

    def bind_space(self, digest: str) -> str:
        """The digest of the space the sweep was started with: ``digest`` where this is its first worker."""
        key = f"space:{self.sweep}"
        self.conn.execute("INSERT INTO tunebox_meta (key, value) VALUES (%s, %s) ON CONFLICT DO NOTHING", (key, digest))
        row = self.conn.execute("SELECT value FROM tunebox_meta WHERE key = %s", (key,)).fetchone()
        assert row is not None
        return str(row[0])

    def read_since(self, family: str, problem_key: str, after: int) -> list[tuple[int, EvalRecord]]:
        """A problem's records stored after record id ``after``, with their ids, in order."""
        rows = self.conn.execute(
            "SELECT id, record_json FROM tunebox_evals WHERE sweep = %s AND family = %s AND problem_key = %s"
            " AND id > %s ORDER BY id",
            (self.sweep, family, problem_key, after),
        ).fetchall()
        try:
            return [(int(r[0]), EvalRecord.from_json(r[1])) for r in rows]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise DatabaseError(f"{redacted(self.url)}: a record of sweep {self.sweep} is damaged ({exc})") from exc

    def claimed_since(self, family: str, problem_key: str, after: int) -> list[tuple[int, str]]:
        """The configurations of a problem claimed after claim number ``after``: (number, canonical JSON)."""
        rows = self.conn.execute(
            "SELECT seq, config_key FROM tunebox_claims WHERE sweep = %s AND family = %s AND problem_key = %s"
            " AND seq > %s ORDER BY seq",
            (self.sweep, family, problem_key, after),
        ).fetchall()
        return [(int(r[0]), str(r[1])) for r in rows]

    def counts(self, family: str, problem_key: str, study_id: int | None = None) -> tuple[int, int, int]:
        """(configurations claimed, screening records stored, trials waiting in Optuna study
        ``study_id``: queued again after their worker died) of a problem, in one round trip."""
        waiting = (
            "(SELECT count(*) FROM trials WHERE study_id = %s AND state = 'WAITING')"
            if study_id is not None
            else "(SELECT %s::integer)"
        )
        row = self.conn.execute(
            "SELECT (SELECT count(*) FROM tunebox_claims WHERE sweep = %s AND family = %s AND problem_key = %s),"
            " (SELECT count(*) FROM tunebox_evals WHERE sweep = %s AND family = %s AND problem_key = %s"
            f" AND phase = 'screen' AND baseline = ''), {waiting}",
            (*(self.sweep, family, problem_key) * 2, study_id or 0),
        ).fetchone()
        assert row is not None
        return int(row[0]), int(row[1]), int(row[2])

    # -- claims -----------------------------------------------------------------------------------
    def claim(self, family: str, problem_key: str, config_key: str, trial_id: int, budget: int, alive: Any) -> Claim:
        """Claim ``config_key`` of a problem for Optuna trial ``trial_id``. ``alive(trial_id)``: whether
        a claim's trial may still store its record (RUNNING); a claim of a trial that ended without
        one is taken over. A new claim past ``budget`` claims of the problem is refused (FULL)."""
        key = (self.sweep, family, problem_key)
        with self.conn.transaction():
            self.conn.execute(
                "INSERT INTO tunebox_problems (sweep, family, problem_key) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                key,
            )
            self.conn.execute(
                "SELECT 1 FROM tunebox_problems WHERE sweep = %s AND family = %s AND problem_key = %s FOR UPDATE",
                key,
            )
            owner = self.conn.execute(
                "SELECT trial_id FROM tunebox_claims WHERE sweep = %s AND family = %s AND problem_key = %s"
                " AND config_key = %s",
                (*key, config_key),
            ).fetchone()
            if owner is None:
                claims = self.conn.execute(
                    "SELECT count(*) FROM tunebox_claims WHERE sweep = %s AND family = %s AND problem_key = %s", key
                ).fetchone()
                assert claims is not None
                if int(claims[0]) >= budget:
                    return Claim(ClaimResult.FULL)
                self.conn.execute(
                    "INSERT INTO tunebox_claims (sweep, family, problem_key, config_key, trial_id, worker)"
                    " VALUES (%s, %s, %s, %s, %s, %s)",
                    (*key, config_key, trial_id, self.worker),
                )
                return Claim(ClaimResult.MINE)
            done = self.conn.execute(
                "SELECT record_json FROM tunebox_evals WHERE sweep = %s AND family = %s AND problem_key = %s"
                " AND config_key = %s AND phase = 'screen' AND baseline = ''",
                (*key, config_key),
            ).fetchone()
            if done is not None:
                return Claim(ClaimResult.DONE, EvalRecord.from_json(done[0]))
            if owner[0] == trial_id or alive(int(owner[0])):
                return Claim(ClaimResult.BUSY)
            self.conn.execute(
                "UPDATE tunebox_claims SET trial_id = %s, worker = %s, claimed_at = now()"
                " WHERE sweep = %s AND family = %s AND problem_key = %s AND config_key = %s",
                (trial_id, self.worker, *key, config_key),
            )
            return Claim(ClaimResult.MINE, taken_over=True)

    @contextmanager
    def finishing(self, family: str, problem_key: str) -> Iterator[None]:
        """Hold the problem's finishing lock (waits for another worker finishing it). A session
        advisory lock on a connection of its own: PostgreSQL drops it when the worker dies."""
        digest = hashlib.sha256(f"{self.sweep}\0{family}\0{problem_key}".encode()).digest()
        lock = int.from_bytes(digest[:8], "big", signed=True)
        conn = connect(self.url)
        try:
            conn.execute("SELECT pg_advisory_lock(%s)", (lock,))
            yield
        finally:
            conn.close()  # drops the lock


class PgWinnersDB:
    """The winners of sweeps shared through PostgreSQL: the SQLite ``WinnersDB``'s columns, checks and
    compare-and-set (``put`` stores unless a winner with a median <= the record's is there), in the
    table ``tunebox_winners``. Use as a context manager or call ``open``/``close``."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._conn: psycopg.Connection[Any] | None = None

    def open(self) -> PgWinnersDB:
        if self._conn is None:
            self._conn = connect(self.url)
        return self

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> PgWinnersDB:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def conn(self) -> psycopg.Connection[Any]:
        if self._conn is None:
            raise DatabaseError(f"{redacted(self.url)}: the winners database is not open; call open() first")
        return self._conn

    def put(self, key: WinnerKey, record: EvalRecord, library: EvalRecord | None = None) -> bool:
        """As ``WinnersDB.put`` (the same ValueErrors, and ``refuse_mixing``), atomic across workers: a
        stored winner of the other kind is never replaced, whatever runs between the check and the put."""
        row = winner_row(key, record, library)
        stored = self.conn.execute(f"SELECT replayed FROM tunebox_winners WHERE {_WINNER_KEY_WHERE}", astuple(key))
        kind = stored.fetchone()
        if kind is not None:
            refuse_mixing(f"{redacted(self.url)} (tunebox_winners)", bool(kind[0]), record.replayed, option="--storage")
        return self.conn.execute(_WINNER_PUT, row).fetchone() is not None

    def kind_count(self, replayed: bool) -> int:
        """How many winners of that kind (replayed, or measured) the table holds."""
        row = self.conn.execute("SELECT count(*) FROM tunebox_winners WHERE replayed = %s", (int(replayed),)).fetchone()
        return int(row[0]) if row else 0

    def get(self, key: WinnerKey) -> Winner | None:
        rows = self._query(f"{_WINNER_SELECT} WHERE {_WINNER_KEY_WHERE}", astuple(key))
        return rows[0] if rows else None

    def all(self) -> list[Winner]:
        return self._query(f"{_WINNER_SELECT} ORDER BY {', '.join(KEY_COLUMNS)}", ())

    def copy_to(self, local: WinnerStore, keys: Sequence[WinnerKey]) -> int:
        """Put the winners of ``keys`` into ``local`` (a SQLite ``WinnersDB``, which ``tunebox query``
        and ``tunebox.lookup`` read) with the same compare-and-set; the number stored there."""
        stored = 0
        for key in keys:
            w = self.get(key)
            if w is None:
                continue
            library = None
            if w.library is not None and w.library_ms is not None:
                library = EvalRecord(
                    w.record.family, w.record.problem, {}, Status.OK, timing=Timing((w.library_ms,)),
                    device=w.record.device, replayed=w.replayed, baseline=w.library, phase="final",
                )  # fmt: skip
            stored += local.put(w.key, w.record, library=library)
        return stored

    def _query(self, sql: str, params: tuple[Any, ...]) -> list[Winner]:
        rows = self.conn.execute(sql, params).fetchall()  # SQL from constants
        return [validated_winner(redacted(self.url), tuple(r)) for r in rows]
