"""Sweep files (TOML): which family, which problems, which slice of the space, what budget.

Loaded and normalised once, at the edge; everything past this point works on ``SweepSpec``.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import InvalidConfig, InvalidProblem, SpaceError
from .families import get as get_family
from .families.base import Problem
from .families.contract import Family
from .params import TemplateSpaces

STRATEGIES = ("tpe", "random", "exhaustive")


@dataclass(frozen=True)
class SearchSettings:
    strategy: str = "tpe"
    trials: int = 50  # evaluated (valid) variants per problem; exhaustive evaluates every valid one
    seconds: float = 3600.0  # wall-clock budget of the whole sweep
    seed: int = 0
    finalists: int = 3  # top variants re-timed interleaved before a winner is declared


@dataclass(frozen=True)
class NamedProblem:
    name: str
    problem: Problem


@dataclass(frozen=True)
class SweepSpec:
    name: str
    family: Family[Any]
    space: TemplateSpaces
    problems: tuple[NamedProblem, ...]
    search: SearchSettings
    source: Path


def _table(data: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise SpaceError(f"{where}: [{key}] must be a table")
    return value


def _reject_unknown(data: dict[str, Any], known: set[str], where: str) -> None:
    unknown = sorted(set(data) - known)
    if unknown:
        raise SpaceError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(known)}")


def load_sweep(path: Path) -> SweepSpec:
    """Parse and validate a sweep file; every problem raises SpaceError with its file and name."""
    where = str(path)
    try:
        data = tomllib.loads(Path(path).read_text())
    except FileNotFoundError:
        raise SpaceError(f"{where}: no such sweep file") from None
    except OSError as exc:
        raise SpaceError(f"{where}: cannot read the sweep file ({exc.strerror})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SpaceError(f"{where}: not valid TOML ({exc})") from None
    _reject_unknown(data, {"name", "family", "search", "space", "problems"}, where)
    try:
        family = get_family(data.get("family"))
    except SpaceError as exc:
        raise SpaceError(f"{where}: {exc}") from None
    name = data.get("name", Path(path).stem)
    if not isinstance(name, str) or not name.replace("-", "_").isidentifier():
        raise SpaceError(f"{where}: name must be a simple identifier, got {name!r}")
    search_data = _table(data, "search", where)
    _reject_unknown(search_data, set(SearchSettings.__dataclass_fields__), f"{where} [search]")
    search = search_settings(search_data, where)
    try:
        space = family.space.restrict(_table(data, "space", where))
    except InvalidConfig as exc:
        raise SpaceError(f"{where} [space]: {exc}") from None
    problems = data.get("problems")
    if not isinstance(problems, list) or not problems:
        raise SpaceError(f"{where}: needs at least one [[problems]] table")
    named = []
    for i, entry in enumerate(problems):
        if not isinstance(entry, dict):
            raise SpaceError(f"{where}: problems[{i}] must be a table")
        entry = dict(entry)
        label = entry.pop("name", f"problem{i}")
        try:
            named.append(NamedProblem(str(label), family.parse_problem(entry)))
        except InvalidProblem as exc:
            raise SpaceError(f"{where}: problem {label!r}: {exc}") from None
    if len({p.name for p in named}) != len(named):
        raise SpaceError(f"{where}: problem names must be unique")
    return SweepSpec(name, family, space, tuple(named), search, Path(path))


def search_settings(data: dict[str, Any], where: str) -> SearchSettings:
    settings = SearchSettings(**data)
    if settings.strategy not in STRATEGIES:
        raise SpaceError(f"{where}: strategy {settings.strategy!r} is not one of {STRATEGIES}")
    checks = (("trials", int, 1), ("seed", int, 0), ("finalists", int, 1), ("seconds", (int, float), 1))
    for field, kind, low in checks:
        value = getattr(settings, field)
        if type(value) not in (kind if isinstance(kind, tuple) else (kind,)) or not math.isfinite(value) or value < low:
            raise SpaceError(f"{where}: search.{field} must be a number >= {low}, got {value!r}")
    return settings
