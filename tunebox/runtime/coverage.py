"""Which problems a winners database covers (issue 16 item 4): per family and device, every tuned
problem with its winner's time, the library call's beside it, and whether the winner is current
(stored under the family's present source hash; a stale one is never served as exact).

``tunebox coverage`` prints it; serving answers a caller's problem exactly only at these problems
(or at one raced before, kept in the raced database), else from the nearest one or a race.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import DatabaseError
from ..families import get as get_family
from ..families import names
from ..store.winner_rows import Winner
from ..store.winners import WinnersDB


@dataclass(frozen=True)
class Covered:
    """One tuned problem of a winners database."""

    family: str
    device: str
    problem: dict[str, object]
    median_ms: float
    library: str | None
    library_ms: float | None
    raced: bool  # tuned on first use (a race), else by a sweep
    replayed: bool
    current: bool  # stored under the family's present source hash

    @property
    def ratio(self) -> float | None:
        """The library call's time over the winner's (above 1: the tuned kernel is faster)."""
        return self.library_ms / self.median_ms if self.library_ms is not None else None


def coverage(db: Path, family: str | None = None) -> list[Covered]:
    """The problems ``db`` covers, of ``family`` or of every family, in family, device, problem order.
    Raises DatabaseError for a missing, damaged or foreign database, SpaceError for an unknown family."""
    if family is not None:
        get_family(family)  # an unknown name says which families there are
    if not db.is_file():
        raise DatabaseError(f"no winners database at {db}: check the path, or run a sweep to make one")
    with WinnersDB(db, read_only=True) as opened:
        winners = opened.all()
    return sorted(_covered(winners, family), key=lambda c: (c.family, c.device, json.dumps(c.problem, sort_keys=True)))


def _covered(winners: Iterable[Winner], family: str | None) -> Iterable[Covered]:
    hashes = {name: get_family(name).source_hash() for name in names() if family in (None, name)}
    for w in winners:
        if w.key.family not in hashes:
            continue
        yield Covered(
            w.key.family,
            w.key.device_name,
            json.loads(w.key.problem_key),
            w.median_ms,
            w.library,
            w.library_ms,
            w.record.phase == "race",
            w.replayed,
            w.key.family_hash == hashes[w.key.family],
        )
