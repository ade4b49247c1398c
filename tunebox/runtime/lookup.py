"""Run-time lookup: the configuration to launch for a problem on a device, in microseconds when cached.

Order: the exact winner (every ``WinnerKey`` field equal, toolchain versions included), else a winner
of the same problem whose seeded inputs were drawn otherwise (``Family.identity``: a caller's arrays
match the sweep of their shapes; answered as exact), else the nearest tuned problem of the same
family sources, device and dtype whose configuration is valid for *this* problem, else the family
default. A configuration is always re-validated against the family's space and validity rules before
it is returned, so a stale or foreign winner never yields a wrong kernel. Each answer carries the
library call's time measured beside its winner. This module imports neither optuna nor matplotlib.

Warm answers cost microseconds: a ``Lookup`` keeps its database open and its answers (and the
devices the database holds) for its life, and drops them when the file or its write-ahead log
changes (compared by identity, size and mtime on every call). ``shared`` keeps one ``Lookup`` per
database path for the life of the process; ``tunebox.lookup`` and ``tunebox.query`` answer from it.
The database must exist: a missing one is an error naming the path (a typo would otherwise silently
give family defaults). ``default_db`` finds the default database the same way from any working
directory.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import threading
from collections.abc import Hashable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..errors import DatabaseError, InvalidConfig, InvalidProblem, SpaceError
from ..records import DeviceInfo, WinnerKey
from ..store.winner_rows import Winner
from ..store.winners import WinnersDB

if TYPE_CHECKING:
    from ..families.base import Problem
    from ..families.contract import Family

log = logging.getLogger(__name__)

ENV_DB = "TUNEBOX_DB"
_MAX_ANSWERS = 100_000  # raw queries kept per database (beyond, answered without keeping them)
# (device, inode, size, mtime) of the database, and (inode, size, mtime) of its WAL or None
_Stamp = tuple[int, int, int, int, tuple[int, int, int] | None]


def default_db() -> Path:
    """The winners database read when none is named: the ``TUNEBOX_DB`` environment variable when
    set, else ``results/winners.sqlite`` of the checkout tunebox runs from, else of the installed
    package. The same from any working directory."""
    named = os.environ.get(ENV_DB)
    return Path(named).expanduser() if named else shipped_db()


@cache
def shipped_db() -> Path:
    """``results/winners.sqlite`` beside the package (a checkout), else the copy installed with it
    (``tunebox/shipped/``, links to ``results/`` in a checkout: pyproject.toml's package data)."""
    package = Path(__file__).resolve().parents[1]
    checkout, installed = package.parent / "results" / "winners.sqlite", package / "shipped" / "winners.sqlite"
    if checkout.exists() or installed.exists():
        return checkout if checkout.exists() else installed
    return checkout if checkout.parent.is_dir() else installed  # the one a sweep there would write


@dataclass(frozen=True)
class LookupResult:
    """The configuration to use, where it came from, and a one-line explanation for humans."""

    family: str
    problem_key: str
    config: dict[str, Any]
    source: Literal["exact", "raced", "nearest", "default"]  # raced: by tuning on first use
    matched_problem_key: str | None  # the tuned problem whose winner is used; None for "default"
    median_ms: float | None  # measured time of the matched winner (on its own problem)
    replayed: bool
    explanation: str
    library: str | None = None  # the library call timed beside the matched winner, on its problem
    library_ms: float | None = None  # its median (ms); None: not timed (or no winner)

    @property
    def beats_library(self) -> bool:
        """Whether the configuration is known to beat the library call at this very problem: an
        exact answer (or one raced here) whose winner was faster than the library beside it."""
        return (
            self.source in ("exact", "raced")
            and self.median_ms is not None
            and self.library_ms is not None
            and self.median_ms < self.library_ms
        )


class Lookup:
    """Answers lookups from the winners database at ``db_path``, opened read-only on first need.

    The file must exist: a missing one raises ``DatabaseError`` naming it (the constructor does no
    I/O). Answers (and the devices the database holds) are kept in-process, keyed by family,
    problem and device, until the file or its WAL changes; a damaged or tampered database raises
    ``DatabaseError``. Thread-safe.
    """

    def __init__(self, db_path: str | os.PathLike[str]) -> None:
        self.db_path = Path(db_path)
        self._files = (os.fspath(db_path), os.fspath(db_path) + "-wal")
        self._db: WinnersDB | None = None
        self._stamp: _Stamp | None = None
        self._cache: dict[tuple[str, ...], LookupResult] = {}
        self._answers: dict[Hashable, LookupResult] = {}  # (family, frozen problem data, device) -> answer
        self._devices: dict[tuple[str, str | None], DeviceInfo] = {}
        self._lock = threading.RLock()  # around reading the database, dropping what was read, keeping answers
        self._generation = 0  # counts the drops: an answer read before one is not kept after it

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
            self._stamp = None
            self._generation += 1
            self._cache.clear()
            self._answers.clear()
            self._devices.clear()

    def __enter__(self) -> Lookup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def lookup(self, family: Family[Any], problem: Problem, device: DeviceInfo) -> LookupResult:
        """The configuration for ``problem`` on ``device`` (see the module doc for the order)."""
        self._fresh()
        problem_key = problem.key()
        cache_key = (
            family.name,
            problem_key,
            device.name,
            device.compute_capability,
            device.nvrtc_version,
            device.driver_version,
        )
        result = self._cache.get(cache_key)
        if result is None:
            with self._lock:
                result = self._resolve(family, problem, problem_key, device)
                self._cache[cache_key] = result
        return _copy(result)  # a fresh config dict: a caller mutating its answer cannot poison the cache

    def query(
        self,
        family: str,
        problem: dict[str, Any],
        *,
        device: str | None = None,
        device_info: DeviceInfo | None = None,
    ) -> LookupResult:
        """``lookup`` from a family name and problem data (as ``Family.parse_problem`` takes them). Without
        ``device_info`` the device is the database's (see ``device``). A query seen before is answered
        without parsing the problem again. The query is checked before the database; a ``device_info``
        that is no ``DeviceInfo``, or a ``device`` that is no name, raises TypeError."""
        key: Hashable | None
        try:
            key = (family, _frozen(problem), device, device_info)
        except TypeError:  # an unhashable value: answered, not kept
            key = None
        if key is not None and self._answers:
            self._fresh()
            hit = self._answers.get(key)
            if hit is not None:
                return _copy(hit)
        # checked on a miss only (a refused query is never kept): the warm path stays a dict lookup
        if device_info is not None:
            check_device_info("device_info", device_info)
        if device is not None and not isinstance(device, str):
            raise TypeError(f"device is a device's name (text), not {type(device).__name__} {device!r:.60}")
        from ..families import get as get_family
        from ..sweep_spec import parse_problem

        operation = get_family(family)
        parsed = parse_problem(operation, problem)
        generation = self._generation
        result = self.lookup(operation, parsed, device_info or self.device(operation.name, device))
        with self._lock:
            if key is not None and generation == self._generation and len(self._answers) < _MAX_ANSWERS:
                self._answers[key] = result
        return _copy(result)

    def device(self, family: str, name: str | None = None) -> DeviceInfo:
        """The device whose winners answer a query that names none: the one called ``name``, or the only
        device (with its toolchain) holding winners of ``family``; several need a name. Without any, a
        placeholder, so that the answer is the family default."""
        self._fresh()
        info = self._devices.get((family, name))
        if info is not None:
            return info
        with self._lock:
            holding = self._open().devices(family)
            seen = [d for d in holding if name is None or d.name == name]
            if holding and not seen:  # a name no winner of the family has: a typo, not an untuned device
                names = ", ".join(sorted({repr(d.name) for d in holding}))
                raise SpaceError(
                    f"{self.db_path} holds no winner of {family} on {name!r}; its winners are of {names}: "
                    "name one of those, or none"
                )
            if len(seen) > 1:
                which = (
                    "give the whole device (device_info, a tunebox.DeviceInfo)"
                    if name is not None  # one name, several toolchains
                    else "name one (--device, or device= in Python)"
                )
                raise SpaceError(
                    f"{self.db_path} holds winners of {family} from several devices/toolchains "
                    f"({'; '.join(sorted(d.describe() for d in seen))}): {which}"
                )
            info = seen[0] if seen else DeviceInfo(name or "unknown device", "0.0", "none", "none")
            self._devices[(family, name)] = info
        return info

    def winners(self, family: Family[Any], device: DeviceInfo, near: Problem) -> list[Winner]:
        """Every stored winner of ``family``'s current sources on ``device`` (any toolchain, any dtype),
        those of the problems nearest ``near`` first (``Family.distance``; incomparable problems last),
        each problem's faster winners first: the order in which a race takes them."""
        self._fresh()
        with self._lock:
            found = self._open().candidates(family.name, family.source_hash(), device.name, device.compute_capability)
        return [w for _, w in sorted(((_race_order(family, near, w), w) for w in found), key=lambda dw: dw[0])]

    def _fresh(self) -> None:
        """Drop what was read when the database changed since (opened again on need)."""
        if self._current() != self._stamp:
            with self._lock:
                if self._current() != self._stamp:  # not already done by another thread
                    self.close()
                    self._open()

    def _current(self) -> _Stamp:
        try:
            st = os.stat(self._files[0])
        except FileNotFoundError:
            where = "" if self.db_path.is_absolute() else f" ({Path.cwd() / self.db_path})"
            raise DatabaseError(
                f"no winners database at {self.db_path}{where}: check the path, point --db (from Python: "
                f"db=) or the {ENV_DB} environment variable at a winners database, or run a sweep "
                "(tunebox tune <sweep file>) to make one"
            ) from None
        except OSError as exc:
            raise DatabaseError(f"{self.db_path}: cannot read the winners database ({exc})") from exc
        try:
            w = os.stat(self._files[1])
            wal: tuple[int, int, int] | None = (w.st_ino, w.st_size, w.st_mtime_ns)
        except OSError:
            wal = None
        return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, wal

    def _open(self) -> WinnersDB:
        if self._db is None:
            self._db = WinnersDB(self.db_path, read_only=True).open()
            self._stamp = self._current()  # after opening (which may create the WAL), before reading
        return self._db

    def _resolve(self, family: Family[Any], problem: Problem, problem_key: str, device: DeviceInfo) -> LookupResult:
        db = self._open()
        family_hash = family.source_hash()
        key = WinnerKey(
            family.name,
            family_hash,
            problem_key,
            problem.dtype,
            device.name,
            device.compute_capability,
            device.nvrtc_version,
            device.driver_version,
        )
        exact = db.get(key)
        if exact is not None:
            if self._valid_for(family, problem, exact):
                return self._result(family, problem_key, exact, "exact", "exact match")
            log.warning(
                "%s %s: the exact winner's config %s is invalid for this family; ignoring it",
                family.name,
                problem_key,
                exact.config,
            )
        identity = family.identity(problem)
        same: list[tuple[float, str, Winner]] = []  # the same problem, inputs drawn otherwise
        ranked: list[tuple[float, float, str, Winner]] = []
        for cand in db.candidates(
            family.name, family_hash, device.name, device.compute_capability, dtype=problem.dtype
        ):
            other = _stored_problem(family, cand)
            if other is None:
                continue
            same_toolchain = cand.key.nvrtc_version == device.nvrtc_version and (
                cand.key.driver_version == device.driver_version
            )
            if same_toolchain and family.identity(other) == identity:
                same.append((cand.median_ms, cand.key.problem_key, cand))
                continue
            distance = family.distance(problem, other)
            if distance is not None:
                ranked.append((distance, cand.median_ms, cand.key.problem_key, cand))
        for _, _, cand in sorted(same, key=lambda item: item[:2]):
            if self._valid_for(family, problem, cand):
                how = f"tuned problem {cand.key.problem_key}: the same problem, its inputs drawn otherwise"
                return self._result(family, problem_key, cand, "exact", how)
        ranked.sort(key=lambda item: item[:3])
        for distance, _, _, cand in ranked:
            if self._valid_for(family, problem, cand):
                how = f"nearest tuned problem {cand.key.problem_key} (distance {distance:.3g})"
                return self._result(family, problem_key, cand, "nearest", how)
            log.debug(
                "%s %s: nearest candidate %s has a config invalid here; skipping",
                family.name,
                problem_key,
                cand.key.problem_key,
            )
        reason = (
            f"no tuned problem valid for this one among {len(ranked)} comparable"
            if ranked
            else "no comparable tuned problem"
        )
        reason += f" on {device.name}"
        stale = db.stale_count(family.name, family_hash, device.name)
        if stale:
            reason += (
                f"; {stale} of its winners there were tuned on other sources of {family.name}, changed since, and "
                "are never served: re-run its sweeps (`tunebox coverage` lists them)"
            )
        return self._default(family, problem, problem_key, reason)

    @staticmethod
    def _valid_for(family: Family[Any], problem: Problem, winner: Winner) -> bool:
        try:
            config = family.config(winner.config)
        except InvalidConfig:
            return False
        return not family.violations(problem, config)

    @staticmethod
    def _result(
        family: Family[Any], problem_key: str, winner: Winner, source: Literal["exact", "nearest"], how: str
    ) -> LookupResult:
        origin = "replayed recording" if winner.replayed else "measured"
        library = f"; {winner.library} {winner.library_ms:.4g} ms" if winner.library_ms is not None else ""
        explanation = f"{how} tuned on {winner.key.device_name} ({origin}, median {winner.median_ms:.4g} ms{library})"
        return LookupResult(
            family.name,
            problem_key,
            dict(winner.config),
            source,
            winner.key.problem_key,
            winner.median_ms,
            winner.replayed,
            explanation,
            winner.library,
            winner.library_ms,
        )

    @staticmethod
    def _default(family: Family[Any], problem: Problem, problem_key: str, reason: str) -> LookupResult:
        config = family.default_config(problem).as_dict()
        return LookupResult(family.name, problem_key, config, "default", None, None, False, f"family default: {reason}")


def check_device_info(argument: str, device: object) -> None:
    """TypeError unless ``device`` (given as ``argument``) is a ``DeviceInfo``."""
    if not isinstance(device, DeviceInfo):
        raise TypeError(
            f"{argument} must be a tunebox.DeviceInfo (name, compute capability, driver, NVRTC; a Launcher's "
            f"device_info() gives this machine's), not {type(device).__name__} {device!r:.60}"
        )


def _copy(r: LookupResult) -> LookupResult:
    return dataclasses.replace(r, config=dict(r.config))


def _frozen(value: Any) -> Hashable:
    """A hashable form of problem data that tells apart what JSON tells apart (1, 1.0 and true;
    lists and tuples stay distinct too). Raises TypeError for a value that cannot be hashed."""
    kind = type(value)
    if kind is dict:
        return kind, tuple((k, _frozen(value[k])) for k in sorted(value))
    if kind is list or kind is tuple:
        return kind, tuple(_frozen(v) for v in value)
    hash(value)
    return kind, value


_shared: dict[str, Lookup] = {}
_shared_lock = threading.Lock()


def shared(db: str | os.PathLike[str] | None = None) -> Lookup:
    """The process's ``Lookup`` of ``db`` (default ``default_db()``), kept for the life of the process."""
    path = os.fspath(default_db() if db is None else db)
    found = _shared.get(path)
    if found is None:
        with _shared_lock:
            found = _shared.setdefault(path, Lookup(path))
    return found


def _stored_problem(family: Family[Any], winner: Winner) -> Problem | None:
    """The problem ``winner`` was tuned at; None (logged) when its stored key no longer parses."""
    try:
        parsed: Problem = family.parse_problem(json.loads(winner.key.problem_key))
        return parsed
    except (ValueError, InvalidProblem) as exc:
        log.warning("%s: skipping stored problem %s (%s)", family.name, winner.key.problem_key, exc)
        return None


def _race_order(family: Family[Any], problem: Problem, winner: Winner) -> tuple[float, float]:
    """(distance from ``problem`` to the winner's problem, infinite when incomparable or unreadable;
    the winner's median ms): ``Lookup.winners``' order."""
    other = _stored_problem(family, winner)
    distance = None if other is None else family.distance(problem, other)
    return (float("inf") if distance is None else distance, winner.median_ms)
