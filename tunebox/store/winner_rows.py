"""What every winners store shares: the columns of a winner row, the row ``put`` stores for a record
(``winner_row``), its validation when read back (``validated_winner``: a tampered or damaged row
raises ``DatabaseError``), the validated ``Winner`` and the ``WinnerStore`` protocol that the SQLite
``WinnersDB`` and PostgreSQL's ``PgWinnersDB`` implement."""

from __future__ import annotations

import json
import math
from dataclasses import astuple, dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from ..errors import DatabaseError
from ..records import EvalRecord, Status, WinnerKey, check_samples

KEY_COLUMNS = (
    "family",
    "family_hash",
    "problem_key",
    "dtype",
    "device_name",
    "compute_capability",
    "nvrtc_version",
    "driver_version",
)
VALUE_COLUMNS = (
    "config_json",
    "median_ms",
    "noise",
    "bandwidth_gbps",
    "replayed",
    "record_json",
    "created_at",
    "library",
    "library_ms",
)


@dataclass(frozen=True)
class Winner:
    """A validated row of the winners database."""

    key: WinnerKey
    config: dict[str, Any]
    median_ms: float
    noise: float
    bandwidth_gbps: float | None
    replayed: bool
    created_at: str  # ISO 8601, UTC
    record: EvalRecord
    library: str | None = None  # the library call timed beside the winner on the same inputs (its name)
    library_ms: float | None = None  # its median, ms; None: not timed, or it failed verification

    @property
    def beats_library(self) -> bool:
        """Whether the winner is known to be faster than the library call at its problem."""
        return self.library_ms is not None and self.median_ms < self.library_ms


class WinnerStore(Protocol):
    """What a sweep stores its winners through: the SQLite ``WinnersDB`` or, for a sweep shared
    through PostgreSQL, ``tunebox.store.postgres.PgWinnersDB``. ``put`` is a compare-and-set: the
    record is stored unless a winner with a median <= its median is there."""

    def __enter__(self) -> WinnerStore: ...

    def __exit__(self, *exc: object) -> None: ...

    def put(self, key: WinnerKey, record: EvalRecord, library: EvalRecord | None = None) -> bool: ...

    def get(self, key: WinnerKey) -> Winner | None: ...

    def all(self) -> list[Winner]: ...

    def kind_count(self, replayed: bool) -> int: ...


def refuse_mixing(where: str, stored_replayed: bool, replayed: bool, count: int = 1, option: str = "--db") -> None:
    """Raise ``DatabaseError`` when winners of a replayed sweep would be stored beside measured ones, or
    the reverse: a replayed winner must never answer as a measurement (nor replace one). ``option``: the
    one that names another database."""
    if stored_replayed == replayed:
        return
    stored, new = ("replayed", "measured") if stored_replayed else ("measured", "replayed")
    raise DatabaseError(
        f"{where} holds {count} {stored} winner(s); {new} winners are never stored beside them (replayed ones "
        f"go to results/winners-replay.sqlite by default). Name another database ({option}); nothing was stored."
    )


def refuse_other_kind(store: WinnerStore, where: str, replayed: bool, option: str = "--db") -> None:
    """Before a sweep of that kind (``replayed`` or measured) stores into ``store``: ``refuse_mixing`` when
    it holds winners of the other kind."""
    others = store.kind_count(not replayed)
    if others:
        refuse_mixing(where, not replayed, replayed, others, option)


def winner_row(key: WinnerKey, record: EvalRecord, library: EvalRecord | None = None) -> tuple[Any, ...]:
    """The row ``put`` stores for ``record`` under ``key`` (key columns, then value columns); raises
    ValueError as ``WinnersDB.put`` documents. Shared by every winners store."""
    if library is not None and not library.baseline:
        raise ValueError("the library time must come from a baseline's record")
    timed = library is not None and library.median_ms
    library_row = (library.baseline, library.median_ms) if library is not None and timed else (None, None)
    if record.status is not Status.OK:
        raise ValueError(f"only OK records can become winners, not {record.status.value}")
    if record.timing is None:
        raise ValueError("a winner needs a timing")
    check_samples(record.timing.samples_ms)  # so the median is finite and positive
    median, noise = record.timing.median_ms, record.timing.noise
    if not (math.isfinite(noise) and noise >= 0):
        raise ValueError(f"a winner needs a finite noise, got {noise}")
    if record.family != key.family:
        raise ValueError(f"record of family {record.family!r} stored under {key.family!r}")
    if not _json_object(key.problem_key):
        raise ValueError(f"the problem key {key.problem_key[:80]!r} is not a JSON object")
    d = record.device
    if d is not None and (d.name, d.compute_capability, d.nvrtc_version, d.driver_version) != (
        key.device_name,
        key.compute_capability,
        key.nvrtc_version,
        key.driver_version,
    ):
        raise ValueError(f"record measured on {d} stored under another device key")
    bandwidth = record.bandwidth_gbps
    row = (
        *astuple(key),
        json.dumps(record.config, sort_keys=True, allow_nan=False),
        median,
        noise,
        bandwidth if bandwidth and math.isfinite(bandwidth) else None,
        int(record.replayed),
        record.to_json(),
        datetime.now(UTC).isoformat(timespec="seconds"),
        *library_row,
    )
    return row


def validated_winner(where: str, row: tuple[Any, ...]) -> Winner:
    """Validate one row; any inconsistency means tampering or damage."""
    key = WinnerKey(*row[: len(KEY_COLUMNS)])
    config_json, median, noise, bandwidth, replayed, record_json, created_at, library, library_ms = row[
        len(KEY_COLUMNS) :
    ]
    try:
        if not all(isinstance(v, str) for v in (*astuple(key), config_json, record_json, created_at)):
            raise ValueError("a text column holds a non-text value")
        config = json.loads(config_json)
        if not isinstance(config, dict):
            raise ValueError("config_json is not a JSON object")
        if not _json_object(key.problem_key):
            raise ValueError("problem_key is not a JSON object")
        for name, value in (("median_ms", median), ("noise", noise)):
            if not isinstance(value, float | int) or not math.isfinite(value) or value < 0:
                raise ValueError(f"{name}={value!r} is not a finite non-negative number")
        if median <= 0:
            raise ValueError(f"median_ms={median!r} is not positive")
        if bandwidth is not None and (not isinstance(bandwidth, float | int) or not math.isfinite(bandwidth)):
            raise ValueError(f"bandwidth_gbps={bandwidth!r} is not finite")
        if (
            (library is None) != (library_ms is None)
            or library is not None
            and not (isinstance(library, str) and library)
        ):
            raise ValueError(f"library={library!r}, library_ms={library_ms!r} is not a name with its time")
        if library_ms is not None and (
            not isinstance(library_ms, float | int) or not math.isfinite(library_ms) or library_ms <= 0
        ):
            raise ValueError(f"library_ms={library_ms!r} is not a finite positive number")
        if replayed not in (0, 1):
            raise ValueError(f"replayed={replayed!r} is not 0 or 1")
        record = EvalRecord.from_json(record_json)
        if record.status is not Status.OK or record.timing is None:
            raise ValueError(f"the stored record has status {record.status.value} or no timing")
        if record.family != key.family or record.config != config:
            raise ValueError("the stored record disagrees with the row's family or config")
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise DatabaseError(
            f"{where}: bad winner row for {key.family} {key.problem_key}: {exc}; the database "
            "was tampered with or damaged. Restore it or move it aside."
        ) from exc
    return Winner(
        key,
        config,
        float(median),
        float(noise),
        None if bandwidth is None else float(bandwidth),
        bool(replayed),
        created_at,
        record,
        library,
        None if library_ms is None else float(library_ms),
    )


def _json_object(text: str) -> bool:
    """Whether ``text`` is a JSON object (what every problem key is)."""
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False
