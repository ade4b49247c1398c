"""Sweep files (TOML): which family, which problems, which slice of the space, what budget.

Loaded and normalised once, at the edge; everything past this point works on ``SweepSpec``.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .errors import InvalidConfig, InvalidProblem, SpaceError
from .families import get as get_family
from .families.base import Problem
from .families.contract import Family, P
from .params import TemplateSpaces

STRATEGIES = ("surrogate", "tpe", "random", "exhaustive")  # the first is the default


@dataclass(frozen=True)
class SearchSettings:
    strategy: str = STRATEGIES[0]
    trials: int = 50  # evaluated (valid) variants per problem; exhaustive evaluates every valid one
    seconds: float = 3600.0  # wall-clock budget of the whole sweep
    seed: int = 0
    finalists: int = 3  # top variants re-timed interleaved before a winner is declared
    # a variant whose verification launch and probe sample are both slower than this multiple of the
    # problem's best median so far keeps them as its measurement, untimed further (0: every variant timed
    # in full)
    cutoff: float = 1.5


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
    unknown = sorted(set(data) - known, key=str)
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
    except RecursionError:
        message = "nested too deeply to read; a sweep file's values are one or two levels deep"
        raise SpaceError(f"{where}: {message}") from None
    _reject_unknown(data, {"name", "family", "search", "space", "problems"}, where)
    if "family" not in data:
        raise SpaceError(f'{where}: no family; add e.g. family = "tile_copy" (`tunebox families` lists them)')
    try:
        family = get_family(data.get("family"))
    except SpaceError as exc:
        raise SpaceError(f"{where}: {exc}") from None
    name = data.get("name", Path(path).stem)
    if not isinstance(name, str) or not name.replace("-", "_").isidentifier():
        raise SpaceError(f"{where}: name must be a simple identifier, got {name!r}")
    search = search_settings(_table(data, "search", where), where)
    space = space_slice(family, _table(data, "space", where), where)
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
            named.append(NamedProblem(str(label), parse_problem(family, entry)))
        except InvalidProblem as exc:
            raise SpaceError(f"{where}: problem {label!r}: {exc}") from None
    if len({p.name for p in named}) != len(named):
        raise SpaceError(f"{where}: problem names must be unique")
    return SweepSpec(name, family, space, tuple(named), search, Path(path))


def search_settings(data: Mapping[str, Any], where: str) -> SearchSettings:
    """A sweep's ``[search]`` table (or its values overridden from the command line) checked: unknown
    keys, strategies and numbers out of range raise SpaceError naming ``where``."""
    _reject_unknown(dict(data), set(SearchSettings.__dataclass_fields__), f"{where} [search]")
    settings = SearchSettings(**data)
    if not isinstance(settings.strategy, str) or settings.strategy not in STRATEGIES:
        raise SpaceError(f"{where}: strategy {_shown(settings.strategy)} is not one of {STRATEGIES}")
    checks = (("trials", int, 1), ("seed", int, 0), ("finalists", int, 1), ("seconds", (int, float), 1))
    for field, kind, low in checks:
        value = getattr(settings, field)
        # an int is finite however large (math.isfinite would overflow converting it to a float)
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if type(value) not in kinds or type(value) is float and not math.isfinite(value) or value < low:
            what = "a whole number" if kind is int else "a finite number"
            raise SpaceError(f"{where}: search.{field} must be {what} >= {low}, got {_shown(value)}")
    cutoff = settings.cutoff
    finite = type(cutoff) is int or type(cutoff) is float and math.isfinite(cutoff)
    if not finite or not (cutoff == 0 or cutoff >= 1):
        raise SpaceError(
            f"{where}: search.cutoff must be 0 (time every variant in full) or a number >= 1 (a multiple of "
            f"the best time so far), got {_shown(cutoff)}"
        )
    return settings


def _shown(value: object) -> str:
    """``value`` for a message: its repr, cut short (an integer past Python's digit limit by its size)."""
    try:
        text = repr(value)
    except ValueError:
        return f"{type(value).__name__} too large to print"
    return text if len(text) <= 100 else text[:97] + "..."


def _space_value(value: object) -> bool:
    """Whether a ``[space]`` list may hold ``value``: a string or a 64-bit number (bool is an int)."""
    return isinstance(value, str | float) or isinstance(value, int) and -(2**63) <= value < 2**63


def space_slice(family: Family[Any], data: Mapping[str, Any], where: str) -> TemplateSpaces:
    """The slice of ``family``'s space that a sweep's ``[space]`` table selects (``TemplateSpaces.restrict``),
    every problem a SpaceError naming ``where``. Lists of anything but strings and 64-bit numbers (an
    array or inline table inside a list, which cannot name a template or a value) are refused here first."""
    for key, value in data.items():
        for inner, items in value.items() if isinstance(value, dict) else ((None, value),):
            if isinstance(items, list) and not all(_space_value(v) for v in items):
                name = key if inner is None else f"{key}.{inner}"
                raise SpaceError(
                    f"{where} [space]: {name} must be a list of values (numbers or strings), got {_shown(items)}"
                )
    try:
        return family.space.restrict(data)
    except InvalidConfig as exc:
        raise SpaceError(f"{where} [space]: {exc}") from None


MAX_PROBLEM_DEPTH = 8  # nesting of a problem's fields (lists of lists); the families' deepest is 2
PADDING_HINT = 'for padding by an infinity or NaN, give padding = "pos_inf", "neg_inf" or "nan" instead of a pad_value'


def check_problem(family: str, data: object) -> dict[str, Any]:
    """What every problem description passes before its family sees it, from a sweep file
    (``load_sweep``), a query (``tunebox.api.query``) or a caller's options (``tunebox.launch``): a
    table with text keys holding, anywhere inside it, no number that is not finite (TOML ``inf`` /
    ``nan``, JSON ``Infinity`` / ``NaN`` / ``1e999``, a float ``inf`` from Python), no integer
    beyond 64 bits (TOML's range; JSON's may be any size) and nothing nested deeper than
    ``MAX_PROBLEM_DEPTH``. Raises InvalidProblem saying what to give instead; returns ``data`` with numpy
    scalars (``np.int64(4096)``, ``np.float32``, ``np.bool_``) as the Python numbers they hold."""
    if not isinstance(data, dict):
        raise InvalidProblem(
            f"{family}: a problem is a table (JSON object) of named fields, got a {type(data).__name__}"
        )
    if not all(isinstance(k, str) for k in data):
        kinds = sorted({type(k).__name__ for k in data if not isinstance(k, str)})
        raise InvalidProblem(f"{family}: a problem's field names are text, not {', '.join(kinds)}")
    stack: list[tuple[str, object, int]] = [(k, v, 1) for k, v in data.items()]
    while stack:
        path, value, depth = stack.pop()
        if depth > MAX_PROBLEM_DEPTH:
            raise InvalidProblem(
                f"{family}: {path} is nested more than {MAX_PROBLEM_DEPTH} levels deep; a problem's fields are "
                "numbers, text and lists of them"
            )
        if isinstance(value, float | np.floating):
            if not math.isfinite(value):
                hint = f" ({PADDING_HINT})" if path == "pad_value" else ""
                raise InvalidProblem(f"{family}: {path} is {float(value)!r}; problems take finite numbers only{hint}")
        elif type(value) is int and not -(2**63) <= value < 2**63:
            shown = value if value.bit_length() <= 128 else f"an integer of {value.bit_length()} bits"
            raise InvalidProblem(
                f"{family}: {path} is {shown}, outside the signed 64-bit range (-2**63 to 2**63 - 1) problems take"
            )
        elif isinstance(value, np.ndarray):
            if value.dtype.kind in "fc" and not np.isfinite(value).all():
                raise InvalidProblem(f"{family}: {path} holds a number that is not finite; give finite numbers")
        elif isinstance(value, list | tuple):
            stack.extend((f"{path}[{i}]", v, depth + 1) for i, v in enumerate(value))
        elif isinstance(value, dict):
            stack.extend((f"{path}.{k}", v, depth + 1) for k, v in value.items())
    plain = plain_numbers(data)
    assert isinstance(plain, dict)
    return plain


def plain_numbers(value: object) -> object:
    """``value`` with every numpy scalar inside it as the Python number it holds (arrays kept)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {k: plain_numbers(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(plain_numbers(v) for v in value)
    return value


def parse_problem(family: Family[P], data: object) -> P:
    """A problem description checked (``check_problem``), then parsed by ``family``."""
    return family.parse_problem(check_problem(family.name, data))
