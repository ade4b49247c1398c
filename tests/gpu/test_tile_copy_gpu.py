"""tile_copy on the GPU: every padding and bounds mode on odd shapes and negative origins, both
orientations and all dtypes, verified bit for bit, for every template (vector; cp_async with every
staging layout; tma with every swizzle mode, the direct copy and the padding selected in registers),
pipelines of 1 to 4 stages over more tiles per block than stages; sabotaged variants are rejected and
never stored."""

from __future__ import annotations

import itertools
import random

import pytest
from gpu_jobs import assert_sabotage_caught, evaluate, variant

from tunebox.families import get
from tunebox.records import Status
from tunebox.runner.protocol import EvaluateJob
from tunebox.runner.timing import SCREEN

pytestmark = pytest.mark.gpu
FAMILY = get("tile_copy")

ODD_PROBLEMS = [
    {"src": [65, 73], "dst": [64, 32], "origin": [64, 64]},  # the seed's edge: 1 row, 9 columns
    {"src": [257, 131], "dst": [300, 129], "origin": [-5, 3]},
    {"src": [97, 1001], "dst": [1000, 100], "origin": [-7, -9], "transpose": True},
    {"src": [33, 17], "dst": [40, 45], "origin": [-3, -2]},
    {"src": [1, 1], "dst": [3, 5], "origin": [-1, -2], "transpose": True},
]
PADDINGS = [{"padding": m} for m in ("zero", "neg_zero", "nan", "pos_inf", "neg_inf")] + [
    {"padding": "value", "pad_value": -3.25}
]
# Shapes TMA can take in every dtype: rows of src and dst and the origin's column are 16-byte multiples
# (multiples of 8 elements); ragged tiles, negative origins, boxes wholly outside src.
TMA_PROBLEMS = [
    {"src": [65, 72], "dst": [64, 32], "origin": [64, 64]},  # the seed's edge: 1 row, 8 columns
    {"src": [257, 136], "dst": [300, 128], "origin": [-5, -8]},
    {"src": [97, 1000], "dst": [1000, 96], "origin": [-7, -16], "transpose": True},
    {"src": [33, 24], "dst": [40, 48], "origin": [-3, -8]},
    {"src": [1, 8], "dst": [3, 8], "origin": [-1, -8], "transpose": True},
    {"src": [16, 16], "dst": [24, 40], "origin": [20, 32]},  # nothing inside src: all padding
]
VECTOR = {"template": ["vector"]}
# the slices of the space each pipelined template uses (cp_async refuses staging 'none')
PIPELINES: dict[str, dict[str, list[str]]] = {"cp_async": {"staging": ["plain", "padded", "swizzled"]}, "tma": {}}


def configs_for(problem):
    """A spread of valid variants: every bounds mode, vector width and staging layout."""
    space = FAMILY.space.restrict(
        {"BM": [1, 8, 32], "BN": [32, 64, 128], "threads": [64, 128], "tiles_per_block": [1, 2], **VECTOR}
    )
    seen, chosen = set(), []
    for c in space:
        if FAMILY.violations(problem, c):
            continue
        key = (c["bounds"], c["vec_bytes"], c["staging"])
        if key not in seen:
            seen.add(key)
            chosen.append(c)
    return chosen


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("shape", ODD_PROBLEMS, ids=lambda s: f"{s['src']}->{s['dst']}@{s['origin']}")
def test_every_padding_and_bounds_mode_is_exact(runner, builder, dtype, shape):
    for padding in PADDINGS:
        problem = FAMILY.parse_problem({"dtype": dtype, **shape, **padding})
        configs = configs_for(problem)
        assert {c["bounds"] for c in configs} >= {"checked", "split"}
        for config in configs:
            outcome = evaluate(runner, builder, FAMILY, problem, config)
            assert outcome.status is Status.OK, (padding, config.label(), outcome.message)


@pytest.mark.parametrize("transpose", [False, True])
def test_unchecked_on_full_aligned_tiles(runner, builder, transpose):
    problem = FAMILY.parse_problem(
        {
            "dtype": "bfloat16",
            "src": [256, 512],
            "dst": [512, 256] if transpose else [128, 256],
            "origin": [0, 0] if transpose else [64, 128],
            "transpose": transpose,
        }
    )
    configs = [c for c in configs_for(problem) if c["bounds"] == "unchecked"]
    assert configs
    for config in configs:
        assert evaluate(runner, builder, FAMILY, problem, config).status is Status.OK, config.label()


def test_sabotaged_variant_is_rejected(runner, builder):
    problem = FAMILY.parse_problem({"dtype": "float32", "src": [300, 300], "dst": [300, 300]})
    assert_sabotage_caught(
        runner,
        builder,
        FAMILY,
        problem,
        FAMILY.default_config(problem),
        "if (tile >= n_tiles) return;",
        "if (tile >= n_tiles - 1) return;",
        header="tunebox/copy_tiles.cuh",  # the walk over a block's tiles
    )


def test_every_dtype_and_orientation_times(runner, builder):
    for dtype, transpose in itertools.product(["float32", "bfloat16"], [False, True]):
        problem = FAMILY.parse_problem(
            {
                "dtype": dtype,
                "src": [2048, 1024],
                "dst": [1024, 2048] if transpose else [2048, 1024],
                "transpose": transpose,
            }
        )
        config = FAMILY.default_config(problem)
        outcome = runner.run(
            EvaluateJob("tile_copy", problem.to_dict(), variant(builder, FAMILY, problem, config), SCREEN, 7)
        )
        assert outcome.status is Status.OK, outcome.message
        assert len(outcome.samples_ms) >= 10 and all(s > 0 for s in outcome.samples_ms)
        assert outcome.metrics and outcome.metrics.registers > 0


def pipeline_configs(problem, template, keys):
    """A seeded spread of valid variants of a pipelined template, one per combination of the values
    of ``keys`` that has one, each with more tiles per block than stages."""
    space = FAMILY.space.restrict(
        {
            "template": [template],
            "BM": [1, 8, 32, 64],
            "BN": [32, 64, 128],
            "threads": [64, 128],
            "tiles_per_block": [2, 4, 8],
            **PIPELINES[template],
        }
    )
    configs = [c for c in space if c["tiles_per_block"] > c["stages"] and not FAMILY.violations(problem, c)]
    random.Random(f"{problem.key()}/{template}").shuffle(configs)
    return list({tuple(c[k] for k in keys): c for c in configs}.values())


def _padded(dtype, shape, padding):
    return FAMILY.parse_problem({"dtype": dtype, **shape, **padding})


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("shape", ODD_PROBLEMS, ids=lambda s: f"{s['src']}->{s['dst']}@{s['origin']}")
def test_cp_async_is_exact(runner, builder, dtype, shape):
    """Every staging layout, bounds mode and stage count; the padding modes rotate over them (the
    padding is a run-time argument of one code path)."""
    configs = pipeline_configs(_padded(dtype, shape, {"padding": "nan"}), "cp_async", ("staging", "bounds", "stages"))
    assert {c["stages"] for c in configs} == {1, 2, 3, 4} and {c["bounds"] for c in configs} >= {"checked", "split"}
    for k, config in enumerate(configs):
        padding = PADDINGS[k % len(PADDINGS)]
        outcome = evaluate(runner, builder, FAMILY, _padded(dtype, shape, padding), config)
        assert outcome.status is Status.OK, (padding, config.label(), outcome.message)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("shape", TMA_PROBLEMS, ids=lambda s: f"{s['src']}->{s['dst']}@{s['origin']}")
def test_tma_is_exact(runner, builder, dtype, shape):
    """Every swizzle mode with every stage count, each variant on the zero padding (the hardware's fill:
    a direct copy when not transposed) and on one of the padding modes selected in registers."""
    configs = pipeline_configs(_padded(dtype, shape, {"padding": "nan"}), "tma", ("swizzle", "stages"))
    assert {c["swizzle"] for c in configs} == {"none", "32B", "64B", "128B"}
    assert {c["stages"] for c in configs} == {1, 2, 3, 4}
    for k, config in enumerate(configs):
        for padding in (PADDINGS[0], PADDINGS[1 + k % (len(PADDINGS) - 1)]):
            outcome = evaluate(runner, builder, FAMILY, _padded(dtype, shape, padding), config)
            assert outcome.status is Status.OK, (padding, config.label(), outcome.message)


@pytest.mark.parametrize("template", ["cp_async", "tma"])
@pytest.mark.parametrize("transpose", [False, True])
def test_long_pipelines_are_exact(runner, builder, template, transpose):
    """Blocks of 16 tiles through 1 to 4 stages (each buffer reused several times) on a larger ragged
    crop, float32 and bfloat16, zero and negative-infinity padding."""
    shape = {
        "src": [1000, 1000],
        "dst": [1000, 1024] if not transpose else [1024, 1000],
        "origin": [-8, -8],
        "transpose": transpose,
    }
    for dtype, padding in itertools.product(["float32", "bfloat16"], [PADDINGS[0], PADDINGS[4]]):
        problem = _padded(dtype, shape, padding)
        space = FAMILY.space.restrict(
            {
                "template": [template],
                "tiles_per_block": [16],
                "BM": [8, 32, 64],
                "BN": [64, 128],
                "threads": [128, 256],
                **PIPELINES[template],
            }
        )
        configs = [c for c in space if not FAMILY.violations(problem, c)]
        random.Random(f"{problem.key()}/{template}").shuffle(configs)
        chosen = {(c["stages"], c.as_dict().get("swizzle")): c for c in configs}  # cp_async has no swizzle
        assert {s for s, _ in chosen} == {1, 2, 3, 4}
        for config in chosen.values():
            outcome = evaluate(runner, builder, FAMILY, problem, config)
            assert outcome.status is Status.OK, (dtype, padding, config.label(), outcome.message)


@pytest.mark.parametrize(
    ("template", "find", "replace_with"),
    [
        ("cp_async", "on_path(path_of(i0, j0), ", "if (t > 0) on_path(path_of(i0, j0), "),
        ("tma", "if (threadIdx.x == 0) store_tile<", "if (threadIdx.x == 0 && t > 0) store_tile<"),
    ],
)
def test_sabotaged_pipeline_is_rejected(runner, builder, template, find, replace_with):
    """The first tile of every block left unstored (every load still awaited) is caught."""
    problem = FAMILY.parse_problem(
        {"dtype": "float32", "src": [300, 304], "dst": [300, 296], "origin": [-4, 8], "padding": "nan"}
    )
    config = pipeline_configs(problem, template, ("stages",))[0]
    assert_sabotage_caught(runner, builder, FAMILY, problem, config, find, replace_with)


# ---------------------------------------------------------------------------------------------
# template paired (2-byte transposes staged as pair words) and degenerate shapes (issue 16 item 6)

# Transposes the paired template takes: full aligned tiles (every bounds mode), whole odd shapes, rows
# whose length is even but not a vector multiple (row b's vectors shifted by whole words), a ragged crop
# at a negative origin, a source of 2 rows (one pair) and of 3 (a tail row without a partner), 2 and 3
# columns, tiles wholly outside src, and a destination smaller than one tile.
PAIRED_PROBLEMS = [
    {"src": [256, 512], "dst": [512, 256]},
    {"src": [97, 1001], "dst": [1001, 97]},
    {"src": [130, 70], "dst": [70, 130]},
    {"src": [97, 1001], "dst": [1000, 100], "origin": [-7, -9]},
    {"src": [2, 37], "dst": [37, 2]},
    {"src": [3, 37], "dst": [40, 5], "origin": [0, -1]},
    {"src": [45, 2], "dst": [2, 45]},
    {"src": [45, 3], "dst": [5, 50], "origin": [-1, 0]},
    {"src": [50, 50], "dst": [20, 20], "origin": [60, 60]},
    {"src": [5, 7], "dst": [6, 4], "origin": [1, -1]},
]
# Shapes whose kernel view is a flat copy (transposes with a unit dimension, narrow whole-row copies), a
# narrow pad that stays 2-D, and 1-row / 1-column transposes at origins that read padding.
DEGENERATE_PROBLEMS = [
    {"src": [1, 4099], "dst": [4099, 1], "transpose": True},
    {"src": [4099, 1], "dst": [1, 4099], "transpose": True},
    {"src": [1, 999], "dst": [990, 3], "origin": [-2, 5], "transpose": True},
    {"src": [999, 1], "dst": [3, 990], "origin": [5, -2], "transpose": True},
    {"src": [10007, 1], "dst": [10007, 1]},
    {"src": [3001, 3], "dst": [3005, 3], "origin": [-2, 0]},
    {"src": [3000, 77], "dst": [3000, 80]},
    {"src": [1, 1], "dst": [3, 5], "origin": [-1, -2], "transpose": True},
]
TRANSPOSED_PADDINGS = [PADDINGS[2], PADDINGS[4], PADDINGS[5]]  # nan, neg_inf, value: never zero bits


def _shape_id(shape):
    return f"{shape['src']}->{shape['dst']}@{shape.get('origin', [0, 0])}{'T' if shape.get('transpose') else ''}"


def paired_configs(problem):
    """A seeded spread of valid paired variants: every bounds mode, staging layout and vector width the
    problem allows, some with several tiles per block."""
    space = FAMILY.space.restrict(
        {
            "template": ["paired"],
            "BM": [8, 16, 32],
            "BN": [16, 32, 64, 128],
            "threads": [64, 128],
            "tiles_per_block": [1, 2, 4],
        }
    )
    configs = [c for c in space if not FAMILY.violations(problem, c)]
    random.Random(problem.key()).shuffle(configs)
    return list({(c["bounds"], c["staging"], c["vec_bytes"]): c for c in configs}.values())


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("shape", PAIRED_PROBLEMS, ids=_shape_id)
def test_paired_is_exact(runner, builder, dtype, shape):
    """Every staging layout, bounds mode and vector width, the padding rotating (never zero bits)."""
    problem = _padded(dtype, {**shape, "transpose": True}, {"padding": "nan"})
    configs = paired_configs(problem)
    assert {c["staging"] for c in configs} == {"plain", "padded", "swizzled"}
    assert {c["bounds"] for c in configs} >= {"checked", "split"} and {c["vec_bytes"] for c in configs} == {4, 8, 16}
    if shape == PAIRED_PROBLEMS[0]:
        assert "unchecked" in {c["bounds"] for c in configs}
    for k, config in enumerate(configs):
        padding = TRANSPOSED_PADDINGS[k % len(TRANSPOSED_PADDINGS)]
        outcome = evaluate(runner, builder, FAMILY, _padded(dtype, {**shape, "transpose": True}, padding), config)
        assert outcome.status is Status.OK, (padding, config.label(), outcome.message)


def test_paired_large_odd_transpose_is_exact(runner, builder):
    """The benchmark's bfloat16 12345 x 6789 transpose, split and checked, and a float16 one of even
    rows, through a few tiles per block."""
    for dtype, src in (("bfloat16", [12345, 6789]), ("float16", [6000, 7000])):
        problem = FAMILY.parse_problem({"dtype": dtype, "src": src, "dst": src[::-1], "transpose": True})
        for bounds, staging in (("split", "swizzled"), ("checked", "padded"), ("split", "plain")):
            values = {"BM": 32, "BN": 128, "threads": 256, "vec_bytes": 16, "tiles_per_block": 2}
            config = FAMILY.config({"template": "paired", **values, "bounds": bounds, "staging": staging})
            assert FAMILY.violations(problem, config) == []
            outcome = evaluate(runner, builder, FAMILY, problem, config)
            assert outcome.status is Status.OK, (dtype, config.label(), outcome.message)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape", DEGENERATE_PROBLEMS, ids=_shape_id)
def test_degenerate_shapes_are_exact(runner, builder, dtype, shape):
    """The default and a spread of vector and cp_async variants (their kernels take the flat view),
    paired refused where the view is a copy."""
    problem = _padded(dtype, shape, {"padding": "nan"})
    if shape.get("transpose"):
        assert not problem.kernel_view.transpose and not paired_configs(problem)
    configs = [FAMILY.default_config(problem), *configs_for(problem)]
    configs += pipeline_configs(problem, "cp_async", ("staging", "bounds"))
    for k, config in enumerate(configs):
        padded = _padded(dtype, shape, PADDINGS[k % len(PADDINGS)])
        outcome = evaluate(runner, builder, FAMILY, padded, config)
        assert outcome.status is Status.OK, (config.label(), outcome.message)


def test_long_column_copies_flat(runner, builder):
    """10,000,019 x 1, copied and transposed from a row, with the default (one-row tiles)."""
    for shape in (
        {"src": [10_000_019, 1], "dst": [10_000_019, 1]},
        {"src": [1, 10_000_019], "dst": [10_000_019, 1], "transpose": True},
    ):
        problem = FAMILY.parse_problem({"dtype": "bfloat16", **shape})
        config = FAMILY.default_config(problem)
        assert config["BM"] == 1 and problem.kernel_view.dst == (1, 10_000_019)
        assert evaluate(runner, builder, FAMILY, problem, config).status is Status.OK, config.label()


# ---------------------------------------------------------------------------------------------
# template shifted (copies whose rows move in aligned vectors whatever their alignment; issue 16 item 6)

# Crops at odd origins, odd-width pads, negative origins (padding on the checked path), a destination
# smaller than one tile, tiles wholly outside src, narrow whole-row copies run flat from an offset, one
# row, and the serving crop of 6000^2 to 5990^2.
SHIFTED_PROBLEMS = [
    {"src": [60, 60], "dst": [59, 57], "origin": [1, 3]},
    {"src": [300, 77], "dst": [300, 80]},
    {"src": [97, 1001], "dst": [1000, 999], "origin": [-7, -9]},
    {"src": [5, 7], "dst": [3, 5], "origin": [1, 1]},
    {"src": [50, 50], "dst": [20, 20], "origin": [60, 60]},
    {"src": [3001, 3], "dst": [2997, 3], "origin": [3, 0]},
    {"src": [1, 100_003], "dst": [1, 99_999], "origin": [0, 1]},
    {"src": [6000, 6000], "dst": [5990, 5990], "origin": [3, 5]},
]


def shifted_configs(problem):
    """A seeded spread of valid shifted variants: every vector width, small and wide tiles, several tiles
    per block."""
    space = FAMILY.space.restrict(
        {
            "template": ["shifted"],
            "BM": [1, 2, 8],
            "BN": [8, 16, 64, 256, 1024],
            "threads": [64, 128, 256],
            "tiles_per_block": [1, 2, 4],
        }
    )
    configs = [c for c in space if not FAMILY.violations(problem, c)]
    random.Random(problem.key()).shuffle(configs)
    return list({(c["vec_bytes"], c["BN"] >= 64, c["tiles_per_block"] > 1): c for c in configs}.values())


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("shape", SHIFTED_PROBLEMS, ids=_shape_id)
def test_shifted_is_exact(runner, builder, dtype, shape):
    """Every vector width, narrow and wide tiles, the padding rotating (never zero bits)."""
    configs = shifted_configs(_padded(dtype, shape, {"padding": "nan"}))
    assert {c["vec_bytes"] for c in configs} == {4, 8, 16}
    for k, config in enumerate(configs):
        padding = TRANSPOSED_PADDINGS[k % len(TRANSPOSED_PADDINGS)]
        outcome = evaluate(runner, builder, FAMILY, _padded(dtype, shape, padding), config)
        assert outcome.status is Status.OK, (padding, config.label(), outcome.message)


def test_sabotaged_shift_is_rejected(runner, builder):
    """A shift that drops its half-word step (whole words only) is caught on a float16 crop at an odd
    column."""
    problem = FAMILY.parse_problem({"dtype": "float16", "src": [600, 600], "dst": [590, 590], "origin": [3, 5]})
    config = FAMILY.config(
        {"template": "shifted", "BM": 8, "BN": 256, "threads": 128, "vec_bytes": 16, "tiles_per_block": 1}
    )
    assert_sabotage_caught(
        runner,
        builder,
        FAMILY,
        problem,
        config,
        "const u32 bits = (u32)(bytes & 3) * 8u;",
        "const u32 bits = 0u;",
        expect="elements wrong",
    )


def windowed_configs(problem):
    """A seeded spread of valid windowed variants: every vector width and pitch, small and wide tiles,
    several tiles per block."""
    space = FAMILY.space.restrict(
        {
            "template": ["windowed"],
            "BM": [8, 16, 64],
            "BN": [16, 32, 64, 128],
            "threads": [64, 128, 256],
            "tiles_per_block": [1, 2, 4],
        }
    )
    configs = [c for c in space if not FAMILY.violations(problem, c)]
    random.Random(problem.key()).shuffle(configs)
    keys = ("vec_bytes", "staging", "stages")
    return list({(*(c[k] for k in keys), c["BM"] >= 16, c["tiles_per_block"] > 1): c for c in configs}.values())


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("shape", PAIRED_PROBLEMS, ids=_shape_id)
def test_windowed_is_exact(runner, builder, dtype, shape):
    """Every vector width, pitch and ring depth, the padding rotating (never zero bits); shapes whose view
    is a copy have no windowed variant."""
    problem = _padded(dtype, {**shape, "transpose": True}, {"padding": "nan"})
    configs = windowed_configs(problem)
    if not problem.kernel_view.transpose:
        assert not configs
        return
    assert {c["vec_bytes"] for c in configs} == {4, 8, 16} and {c["staging"] for c in configs} == {"plain", "padded"}
    assert {c["stages"] for c in configs} == {1, 2, 3}
    for k, config in enumerate(configs):
        padding = TRANSPOSED_PADDINGS[k % len(TRANSPOSED_PADDINGS)]
        outcome = evaluate(runner, builder, FAMILY, _padded(dtype, {**shape, "transpose": True}, padding), config)
        assert outcome.status is Status.OK, (padding, config.label(), outcome.message)


def test_windowed_large_odd_transposes_are_exact(runner, builder):
    """The serving grid's odd 2-byte transposes (rows at every offset into their windows), wide tiles,
    several tiles per block, through rings of stages."""
    for dtype, src in (("float16", [7919, 10007]), ("bfloat16", [4097, 8191]), ("bfloat16", [12345, 6789])):
        problem = FAMILY.parse_problem({"dtype": dtype, "src": src, "dst": src[::-1], "transpose": True})
        for BM, BN, staging, stages in ((64, 64, "plain", 2), (32, 128, "padded", 1), (64, 32, "plain", 3)):
            values = {"BM": BM, "BN": BN, "threads": 256, "vec_bytes": 16, "tiles_per_block": 4, "stages": stages}
            config = FAMILY.config({"template": "windowed", **values, "staging": staging})
            assert FAMILY.violations(problem, config) == []
            outcome = evaluate(runner, builder, FAMILY, problem, config)
            assert outcome.status is Status.OK, (dtype, config.label(), outcome.message)


def test_sabotaged_window_offset_is_rejected(runner, builder):
    """Reading each staged row from its window's start (its offset into the window dropped) is caught on
    an odd float16 transpose."""
    problem = FAMILY.parse_problem({"dtype": "float16", "src": [601, 599], "dst": [599, 601], "transpose": True})
    config = FAMILY.config(
        {
            "template": "windowed",
            "BM": 64,
            "BN": 64,
            "threads": 256,
            "vec_bytes": 16,
            "tiles_per_block": 1,
            "staging": "plain",
            "stages": 1,
        }
    )
    assert_sabotage_caught(
        runner,
        builder,
        FAMILY,
        problem,
        config,
        "const int twice_s = 2 * (o.s0 + q * o.step);",
        "const int twice_s = 0 * (o.s0 + q * o.step);",
        expect="elements wrong",
    )


NARROW_PROBLEMS = [
    {"src": [3, 1001], "dst": [1001, 3], "transpose": True},
    {"src": [13, 3000], "dst": [3000, 13], "transpose": True},
    {"src": [7, 250], "dst": [260, 9], "origin": [-1, -5], "transpose": True},
    {"src": [801, 7], "dst": [800, 5], "origin": [1, 1]},
    {"src": [300, 5], "dst": [310, 8], "origin": [-4, -2]},
    {"src": [2, 3], "dst": [3, 2], "transpose": True},
]


def narrow_configs(problem):
    """A seeded spread of valid narrow variants: every vector width, one and several vectors a thread and
    chunks a block."""
    space = FAMILY.space.restrict({"template": ["narrow"], "threads": [64, 256]})
    configs = [c for c in space if not FAMILY.violations(problem, c)]
    random.Random(problem.key()).shuffle(configs)
    return list({(c["vec_bytes"], c["vectors"] > 1, c["chunks_per_block"] > 1): c for c in configs}.values())


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("shape", NARROW_PROBLEMS, ids=_shape_id)
def test_narrow_is_exact(runner, builder, dtype, shape):
    """Every vector width, several vectors a thread and chunks a block, the padding rotating."""
    configs = narrow_configs(_padded(dtype, shape, PADDINGS[0]))
    assert {c["vec_bytes"] for c in configs} == ({4, 8, 16} if dtype == "float32" else {2, 4, 8, 16})
    for k, config in enumerate(configs):
        padding = PADDINGS[k % len(PADDINGS)]
        outcome = evaluate(runner, builder, FAMILY, _padded(dtype, shape, padding), config)
        assert outcome.status is Status.OK, (padding, config.label(), outcome.message)


def test_narrow_large_transposes_are_exact(runner, builder):
    """Narrow transposes of the sizes served (tens of millions of elements), wide chunks."""
    for dtype, rows, cols in (("float32", 3, 4_000_000), ("bfloat16", 5, 3_000_001), ("float16", 16, 1_000_003)):
        problem = FAMILY.parse_problem({"dtype": dtype, "src": [rows, cols], "dst": [cols, rows], "transpose": True})
        for threads, vectors, chunks in ((256, 4, 4), (1024, 8, 1), (128, 1, 16)):
            values = {"threads": threads, "vec_bytes": 16, "vectors": vectors, "chunks_per_block": chunks}
            config = FAMILY.config({"template": "narrow", **values})
            outcome = evaluate(runner, builder, FAMILY, problem, config)
            assert outcome.status is Status.OK, (dtype, config.label(), outcome.message)


def test_sabotaged_narrow_row_step_is_rejected(runner, builder):
    """Each vector's first destination row taken as if rows held one element more is caught on a narrow
    float32 transpose (the reads stay inside src)."""
    problem = FAMILY.parse_problem({"dtype": "float32", "src": [3, 10001], "dst": [10001, 3], "transpose": True})
    config = FAMILY.config({"template": "narrow", "threads": 128, "vec_bytes": 16, "vectors": 2, "chunks_per_block": 1})
    assert_sabotage_caught(
        runner,
        builder,
        FAMILY,
        problem,
        config,
        "i64 i = row0 + offset / nd;",
        "i64 i = row0 + offset / (nd + 1);",
        expect="elements wrong",
    )
