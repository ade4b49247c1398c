"""problem_from_arrays of the indexed, ragged and GEMM families (what tunebox.launch builds from the
caller's arrays): shapes and types from the arrays, options as problem keys, the check_bounds
promise (indices are checked unless the caller promises otherwise), clear errors for missing or
misshapen arrays, and problems that survive to_dict / parse_problem."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tunebox.errors import InvalidProblem
from tunebox.families import get


def arr(*shape: int, dtype: str = "bfloat16") -> SimpleNamespace:
    return SimpleNamespace(shape=shape, dtype=dtype)


UNCHECKED = {
    "gather": {"template": "rows", "rows_per_block": 4, "threads": 64, "vec_bytes": 16, "check_bounds": "false"},
    "scatter": {"template": "rows", "rows_per_block": 4, "threads": 64, "vec_bytes": 16, "check_bounds": "false"},
    "gather_elements": {"template": "elements", "threads": 64, "elems_per_thread": 4, "check_bounds": "false"},
}
CASES = {
    "gather": {"A": arr(1000, 64), "idx": arr(500, dtype="int64"), "out": arr(500, 64)},
    "scatter": {"V": arr(500, 64), "idx": arr(500, dtype="int32"), "A": arr(1000, 64)},
    "gather_elements": {
        "A": arr(1000, 64),
        "ri": arr(30, 40, dtype="int32"),
        "ci": arr(30, 40, dtype="int32"),
        "out": arr(30, 40),
    },
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_unchecked_winners_need_the_callers_promise(name: str) -> None:
    family = get(name)
    checked = family.problem_from_arrays(CASES[name])
    promised = family.problem_from_arrays(CASES[name], check_bounds=False)
    unchecked = family.config(UNCHECKED[name])
    assert "check_bounds='false'" in " ".join(family.violations(checked, unchecked))
    assert family.violations(promised, unchecked) == []
    for p in (checked, promised):
        assert family.parse_problem(p.to_dict()) == p
        assert {b.name for b in family.buffers(p)} == set(CASES[name])


def test_gather_takes_its_options_and_a_mask() -> None:
    gather = get("gather")
    arrays = {**CASES["gather"], "mask": arr(500, dtype="uint8"), "out": arr(256, 500)}
    p = gather.problem_from_arrays(arrays, axis=1, window=256, dense_offset=-3, padding="nan", check_bounds=False)
    assert (p.axis, p.window, p.dense_offset, p.padding, p.mask, p.index_dtype) == (1, 256, -3, "nan", True, "int64")
    assert not p.all_valid  # a mask is never the promise of every entry


def test_gather_elements_broadcasts_one_d_tiles() -> None:
    p = get("gather_elements").problem_from_arrays(
        {"A": arr(100, 50), "ri": arr(7, dtype="int64"), "ci": arr(9, dtype="int64"), "out": arr(7, 9)}
    )
    assert p.broadcast and p.tile == (7, 9) and p.index_dtype == "int64"


@pytest.mark.parametrize(
    "name, arrays, options, message",
    [
        ("gather", {"A": arr(10, 4), "out": arr(3, 4)}, {}, "missing \\['idx'\\]"),
        ("gather", {"A": arr(10), "idx": arr(3, dtype="int32"), "out": arr(3, 4)}, {}, "2 dimension"),
        ("gather", CASES["gather"], {"check_bounds": "no"}, "True or False"),
        ("gather", CASES["gather"], {"sentinel_rate": 0.5}, "give no rates"),
        ("gather_elements", CASES["gather_elements"], {"oob_rate": 0.1}, "give no rates"),
        ("scatter", {**CASES["scatter"], "mask": arr(500, dtype="uint8")}, {"mask_rate": 0.5}, "give no rates"),
        ("scatter", {"V": arr(5, 4), "idx": arr(5, 2, dtype="int32"), "A": arr(10, 4)}, {}, "1 dimension"),
        ("ragged3d", {"x": arr(2, 8, 3, 4), "offsets": arr(3, dtype="int64"), "out": arr(10, 3, 4)}, {}, "lengths"),
        (
            "ragged3d",
            {"x": arr(2, 8, 12), "offsets": arr(3, dtype="int64"), "out": arr(10, 12)},
            {"lengths": [1, 2]},
            "\\(B, Lmax, H, D\\)",
        ),
        ("gemm", {"A": arr(4, 8), "B": arr(8, 5)}, {}, "2-D arrays A, B and D"),
    ],
)
def test_bad_arrays_say_what_to_do(name, arrays, options, message) -> None:
    with pytest.raises(InvalidProblem, match=message):
        get(name).problem_from_arrays(arrays, **options)


def test_ragged3d_from_arrays() -> None:
    ragged = get("ragged3d")
    pack = ragged.problem_from_arrays(
        {"x": arr(3, 8, 2, 4), "offsets": arr(4, dtype="int64"), "out": arr(9, 2, 4)}, lengths=[1, 8, 0]
    )
    assert (pack.direction, pack.total, pack.padded_shape) == ("pack", 9, (3, 8, 2, 4))
    unpack = ragged.problem_from_arrays(
        {"ragged": arr(9, 2, 4), "offsets": arr(4, dtype="int64"), "out": arr(3, 8, 2, 4)}, lengths=[1, 8, 0]
    )
    assert unpack.direction == "unpack" and [b.shape for b in ragged.buffers(unpack)][0] == (9, 2, 4)


def test_gemm_from_arrays() -> None:
    gemm = get("gemm")
    p = gemm.problem_from_arrays(
        {"A": arr(65, 80), "B": arr(73, 100), "D": arr(65, 99, dtype="float32")}, K=73, N=97, relu=True
    )
    assert (p.M, p.N, p.K, p.lda, p.ldb, p.ldd, p.out_dtype, p.relu) == (65, 97, 73, 80, 100, 99, "float32", True)
    with pytest.raises(InvalidProblem, match="ldb must be an integer >= 120"):
        gemm.problem_from_arrays({"A": arr(4, 8), "B": arr(8, 5), "D": arr(4, 5)}, N=120)
