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
