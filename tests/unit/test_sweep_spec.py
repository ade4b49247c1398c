"""Sweep files: the shipped tile_copy sweep loads; every malformed file raises SpaceError saying why."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunebox.errors import SpaceError
from tunebox.families.tile_copy import TileCopyProblem
from tunebox.sweep_spec import STRATEGIES, SearchSettings, load_sweep

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "spaces" / "tile_copy.toml"

GOOD = """\
name = "mini"
family = "tile_copy"

[search]
strategy = "random"
trials = 5
seconds = 60
seed = 3
finalists = 2

[space]
BM = [8, 16]
bounds = ["checked"]

[[problems]]
name = "a"
dtype = "float32"
src = [65, 73]
dst = [64, 32]
origin = [64, 64]

[[problems]]
name = "b"
dtype = "bfloat16"
src = [100, 200]
dst = [200, 100]
transpose = true
padding = "value"
pad_value = -3.25
"""


def write(tmp_path: Path, text: str, name: str = "sweep.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def raises(tmp_path: Path, text: str, *fragments: str, names_file: bool = True) -> str:
    path = write(tmp_path, text)
    with pytest.raises(SpaceError) as info:
        load_sweep(path)
    message = str(info.value)
    if names_file:
        assert str(path) in message, message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    return message


def test_shipped_sweep_loads() -> None:
    spec = load_sweep(SHIPPED)
    assert spec.name == "tile_copy"
    assert spec.family.name == "tile_copy"
    assert spec.source == SHIPPED
    assert [p.name for p in spec.problems] == [
        "copy_f32_16384",
        "transpose_f32_16384",
        "pad_bf16_16383x16381",
        "transpose_bf16_12345x6789",
        "crop_f16_nan_pad",
    ]
    assert spec.search.strategy in STRATEGIES and spec.search.trials >= 1
    assert 0 < spec.space.size() <= spec.family.space.size()
    crop = spec.problems[4].problem
    assert isinstance(crop, TileCopyProblem)
    assert (crop.element, crop.src, crop.dst, crop.origin, crop.padding) == (
        "float16",
        (4099, 4097),
        (4096, 4096),
        (-3, 5),
        "nan",
    )
    assert spec.problems[3].problem.transpose and spec.problems[3].problem.dst == (6789, 12345)
    # every problem has its valid default and at least one valid variant in the sweep's slice
    for named in spec.problems:
        default = spec.family.default_config(named.problem)
        assert spec.family.violations(named.problem, default) == []
        assert any(not spec.family.violations(named.problem, c) for c in spec.space), named.name


def test_good_file_loads(tmp_path: Path) -> None:
    spec = load_sweep(write(tmp_path, GOOD))
    assert spec.name == "mini"
    assert spec.search == SearchSettings("random", 5, 60, 3, 2)
    vector = 2 * 8 * 5 * 4 * 1 * 4 * 5  # BM, BN, threads, vec_bytes, bounds, staging, tiles_per_block
    cp_async = vector * 4  # stages
    tma = 2 * 8 * 5 * 4 * 5 * 4 * 4  # no bounds or staging; stages, swizzle
    paired = vector * 3 // 4  # always staged: no staging 'none'
    shifted = 2 * 8 * 5 * 4 * 5  # the tile parameters only
    windowed = shifted * 2 * 3  # its staging (plain, padded) and stages
    narrow = 5 * 4 * 4 * 5  # no tile: threads, vec_bytes, vectors, chunks_per_block
    assert spec.space.size() == vector + cp_async + tma + paired + shifted + windowed + narrow
    a, b = (p.problem for p in spec.problems)
    assert a.origin == (64, 64) and a.padding == "zero"
    assert b.transpose and b.padding == "value" and b.pad_value == -3.25 and b.pad_bits == 0xC050


def test_defaults(tmp_path: Path) -> None:
    text = 'family = "tile_copy"\n[[problems]]\ndtype = "float16"\nsrc = [4, 4]\ndst = [4, 4]\n'
    spec = load_sweep(write(tmp_path, text, "my-sweep.toml"))
    assert spec.name == "my-sweep"
    assert spec.search == SearchSettings()
    assert spec.space.size() == spec.family.space.size()
    assert [p.name for p in spec.problems] == ["problem0"]


def test_not_toml(tmp_path: Path) -> None:
    raises(tmp_path, "this is [not toml\n = =", "TOML")


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "bin.toml"
    path.write_bytes(b'name = "\xff\xfe"\n')
    with pytest.raises(SpaceError, match="TOML"):
        load_sweep(path)


def test_unknown_top_level_key(tmp_path: Path) -> None:
    raises(tmp_path, GOOD.replace('name = "mini"', 'name = "mini"\nbudget = 3'), "budget")


def test_unknown_family(tmp_path: Path) -> None:
    raises(tmp_path, GOOD.replace('family = "tile_copy"', 'family = "conv2d"'), "conv2d", "tile_copy", names_file=False)


def test_missing_family(tmp_path: Path) -> None:
    """An empty file said 'unknown family None'."""
    raises(tmp_path, GOOD.replace('family = "tile_copy"\n', ""), "no family; add e.g. family = ", names_file=False)
    raises(tmp_path, "", "no family; add e.g. family = ")


def test_a_file_nested_too_deeply_says_so(tmp_path: Path) -> None:
    raises(tmp_path, "x = " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply")


@pytest.mark.parametrize("value", ['["tile_copy"]', '{ name = "tile_copy" }', "3"])
def test_family_of_the_wrong_type(tmp_path: Path, value: str) -> None:
    """A non-string family (an array or inline table is unhashable) must still be a SpaceError."""
    raises(tmp_path, GOOD.replace('family = "tile_copy"', f"family = {value}"), "family", names_file=False)


def test_family_error_names_the_file(tmp_path: Path) -> None:
    """load_sweep promises that every problem raises SpaceError with its file, the family included."""
    raises(tmp_path, GOOD.replace('family = "tile_copy"', 'family = "conv2d"'), "conv2d")


def test_bad_name(tmp_path: Path) -> None:
    raises(tmp_path, GOOD.replace('name = "mini"', 'name = "a b/../c"'), "name")


def test_unknown_search_key(tmp_path: Path) -> None:
    raises(tmp_path, GOOD.replace("trials = 5", "trials = 5\nbudget = 3"), "[search]", "budget")


def test_search_not_a_table(tmp_path: Path) -> None:
    search = '[search]\nstrategy = "random"\ntrials = 5\nseconds = 60\nseed = 3\nfinalists = 2\n'
    assert search in GOOD
    raises(tmp_path, GOOD.replace(search, "").replace('name = "mini"', 'name = "mini"\nsearch = 3'), "[search]")


@pytest.mark.parametrize("strategy", ['"grid"', '"TPE"', "3", '["tpe"]'])
def test_bad_strategy(tmp_path: Path, strategy: str) -> None:
    message = raises(tmp_path, GOOD.replace('strategy = "random"', f"strategy = {strategy}"), "strategy")
    assert all(s in message for s in STRATEGIES)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("trials", "0"),
        ("trials", "-1"),
        ("trials", "2.5"),
        ("trials", "true"),
        ("trials", '"5"'),
        ("seed", "-1"),
        ("finalists", "0"),
        ("seconds", "0"),
        ("seconds", "0.5"),
        ("seconds", '"60"'),
        ("seconds", "nan"),
        ("seconds", "-inf"),
    ],
)
def test_bad_search_values(tmp_path: Path, field: str, value: str) -> None:
    old = {"trials": "trials = 5", "seed": "seed = 3", "finalists": "finalists = 2", "seconds": "seconds = 60"}
    raises(tmp_path, GOOD.replace(old[field], f"{field} = {value}"), f"search.{field}")


def test_space_unknown_parameter(tmp_path: Path) -> None:
    raises(tmp_path, GOOD.replace("BM = [8, 16]", "BM = [8, 16]\nwarps = [4]"), "[space]", "warps")


@pytest.mark.parametrize("value", ["[8, 3]", '["8"]', "[]", "8", "[true]"])
def test_space_value_outside_domain(tmp_path: Path, value: str) -> None:
    raises(tmp_path, GOOD.replace("BM = [8, 16]", f"BM = {value}"), "[space]", "BM")


def test_no_problems(tmp_path: Path) -> None:
    raises(tmp_path, GOOD[: GOOD.index("[[problems]]")], "problems")


def test_problems_not_tables(tmp_path: Path) -> None:
    raises(tmp_path, GOOD[: GOOD.index("[[problems]]")] + "problems = [1, 2]\n", "problems")


def test_problem_unknown_key(tmp_path: Path) -> None:
    raises(tmp_path, GOOD.replace("origin = [64, 64]", "origin = [64, 64]\nstride = [1, 1]"), "'a'", "stride")


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("src = [65, 73]", "src = [-65, 73]"),
        ("dst = [64, 32]", "dst = [64, -1]"),
        ("dst = [64, 32]", "dst = [0, 32]"),
    ],
)
def test_problem_negative_extent(tmp_path: Path, old: str, new: str) -> None:
    raises(tmp_path, GOOD.replace(old, new), "'a'", new.split(" =")[0])


def test_problem_bad_dtype(tmp_path: Path) -> None:
    raises(tmp_path, GOOD.replace('dtype = "bfloat16"', 'dtype = "float64"'), "'b'", "float64")


def test_duplicate_problem_names(tmp_path: Path) -> None:
    raises(tmp_path, GOOD.replace('name = "b"', 'name = "a"'), "unique")


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.toml"
    with pytest.raises(SpaceError, match="no such") as info:
        load_sweep(path)
    assert str(path) in str(info.value)


def test_directory_instead_of_file(tmp_path: Path) -> None:
    """Every problem with the file is a SpaceError naming it, a directory included."""
    with pytest.raises(SpaceError) as info:
        load_sweep(tmp_path)
    assert str(tmp_path) in str(info.value)
