"""Tuned on first use (issue 16): which configurations race at a new problem, and where the result is
kept.

Policies (``Launcher(tune=...)``): "off" (the lookup's answer as it is), "first_call" (the first launch
of an untuned problem races before it runs), "background" (the first launch is served as with "off"
and the race runs beside it on copies of the inputs; later launches use its result).

The portfolio is learned from the recorded sweeps (``scripts/portfolio.py`` writes ``portfolios.json``
beside the winners database: per family, the fewest configurations that bring every tuned problem
within a few percent of its best). A race takes the lookup's answer, then the portfolio, then every
stored winner of the family, those of the tuned problems nearest the new one first (``Family.distance``),
each only if valid at the problem, up to ``MAX_CANDIDATES``.

Raced results are kept in their own winners database (``raced_db()``: ``TUNEBOX_RACED_DB``, else
``~/.cache/tunebox/raced.sqlite``), never in the shipped one: the fastest verified kernel with its
samples (record phase "race") and the library call's time beside it. Writes are the winners
database's own (safe across threads and processes; a slower result never replaces a faster one).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from ..errors import InvalidConfig
from ..families.base import Problem
from ..families.contract import Family
from ..params import Config
from ..records import DeviceInfo, EvalRecord, Status, Timing, WinnerKey
from ..store.winners import WinnersDB
from .lookup import LookupResult
from .race import RaceResult

log = logging.getLogger(__name__)

Policy = Literal["off", "first_call", "background"]
POLICIES = ("off", "first_call", "background")
MAX_CANDIDATES = 8
ENV_RACED_DB = "TUNEBOX_RACED_DB"
PORTFOLIOS = "portfolios.json"


def raced_db() -> Path:
    """Where raced winners are kept: ``TUNEBOX_RACED_DB``, else ``~/.cache/tunebox/raced.sqlite``."""
    named = os.environ.get(ENV_RACED_DB)
    return Path(named).expanduser() if named else Path.home() / ".cache" / "tunebox" / "raced.sqlite"


def portfolio(winners_db: Path, family: str) -> list[dict[str, Any]]:
    """The family's learned portfolio (``portfolios.json`` beside ``winners_db``), empty without one."""
    path = winners_db.parent / PORTFOLIOS
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        log.warning("%s: unreadable portfolio (%s); racing without it", path, exc)
        return []
    found = data.get("families", {}).get(family, {}).get("configs", []) if isinstance(data, dict) else []
    return [c for c in found if isinstance(c, dict)]


def candidates(
    family: Family[Any], problem: Problem, answer: LookupResult, others: Iterable[dict[str, Any]]
) -> list[Config]:
    """The configurations to race, in order (see the module doc), each valid at ``problem``."""
    chosen: list[Config] = []
    for values in (answer.config, *others):
        try:
            config = family.config(values)
        except InvalidConfig:
            continue
        if config not in chosen and not family.violations(problem, config):
            chosen.append(config)
        if len(chosen) == MAX_CANDIDATES:
            break
    return chosen


def answer_of(answer: LookupResult, result: RaceResult, problem_key: str) -> LookupResult:
    """The lookup answer a race gives: its fastest kernel (source "raced") with the library time
    beside it, or the old answer with the library time when no kernel passed."""
    library = result.library
    library_ms = library.median_ms if library is not None else None
    library_name = library.label if library is not None and library_ms is not None else None
    kernel = result.kernel
    if kernel is None or kernel.config is None:
        return LookupResult(
            answer.family,
            problem_key,
            answer.config,
            answer.source,
            answer.matched_problem_key,
            answer.median_ms,
            answer.replayed,
            f"{answer.explanation}; raced: no kernel passed ({_summary(result)})",
            library_name,
            library_ms,
        )
    how = f"raced here in {result.seconds:.2f} s: {_summary(result)}"
    return LookupResult(
        answer.family, problem_key, kernel.config, "raced", problem_key, kernel.median_ms, False, how, library_name,
        library_ms,
    )  # fmt: skip


def keep(path: Path, family: Family[Any], problem: Problem, device: DeviceInfo, result: RaceResult, work: Any) -> bool:
    """Store a race's fastest kernel (with the library time) in the raced database at ``path``."""
    kernel = result.kernel
    if kernel is None or kernel.config is None:
        return False
    record = EvalRecord(
        family.name,
        problem.to_dict(),
        kernel.config,
        Status.OK,
        timing=Timing(kernel.samples_ms),
        bytes_moved=work.bytes_moved,
        flops=work.flops,
        device=device,
        phase="race",
    )
    library = None
    if result.library is not None and result.library.samples_ms:
        verdict = result.library.verdict
        library = EvalRecord(
            family.name,
            problem.to_dict(),
            {},
            Status.OK if verdict == "ok" else Status.WRONG_RESULT,
            message="" if verdict == "ok" else verdict,
            timing=Timing(result.library.samples_ms),
            device=device,
            baseline=result.library.label,
            phase="race",
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    with WinnersDB(path) as db:
        return db.put(WinnerKey.of(record, family.source_hash(), problem.key(), problem.dtype), record, library=library)


def _summary(result: RaceResult) -> str:
    parts = []
    for e in result.entrants:
        ms = f"{e.median_ms:.4g} ms" if e.median_ms is not None else e.verdict
        parts.append(f"{e.label} {ms}")
    return "; ".join(parts)
