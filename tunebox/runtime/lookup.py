"""Run-time lookup: the configuration to launch for a problem on a device, in microseconds when cached.

Order: the exact winner (every ``WinnerKey`` field equal, toolchain versions included), else the
nearest tuned problem of the same family sources, device and dtype whose configuration is valid for
*this* problem, else the family default. A configuration is always re-validated against the family's
space and validity rules before it is returned, so a stale or foreign winner never yields a wrong
kernel. This module imports neither optuna nor matplotlib.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..errors import InvalidConfig, InvalidProblem
from ..records import DeviceInfo, WinnerKey
from ..store.winners import Winner, WinnersDB

if TYPE_CHECKING:
    from ..families.base import Problem
    from ..families.contract import Family

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LookupResult:
    """The configuration to use, where it came from, and a one-line explanation for humans."""

    family: str
    problem_key: str
    config: dict[str, Any]
    source: Literal["exact", "nearest", "default"]
    matched_problem_key: str | None  # the tuned problem whose winner is used; None for "default"
    median_ms: float | None  # measured time of the matched winner (on its own problem)
    replayed: bool
    explanation: str


class Lookup:
    """Answers lookups from a winners database opened read-only on first need.

    A missing database file means "no winners" (every answer is the default). Answers are cached
    in-process for the life of this object, keyed by family, problem and device; a damaged or
    tampered database raises ``DatabaseError``.
    """

    def __init__(self, db_path: str | os.PathLike[str]) -> None:
        self.db_path = Path(db_path)
        self._db: WinnersDB | None = None
        self._cache: dict[tuple[str, ...], LookupResult] = {}

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self) -> Lookup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def lookup(self, family: Family[Any], problem: Problem, device: DeviceInfo) -> LookupResult:
        """The configuration for ``problem`` on ``device`` (see the module doc for the order)."""
        problem_key = problem.key()
        cache_key = (family.name, problem_key, device.name, device.compute_capability,
                     device.nvrtc_version, device.driver_version)
        result = self._cache.get(cache_key)
        if result is None:
            result = self._resolve(family, problem, problem_key, device)
            self._cache[cache_key] = result
        r = result  # a fresh config dict: a caller mutating its answer cannot poison the cache
        return LookupResult(r.family, r.problem_key, dict(r.config), r.source, r.matched_problem_key,
                            r.median_ms, r.replayed, r.explanation)

    def _open(self) -> WinnersDB | None:
        if self._db is None and self.db_path.exists():
            self._db = WinnersDB(self.db_path, read_only=True).open()
        return self._db

    def _resolve(self, family: Family[Any], problem: Problem, problem_key: str,
                 device: DeviceInfo) -> LookupResult:
        db = self._open()
        if db is None:
            return self._default(family, problem, problem_key, f"no winners database at {self.db_path}")
        family_hash = family.source_hash()
        key = WinnerKey(family.name, family_hash, problem_key, problem.dtype, device.name,
                        device.compute_capability, device.nvrtc_version, device.driver_version)
        exact = db.get(key)
        if exact is not None:
            if self._valid_for(family, problem, exact):
                return self._result(family, problem_key, exact, "exact", "exact match")
            log.warning("%s %s: the exact winner's config %s is invalid for this family; ignoring it",
                        family.name, problem_key, exact.config)
        ranked: list[tuple[float, float, str, Winner]] = []
        for cand in db.candidates(family.name, family_hash, device.name, device.compute_capability,
                                  dtype=problem.dtype):
            try:
                other = family.parse_problem(json.loads(cand.key.problem_key))
            except (ValueError, InvalidProblem) as exc:
                log.warning("%s: skipping stored problem %s (%s)", family.name, cand.key.problem_key, exc)
                continue
            distance = family.distance(problem, other)
            if distance is not None:
                ranked.append((distance, cand.median_ms, cand.key.problem_key, cand))
        ranked.sort(key=lambda item: item[:3])
        for distance, _, _, cand in ranked:
            if self._valid_for(family, problem, cand):
                how = f"nearest tuned problem {cand.key.problem_key} (distance {distance:.3g})"
                return self._result(family, problem_key, cand, "nearest", how)
            log.debug("%s %s: nearest candidate %s has a config invalid here; skipping",
                      family.name, problem_key, cand.key.problem_key)
        reason = (f"no tuned problem valid for this one among {len(ranked)} comparable"
                  if ranked else "no comparable tuned problem")
        return self._default(family, problem, problem_key, f"{reason} on {device.name}")

    @staticmethod
    def _valid_for(family: Family[Any], problem: Problem, winner: Winner) -> bool:
        try:
            config = family.config(winner.config)
        except InvalidConfig:
            return False
        return not family.violations(problem, config)

    @staticmethod
    def _result(family: Family[Any], problem_key: str, winner: Winner,
                source: Literal["exact", "nearest"], how: str) -> LookupResult:
        origin = "replayed recording" if winner.replayed else "measured"
        explanation = (f"{how} tuned on {winner.key.device_name} ({origin}, "
                       f"median {winner.median_ms:.4g} ms)")
        return LookupResult(family.name, problem_key, dict(winner.config), source,
                            winner.key.problem_key, winner.median_ms, winner.replayed, explanation)

    @staticmethod
    def _default(family: Family[Any], problem: Problem, problem_key: str, reason: str) -> LookupResult:
        config = family.default_config(problem).as_dict()
        return LookupResult(family.name, problem_key, config, "default", None, None, False,
                            f"family default: {reason}")
