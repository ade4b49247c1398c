"""ragged3d without a GPU: numpy reference on hand-computed packs and unpacks (empty sequences,
length 1, length exactly BM and Lmax), problem parsing (explicit and uniform lengths), validity
rules, geometry, work, the shipped sweep, and NVRTC compilation (to CUBIN, sm_90) of every dtype x
direction x vector width."""

from __future__ import annotations

from pathlib import Path

import family_checks
import numpy as np
import pytest

from tunebox.errors import InvalidProblem
from tunebox.families import get
from tunebox.families.ragged3d import Ragged3D, RaggedProblem
from tunebox.records import Status
from tunebox.sweep_spec import load_sweep

R = Ragged3D()
REPO = Path(__file__).resolve().parents[3]


def problem(direction: str = "pack", lengths=(2, 0, 4), **extra) -> RaggedProblem:
    data = {"dtype": "float32", "batch": len(lengths), "max_len": 4, "heads": 2, "depth": 3, "direction": direction,
            "lengths": list(lengths), **extra}
    return R.parse_problem(data)


def padded_arange(p: RaggedProblem) -> np.ndarray:
    return (np.arange(np.prod(p.padded_shape), dtype=np.uint32) + 1).reshape(p.padded_shape)


def test_registered() -> None:
    assert isinstance(get("ragged3d"), Ragged3D)


def test_pack_by_hand() -> None:
    """Sequence 0 keeps positions 0-1, sequence 1 is empty, sequence 2 keeps all four."""
    p = problem()
    x = padded_arange(p)
    out = R.reference(p, {"x": x, "offsets": p.offsets})["out"]
    assert out.shape == (6, 2, 3) and list(p.offsets) == [0, 2, 2, 6]
    np.testing.assert_array_equal(out[:2], x[0, :2])
    np.testing.assert_array_equal(out[2:], x[2])


def test_unpack_by_hand_zero_fills_past_each_length() -> None:
    p = problem("unpack")
    ragged = (np.arange(6 * 6, dtype=np.uint32) + 1).reshape(6, 2, 3)
    out = R.reference(p, {"ragged": ragged, "offsets": p.offsets})["out"]
    assert out.shape == (3, 4, 2, 3)
    np.testing.assert_array_equal(out[0, :2], ragged[:2])
    assert not out[0, 2:].any() and not out[1].any()
    np.testing.assert_array_equal(out[2], ragged[2:])


def test_pack_then_unpack_round_trips() -> None:
    p = problem(lengths=(1, 4, 0, 3))
    x = padded_arange(p)
    packed = R.reference(p, {"x": x, "offsets": p.offsets})["out"]
    back = R.reference(problem("unpack", lengths=(1, 4, 0, 3)), {"ragged": packed, "offsets": p.offsets})["out"]
    mask = np.arange(4)[None, :] < np.array(p.lengths)[:, None]
    np.testing.assert_array_equal(back[mask], x[mask])
    assert not back[~mask].any()


def test_all_empty_packs_to_nothing() -> None:
    p = problem(lengths=(0, 0))
    out = R.reference(p, R.make_inputs(p, np.random.default_rng(0)))["out"]
    assert out.shape == (0, 2, 3) and p.total == 0


def test_uniform_lengths_are_fixed_by_the_problem() -> None:
    data = {"dtype": "bfloat16", "batch": 64, "max_len": 4096, "heads": 8, "depth": 128, "direction": "pack",
            "lengths": "uniform"}
    a, b = R.parse_problem(data), R.parse_problem(data)
    assert a.lengths == b.lengths and len(a.lengths) == 64 and all(1 <= n <= 4096 for n in a.lengths)
    assert a.to_dict() == {**data, "lengths_seed": 0} and R.parse_problem(a.to_dict()) == a
    other = R.parse_problem({**data, "lengths_seed": 1})
    assert other.lengths != a.lengths
    assert R.work(a).bytes_moved == 2 * a.total * 8 * 128 * 2 + 65 * 8


def test_inputs_and_buffers() -> None:
    p = problem("unpack")
    inputs = R.make_inputs(p, np.random.default_rng(3))
    assert inputs["ragged"].shape == (6, 2, 3) and inputs["offsets"].dtype == np.int64
    assert [(b.name, b.shape, b.role) for b in R.buffers(p)] == [
        ("ragged", (6, 2, 3), "input"), ("offsets", (4,), "input"), ("out", (3, 4, 2, 3), "output")]


@pytest.mark.parametrize("data, message", [
    ({"direction": "both"}, "direction"), ({"lengths": [1, 2], "batch": 3}, "lengths must be"),
    ({"lengths": [1, 2, 5]}, "lengths must be"), ({"lengths": [1, -1, 0]}, "lengths must be"),
    ({"lengths_seed": 3}, "only with lengths = 'uniform'"), ({"heads": 0}, "positive integer"),
    ({"max_len": 2**20, "heads": 2**20, "depth": 2**10}, "too many"), ({"group": 2}, "unknown problem key"),
])
def test_bad_problems_say_what_to_do(data, message) -> None:
    with pytest.raises(InvalidProblem, match=message):
        problem(**data)


def test_rules_each_pass_and_fail() -> None:
    p = problem(lengths=(3, 1000), max_len=1000)
    ok = R.config({"BM": 16, "threads": 64, "vec_bytes": 8})
    assert R.violations(p, ok) == [] and R.violations(p, R.default_config(p)) == []
    assert "threads would idle" in R.violations(p, R.config({**ok.as_dict(), "threads": 512}))[0]
    assert "exceeds max_len" in R.violations(problem(), R.config({**ok.as_dict(), "BM": 8}))[0]
    assert R.violations(problem(), R.config({**ok.as_dict(), "BM": 4})) == []
    many = problem(lengths=(1,), max_len=2**31)
    assert "grid limit" in R.violations(many, R.config({**ok.as_dict(), "BM": 1}))[0]
    assert R.violations(many, R.config({**ok.as_dict(), "BM": 2})) == []


def test_geometry() -> None:
    p = problem(lengths=(3, 1000), max_len=1000)
    geo = R.geometry(p, R.config({"BM": 16, "threads": 128, "vec_bytes": 16}))
    assert geo.grid == (2 * 63, 1, 1) and geo.block == (128, 1, 1)


def test_distance() -> None:
    a, b = problem(lengths=(2, 2)), problem(lengths=(4, 4))
    assert a and R.distance(a, b) == pytest.approx(1.0)
    assert R.distance(a, problem("unpack", lengths=(2, 2))) is None


def test_shipped_sweep_loads() -> None:
    spec = load_sweep(REPO / "spaces" / "ragged3d.toml")
    assert spec.family.name == "ragged3d" and {n.problem.direction for n in spec.problems} == {"pack", "unpack"}
    for named in spec.problems:
        assert named.problem.padded_shape == (64, 4096, 8, 128)
        assert sum(1 for c in spec.space if not R.violations(named.problem, c)) >= 20


@pytest.fixture(scope="module")
def compiled():
    cases = []
    for dtype in ("float32", "float16", "bfloat16"):
        for direction in ("pack", "unpack"):
            p = R.parse_problem({"dtype": dtype, "batch": 3, "max_len": 300, "heads": 3, "depth": 7,
                                 "direction": direction, "lengths": [0, 1, 300]})
            for values in ({"BM": 1, "threads": 64, "vec_bytes": 16}, {"BM": 128, "threads": 512, "vec_bytes": 4},
                           {"BM": 16, "threads": 128, "vec_bytes": 8}):
                cases.append((p, R.config(values)))
    return family_checks.compile_cases(R, cases)


def test_every_kind_compiles(compiled) -> None:
    assert len(compiled) == 18
    for (p, _), result in compiled:
        assert result.status is Status.OK, result.log
        assert result.spill_bytes == 0 and result.source.name_expression.endswith(
            f", {str(p.direction == 'pack').lower()}>")
