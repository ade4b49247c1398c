"""The windows family without a GPU: problems and their refusals, every validity rule with a passing
and a failing configuration, the numpy reference against a loop over windows (cuTile's example among
them), the work and tolerance it states, and NVRTC compiles of every kind of variant."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from family_checks import assert_rule, compile_cases

from tunebox.dtypes import element_type, padding_bits
from tunebox.errors import InvalidProblem
from tunebox.families import get
from tunebox.limits import MAX_SHARED_BYTES
from tunebox.records import Status

W = get("windows")
BASE = {"dtype": "bfloat16", "rows": 37, "cols": 45, "window": [4, 8], "step": [3, 2]}


def problem(**changes):
    data = {**BASE, "op": "unfold", **changes}
    return W.parse_problem({k: v for k, v in data.items() if v is not None})


def config(**changes):
    values = {"BI": 2, "BJ": 4, "threads": 64, "vector": 1, "staging": "none", "scheme": "direct", **changes}
    return W.config(values)


def by_loop(p, a: np.ndarray) -> np.ndarray:
    """The definition, window by window: unfold as bits, reductions as float64 over the part inside A."""
    et = element_type(p.element)
    (nr, nc), (th, tw), (sr, sc) = p.grid, p.window, p.step
    if p.op == "unfold":
        out = np.empty((nr, nc, th, tw), et.storage)
        for i, j, r, c in itertools.product(range(nr), range(nc), range(th), range(tw)):
            inside = i * sr + r < p.rows and j * sc + c < p.cols
            out[i, j, r, c] = a[i * sr + r, j * sc + c] if inside else padding_bits(et, p.padding, p.pad_value)
        return out
    reduce = {"sum": np.sum, "max": np.max, "min": np.min}[p.op]
    values = et.decode(a)
    return np.array([[reduce(values[i * sr:i * sr + th, j * sc:j * sc + tw]) for j in range(nc)] for i in range(nr)])


def test_cutile_example_window_origin():
    """eachtile(12 x 12, (4, 8); step = (3, 2)): Julia tile (2, 3) covers rows 4:7 and columns 5:12."""
    p = W.parse_problem({"dtype": "float32", "rows": 12, "cols": 12, "window": [4, 8], "step": [3, 2], "op": "unfold"})
    a = np.arange(144, dtype=np.uint32).reshape(12, 12)
    out = W.reference(p, {"A": a})["out"]
    assert p.grid == (4, 6) and out.shape == (4, 6, 4, 8)
    assert np.array_equal(out[1, 2], a[3:7, 4:12])


@pytest.mark.parametrize("op", ["unfold", "sum", "max", "min"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("shape", [((37, 45), (4, 8), (3, 2)), ((29, 31), (2, 3), (5, 7)), ((3, 5), (6, 7), (1, 1)),
                                   ((16, 16), (4, 4), (4, 4))], ids=str)
def test_reference_matches_the_definition(op, dtype, shape):
    (rows, cols), window, step = shape
    data = {"dtype": dtype, "rows": rows, "cols": cols, "window": list(window), "step": list(step), "op": op}
    p = W.parse_problem({**data, "padding": "nan"} if op == "unfold" else data)
    a = W.make_inputs(p, np.random.default_rng(0))["A"]
    got = W.reference(p, {"A": a})["out"]
    want = by_loop(p, a)
    assert got.shape == p.out_shape
    if op == "unfold":
        assert np.array_equal(got, want)
    else:  # max and min exactly; the float64 sum rounded once to float32
        assert np.array_equal(got.view(np.float32), want.astype(np.float32))


def test_outputs_tolerance_and_work():
    p = problem(op="sum", padding=None)
    a = W.make_inputs(p, np.random.default_rng(0))["A"]
    tolerance = W.tolerance(p, {"A": a})
    largest = np.abs(element_type("bfloat16").decode(a)).max()
    assert tolerance.rtol == 0 and tolerance.atol == pytest.approx(32 * largest * 2.0**-22)
    assert tolerance.atol < 2.0**-4  # below the smallest input magnitude
    assert W.tolerance(problem(), {"A": a}) is None and W.tolerance(problem(op="max", padding=None), {"A": a}) is None
    assert [b.shape for b in W.buffers(p)] == [(37, 45), (13, 23)] and W.buffers(p)[1].dtype == "float32"
    # every row and column is read (step < window); 13 x 23 float32 results
    assert W.work(p).bytes_moved == 37 * 45 * 2 + 13 * 23 * 4
    gaps = W.parse_problem({**BASE, "window": [2, 3], "step": [5, 7], "op": "unfold"})
    # rows 0-1, 5-6, ..., 35-36 (16 of 37); columns 0-2, 7-9, ..., 42-44 (21 of 45); windows 8 x 7 x 2 x 3
    assert W.work(gaps).bytes_moved == 16 * 21 * 2 + 8 * 7 * 2 * 3 * 2


@pytest.mark.parametrize("changes, message", [
    ({"window": [0, 4]}, r"window must be two integers in \[1, 64\]"),
    ({"window": [65, 4]}, r"window must be two integers in \[1, 64\]"),
    ({"window": [4]}, "window must be two integers"),
    ({"step": [1, 1025]}, r"step must be two integers in \[1, 1024\]"),
    ({"step": [2.0, 2]}, "step must be two integers"),
    ({"op": "mean"}, "op must be one of"),
    ({"op": "sum", "padding": "nan"}, "pads with its neutral element"),
    ({"padding": "fill"}, "unknown padding"),
    ({"rows": 0}, "rows must be a positive integer"),
    ({"rows": 2**21, "cols": 2**20}, "too many elements"),
    ({"pitch": 3}, "unknown problem key"),
    ({"dtype": "int8"}, "unknown dtype"),
])
def test_bad_problems_are_refused_with_the_reason(changes, message):
    with pytest.raises(InvalidProblem, match=message):
        problem(**changes)


def test_problems_round_trip_and_come_from_caller_arrays():
    class Array:
        def __init__(self, shape, dtype):
            self.shape, self.dtype = shape, dtype

    p = problem(padding="value", pad_value=-2.5)
    assert W.parse_problem(p.to_dict()) == p
    assert "padding" not in problem(op="max", padding=None).to_dict()
    assert W.problem_from_arrays({"A": Array((37, 45), "bfloat16"), "out": Array((13, 23, 4, 8), "bfloat16")},
                                 window=[4, 8], step=[3, 2], op="unfold") == problem()
    with pytest.raises(InvalidProblem, match="needs the arrays A and out"):
        W.problem_from_arrays({"A": Array((37, 45), "bfloat16")}, window=[4, 8], step=[3, 2], op="unfold")
    with pytest.raises(InvalidProblem, match="A must have 2 dimensions"):
        W.problem_from_arrays({"A": Array((37,), "bfloat16"), "out": Array((1,), "bfloat16")}, window=[4, 8],
                              step=[3, 2], op="unfold")


def test_rule_reductions_take_vector_one():
    p = problem(op="sum", padding=None)
    assert_rule(W, p, config(), config(vector=2), "a reduction writes one float per window and takes vector=1")


def test_rule_vector_divides_the_window_width_within_16_bytes():
    assert_rule(W, problem(window=[4, 6]), config(vector=2), config(vector=4), "must divide the window width 6")
    assert_rule(W, problem(dtype="float32"), config(vector=4), config(vector=8), "span at most 16 bytes")


def test_rule_separable_needs_a_staged_reduction():
    p = problem(op="max", padding=None)
    assert_rule(W, p, config(staging="shared", scheme="separable"), config(scheme="separable"),
                "it needs a reduction and staging='shared'")
    assert_rule(W, problem(), config(staging="shared"), config(staging="shared", scheme="separable"),
                "it needs a reduction")


def test_rule_blocks_no_larger_than_the_window_grid():
    p = problem()  # 13 x 23 windows: 16 x 32 rounded up
    assert_rule(W, p, config(BI=16, BJ=32, threads=512), config(BI=32, BJ=32, threads=512), "BI=32 x BJ=32")


def test_rule_grid_rows_within_the_limit():
    tall = W.parse_problem({"dtype": "float32", "rows": 70000, "cols": 8, "window": [1, 8], "step": [1, 8],
                            "op": "max"})
    assert_rule(W, tall, config(BI=2, BJ=1), config(BI=1, BJ=1), "exceeds the limits")


def test_rule_no_idle_threads():
    p = problem(op="sum", padding=None)  # 2 x 4 windows per block: 8 work items, one warp
    assert_rule(W, p, config(threads=64), config(threads=128), "128 threads exceed the 8 work items")


def test_rule_shared_memory_fits_a_block():
    p = W.parse_problem({"dtype": "float32", "rows": 4096, "cols": 4096, "window": [64, 64], "step": [64, 64],
                         "op": "sum"})
    good = config(BI=2, BJ=4, threads=512, staging="shared")  # a 128 x 256 region of float32
    assert_rule(W, p, good, config(BI=4, BJ=8, threads=512, staging="shared"),
                f"exceed the {MAX_SHARED_BYTES} a block may have")
    assert W.geometry(p, good).shared_bytes == 128 * 256 * 4
    separable = config(BI=2, BJ=4, threads=512, staging="shared", scheme="separable")  # and 128 rows x 4 partials
    assert W.geometry(p, separable).shared_bytes == 128 * 256 * 4 + 128 * 4 * 4


def test_defaults_are_valid_everywhere():
    for op, dtype, width in itertools.product(["unfold", "sum", "max", "min"], ["float32", "float16"], [1, 6, 7, 64]):
        data = {"dtype": dtype, "rows": 100, "cols": 1000, "window": [3, width], "step": [2, 5], "op": op}
        p = W.parse_problem(data)
        assert W.violations(p, W.default_config(p)) == [], (data, W.default_config(p).label())


def kinds(p):
    """One valid configuration per (staging, scheme, vector), the largest blocks first."""
    valid = [c for c in W.space if not W.violations(p, c)]
    valid.sort(key=lambda c: (-int(c["BI"]) * int(c["BJ"]), -int(c["threads"])))
    return list({(c["staging"], c["scheme"], c["vector"]): c for c in valid}.values())


def test_every_kind_of_variant_compiles_for_every_op_and_dtype():
    cases = []
    for op, dtype in itertools.product(["unfold", "sum", "max", "min"], ["float32", "float16", "bfloat16"]):
        data = {"dtype": dtype, "rows": 1000, "cols": 999, "window": [5, 8], "step": [3, 4], "op": op}
        p = W.parse_problem(data)
        cases += [(p, c) for c in kinds(p)]
    assert len(cases) >= 40
    for (p, c), build in compile_cases(W, cases, cache_dir=None):
        assert build.status is Status.OK, (p.to_dict(), c.label(), build.log[-2000:])


@pytest.mark.parametrize("size, window, step, fits", [
    (8192, 3, 2, True),  # torch's ceil_mode makes 4096 windows, the last reaching one past the end
    (8192, 4, 2, False),  # torch stops at 4095: its last window (origin 8188) already reaches the end
    (10, 2, 4, True),  # gaps: origins 0, 4, 8
    (3, 6, 1, False),  # windows larger than the axis: torch refuses
])
def test_torch_ceil_mode_windows_match_only_where_the_counts_do(size, window, step, fits):
    from tunebox.families.windows import _ceil_mode_fits

    assert _ceil_mode_fits(size, window, step) is fits
