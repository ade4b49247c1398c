"""Warm start: a new problem's search begins with the winners of the nearest problems already tuned.

The sweep loop (or any caller) gives the problems tuned before (from the winners database: each
winner's problem and configuration) and the new problem's valid configurations; ``warm_seeds``
answers the winners to try first, nearest problem first by the family's ``distance``, each
re-validated: a configuration the new problem's valid set does not hold (a rule it breaks, a
template or value the space no longer has) is skipped, and one configuration is given once.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import DatabaseError
from ..families.contract import Family
from ..params import Config
from ..records import canonical_json
from ..store.winners import WinnersDB

log = logging.getLogger(__name__)

DEFAULT_LIMIT = 3  # winners tried first: past that, the model knows more than the neighbours do


@dataclass(frozen=True)
class Tuned:
    """A problem tuned before and its winning configuration (both as stored: plain mappings)."""

    problem: Mapping[str, Any]
    config: Mapping[str, Any]


def warm_seeds(
    family: Family[Any],
    problem: Any,
    tuned: Iterable[Tuned],
    valid: Sequence[Config],
    limit: int = DEFAULT_LIMIT,
    incomparable: bool = False,
) -> list[Config]:
    """Up to ``limit`` configurations of ``valid``: the winners of the tuned problems nearest to
    ``problem`` (the family's ``distance``; incomparable problems and the problem itself, at any
    distance None or with the same canonical key, are left out), nearest first, ties in the order
    given. With ``incomparable``, the winners of problems the family calls incomparable (distance
    None: another dtype, direction or mask) follow those of the comparable ones instead of being
    left out. Contract: every returned config is in ``valid``, none twice; an empty list when nothing
    tuned is comparable."""
    by_key = {canonical_json(c.as_dict()): c for c in valid}
    own = problem.key() if hasattr(problem, "key") else None
    ranked: list[tuple[float, int, Config]] = []
    for order, t in enumerate(tuned):
        other = family.parse_problem(t.problem)
        if own is not None and other.key() == own:
            continue
        distance = family.distance(problem, other)
        config = by_key.get(canonical_json(dict(t.config)))
        if distance is None and incomparable:
            distance = math.inf
        if distance is None or config is None or math.isnan(distance):
            continue
        ranked.append((distance, order, config))
    seeds: list[Config] = []
    for _, _, config in sorted(ranked, key=lambda r: (r[0], r[1])):
        if config not in seeds:
            seeds.append(config)
        if len(seeds) == limit:
            break
    return seeds


@dataclass(frozen=True)
class Stored:
    """A family's winners in a local database: under its current sources (``warm_seeds`` picks among them)
    and under any other (winners a change of its code left stale, which a re-recording measures again
    early: ``stored_winner``)."""

    current: list[Tuned]
    older: list[Tuned]


def stored_tuned(db_path: Path, family: Family[Any]) -> Stored:
    """The problems tuned before and their winners in the local database at ``db_path``, read once (none
    without one: an empty or unreadable database gives none, a write says more later)."""
    if not Path(db_path).is_file():
        return Stored([], [])
    family_hash = family.source_hash()
    try:
        with WinnersDB(db_path, read_only=True) as db:
            rows = [w for w in db.all() if w.key.family == family.name]
    except DatabaseError as exc:
        log.info("%s: no warm start (%s)", db_path, exc)
        return Stored([], [])
    tuned = [(w.key.family_hash == family_hash, Tuned(json.loads(w.key.problem_key), w.config)) for w in rows]
    return Stored([t for now, t in tuned if now], [t for now, t in tuned if not now])


def stored_winner(family: Family[Any], problem: Any, tuned: Iterable[Tuned]) -> Mapping[str, Any] | None:
    """The stored winner of ``problem`` itself (the same canonical key) among ``tuned``, None without
    one. A sweep measures it early (``warm_seeds`` leaves it out: it seeds from other problems), so a
    re-run of a sweep never loses its stored best to a search that missed it."""
    own = problem.key()
    return next((t.config for t in tuned if family.parse_problem(t.problem).key() == own), None)
