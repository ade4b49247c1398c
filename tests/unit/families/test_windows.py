"""The windows family without a GPU: problems and their refusals, every validity rule with a passing
and a failing configuration, the numpy reference against a loop over windows (cuTile's example among
them), the work and tolerance it states, and NVRTC compiles of every kind of variant."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from family_checks import assert_rule, compile_cases

from tunebox.build.nvrtc import NvrtcBuilder
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
    """A ``direct`` configuration (a window walk, or unfold)."""
    values = {"template": "direct", "BI": 2, "BJ": 4, "threads": 64, "vector": 1, "staging": "none", **changes}
    return W.config(values)


def separable(**changes):
    """A ``separable`` configuration (staged, reduced over rows then columns)."""
    return W.config({"template": "separable", "BI": 2, "BJ": 4, "threads": 64, **changes})


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
    reductions: dict[str, Callable[..., Any]] = {"sum": np.sum, "max": np.max, "min": np.min}
    reduce = reductions[p.op]
    values = et.decode(a)
    return np.array(
        [[reduce(values[i * sr : i * sr + th, j * sc : j * sc + tw]) for j in range(nc)] for i in range(nr)]
    )


def test_cutile_example_window_origin():
    """eachtile(12 x 12, (4, 8); step = (3, 2)): Julia tile (2, 3) covers rows 4:7 and columns 5:12."""
    p = W.parse_problem({"dtype": "float32", "rows": 12, "cols": 12, "window": [4, 8], "step": [3, 2], "op": "unfold"})
    a = np.arange(144, dtype=np.uint32).reshape(12, 12)
    out = W.reference(p, {"A": a})["out"]
    assert p.grid == (4, 6) and out.shape == (4, 6, 4, 8)
    assert np.array_equal(out[1, 2], a[3:7, 4:12])


@pytest.mark.parametrize("op", ["unfold", "sum", "max", "min"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize(
    "shape",
    [((37, 45), (4, 8), (3, 2)), ((29, 31), (2, 3), (5, 7)), ((3, 5), (6, 7), (1, 1)), ((16, 16), (4, 4), (4, 4))],
    ids=str,
)
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


@pytest.mark.parametrize(
    "changes, message",
    [
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
    ],
)
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
    assert (
        W.problem_from_arrays(
            {"A": Array((37, 45), "bfloat16"), "out": Array((13, 23, 4, 8), "bfloat16")},
            window=[4, 8],
            step=[3, 2],
            op="unfold",
        )
        == problem()
    )
    with pytest.raises(InvalidProblem, match="needs the arrays A and out"):
        W.problem_from_arrays({"A": Array((37, 45), "bfloat16")}, window=[4, 8], step=[3, 2], op="unfold")
    with pytest.raises(InvalidProblem, match="A must have 2 dimensions"):
        W.problem_from_arrays(
            {"A": Array((37,), "bfloat16"), "out": Array((1,), "bfloat16")}, window=[4, 8], step=[3, 2], op="unfold"
        )


def test_rule_reductions_take_vector_one():
    p = problem(op="sum", padding=None)
    assert_rule(W, p, config(), config(vector=2), "a reduction writes one float per window and takes vector=1")


def test_rule_vector_divides_the_window_width_within_16_bytes():
    assert_rule(W, problem(window=[4, 6]), config(vector=2), config(vector=4), "must divide the window width 6")
    assert_rule(W, problem(dtype="float32"), config(vector=4), config(vector=8), "span at most 16 bytes")


def test_rule_separable_needs_a_reduction():
    """The separable template always stages (it has no staging or vector parameter), and reduces."""
    assert W.violations(problem(op="max", padding=None), separable()) == []
    assert_rule(W, problem(), config(staging="shared"), separable(), "it needs a reduction")
    assert W.space.template("separable").size() == 6 * 8 * 4


def test_rule_blocks_no_larger_than_the_window_grid():
    p = problem()  # 13 x 23 windows: 16 x 32 rounded up
    assert_rule(W, p, config(BI=16, BJ=32, threads=512), config(BI=32, BJ=32, threads=512), "BI=32 x BJ=32")


def test_rule_grid_rows_within_the_limit():
    tall = W.parse_problem(
        {"dtype": "float32", "rows": 70000, "cols": 8, "window": [1, 8], "step": [1, 8], "op": "max"}
    )
    assert_rule(W, tall, config(BI=2, BJ=1), config(BI=1, BJ=1), "exceeds the limits")


def test_rule_no_idle_threads():
    p = problem(op="sum", padding=None)  # 2 x 4 windows per block: 8 work items, one warp
    assert_rule(W, p, config(threads=64), config(threads=128), "128 threads exceed the 8 work items")


def test_rule_shared_memory_fits_a_block():
    p = W.parse_problem(
        {"dtype": "float32", "rows": 4096, "cols": 4096, "window": [64, 64], "step": [64, 64], "op": "sum"}
    )
    good = config(BI=2, BJ=4, threads=512, staging="shared")  # a 128 x 256 region of float32
    assert_rule(
        W, p, good, config(BI=4, BJ=8, threads=512, staging="shared"), f"exceed the {MAX_SHARED_BYTES} a block may have"
    )
    assert W.geometry(p, good).shared_bytes == 128 * 256 * 4
    rows_then_columns = separable(BI=2, BJ=4, threads=512)  # and 128 rows x 4 partials
    assert W.geometry(p, rows_then_columns).shared_bytes == 128 * 256 * 4 + 128 * 4 * 4
    assert_rule(W, p, rows_then_columns, separable(BI=4, BJ=8, threads=512), "exceed the")
    assert f"SHARED_BYTES = {128 * 256 * 4 + 128 * 4 * 4};" in W.render(p, rows_then_columns).code


def test_the_kernel_asserts_its_shared_layout_fits_the_launch():
    """The kernel computes its shared-memory layout itself: a launch giving one byte less fails to compile."""
    p = problem(op="sum", padding=None)
    source = W.render(p, separable())
    needed = W.geometry(p, separable()).shared_bytes
    short = dataclasses.replace(
        source, code=source.code.replace(f"SHARED_BYTES = {needed};", f"SHARED_BYTES = {needed - 1};")
    )
    builder = NvrtcBuilder("sm_90", cache_dir=None)
    try:
        fits, exceeds = builder.build([source, short])
    finally:
        builder.close()
    assert fits.status is Status.OK, fits.log[-2000:]
    assert exceeds.status is Status.COMPILE_ERROR and "exceeds the launch's SHARED_BYTES" in exceeds.log


@pytest.mark.parametrize(
    "template, data, bits",
    [
        ("direct", {"op": "unfold", "padding": "value", "pad_value": -2.5}, "unsigned short"),
        ("separable", {"dtype": "float32", "op": "max"}, "unsigned int"),
    ],
)
def test_the_kernel_takes_its_arguments_as_one_named_struct(template, data, bits):
    """Every template's kernel takes ``Cfg::Args``: A's pointer, out, the extents and the padding's bits,
    in the old parameter order, typed by A's element (the layout is asserted in the source, so the
    NVRTC compiles in this file prove it)."""
    p = problem(**data)
    c = config() if template == "direct" else separable()
    code = W.render(p, c).code
    assert (
        f"struct Args_t {{\n  const {bits}* A;\n  void* out;\n  long long R;\n  long long C;\n  long long NR;\n"
        f"  long long NC;\n  {bits} pad;\n}};"
    ) in code
    assert "static_assert(sizeof(Args_t) == 56 && alignof(Args_t) == 8" in code and "using Args = Args_t;" in code
    pad = W.args(p, c)[-1]
    assert pad.name == "pad" and pad.value == (
        padding_bits(element_type("bfloat16"), "value", -2.5) if p.op == "unfold" else 0
    )


def test_defaults_are_valid_everywhere():
    for op, dtype, width in itertools.product(["unfold", "sum", "max", "min"], ["float32", "float16"], [1, 6, 7, 64]):
        data = {"dtype": dtype, "rows": 100, "cols": 1000, "window": [3, width], "step": [2, 5], "op": op}
        p = W.parse_problem(data)
        assert W.violations(p, W.default_config(p)) == [], (data, W.default_config(p).label())
        assert W.default_config(p)["template"] == "direct" and W.default_config(p)["staging"] == "none"


def test_defaults_are_those_of_the_flat_space():
    """unfold: 1 x 8 windows, the widest vector; reductions: 8 x 32 windows; threads for the work items."""
    assert W.default_config(problem()) == config(BI=1, BJ=8, threads=64, vector=8)
    assert W.default_config(problem(op="sum", padding=None)) == config(BI=8, BJ=32, threads=256)
    small = W.parse_problem({"dtype": "float32", "rows": 5, "cols": 9, "window": [2, 3], "step": [2, 2], "op": "min"})
    assert W.default_config(small) == config(BI=4, BJ=8, threads=64)


def kinds(p):
    """One valid configuration per (template, staging, vector), the largest blocks first."""
    valid = [c for c in W.space if not W.violations(p, c)]
    valid.sort(key=lambda c: (-int(c["BI"]) * int(c["BJ"]), -int(c["threads"])))
    return list({(c["template"], c.as_dict().get("staging"), c.as_dict().get("vector")): c for c in valid}.values())


def test_every_kind_of_variant_compiles_for_every_op_and_dtype():
    cases = []
    for op, dtype in itertools.product(["unfold", "sum", "max", "min"], ["float32", "float16", "bfloat16"]):
        data = {"dtype": dtype, "rows": 1000, "cols": 999, "window": [5, 8], "step": [3, 4], "op": op}
        p = W.parse_problem(data)
        cases += [(p, c) for c in kinds(p)]
    assert len(cases) >= 40
    for (p, c), build in compile_cases(W, cases, cache_dir=None):
        assert build.status is Status.OK, (p.to_dict(), c.label(), build.log[-2000:])


@pytest.mark.parametrize(
    "size, window, step, fits",
    [
        (8192, 3, 2, True),  # torch's ceil_mode makes 4096 windows, the last reaching one past the end
        (8192, 4, 2, False),  # torch stops at 4095: its last window (origin 8188) already reaches the end
        (10, 2, 4, True),  # gaps: origins 0, 4, 8
        (3, 6, 1, False),  # windows larger than the axis: torch refuses
    ],
)
def test_torch_ceil_mode_windows_match_only_where_the_counts_do(size, window, step, fits):
    from tunebox.families.windows import _ceil_mode_fits

    assert _ceil_mode_fits(size, window, step) is fits
