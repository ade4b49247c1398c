"""Property-based tests (Hypothesis) of everything a sweep file, a query or a caller's options hand
to a family: problem descriptions of every family (each field of ``operation.fields`` given values
of every JSON / TOML type, fields dropped, unknown keys added), ``[space]`` tables and ``[search]``
tables either parse or raise a TuneboxError subclass (InvalidProblem, SpaceError, InvalidConfig);
no other exception, and a parsed problem has its canonical key (what every path computes next).

Deterministic (derandomized) and modest by default; ``TUNEBOX_HYPOTHESIS=explore`` searches anew with
many more examples (``TUNEBOX_HYPOTHESIS_EXAMPLES`` sets how many)."""

from __future__ import annotations

import datetime
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tunebox.errors import InvalidConfig, InvalidProblem, SpaceError, TuneboxError
from tunebox.families import get, names
from tunebox.families.contract import Family
from tunebox.params import TEMPLATE
from tunebox.sweep_spec import STRATEGIES, SearchSettings, parse_problem, search_settings, space_slice

REPO = Path(__file__).resolve().parents[2]
EXPLORE = os.environ.get("TUNEBOX_HYPOTHESIS") == "explore"
EXAMPLES = int(os.environ.get("TUNEBOX_HYPOTHESIS_EXAMPLES", 3000 if EXPLORE else 100))

PROPERTY = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not EXPLORE,  # CI sees the same examples every run
    database=None,  # no .hypothesis/ folder in the checkout
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# A valid problem of each family, mutated field by field (a family added later starts from {}).
BASES: dict[str, dict[str, Any]] = {
    "faults": {"n": 1024},
    "gather": {
        "dtype": "float32",
        "rows": 64,
        "cols": 32,
        "count": 48,
        "mask": True,
        "mask_rate": 0.25,
        "sentinel_rate": 0.05,
        "padding": "value",
        "pad_value": 1.5,
    },
    "gather_elements": {
        "dtype": "bfloat16",
        "rows": 64,
        "cols": 32,
        "tile": [16, 8],
        "mask": True,
        "mask_rate": 0.25,
        "padding": "value",
        "pad_value": -2.0,
    },
    "gemm": {"M": 65, "N": 33, "K": 17, "lda": 24, "out_dtype": "float32", "alpha": 0.5, "relu": True},
    "ragged3d": {
        "dtype": "float16",
        "batch": 4,
        "max_len": 16,
        "heads": 2,
        "depth": 8,
        "direction": "pack",
        "lengths": [3, 0, 16, 7],
    },
    "quant": {
        "dtype": "bfloat16",
        "rows": 37,
        "cols": 101,
        "format": "nvfp4",
        "direction": "quantize",
        "scale_layout": "swizzled_128x4",
    },
    "quant_gemm": {"M": 3, "N": 33, "K": 100, "format": "nvfp4", "inputs": "edges"},
    "scatter": {"dtype": "float16", "rows": 64, "cols": 16, "count": 32, "offset": 3, "mask": True, "mask_rate": 0.5},
    "tile_copy": {
        "dtype": "float32",
        "src": [65, 73],
        "dst": [64, 32],
        "origin": [-3, 5],
        "transpose": True,
        "padding": "value",
        "pad_value": 2.5,
    },
    "windows": {
        "dtype": "float16",
        "rows": 31,
        "cols": 29,
        "window": [5, 7],
        "step": [3, 4],
        "op": "unfold",
        "padding": "value",
        "pad_value": 1.0,
    },
}

# strings the families know, so that mutations reach past the first type check
WORDS = (
    "float32",
    "float16",
    "bfloat16",
    "float64",
    "int32",
    "int64",
    "uint8",
    "zero",
    "neg_zero",
    "nan",
    "pos_inf",
    "neg_inf",
    "value",
    "pack",
    "unpack",
    "uniform",
    "unfold",
    "sum",
    "max",
    "min",
    "true",
    "false",
    "",
)
SMALL_EDGES = (0, 1, -1, 2, 3, 8, 2**15, 2**16, 2**31 - 1, 2**31, 2**32, 2**39, 2**40, 2**62)
EDGES = (*SMALL_EDGES, 2**63 - 1, -(2**63), 2**64, 10**30)

ints = st.integers(-4, 300) | st.sampled_from(EDGES) | st.integers()
FLOAT_EDGES = (0.0, -0.0, 0.5, 1.0, 1e999, -1e999, 65504.0, 65520.0, 3.4e38, 3.5e38, -1e39, 1.7e308, 5e-324, 1e-45)
floats = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(FLOAT_EDGES)  # float16 / float32 limits
scalars = st.one_of(
    st.none(),  # JSON null
    st.booleans(),
    ints,
    floats,
    st.text(max_size=6),
    st.sampled_from(WORDS),
    st.datetimes(),  # TOML date-times, dates and times
    st.dates(),
    st.times(),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
# what a field most often holds: a number, a pair or a short list of numbers
shaped = ints | floats | st.lists(ints, min_size=1, max_size=4) | st.lists(ints | floats, min_size=2, max_size=2)


@st.composite
def problems(draw: st.DrawFn, family: Family[Any]) -> dict[str, Any]:
    """A family's base problem with a few fields (most often one, so that the others stay valid and
    the changed one is reached) dropped or given another value, sometimes with unknown keys."""
    data = dict(BASES.get(family.name, {}))
    fields = list(family.operation.fields)
    for field in draw(st.lists(st.sampled_from(fields), max_size=3, unique=True)):
        action = draw(st.sampled_from(("drop", "shaped", "shaped", "word", "any")))
        if action == "drop":
            data.pop(field, None)
        else:
            data[field] = draw({"shaped": shaped, "word": st.sampled_from(WORDS), "any": values}[action])
    extra = draw(st.dictionaries(st.text(max_size=6), values, max_size=2))
    return {**extra, **data} if draw(st.booleans()) else {**data, **extra}


def parse_or_refuse(family: Family[Any], data: Any) -> None:
    """Parse ``data`` as ``load_sweep``, ``tunebox.api.query`` and ``tunebox.launch`` do (checked, then
    the family's parse), then compute its key; only a TuneboxError may stop it."""
    try:
        problem = parse_problem(family, data)
    except TuneboxError:
        return
    key = problem.key()  # canonical JSON: raises for what JSON cannot hold (a non-finite number)
    again = family.parse_problem(json.loads(key))  # a stored problem is read back (the nearest-problem lookup)
    assert again.key() == key


@pytest.mark.parametrize("name", names())
def test_every_family_has_a_base_problem(name: str) -> None:
    """The bases are valid problems (so that mutations explore past the first refusal)."""
    assert name in BASES, f"add a valid {name} problem to BASES"
    parse_problem(get(name), dict(BASES[name]))


@pytest.mark.parametrize("name", names())
def test_problems_parse_or_raise_a_tunebox_error(name: str) -> None:
    family = get(name)

    @PROPERTY
    @given(problems(family))
    def check(data: dict[str, Any]) -> None:
        parse_or_refuse(family, data)

    check()


@pytest.mark.parametrize("name", names())
def test_any_problem_value_is_refused_with_a_tunebox_error(name: str) -> None:
    """Not even a table: any JSON / TOML value as the whole problem."""
    family = get(name)

    @PROPERTY
    @given(values)
    def check(data: Any) -> None:
        if isinstance(data, dict):
            parse_or_refuse(family, data)
        else:
            with pytest.raises(InvalidProblem, match="a problem is a table"):
                parse_problem(family, data)

    check()


def _subsets(family: Family[Any]) -> st.SearchStrategy[Any]:
    """Restriction lists: of the declared choices (valid), mixed with any values; or any value."""
    choices = sorted(
        {(type(c).__name__, c) for _, space in family.space.templates for p in space.params for c in p.choices}
    )
    known = st.sampled_from([c for _, c in choices])
    return st.lists(known | scalars | values, max_size=4) | values


@st.composite
def space_tables(draw: st.DrawFn, family: Family[Any]) -> dict[str, Any]:
    """A ``[space]`` table: template lists, parameter lists, ``[space.<template>]`` sub-tables, and
    names that are none of those."""
    templates = list(family.space.names())
    params = sorted({p.name for _, space in family.space.templates for p in space.params})
    keys = st.sampled_from([TEMPLATE, *templates, *params]) | st.text(max_size=5)
    table: dict[str, Any] = {}
    for key in draw(st.lists(keys, max_size=5)):
        kind = draw(st.sampled_from(("list", "list", "table", "any")))
        if key == TEMPLATE and kind == "list":
            table[key] = draw(st.lists(st.sampled_from(templates) | scalars | values, max_size=3))
        elif kind == "table":
            table[key] = draw(
                st.dictionaries(st.sampled_from(params) | st.text(max_size=4), _subsets(family), max_size=3)
            )
        elif kind == "list":
            table[key] = draw(_subsets(family))
        else:
            table[key] = draw(values)
    return table


@pytest.mark.parametrize("name", names())
def test_space_tables_restrict_or_raise_a_tunebox_error(name: str) -> None:
    family = get(name)

    @PROPERTY
    @given(space_tables(family))
    def check(table: dict[str, Any]) -> None:
        try:
            space = space_slice(family, table, "sweep.toml")
        except SpaceError as exc:
            assert "sweep.toml [space]" in str(exc)
            return
        assert space.size() >= 1 and set(space.names()) <= set(family.space.names())

    check()


search_tables = st.dictionaries(
    st.sampled_from(sorted(SearchSettings.__dataclass_fields__)) | st.text(max_size=6),
    st.sampled_from(STRATEGIES) | scalars | values,
    max_size=6,
)


@PROPERTY
@given(search_tables)
def test_search_tables_parse_or_raise_a_space_error(table: dict[str, Any]) -> None:
    try:
        settings_ = search_settings(table, "sweep.toml")
    except SpaceError as exc:
        assert "sweep.toml" in str(exc)
        return
    assert settings_.strategy in STRATEGIES and settings_.trials >= 1 and settings_.seconds >= 1


# -- cases found by the properties ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "table",
    [{TEMPLATE: [{}]}, {TEMPLATE: [["vector"]]}, {"BM": [[8]]}, {"vector": {"BM": [{"a": 1}]}}],
    ids=["template-table", "template-list", "param-list", "subtable-param-table"],
)
def test_unhashable_space_values_are_a_space_error(table: dict[str, Any]) -> None:
    """TemplateSpaces.restrict itself raises TypeError for ``template = [{}]`` (dict.fromkeys of an
    unhashable item, tunebox/params.py): space_slice refuses such lists before it."""
    with pytest.raises(SpaceError, match=r"sweep.toml \[space\].*list of values"):
        space_slice(get("tile_copy"), table, "sweep.toml")


@pytest.mark.parametrize(("field", "value"), [("seconds", 10**400), ("trials", 10**400)])
def test_huge_search_integers_are_not_an_overflow(field: str, value: int) -> None:
    settings_ = search_settings({field: value}, "sweep.toml")  # math.isfinite(10**400) would overflow
    assert getattr(settings_, field) == value


HUGE = 10**5000  # past Python's limit of digits for printing an integer: no message may print it


def test_integers_too_large_to_print_are_refused_with_a_tunebox_error() -> None:
    for family in map(get, names()):
        for field in family.operation.fields:
            with pytest.raises(InvalidProblem, match=f"{field} is an integer of 16610 bits"):
                parse_problem(family, {**BASES.get(family.name, {}), field: HUGE})
        with pytest.raises(SpaceError, match="too large to print"):
            space_slice(family, {family.space.templates[0][1].params[0].name: [HUGE]}, "sweep.toml")
    with pytest.raises(SpaceError, match="search.seed must be a whole number >= 0, got int too large to print"):
        search_settings({"seed": -HUGE}, "sweep.toml")


@pytest.mark.parametrize(
    "value", [0.5, -1, math.nan, math.inf, "1.5", True, -HUGE], ids=["half", "-1", "nan", "inf", "str", "bool", "-huge"]
)
def test_a_cutoff_below_one_or_not_a_number_is_refused(value: object) -> None:
    with pytest.raises(SpaceError, match=r"search.cutoff must be 0 \(time every variant in full\) or a number >= 1"):
        search_settings({"cutoff": value}, "sweep.toml")


@pytest.mark.parametrize("value", [0, 1, 1.5, HUGE], ids=["0", "1", "1.5", "huge"])
def test_cutoffs_of_zero_or_from_one_are_taken(value: float) -> None:
    assert search_settings({"cutoff": value}, "sweep.toml").cutoff == value


@pytest.mark.parametrize("key", ["budget", "1"])
def test_unknown_search_keys_are_a_space_error(key: str) -> None:
    with pytest.raises(SpaceError, match=r"\[search\].*unknown key"):
        search_settings({key: 3}, "sweep.toml")


RAGGED_UNIFORM_HUGE = {
    "dtype": "float32",
    "batch": 2**31,
    "max_len": 1,
    "heads": 1,
    "depth": 1,
    "direction": "pack",
    "lengths": "uniform",
}


def test_ragged3d_uniform_lengths_of_a_huge_batch_are_refused() -> None:
    """Found by the property above (it drew the lengths of 2^31 sequences: 16 GiB). Run in a child with
    its address space limited to 2 GiB, so that a regression fails the same way on any machine."""
    script = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
        "from tunebox.errors import TuneboxError\n"
        "from tunebox.families import get\n"
        "from tunebox.sweep_spec import parse_problem\n"
        "try:\n"
        f"    parse_problem(get('ragged3d'), {RAGGED_UNIFORM_HUGE!r})\n"
        "except TuneboxError as exc:\n"
        "    print('refused:', exc)\n"
        "    sys.exit(0)\n"
        "sys.exit(3)  # parsed: a problem of 2^31 sequences, its lengths drawn\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]


def test_problem_datetimes_are_refused_not_crashed() -> None:
    """TOML date-times are values a sweep file may hold: refused like any other wrong type."""
    data = {**BASES["tile_copy"], "pad_value": datetime.datetime(2024, 1, 1)}
    with pytest.raises(InvalidProblem):
        parse_problem(get("tile_copy"), data)


def test_invalid_config_is_the_space_errors_source() -> None:
    """space_slice turns the space's InvalidConfig into a SpaceError naming the file."""
    with pytest.raises(InvalidConfig):
        get("tile_copy").space.restrict({"BM": [3]})
    with pytest.raises(SpaceError, match=r"sweep.toml \[space\].*BM"):
        space_slice(get("tile_copy"), {"BM": [3]}, "sweep.toml")


def test_gemm_alpha_beyond_float32_is_refused() -> None:
    """Found by the property above: a finite alpha past float32's range became inf when rounded."""
    with pytest.raises(InvalidProblem, match="finite float32"):
        parse_problem(get("gemm"), {"M": 4, "N": 4, "K": 4, "alpha": 1e39})
