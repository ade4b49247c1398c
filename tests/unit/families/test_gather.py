"""gather without a GPU: numpy reference on hand-computed cases (whole rows, and the Warp
tile_load_indexed / cuTile sparse-view forms: axis, window, dense_offset), problem parsing, seeded
inputs, validity rules, geometry, work, distance, the shipped sweep, and NVRTC compilation (to CUBIN,
sm_90) of every dtype x index type x check_bounds x vector width kind of every kernel form."""

from __future__ import annotations

import random
from functools import partial
from pathlib import Path

import family_checks
import numpy as np
import pytest
from indexed_reference import arg_members, assert_rows_variant, compile_matrix, reference_of

from tunebox.dtypes import PADDING_MODES, element_type
from tunebox.errors import InvalidProblem
from tunebox.families import get
from tunebox.families.base import BufferArg, BufferSpec, ScalarArg
from tunebox.families.gather import FAMILY, GatherProblem, GatherRows, RowsConfig
from tunebox.params import Config
from tunebox.records import Status
from tunebox.sweep_spec import load_sweep

G = FAMILY
ROWS = G.templates["rows"]
assert isinstance(ROWS, GatherRows)
DTYPES = ("float32", "float16", "bfloat16")
INDEX_DTYPES = ("int32", "int64")
NAN32 = 0x7FC00000
REPO = Path(__file__).resolve().parents[3]


def problem(dtype: str = "float32", rows: int = 4, cols: int = 4, count: int = 2, **extra) -> GatherProblem:
    return G.parse_problem({"dtype": dtype, "rows": rows, "cols": cols, "count": count, **extra})


def config(**values) -> Config:
    base = {"template": "rows", "rows_per_block": 4, "threads": 64, "vec_bytes": 16, "check_bounds": "true"}
    return G.config({**base, **values})


def arange_a(dtype: str, shape: tuple[int, int], start: int = 1) -> np.ndarray:
    storage = element_type(dtype).storage
    return np.arange(start, start + shape[0] * shape[1], dtype=np.int64).astype(storage).reshape(shape)


def ref(p: GatherProblem, a: np.ndarray, idx, mask=None) -> np.ndarray:
    out = reference_of(G, p, ("A", a), idx, mask, "out")
    assert out.shape == p.out_shape
    return out


# ---------------------------------------------------------------------------------------------
# numpy reference on hand-computed cases. A = [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12], [13, ...]]

A = arange_a("float32", (4, 4))
P = [NAN32] * 4  # a padding row, padding "nan" for float32


def test_reference_warp_even_rows() -> None:
    """Warp's tile_load_indexed example: rows 0 and 2 of arange(1, 17).reshape(4, 4)."""
    for index_dtype in INDEX_DTYPES:
        got = ref(problem(index_dtype=index_dtype), A, [0, 2])
        np.testing.assert_array_equal(got, [[1, 2, 3, 4], [9, 10, 11, 12]])


def test_reference_offset_is_added_to_every_index() -> None:
    np.testing.assert_array_equal(ref(problem(offset=1), A, [-1, 1]), [[1, 2, 3, 4], [9, 10, 11, 12]])
    got = ref(problem(count=3, offset=-2, padding="nan"), A, [2, 5, 1])  # rows 0, 3 and -1
    np.testing.assert_array_equal(got, [[1, 2, 3, 4], [13, 14, 15, 16], P])


def test_reference_sentinel_rows_read_padding() -> None:
    got = ref(problem(count=4, padding="nan"), A, [-1, 3, -1, 0])
    np.testing.assert_array_equal(got, [P, [13, 14, 15, 16], P, [1, 2, 3, 4]])
    zero = ref(problem(count=2), A, [-1, 1])  # padding "zero"
    np.testing.assert_array_equal(zero, [[0, 0, 0, 0], [5, 6, 7, 8]])


def test_reference_out_of_range_rows_read_padding() -> None:
    """Beyond either end: no wrap-around (-2 is not row 2, 4 is not row 0)."""
    got = ref(problem(count=5, padding="neg_inf"), A, [4, -2, 100, 3, -(2**31)])
    inf = [0xFF800000] * 4
    np.testing.assert_array_equal(got, [inf, inf, inf, [13, 14, 15, 16], inf])


def test_reference_masked_rows_read_padding() -> None:
    got = ref(problem(count=4, mask=True, padding="nan"), A, [0, 1, 2, -1], mask=[1, 0, 1, 1])
    np.testing.assert_array_equal(got, [[1, 2, 3, 4], P, [9, 10, 11, 12], P])


def test_reference_repeated_indices() -> None:
    got = ref(problem(count=4), A, [2, 2, 0, 2])
    np.testing.assert_array_equal(got, [[9, 10, 11, 12], [9, 10, 11, 12], [1, 2, 3, 4], [9, 10, 11, 12]])


@pytest.mark.parametrize(("dtype", "pad"), [("bfloat16", 0xC050), ("float16", 0xC280), ("float32", 0xC0500000)])
def test_reference_pad_value(dtype: str, pad: int) -> None:
    a = arange_a(dtype, (3, 2))
    got = ref(problem(dtype, rows=3, cols=2, count=2, padding="value", pad_value=-3.25), a, [5, 1])
    np.testing.assert_array_equal(got, [[pad, pad], [3, 4]])


def test_reference_int64_offsets_never_overflow() -> None:
    """Huge int64 indices plus a huge offset: validity is decided without forming idx + offset."""
    p = problem(count=4, index_dtype="int64", offset=2**61, padding="nan")
    idx = [-(2**61), -(2**61) + 3, 2**63 - 1, -(2**63)]
    np.testing.assert_array_equal(ref(p, A, idx), [[1, 2, 3, 4], [13, 14, 15, 16], P, P])


def _naive(p: GatherProblem, inputs: dict[str, np.ndarray]) -> np.ndarray:
    out = np.empty((p.count, p.cols), dtype=inputs["A"].dtype)
    for k in range(p.count):
        row = int(inputs["idx"][k]) + p.offset
        ok = 0 <= row < p.rows and (not p.mask or inputs["mask"][k] != 0)
        out[k] = inputs["A"][row] if ok else p.pad_bits
    return out


def test_reference_matches_definition_on_random_problems() -> None:
    rng = np.random.default_rng(11)
    for _ in range(200):
        mode = PADDING_MODES[int(rng.integers(len(PADDING_MODES)))]
        mask = bool(rng.integers(2))
        rates = rng.dirichlet([1, 1, 1, 1])[:3] * 0.9
        p = problem(
            DTYPES[int(rng.integers(3))],
            rows=int(rng.integers(1, 9)),
            cols=int(rng.integers(1, 9)),
            count=int(rng.integers(1, 20)),
            index_dtype=INDEX_DTYPES[int(rng.integers(2))],
            offset=int(rng.integers(-5, 6)),
            mask=mask,
            padding=mode,
            sentinel_rate=float(rates[0]),
            oob_rate=float(rates[1]),
            **({"mask_rate": float(rates[2])} if mask else {}),
            **({"pad_value": 1.5} if mode == "value" else {}),
        )
        inputs = G.make_inputs(p, rng)
        got = G.reference(p, inputs)["out"]
        np.testing.assert_array_equal(got, _naive(p, inputs), err_msg=str(p))
        assert int((got != p.pad_bits).all(axis=1).sum()) == p.valid_entries  # random bits are never padding


# ---------------------------------------------------------------------------------------------
# the Warp tile_load_indexed / cuTile sparse-view forms: axis, window, dense_offset (hand-computed)


def test_reference_warp_even_rows_with_explicit_keys() -> None:
    """The same Warp example spelled out: axis 0, the full window, dense offset 0."""
    p = problem(axis=0, window=4, dense_offset=0)
    assert p == problem() and p.whole_rows
    np.testing.assert_array_equal(ref(p, A, [0, 2]), [[1, 2, 3, 4], [9, 10, 11, 12]])


def test_reference_cutile_sparse_view() -> None:
    """cutile-python: x = arange(64).reshape(8, 8), rows arange(4), dense Slice(start=2, length=4)."""
    x = arange_a("float32", (8, 8), start=0)
    for index_dtype in INDEX_DTYPES:
        p = problem(rows=8, cols=8, count=4, index_dtype=index_dtype, dense_offset=2, window=4)
        assert p.out_shape == (4, 4) and not p.whole_rows
        got = ref(p, x, np.arange(4))
        np.testing.assert_array_equal(got, [[2, 3, 4, 5], [10, 11, 12, 13], [18, 19, 20, 21], [26, 27, 28, 29]])


def test_reference_column_gather() -> None:
    """axis 1: out[j, k] = A[dense_offset + j, idx[k] + offset]; out is (window, K)."""
    p = problem(count=2, axis=1)
    assert p.out_shape == (4, 2) and p.window is None and p.span == 4
    np.testing.assert_array_equal(ref(p, A, [3, 0]), [[4, 1], [8, 5], [12, 9], [16, 13]])
    q = problem(count=3, axis=1, window=2, dense_offset=1, offset=-1)  # columns 2, 0, 3 of rows 1 and 2
    np.testing.assert_array_equal(ref(q, A, [3, 1, 4]), [[7, 5, 8], [11, 9, 12]])
    r = problem(rows=4, cols=3, count=4, axis=1, window=1, dense_offset=3)  # the last row; A is 4 x 3 here
    np.testing.assert_array_equal(ref(r, arange_a("float32", (4, 3)), [2, 2, 0, 1]), [[12, 12, 10, 11]])


def test_reference_dense_range_outside_reads_padding() -> None:
    """A negative dense_offset and a window running past the end read the padding, on both axes."""
    got = ref(problem(count=2, dense_offset=-2, window=4, padding="nan"), A, [1, 3])
    np.testing.assert_array_equal(got, [[NAN32, NAN32, 5, 6], [NAN32, NAN32, 13, 14]])
    got = ref(problem(count=1, dense_offset=2, window=5, padding="nan"), A, [2])
    np.testing.assert_array_equal(got, [[11, 12, NAN32, NAN32, NAN32]])
    got = ref(problem(count=1, dense_offset=-1, window=6), A, [0])  # both ends, padding zero
    np.testing.assert_array_equal(got, [[0, 1, 2, 3, 4, 0]])
    got = ref(problem(count=2, axis=1, dense_offset=-1, window=6, padding="nan"), A, [1, 2])
    np.testing.assert_array_equal(got, [[NAN32] * 2, [2, 3], [6, 7], [10, 11], [14, 15], [NAN32] * 2])
    for start in (4, 100, -6, -(2**40)):  # the window misses A entirely
        for axis in (0, 1):
            out = ref(problem(count=2, axis=axis, dense_offset=start, window=2, padding="nan"), A, [0, 1])
            assert (out == NAN32).all()


def test_reference_sentinels_on_both_axes() -> None:
    got = ref(problem(count=3, dense_offset=1, window=3, padding="nan"), A, [-1, 2, 5])
    np.testing.assert_array_equal(got, [[NAN32] * 3, [10, 11, 12], [NAN32] * 3])
    got = ref(problem(count=3, axis=1, padding="nan"), A, [-1, 1, 4])
    np.testing.assert_array_equal(got, [[NAN32, 2, NAN32], [NAN32, 6, NAN32], [NAN32, 10, NAN32], [NAN32, 14, NAN32]])
    got = ref(problem(count=2, axis=1, offset=2, window=2), A, [-3, -1])  # column -1 (sentinel) and column 1
    np.testing.assert_array_equal(got, [[0, 2], [0, 6]])


def test_reference_mask_on_both_axes() -> None:
    got = ref(problem(count=3, mask=True, dense_offset=3, window=2, padding="nan"), A, [0, 1, 2], mask=[1, 0, 1])
    np.testing.assert_array_equal(got, [[4, NAN32], [NAN32, NAN32], [12, NAN32]])
    got = ref(problem(count=3, axis=1, mask=True, window=2, padding="nan"), A, [0, 1, 3], mask=[0, 1, 1])
    np.testing.assert_array_equal(got, [[NAN32, 2, 4], [NAN32, 6, 8]])


def _warp(p: GatherProblem, inputs: dict[str, np.ndarray]) -> np.ndarray:
    """Warp's rule element by element: the indexed axis reads offset + idx, the dense axis
    dense_offset + position; out of range on any side (or masked out) reads the padding."""
    a = inputs["A"]
    out = np.empty(p.out_shape, dtype=a.dtype)
    for i, j in np.ndindex(*p.out_shape):
        k, c = (i, j) if p.axis == 0 else (j, i)
        g = [0, 0]
        g[p.axis] = int(inputs["idx"][k]) + p.offset
        g[1 - p.axis] = p.dense_offset + c
        ok = 0 <= g[0] < p.rows and 0 <= g[1] < p.cols and (not p.mask or inputs["mask"][k] != 0)
        out[i, j] = a[g[0], g[1]] if ok else p.pad_bits
    return out


def test_reference_matches_warp_rule_on_random_problems() -> None:
    rng = np.random.default_rng(12)
    for _ in range(200):
        mode = PADDING_MODES[int(rng.integers(len(PADDING_MODES)))]
        mask, axis = bool(rng.integers(2)), int(rng.integers(2))
        rates = rng.dirichlet([1, 1, 1, 1])[:3] * 0.9
        rows, cols = int(rng.integers(1, 9)), int(rng.integers(1, 9))
        dense = cols if axis == 0 else rows
        p = problem(
            DTYPES[int(rng.integers(3))],
            rows=rows,
            cols=cols,
            count=int(rng.integers(1, 12)),
            axis=axis,
            window=int(rng.integers(1, 2 * dense + 3)),
            dense_offset=int(rng.integers(-dense - 2, dense + 3)),
            index_dtype=INDEX_DTYPES[int(rng.integers(2))],
            offset=int(rng.integers(-5, 6)),
            mask=mask,
            padding=mode,
            sentinel_rate=float(rates[0]),
            oob_rate=float(rates[1]),
            **({"mask_rate": float(rates[2])} if mask else {}),
            **({"pad_value": 1.5} if mode == "value" else {}),
        )
        inputs = G.make_inputs(p, rng)
        got = G.reference(p, inputs)["out"]
        np.testing.assert_array_equal(got, _warp(p, inputs), err_msg=str(p))
        moved = int((got != p.pad_bits).sum())  # random bits are never padding
        assert moved == p.valid_entries * p.dense_inside, p


# ---------------------------------------------------------------------------------------------
# seeded inputs


def _rows(p: GatherProblem, inputs: dict[str, np.ndarray]) -> np.ndarray:
    return inputs["idx"].astype(np.int64) + p.offset


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
def test_make_inputs_has_exact_fractions(index_dtype: str) -> None:
    p = problem(
        "bfloat16",
        rows=1000,
        cols=3,
        count=2000,
        index_dtype=index_dtype,
        offset=-7,
        mask=True,
        mask_rate=0.25,
        sentinel_rate=0.05,
        oob_rate=0.1,
    )
    inputs = G.make_inputs(p, np.random.default_rng(5))
    assert set(inputs) == {"A", "idx", "mask"}
    assert inputs["A"].shape == (1000, 3) and inputs["A"].dtype == np.uint16
    assert inputs["idx"].shape == (2000,) and inputs["idx"].dtype == np.dtype(index_dtype)
    assert inputs["mask"].shape == (2000,) and inputs["mask"].dtype == np.uint8
    assert set(np.unique(inputs["mask"]).tolist()) == {0, 1}
    rows, masked = _rows(p, inputs), inputs["mask"] == 0
    sentinel, beyond = rows == -1, rows >= 1000
    assert (p.sentinels, p.out_of_range, p.masked_out) == (100, 200, 500)
    assert (int(sentinel.sum()), int(beyond.sum()), int(masked.sum())) == (100, 200, 500)
    assert not (sentinel & masked).any() and not (beyond & masked).any()  # disjoint positions
    assert ((rows >= -1) & (rows < 2000)).all()  # sentinels are row -1, out-of-range rows lie in [N, 2N)
    assert int((inputs["idx"] == -1 + 7).sum()) == 100  # sentinel entries store -1 - offset
    assert p.valid_entries == 1200 == int((~sentinel & ~beyond & ~masked).sum())


def test_make_inputs_without_invalid_entries() -> None:
    p = problem("float16", rows=50, cols=8, count=3000, offset=5)
    inputs = G.make_inputs(p, np.random.default_rng(0))
    assert set(inputs) == {"A", "idx"}
    rows = _rows(p, inputs)
    assert ((rows >= 0) & (rows < 50)).all()
    assert len(np.unique(rows)) == 50  # uniform draws: every row, many repeated
    assert p.all_valid and p.valid_entries == 3000


def test_make_inputs_is_seeded() -> None:
    p = problem("float32", rows=100, cols=5, count=64, sentinel_rate=0.5, mask=True, mask_rate=0.25)
    a, b = (G.make_inputs(p, np.random.default_rng(3)) for _ in range(2))
    c = G.make_inputs(p, np.random.default_rng(4))
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    assert not all(np.array_equal(a[k], c[k]) for k in a)


def test_make_inputs_all_sentinel_and_all_out_of_range() -> None:
    s = problem(rows=10, cols=2, count=7, sentinel_rate=1.0, padding="nan")
    inputs = G.make_inputs(s, np.random.default_rng(1))
    assert (inputs["idx"] == -1).all() and s.valid_entries == 0
    assert (G.reference(s, inputs)["out"] == NAN32).all()
    o = problem(rows=10, cols=2, count=7, oob_rate=1.0, index_dtype="int64")
    rows = _rows(o, G.make_inputs(o, np.random.default_rng(1)))
    assert ((rows >= 10) & (rows < 20)).all()


@pytest.mark.parametrize("count", [1, 2, 7, 513, 1000])
def test_rates_summing_to_one_leave_no_valid_entry(count: int) -> None:
    """Cumulative rounding: halves of an odd K (round-half-even would leave one entry valid) and
    thirds still cover every entry."""
    for rates in (
        {"sentinel_rate": 0.5, "oob_rate": 0.5},
        {"sentinel_rate": 0.5, "mask": True, "mask_rate": 0.5},
        {"sentinel_rate": 1 / 3, "oob_rate": 1 / 3, "mask": True, "mask_rate": 1 / 3},
    ):
        p = problem(rows=11, cols=3, count=count, **rates)
        assert p.valid_entries == 0 and p.sentinels + p.out_of_range + p.masked_out == count


def test_make_inputs_int32_index_near_its_limit() -> None:
    """An offset of 2^31: rows 0..N-1 are stored as -2^31 .. N-1-2^31 and fit int32; out-of-range
    rows are drawn only as far as int32 reaches."""
    p = problem("float16", rows=100, cols=1, count=500, offset=2**31, oob_rate=0.2)
    inputs = G.make_inputs(p, np.random.default_rng(2))
    rows = _rows(p, inputs)
    assert inputs["idx"].dtype == np.int32 and ((rows >= 0) & (rows < 200)).all()
    assert int((rows >= 100).sum()) == 100
    q = problem("float16", rows=100, cols=1, count=500, offset=101 - 2**31, oob_rate=0.2)
    inputs = G.make_inputs(q, np.random.default_rng(2))
    rows = _rows(q, inputs)
    assert int((rows == 100).sum()) == 100  # row N is stored as 2^31 - 1: no row beyond it fits int32
    assert int(inputs["idx"].max()) == 2**31 - 1


def test_make_inputs_axis_1_draws_columns() -> None:
    """axis 1 indexes columns: valid indices in [0, D), out-of-range ones in [D, 2D), sentinels -1."""
    p = problem(
        "float16",
        rows=1000,
        cols=37,
        count=3000,
        axis=1,
        offset=-4,
        sentinel_rate=0.1,
        oob_rate=0.2,
        mask=True,
        mask_rate=0.1,
        window=9,
        dense_offset=-3,
    )
    inputs = G.make_inputs(p, np.random.default_rng(6))
    assert inputs["A"].shape == (1000, 37)
    cols = _rows(p, inputs)
    assert int((cols == -1).sum()) == 300 and int((cols >= 37).sum()) == 600
    assert ((cols >= -1) & (cols < 74)).all()
    assert len(np.unique(cols[(cols >= 0) & (cols < 37)])) == 37
    assert p.valid_entries == 3000 - 300 - 600 - 300


# ---------------------------------------------------------------------------------------------
# parse_problem


def test_parse_problem_defaults_and_round_trip() -> None:
    p = G.parse_problem({"dtype": "bfloat16", "rows": 100, "cols": 73, "count": 51})
    assert p == GatherProblem("bfloat16", 100, 73, 51)
    assert (p.index_dtype, p.offset, p.mask, p.mask_rate, p.sentinel_rate, p.oob_rate, p.padding) == (
        "int32",
        0,
        False,
        0.0,
        0.0,
        0.0,
        "zero",
    )
    assert G.parse_problem(p.to_dict()) == p and p.dtype == "bfloat16"
    q = problem(
        "float16",
        rows=9,
        cols=3,
        count=4,
        index_dtype="int64",
        offset=-3,
        mask=True,
        mask_rate=0.5,
        sentinel_rate=0.25,
        oob_rate=0,
        padding="value",
        pad_value=2,
    )
    assert type(q.pad_value) is float and type(q.oob_rate) is float
    assert G.parse_problem(q.to_dict()) == q and q.key() == G.parse_problem(q.to_dict()).key()
    assert p.key() != q.key()
    assert get("gather") is FAMILY


def test_parse_problem_new_keys_round_trip() -> None:
    """axis, window and dense_offset appear in to_dict (and so in the problem key) only when they
    differ from the whole-row default: every existing problem keeps its key and meaning."""
    p = problem("bfloat16", rows=100, cols=73, count=51)
    assert set(p.to_dict()) == {
        "dtype",
        "rows",
        "cols",
        "count",
        "index_dtype",
        "offset",
        "mask",
        "sentinel_rate",
        "oob_rate",
        "padding",
    }
    assert (p.axis, p.window, p.dense_offset, p.span, p.whole_rows) == (0, None, 0, 73, True)
    assert problem("bfloat16", rows=100, cols=73, count=51, axis=0, window=73, dense_offset=0) == p
    w = problem("float32", rows=9, cols=8, count=5, dense_offset=-3, window=6, index_dtype="int64", sentinel_rate=0.2)
    assert w.to_dict()["window"] == 6 and w.to_dict()["dense_offset"] == -3 and "axis" not in w.to_dict()
    assert G.parse_problem(w.to_dict()) == w and w.out_shape == (5, 6) and not w.whole_rows
    c = problem("float16", rows=9, cols=8, count=5, axis=1)
    assert c.to_dict()["axis"] == 1 and "window" not in c.to_dict() and (c.span, c.out_shape) == (9, (9, 5))
    assert G.parse_problem(c.to_dict()) == c and problem("float16", rows=9, cols=8, count=5, axis=1, window=9) == c
    d = problem("float16", rows=9, cols=8, count=5, axis=1, window=8)  # D is no default on axis 1
    assert d.window == 8 and G.parse_problem(d.to_dict()) == d
    assert len({x.key() for x in (p, w, c, d)}) == 4
    assert problem(dense_offset=2**62 - 1).dense_offset == 2**62 - 1


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"src": [1, 1]}, "src"),
        ({"axis": 2}, "axis"),
        ({"axis": True}, "axis"),
        ({"axis": "1"}, "axis"),
        ({"axis": -1}, "axis"),
        ({"window": 0}, "window"),
        ({"window": 2.0}, "window"),
        ({"window": True}, "window"),
        ({"window": 2**38, "count": 4}, "too many"),
        ({"dense_offset": 1.0}, "dense_offset"),
        ({"dense_offset": False}, "dense_offset"),
        ({"dense_offset": -(2**62)}, "dense_offset"),
        ({"axis": 1, "cols": 4, "offset": -(2**31) + 3}, "int64"),  # column 3 would be stored as 2^31
        ({"dtype": "int32"}, "int32"),
        ({"rows": 0}, "rows"),
        ({"cols": -1}, "cols"),
        ({"count": 2.0}, "count"),
        ({"count": True}, "count"),
        ({"rows": 2**21, "cols": 2**19}, "too many"),
        ({"count": 2**21, "cols": 2**19}, "too many"),
        ({"count": 2**31, "cols": 1}, "count"),
        ({"index_dtype": "uint32"}, "index_dtype"),
        ({"index_dtype": 32}, "index_dtype"),
        ({"offset": 1.0}, "offset"),
        ({"offset": True}, "offset"),
        ({"offset": 2**62}, "offset"),
        ({"mask": 1}, "mask"),
        ({"mask_rate": 0.5}, "mask_rate"),
        ({"mask": True, "mask_rate": 1.5}, "mask_rate"),
        ({"mask": True, "mask_rate": "0.5"}, "mask_rate"),
        ({"sentinel_rate": -0.1}, "sentinel_rate"),
        ({"sentinel_rate": True}, "sentinel_rate"),
        ({"oob_rate": 2}, "oob_rate"),
        ({"sentinel_rate": 0.5, "oob_rate": 0.6}, "exceed 1"),
        ({"sentinel_rate": 0.5, "mask": True, "mask_rate": 0.6}, "exceed 1"),
        ({"padding": "ZERO"}, "padding"),
        ({"pad_value": 1.0}, "pad_value"),
        ({"padding": "value", "pad_value": "1"}, "pad_value"),
        ({"padding": "value", "pad_value": 10**400}, "pad_value"),
        ({"offset": 2**31, "sentinel_rate": 0.5}, "int64"),  # row -1 would be stored as -1 - 2^31
        ({"offset": -(2**31) + 3}, "int64"),  # row N - 1 = 3 would be stored as 2^31
        ({"offset": -(2**31) + 4, "oob_rate": 0.5}, "int64"),  # out-of-range row N = 4 would be stored as 2^31
    ],
    ids=repr,
)
def test_parse_problem_errors(data: dict, fragment: str) -> None:
    base = {"dtype": "float32", "rows": 4, "cols": 4, "count": 4}
    with pytest.raises(InvalidProblem, match=fragment) as info:
        G.parse_problem({**base, **data})
    assert "\n" not in str(info.value) and str(info.value).startswith("gather: ") or "dtype" in str(info.value)


def test_parse_problem_missing_keys_and_limits() -> None:
    for key in ("dtype", "rows", "cols", "count"):
        data = {"dtype": "float32", "rows": 4, "cols": 4, "count": 4}
        del data[key]
        with pytest.raises(InvalidProblem):
            G.parse_problem(data)
    assert problem(rows=2**31 + 100, cols=1, count=2**31 - 1, index_dtype="int64").rows == 2**31 + 100
    with pytest.raises(InvalidProblem, match="int64"):  # rows beyond 2^31 need an offset with int32
        problem(rows=2**31 + 100, cols=1, count=5)
    assert problem(rows=2**31 + 100, cols=1, count=5, offset=2**31).offset == 2**31
    assert problem(offset=-(2**31) + 4).offset == -(2**31) + 4
    assert problem(offset=-(2**31) + 5, oob_rate=0.5).offset == -(2**31) + 5
    assert problem(index_dtype="int64", offset=2**62 - 1, sentinel_rate=0.5).offset == 2**62 - 1


# ---------------------------------------------------------------------------------------------
# validity rules: each with a passing and a failing case

ODD = problem("bfloat16", rows=1001, cols=73, count=999, sentinel_rate=0.1)
CLEAN = problem("bfloat16", rows=1024, cols=512, count=4096)


assert_rule = partial(family_checks.assert_rule, G)


def test_rule_vec_bytes_multiple_of_element() -> None:
    f32 = problem("float32", rows=10, cols=64, count=10)
    assert_rule(f32, config(vec_bytes=4, threads=64, rows_per_block=1), config(vec_bytes=2), "vec_bytes=2")
    assert G.violations(problem("float16", rows=10, cols=64, count=10), config(vec_bytes=2)) == []


def test_rule_threads_per_row_have_work() -> None:
    # 512 bf16 in 16-byte vectors: 64 vectors, so at most 64 threads per row
    assert_rule(CLEAN, config(threads=256, rows_per_block=4), config(threads=256, rows_per_block=2), "idle")
    assert G.violations(CLEAN, config(threads=128, rows_per_block=2, vec_bytes=16)) == []
    # 2-byte vectors: 512 vectors a row, every team size is fine
    assert G.violations(CLEAN, config(threads=512, rows_per_block=1, vec_bytes=2)) == []
    # D = 73 is odd: the kernel moves it element by element, 73 vectors (96 threads at most)
    assert_rule(ODD, config(threads=64, rows_per_block=1), config(threads=128, rows_per_block=1), "idle")
    # D = 1: one vector per row, 32 threads per row at most
    one = problem("float16", rows=10, cols=1, count=10)
    assert_rule(one, config(threads=64, rows_per_block=2), config(threads=64, rows_per_block=1), "idle")


def test_rule_check_bounds_false_needs_all_valid_inputs() -> None:
    unchecked = config(threads=256, rows_per_block=4, check_bounds="false")
    assert G.violations(CLEAN, unchecked) == []
    assert G.violations(problem("bfloat16", rows=1024, cols=512, count=4096, offset=-3), unchecked) == []
    for extra in ({"sentinel_rate": 0.05}, {"oob_rate": 0.01}, {"mask": True}, {"mask": True, "mask_rate": 0.5}):
        p = problem("bfloat16", rows=1024, cols=512, count=4096, **extra)
        assert_rule(p, config(threads=256, rows_per_block=4), unchecked, "check_bounds='false'")
    # a rate too small to place a single invalid entry leaves every input valid
    assert G.violations(problem("bfloat16", rows=1024, cols=512, count=4, sentinel_rate=0.01), unchecked) == []


SPARSE = problem("bfloat16", rows=1024, cols=512, count=4096, dense_offset=64, window=256)


def test_rule_window_vectors() -> None:
    """A window moves in vectors dividing D, the window and dense_offset: 256 bf16 from 64 in 16-byte
    vectors is 32 vectors (one warp per row); an odd dense_offset moves element by element."""
    assert ROWS.row_vectors(SPARSE, 16) == 32 and ROWS.row_vectors(SPARSE, 4) == 128
    assert_rule(SPARSE, config(threads=128, rows_per_block=4), config(threads=128, rows_per_block=2), "idle")
    odd = problem("bfloat16", rows=1024, cols=512, count=4096, dense_offset=3, window=256)
    assert ROWS.row_vectors(odd, 16) == 256
    assert G.violations(odd, config(threads=256, rows_per_block=1)) == []
    assert ROWS.row_vectors(problem("float32", rows=4, cols=64, count=4, dense_offset=-2, window=64), 16) == 32
    assert ROWS.row_vectors(problem("float32", rows=4, cols=64, count=4, dense_offset=-4, window=12), 16) == 3


def test_rules_axis_1() -> None:
    """axis 1: threads x (vec_bytes / element) entries a block, rows_per_block output rows."""
    p = problem("float32", rows=1000, cols=300, count=1000, axis=1, window=8)  # 250 vectors of 4 entries
    assert_rule(p, config(threads=256, rows_per_block=8), config(threads=512, rows_per_block=8), "idle")
    assert_rule(p, config(threads=256, rows_per_block=8), config(threads=256, rows_per_block=16), "rows_per_block")
    assert G.violations(p, config(threads=512, rows_per_block=1, vec_bytes=4)) == []  # 1000 vectors of 1
    tiny = problem("float16", rows=10, cols=3, count=1, axis=1, window=1)  # 64 threads are always allowed
    assert_rule(tiny, config(threads=64, rows_per_block=1), config(threads=128, rows_per_block=1), "idle")
    bad = problem("float16", rows=10, cols=3, count=100, axis=1, sentinel_rate=0.1)
    assert_rule(
        bad,
        config(threads=64, rows_per_block=8),
        config(threads=64, rows_per_block=8, check_bounds="false"),
        "check_bounds='false'",
    )
    assert G.violations(p, config(threads=256, rows_per_block=8, check_bounds="false")) == []
    assert G.violations(p, config(vec_bytes=2)) == ["vec_bytes=2 is not a multiple of the 4-byte element"]
    # 2^20 entries in tiles of 64 and 2^19 rows in strips of 1: 2^33 blocks, capped to a multiple of the
    # 2^14 tiles below 2^31 (each block walks 4 strips)
    huge = problem("float16", rows=2**20, cols=2**19, count=2**20, axis=1, window=2**19, index_dtype="int64")
    assert G.violations(huge, config(threads=64, rows_per_block=1, vec_bytes=2)) == []
    assert G.geometry(huge, config(threads=64, rows_per_block=1, vec_bytes=2)).grid == (2**14 * (2**17 - 1), 1, 1)
    assert G.geometry(huge, config(threads=512, rows_per_block=16, vec_bytes=16)).grid == (2**8 * 2**15, 1, 1)


def test_violations_reports_every_broken_rule() -> None:
    assert len(G.violations(ODD, config(threads=512, rows_per_block=1, check_bounds="false"))) == 2


# ---------------------------------------------------------------------------------------------
# default_config, geometry, buffers, args, work, distance

VARIETY = [
    (d, r, c, k)
    for d in DTYPES
    for (r, c, k) in [(1, 1, 1), (1001, 73, 999), (2**20, 512, 2**20), (7, 2**20, 3), (10, 64, 1), (3, 2, 10**6)]
]


@pytest.mark.parametrize(("dtype", "rows", "cols", "count"), VARIETY)
def test_default_config_is_valid(dtype: str, rows: int, cols: int, count: int) -> None:
    for extra in ({}, {"mask": True, "sentinel_rate": 0.5}):
        p = problem(dtype, rows=rows, cols=cols, count=count, **extra)
        assert G.violations(p, G.default_config(p)) == []


@pytest.mark.parametrize(("dtype", "rows", "cols", "count"), VARIETY)
def test_default_config_is_valid_on_new_forms(dtype: str, rows: int, cols: int, count: int) -> None:
    whole = {} if rows * count < 2**40 else {"window": 1000}  # the default window N, where it fits
    for extra in (
        {"axis": 1, **whole},
        {"dense_offset": 3, "window": 7},
        {"axis": 1, "window": 1, "dense_offset": -5, "mask": True, "sentinel_rate": 0.5},
        {"dense_offset": -64, "window": 1024, "oob_rate": 0.25},
    ):
        p = problem(dtype, rows=rows, cols=cols, count=count, **extra)
        assert G.violations(p, G.default_config(p)) == [], (p, G.default_config(p).label())


def test_one_template_rows_keeps_the_old_space_and_defaults() -> None:
    """One template, ``rows``, holding the four parameters of the old flat space (same domains), and
    the old default configurations."""
    assert G.space.names() == ("rows",) and G.space.size() == 5 * 4 * 4 * 2
    assert [p.name for p in G.space.template("rows").params] == [
        "rows_per_block",
        "threads",
        "vec_bytes",
        "check_bounds",
    ]
    template, typed = G.typed(config(threads=128))
    assert template is ROWS and typed == RowsConfig(rows_per_block=4, threads=128, vec_bytes=16, check_bounds="true")
    assert G.template_config("rows", typed) == config(threads=128)
    assert G.default_config(CLEAN) == config(rows_per_block=4, threads=256)  # 64 vectors a row: 64 threads each
    assert G.default_config(ODD) == config(rows_per_block=4, threads=256)  # 73 vectors: 96 threads at most
    columns = problem("float32", rows=1000, cols=300, count=1000, axis=1, window=8)
    assert G.default_config(columns) == config(rows_per_block=1, threads=256)
    many = problem("float16", rows=4096, cols=300, count=2**16, axis=1)  # 32 tiles of entries, 4096 rows
    assert G.default_config(many) == config(rows_per_block=16, threads=256)


def test_geometry_buffers_args_new_forms() -> None:
    w = problem("float16", rows=1001, cols=73, count=999, dense_offset=-5, window=40, mask=True, padding="nan")
    cfg = config(rows_per_block=8, threads=256, vec_bytes=8)
    assert G.geometry(w, cfg).grid == (125, 1, 1)
    assert G.buffers(w)[-1] == BufferSpec("out", (999, 40), "float16", "output")
    assert G.args(w, cfg)[4:] == tuple(
        ScalarArg("i64", v, name)
        for name, v in (("N", 1001), ("D", 73), ("K", 999), ("offset", 0), ("start", -5), ("window", 40))
    ) + (ScalarArg("u16", 0x7E00, "pad"),)
    assert_rows_variant(G.render(w, cfg), "gather_window_masked", "unsigned short", "int", 8, 256, 4, True)
    c = problem(
        "float32", rows=1001, cols=73, count=999, axis=1, window=17, dense_offset=3, offset=-2, index_dtype="int64"
    )
    cfg = config(rows_per_block=4, threads=64, vec_bytes=8)
    geo = G.geometry(c, cfg)  # 999 entries in tiles of 64 x 2, 17 rows in strips of 4
    assert (geo.grid, geo.block, geo.shared_bytes) == ((8 * 5, 1, 1), (64, 1, 1), 0)
    assert G.buffers(c)[-1] == BufferSpec("out", (17, 999), "float32", "output")
    assert G.args(c, cfg) == (
        BufferArg("A", "const unsigned int"),
        BufferArg("idx", "const long long"),
        BufferArg("out", "unsigned int"),
        *(
            ScalarArg("i64", v, name)
            for name, v in (("N", 1001), ("D", 73), ("K", 999), ("offset", -2), ("start", 3), ("window", 17))
        ),
        ScalarArg("u32", 0, "pad"),
    )
    assert_rows_variant(G.render(c, cfg), "gather_cols", "unsigned int", "long long", 4, 64, 2, True)
    for q in (w, c):
        inputs = G.make_inputs(q, np.random.default_rng(0))
        outputs = G.reference(q, inputs)
        for spec in G.buffers(q):
            assert (inputs[spec.name] if spec.role == "input" else outputs[spec.name]).shape == spec.shape


def test_geometry_buffers_args() -> None:
    p = problem("bfloat16", rows=1001, cols=73, count=999, index_dtype="int64", offset=-5, padding="neg_zero")
    cfg = config(rows_per_block=8, threads=256, vec_bytes=8)
    geo = G.geometry(p, cfg)
    assert (geo.grid, geo.block, geo.shared_bytes) == ((125, 1, 1), (256, 1, 1), 0)
    assert G.buffers(p) == (
        BufferSpec("A", (1001, 73), "bfloat16", "input"),
        BufferSpec("idx", (999,), "int64", "input"),
        BufferSpec("out", (999, 73), "bfloat16", "output"),
    )
    assert G.args(p, cfg) == (
        BufferArg("A", "const unsigned short"),
        BufferArg("idx", "const long long"),
        BufferArg("out", "unsigned short"),
        ScalarArg("i64", 1001, "N"),
        ScalarArg("i64", 73, "D"),
        ScalarArg("i64", 999, "K"),
        ScalarArg("i64", -5, "offset"),
        ScalarArg("u16", 0x8000, "pad"),
    )
    m = problem("float32", rows=10, cols=4, count=3, mask=True, padding="nan")
    assert [b.name for b in G.buffers(m)] == ["A", "idx", "mask", "out"]
    assert G.buffers(m)[2] == BufferSpec("mask", (3,), "uint8", "input")
    assert G.args(m, cfg)[:4] == (
        BufferArg("A", "const unsigned int"),
        BufferArg("idx", "const int"),
        BufferArg("mask", "const unsigned char"),
        BufferArg("out", "unsigned int"),
    )
    assert G.args(m, cfg)[-1] == ScalarArg("u32", NAN32, "pad")
    assert_rows_variant(G.render(m, cfg), "gather_rows_masked", "unsigned int", "int", 8, 256, 2, True)
    assert_rows_variant(G.render(p, cfg), "gather_rows", "unsigned short", "long long", 8, 256, 4, True)
    # the buffers the worker creates are the ones make_inputs and reference fill
    inputs = G.make_inputs(m, np.random.default_rng(0))
    outputs = G.reference(m, inputs)
    for spec in G.buffers(m):
        array = inputs[spec.name] if spec.role == "input" else outputs[spec.name]
        assert array.shape == spec.shape and array.dtype.name in (spec.dtype, element_type(m.element).storage.__name__)


@pytest.mark.parametrize(
    "form, data, members",
    [
        (
            "gather_rows",
            {"dtype": "bfloat16", "index_dtype": "int64"},
            ["const unsigned short* A", "const long long* idx", "unsigned short* out"],
        ),
        (
            "gather_rows_masked",
            {"mask": True},
            ["const unsigned int* A", "const int* idx", "const unsigned char* mask", "unsigned int* out"],
        ),
        (
            "gather_window_masked",
            {"dtype": "float16", "dense_offset": -1, "window": 2, "mask": True},
            ["const unsigned short* A", "const int* idx", "const unsigned char* mask", "unsigned short* out"],
        ),
        ("gather_cols", {"axis": 1, "window": 3}, ["const unsigned int* A", "const int* idx", "unsigned int* out"]),
    ],
)
def test_the_kernel_takes_its_arguments_as_one_named_struct(form, data, members) -> None:
    """The ``rows`` template's kernels take ``Cfg::Args``: the buffers typed by the element and index
    types, then the 64-bit extents and offsets (and the sparse view's start and window), then the
    padding's bits as an element, in the old parameter order (the layout is asserted in the source, so
    the compiles below prove it)."""
    p = problem(**data)
    source = G.render(p, config(vec_bytes=4))
    assert source.name_expression == f"{form}<Cfg>"
    pad = "unsigned short" if element_type(p.element).itemsize == 2 else "unsigned int"
    dense = [] if p.whole_rows else ["long long start", "long long window"]
    scalars = ["long long N", "long long D", "long long K", "long long offset", *dense, f"{pad} pad"]
    assert arg_members(source) == members + scalars
    assert "using Args = Args_t;" in source.code


def test_work() -> None:
    p = problem("bfloat16", rows=1000, cols=512, count=2000)
    assert G.work(p).bytes_moved == 2000 * 512 * 2 * 2 + 2000 * 4 and G.work(p).flops == 0
    s = problem(
        "bfloat16",
        rows=1000,
        cols=512,
        count=2000,
        sentinel_rate=0.05,
        oob_rate=0.05,
        index_dtype="int64",
        mask=True,
        mask_rate=0.1,
    )
    assert s.valid_entries == 1600
    assert G.work(s).bytes_moved == (2000 + 1600) * 512 * 2 + 2000 * (8 + 1)


def test_work_new_forms() -> None:
    """Bytes really moved: every output element written, the in-range part of the window read for
    every valid entry, and the indices (and mask) read once."""
    assert SPARSE.dense_inside == 256
    assert G.work(SPARSE).bytes_moved == (4096 * 256 + 4096 * 256) * 2 + 4096 * 4
    edge = problem("float32", rows=100, cols=64, count=10, dense_offset=-8, window=100, sentinel_rate=0.2)
    assert edge.dense_inside == 64 and edge.valid_entries == 8
    assert G.work(edge).bytes_moved == (10 * 100 + 8 * 64) * 4 + 10 * 4
    c = problem("float16", rows=100, cols=64, count=10, axis=1, dense_offset=90, window=20, mask=True, mask_rate=0.5)
    assert c.dense_inside == 10 and c.valid_entries == 5
    assert G.work(c).bytes_moved == (20 * 10 + 5 * 10) * 2 + 10 * 5
    miss = problem("float16", rows=100, cols=64, count=10, axis=1, dense_offset=-30, window=20)
    assert miss.dense_inside == 0 and G.work(miss).bytes_moved == 20 * 10 * 2 + 10 * 4


def test_distance_new_forms() -> None:
    a = problem("float32", rows=1024, cols=64, count=4096)
    assert G.distance(a, problem("float32", rows=1024, cols=64, count=4096, axis=1)) is None
    w = problem("float32", rows=1024, cols=64, count=4096, window=32, dense_offset=16)
    assert G.distance(a, w) == 1 == G.distance(w, a)
    c1 = problem("float32", rows=1024, cols=64, count=4096, axis=1, window=16)
    c2 = problem("float32", rows=2048, cols=64, count=4096, axis=1, window=64)
    assert G.distance(c1, c2) == pytest.approx(1 + 2)


def test_distance() -> None:
    a = problem("float32", rows=1024, cols=64, count=4096)
    assert G.distance(a, a) == 0
    assert G.distance(a, problem("float32", rows=1024, cols=64, count=4096, sentinel_rate=0.5, offset=3)) == 0
    for other in (
        problem("float16", rows=1024, cols=64, count=4096),
        problem("float32", rows=1024, cols=64, count=4096, index_dtype="int64"),
        problem("float32", rows=1024, cols=64, count=4096, mask=True),
    ):
        assert G.distance(a, other) is None
    b = problem("float32", rows=2048, cols=128, count=1024)
    assert G.distance(a, b) == pytest.approx(1 + 1 + 2) == G.distance(b, a)


def test_shipped_sweep_loads() -> None:
    spec = load_sweep(REPO / "spaces" / "gather.toml")
    assert spec.family.name == "gather" and spec.search.strategy == "exhaustive"
    assert spec.search.finalists == 3 and spec.space.size() < G.space.size()
    assert {n.name for n in spec.problems} == {
        "gather_bf16_1M_x512",
        "gather_bf16_1M_x512_sentinel5",
        "gather_f32_1M_x64_int64",
        "gather_bf16_1M_x512_sparse_view_64_256",
    }
    sparse = next(n.problem for n in spec.problems if n.name.endswith("sparse_view_64_256"))
    assert (sparse.axis, sparse.dense_offset, sparse.window, sparse.out_shape) == (0, 64, 256, (2**20, 256))
    assert G.render(sparse, G.default_config(sparse)).name_expression == "gather_window<Cfg>"
    for named in spec.problems:
        assert named.problem.count == named.problem.rows == 2**20
        assert sum(1 for c in spec.space if not G.violations(named.problem, c)) >= 40


# ---------------------------------------------------------------------------------------------
# the torch baseline, as the worker runs it (torch is on the GPU host only)


def test_torch_baseline_matches_reference() -> None:
    torch = pytest.importorskip("torch")
    from tunebox.runner.worker import _signed

    cases = [
        problem("bfloat16", rows=50, cols=6, count=40),
        problem("float32", rows=50, cols=3, count=40, offset=4),
        problem(
            "float16",
            rows=50,
            cols=5,
            count=40,
            index_dtype="int64",
            sentinel_rate=0.25,
            oob_rate=0.25,
            mask=True,
            mask_rate=0.25,
            padding="value",
            pad_value=-2.0,
            offset=-3,
        ),
        problem("bfloat16", rows=50, cols=16, count=40, dense_offset=4, window=8),
        problem("float32", rows=50, cols=7, count=40, dense_offset=-3, window=12, sentinel_rate=0.25, padding="nan"),
        problem("float32", rows=50, cols=7, count=40, dense_offset=9, window=2, mask=True),
        problem("bfloat16", rows=30, cols=50, count=40, axis=1, sentinel_rate=0.25, padding="neg_inf"),
        problem(
            "float16",
            rows=50,
            cols=9,
            count=40,
            axis=1,
            dense_offset=45,
            window=10,
            mask=True,
            mask_rate=0.25,
            oob_rate=0.25,
            index_dtype="int64",
            padding="value",
            pad_value=-2.0,
            offset=2,
        ),
        problem("float32", rows=6, cols=5, count=8, axis=1, dense_offset=-4, window=3),
    ]
    for p in cases:
        inputs = G.make_inputs(p, np.random.default_rng(0))
        tensors = {k: torch.from_numpy(_signed(v)) for k, v in inputs.items()}
        got = G.torch_baselines(p)[0].run(tensors)["out"]
        want = torch.from_numpy(_signed(G.reference(p, inputs)["out"]))
        assert torch.equal(got.contiguous().view(want.dtype), want), p


# ---------------------------------------------------------------------------------------------
# compilation under NVRTC (no GPU): dtype x index type x check_bounds, vector widths rotating


MATRIX = compile_matrix(DTYPES, INDEX_DTYPES)
MASKED = [("bfloat16", "int32", 16), ("float32", "int64", 8)]


FORMS = {"rows": {}, "window": {"dense_offset": -3, "window": 40}, "cols": {"axis": 1, "dense_offset": -2, "window": 7}}
NEW = [(form, d, i, c, v) for form in ("window", "cols") for d, i, c, v in MATRIX]
NEW_MASKED = [("window", "float16", "int64", 8), ("cols", "bfloat16", "int32", 16), ("cols", "float32", "int64", 4)]


def _pick(
    dtype: str, index_dtype: str, check: str, vec_bytes: int, mask: bool = False, form: str = "rows"
) -> tuple[GatherProblem, Config]:
    """A seeded choice among the valid configs of that kind, on an odd problem (D = 37) when bounds are
    checked."""
    extra = {"mask": True, "mask_rate": 0.5} if mask else {}
    p = problem(
        dtype, rows=1001, cols=37 if check == "true" else 64, count=999, index_dtype=index_dtype, **extra, **FORMS[form]
    )
    sub = G.space.restrict({"vec_bytes": [vec_bytes], "check_bounds": [check]})
    candidates = [c for c in sub if not G.violations(p, c)]
    assert candidates, (dtype, index_dtype, check, vec_bytes)
    suffix = "" if form == "rows" else f"/{form}"
    return p, random.Random(f"{dtype}/{index_dtype}/{check}/{vec_bytes}/{mask}{suffix}").choice(candidates)


def test_matrix_covers_every_kind() -> None:
    for dtype in DTYPES:
        rows = [m for m in MATRIX if m[0] == dtype]
        assert {m[3] for m in rows} == {v for v in (2, 4, 8, 16) if v % element_type(dtype).itemsize == 0}
        assert {(m[1], m[2]) for m in rows} == {(i, c) for i in INDEX_DTYPES for c in ("true", "false")}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory):
    picks = (
        [_pick(*m) for m in MATRIX]
        + [_pick(d, i, "true", v, mask=True) for d, i, v in MASKED]
        + [_pick(d, i, c, v, form=f) for f, d, i, c, v in NEW]
        + [_pick(d, i, "true", v, mask=True, form=f) for f, d, i, v in NEW_MASKED]
    )
    return family_checks.compile_cases(G, picks, cache_dir=tmp_path_factory.mktemp("nvrtc"), workers=4)


IDS = (
    [f"{d}-{i}-check_{c}-v{v}" for d, i, c, v in MATRIX]
    + [f"{d}-{i}-masked-v{v}" for d, i, v in MASKED]
    + [f"{f}-{d}-{i}-check_{c}-v{v}" for f, d, i, c, v in NEW]
    + [f"{f}-{d}-{i}-masked-v{v}" for f, d, i, v in NEW_MASKED]
)


def test_new_forms_cover_every_kind() -> None:
    for form in ("window", "cols"):
        assert sorted(m[1:] for m in NEW if m[0] == form) == sorted(MATRIX)
    assert {f for f, *_ in NEW_MASKED} == {"window", "cols"}


@pytest.mark.parametrize("index", range(len(IDS)), ids=IDS)
def test_variant_compiles(compiled, index: int) -> None:
    (p, cfg), result = compiled[index]
    assert G.violations(p, cfg) == []
    assert result.status is Status.OK, result.log
    assert result.cubin.startswith(b"\x7fELF") and result.registers > 0
    assert result.spill_bytes == 0, (cfg.label(), result.log)
    kernel = ROWS.kernel_name(p)
    assert (
        kernel.startswith(
            {"rows": "gather_rows", "window": "gather_window", "cols": "gather_cols"}[
                "rows" if p.whole_rows else "window" if p.axis == 0 else "cols"
            ]
        )
        and kernel.endswith("_masked") == p.mask
    )
    assert result.lowered_name.startswith("_Z") and kernel in result.lowered_name
    et, typed = element_type(p.element), G.typed(cfg)[1]
    assert isinstance(typed, RowsConfig)
    assert_rows_variant(
        result.source,
        kernel,
        et.ctype,
        "int" if p.index_dtype == "int32" else "long long",
        typed.rows_per_block,
        typed.threads,
        typed.vec_bytes // et.itemsize,
        typed.check_bounds == "true",
    )
