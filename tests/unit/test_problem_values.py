"""Non-finite numbers in a problem description (issue 19, item 1): a sweep file's ``pad_value = inf``,
a query's JSON ``Infinity`` / ``NaN`` / ``1e999``, a caller's ``pad_value=float("inf")`` are refused by
``sweep_spec.check_problem`` with a message saying what to give instead (padding = "pos_inf" /
"neg_inf" / "nan"), before any family sees them: never a traceback, nothing stored."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import tunebox
from tunebox import api
from tunebox.cli import main
from tunebox.errors import InvalidProblem, SpaceError
from tunebox.families import get
from tunebox.runtime.launch import Launcher
from tunebox.sweep_spec import check_problem, load_sweep, parse_problem

REPO = Path(__file__).resolve().parents[2]
HINT = 'padding = "pos_inf", "neg_inf" or "nan" instead of a pad_value'

SWEEP = """\
name = "pads"
family = "{family}"
[[problems]]
name = "fine"
{fine}
[[problems]]
name = "bad"
{bad}
"""
# per family: a valid problem (TOML lines) and the same with its padding by a value
PADDED = {
    "tile_copy": ('dtype = "float32"\nsrc = [64, 64]\ndst = [80, 80]', 'padding = "value"'),
    "windows": (
        'dtype = "float32"\nrows = 30\ncols = 30\nwindow = [4, 4]\nstep = [4, 4]\nop = "unfold"',
        'padding = "value"',
    ),
    "gather": ('dtype = "float32"\nrows = 64\ncols = 32\ncount = 16\noob_rate = 0.25', 'padding = "value"'),
    "gather_elements": ('dtype = "float32"\nrows = 64\ncols = 32\ntile = [8, 8]\noob_rate = 0.25', 'padding = "value"'),
}
NON_FINITE_TOML = ["inf", "+inf", "-inf", "nan", "-nan", "1e999", "-1e999"]


def sweep_text(family: str, value: str) -> str:
    fine, padded = PADDED[family]
    return SWEEP.format(family=family, fine=fine, bad=f"{fine}\n{padded}\npad_value = {value}")


@pytest.mark.parametrize("family", sorted(PADDED))
@pytest.mark.parametrize("value", NON_FINITE_TOML)
def test_sweep_files_refuse_non_finite_pad_values(tmp_path: Path, family: str, value: str) -> None:
    path = tmp_path / "pads.toml"
    path.write_text(sweep_text(family, value))
    with pytest.raises(SpaceError) as info:
        load_sweep(path)
    message = str(info.value)
    assert str(path) in message and "problem 'bad'" in message and "pad_value" in message
    assert "finite numbers only" in message and HINT in message
    path.write_text(sweep_text(family, "-1.5"))  # a finite value is fine
    assert len(load_sweep(path).problems) == 2


@pytest.mark.parametrize("value", ["inf", "nan"])
def test_non_finite_numbers_anywhere_are_named_by_their_place(tmp_path: Path, value: str) -> None:
    path = tmp_path / "deep.toml"
    bad = f"dtype = 'float32'\nsrc = [64, {value}]\ndst = [64, 64]"
    path.write_text(SWEEP.format(family="tile_copy", fine=PADDED["tile_copy"][0], bad=bad))
    with pytest.raises(SpaceError, match=r"problem 'bad': tile_copy: src\[1\] is (inf|nan)") as info:
        load_sweep(path)
    assert HINT not in str(info.value)  # the padding hint is for pad_value only


def test_a_bad_sweep_file_exits_2_with_one_line_and_stores_nothing(tmp_path: Path, capsys) -> None:
    """The refused problem comes after a valid one: nothing of the valid one is run or stored."""
    path = tmp_path / "pads.toml"
    path.write_text(sweep_text("tile_copy", "inf"))
    results = tmp_path / "r"
    code = main(["tune", str(path), "--backend", "replay", "--results", str(results), "--quiet"])
    out = capsys.readouterr()
    assert code == 2 and out.out == ""
    assert out.err.startswith("tunebox: error:") and HINT in out.err and out.err.count("\n") == 1
    assert not results.exists()


QUERIES = [
    '{"dtype": "float32", "src": [64, 64], "dst": [80, 80], "padding": "value", "pad_value": Infinity}',
    '{"dtype": "float32", "src": [64, 64], "dst": [80, 80], "padding": "value", "pad_value": -Infinity}',
    '{"dtype": "float32", "src": [64, 64], "dst": [80, 80], "padding": "value", "pad_value": NaN}',
    '{"dtype": "float32", "src": [64, 64], "dst": [80, 80], "padding": "value", "pad_value": 1e999}',
]


@pytest.mark.parametrize("text", QUERIES, ids=["Infinity", "-Infinity", "NaN", "1e999"])
def test_api_query_refuses_non_finite_json(tmp_path: Path, text: str) -> None:
    """Checked before the database is opened (this one does not even exist)."""
    with pytest.raises(InvalidProblem, match="tile_copy: pad_value is .*finite numbers only") as info:
        api.query("tile_copy", json.loads(text), db=tmp_path / "absent.sqlite")
    assert HINT in str(info.value)


def test_api_query_still_answers_finite_problems() -> None:
    problem = {"dtype": "float32", "src": [16384, 16384], "dst": [16384, 16384]}
    assert api.query("tile_copy", problem, db=REPO / "results" / "winners.sqlite").source == "exact"


def test_numpy_numbers_are_the_numbers_they_hold() -> None:
    """Sizes a caller computed with numpy (``np.int64``) were refused as "must be two integers"."""
    problem = {"dtype": "float32", "src": [np.int64(16384), np.int32(16384)], "dst": (np.int64(16384), 16384)}
    assert api.query("tile_copy", problem, db=REPO / "results" / "winners.sqlite").source == "exact"
    checked = check_problem("tile_copy", {"src": [np.int64(3)], "pad_value": np.float32(0.5), "t": np.bool_(True)})
    assert checked == {"src": [3], "pad_value": 0.5, "t": True}
    assert [type(v) for v in (checked["src"][0], checked["pad_value"], checked["t"])] == [int, float, bool]


def test_a_problem_nested_too_deeply_is_refused_saying_what_a_field_holds() -> None:
    deep: list[Any] = []
    for _ in range(3000):  # deeper than Python's recursion limit: the check walks it without recursing
        deep = [deep]
    with pytest.raises(InvalidProblem, match="nested more than 8 levels deep"):
        check_problem("tile_copy", {"x": deep})


def test_api_query_names_an_unknown_family_first() -> None:
    with pytest.raises(SpaceError, match="unknown family 'conv2d'"):
        api.query("conv2d", {"pad_value": math.inf})


def test_tunebox_query_refuses_non_finite_json() -> None:
    with pytest.raises(InvalidProblem, match="finite numbers only"):
        tunebox.query("tile_copy", json.loads(QUERIES[0]), db=REPO / "results" / "winners.sqlite")


def test_tunebox_query_command_refuses_non_finite_json() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tunebox",
            "query",
            "tile_copy",
            QUERIES[3],
            "--db",
            str(REPO / "results/winners.sqlite"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("tunebox: error:") and HINT in done.stderr


def cuda_array(shape: tuple[int, ...], typestr: str = "<f4") -> SimpleNamespace:
    cai = {"data": (0x7F00_0000_1000, False), "shape": shape, "typestr": typestr, "strides": None, "version": 3}
    return SimpleNamespace(__cuda_array_interface__=cai)


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, np.float32("inf"), np.float64("nan")])
def test_launch_refuses_non_finite_options(tmp_path: Path, value: Any) -> None:
    """Refused before the lookup and before CUDA is started (there is no GPU here)."""
    launch = Launcher(tmp_path / "absent.sqlite")
    arrays = {"src": cuda_array((64, 64)), "dst": cuda_array((80, 80))}
    with pytest.raises(InvalidProblem, match="tile_copy: pad_value is .*finite numbers only") as info:
        launch("tile_copy", arrays, padding="value", pad_value=value)
    assert HINT in str(info.value) and launch.info is None
    windows = {"A": cuda_array((30, 30)), "out": cuda_array((8, 8, 4, 4))}
    with pytest.raises(InvalidProblem, match="windows: pad_value"):
        launch("windows", windows, window=[4, 4], step=[4, 4], op="unfold", padding="value", pad_value=value)


def test_launch_refuses_non_finite_numbers_in_array_options(tmp_path: Path) -> None:
    x = cuda_array((2, 8, 1, 8), "<f2")
    arrays = {"x": x, "offsets": cuda_array((3,), "<i4"), "out": cuda_array((9, 1, 8), "<f2")}
    with pytest.raises(InvalidProblem, match="ragged3d: lengths holds a number that is not finite"):
        Launcher(tmp_path / "absent.sqlite")("ragged3d", arrays, lengths=np.array([1.0, np.nan]))


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ([1, 2], "a problem is a table (JSON object) of named fields, got a list"),
        ("src", "got a str"),
        (None, "got a NoneType"),
        ({1: 2, "dtype": "float32"}, "field names are text, not int"),
        ({"src": [64, 2**64]}, f"src[1] is {2**64}, outside the signed 64-bit range"),
        ({"src": {"a": [0.5, -math.inf]}}, "src.a[1] is -inf"),
    ],
)
def test_check_problem_refusals(data: Any, fragment: str) -> None:
    with pytest.raises(InvalidProblem) as info:
        check_problem("tile_copy", data)
    assert str(info.value).startswith("tile_copy: ") and fragment in str(info.value)


def test_huge_integers_never_reach_a_family() -> None:
    """gemm's isfinite of an integer past float64 raises OverflowError: refused before it."""
    with pytest.raises(InvalidProblem, match="alpha is an integer of 2001 bits, outside the signed 64-bit range"):
        parse_problem(get("gemm"), {"M": 4, "N": 4, "K": 4, "alpha": 2**2000})


def test_finite_problems_pass_unchanged() -> None:
    data = {
        "dtype": "float32",
        "src": [64, 64],
        "dst": [80, 80],
        "padding": "value",
        "pad_value": -3e38,
    }  # float32 holds it
    assert check_problem("tile_copy", data) == data
    assert parse_problem(get("tile_copy"), data).pad_value == -3e38
