"""gemm on the GPU, verified by the worker against the float64 reference within the family's
tolerance (NaN never passes; D's padding columns must still hold poison): shapes (1, 1, 1),
(65, 97, 73) and (4099, 4097, 4095), odd leading dimensions, bfloat16 and float32 output, alpha and
ReLU, every template (mma; TMA + wgmma where rows are aligned, on padded copies where not) with a
spread of tile shapes and pipeline depths, the mma template with each shared-memory layout, full
tiles with bounds='false', pad_rows copying one operand or both; sabotaged variants (a NaN written,
the last K step dropped) are rejected on both kernels; the torch baseline agrees."""

from __future__ import annotations

import random

import pytest
from gpu_jobs import assert_sabotage_caught, evaluate, retime_with_baseline

from tunebox.families import get
from tunebox.records import Status

pytestmark = pytest.mark.gpu
GEMM = get("gemm")
SHAPES = [
    {"M": 1, "N": 1, "K": 1},
    {"M": 65, "N": 97, "K": 73},
    {"M": 65, "N": 97, "K": 73, "lda": 76, "ldb": 102, "ldd": 98},  # odd leading dimensions
    {"M": 4099, "N": 4097, "K": 4095},
    {"M": 300, "N": 130, "K": 257, "lda": 261, "ldd": 131, "alpha": -0.75, "relu": True},
    {"M": 200, "N": 136, "K": 100, "lda": 104, "ldb": 136, "ldd": 137},  # aligned rows: template wgmma
]


def configs_for(problem):
    """The default and a seeded spread of valid variants: on template mma each BK and stage count
    once; on the wgmma templates each (BM, BN, consumers, tiles_per_block) once, six of them."""
    space = GEMM.space.restrict(
        {"template": ["mma", "wgmma", "padded"], "BM": [32, 64, 128, 256], "BN": [32, 64, 128, 256]}
    )
    configs = [c for c in space if not GEMM.violations(problem, c)]
    random.Random(str(problem)).shuffle(configs)
    mma = {(c["BK"], c["stages"]): c for c in configs if c["template"] == "mma" and c["BM"] <= 128 and c["BN"] <= 128}
    tma = list(
        {
            (c["BM"], c["BN"], c["consumers"], c["tiles_per_block"]): c for c in configs if c["template"] != "mma"
        }.values()
    )
    assert tma, "every shape has a wgmma template"
    return [GEMM.default_config(problem), *mma.values(), *tma[:6]]


@pytest.mark.parametrize("out_dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_bounded_gemm_is_within_tolerance(runner, builder, out_dtype, shape):
    problem = GEMM.parse_problem({**shape, "out_dtype": out_dtype})
    for config in configs_for(problem):
        outcome = evaluate(runner, builder, GEMM, problem, config, timeout_s=120)
        assert outcome.status is Status.OK, (config.label(), outcome.message)


@pytest.mark.parametrize("tiles_per_block", [2, 4, 16])
@pytest.mark.parametrize("stages", [2, 3])
def test_blocks_taking_several_tiles(runner, builder, tiles_per_block, stages):
    """The mbarrier ring runs on across a block's tiles: odd K-step counts (65 steps of 64 for K =
    4095, 2 for K = 73) against 2-3 stages, tile counts that do not divide by tiles_per_block, and
    both operands padded in one pad_rows launch."""
    for shape, template in (
        ({"M": 4099, "N": 4097, "K": 4095}, "padded"),
        ({"M": 65, "N": 97, "K": 73}, "padded"),
        ({"M": 1000, "N": 1000, "K": 4096}, "wgmma"),
    ):
        problem = GEMM.parse_problem(shape)
        for bm, bn, consumers in ((128, 256, 2), (64, 128, 1)):
            config = GEMM.config(
                {
                    "template": template,
                    "BM": bm,
                    "BN": bn,
                    "stages": stages,
                    "bounds": "true",
                    "consumers": consumers,
                    "tiles_per_block": tiles_per_block,
                }
            )
            outcome = evaluate(runner, builder, GEMM, problem, config, timeout_s=120)
            assert outcome.status is Status.OK, (shape, config.label(), outcome.message)


@pytest.mark.parametrize("aligned", [{"lda": 80}, {"ldb": 104}], ids=["B copied", "A copied"])
def test_padded_template_copying_one_operand(runner, builder, aligned):
    """pad_rows with one copy (its argument struct holds that copy alone; gridDim.z = 1): B's rows
    padded while the tensor map reads A in place, and the other way round."""
    problem = GEMM.parse_problem({"M": 65, "N": 97, "K": 73, **aligned})
    assert len(problem.unaligned()) == 1
    for bm, bn, consumers in ((128, 256, 2), (64, 128, 1)):
        config = GEMM.config(
            {
                "template": "padded",
                "BM": bm,
                "BN": bn,
                "stages": 2,
                "bounds": "true",
                "consumers": consumers,
                "tiles_per_block": 2,
            }
        )
        outcome = evaluate(runner, builder, GEMM, problem, config, timeout_s=120)
        assert outcome.status is Status.OK, (aligned, config.label(), outcome.message)


@pytest.mark.parametrize("swizzle", ["none", "32B", "64B", "128B"])
def test_every_shared_layout_of_the_mma_template(runner, builder, swizzle):
    """Padded rows and each swizzle pattern, with every K step (16-64: rows of 32-128 bytes, narrower
    than, equal to or wider than a pattern's span), on ragged shapes and odd leading dimensions."""
    for shape in ({"M": 65, "N": 97, "K": 73, "lda": 76, "ldb": 102, "ldd": 98}, {"M": 4099, "N": 4097, "K": 4095}):
        problem = GEMM.parse_problem(shape)
        for bk, (bm, bn, wm, wn) in zip((16, 32, 64), ((64, 64, 2, 2), (128, 128, 2, 2), (128, 64, 4, 1)), strict=True):
            config = GEMM.config(
                {
                    **GEMM.default_config(problem).as_dict(),
                    "BM": bm,
                    "BN": bn,
                    "BK": bk,
                    "warps_m": wm,
                    "warps_n": wn,
                    "stages": 3,
                    "swizzle": swizzle,
                }
            )
            outcome = evaluate(runner, builder, GEMM, problem, config, timeout_s=120)
            assert outcome.status is Status.OK, (shape, config.label(), outcome.message)


def test_full_tiles_without_bounds(runner, builder):
    problem = GEMM.parse_problem({"M": 256, "N": 256, "K": 256})
    bounded = GEMM.space.restrict({"template": ["mma", "wgmma", "padded"], "bounds": ["false"]})
    configs = [c for c in bounded if not GEMM.violations(problem, c)]
    random.Random(5).shuffle(configs)
    for config in configs[:6]:
        outcome = evaluate(runner, builder, GEMM, problem, config)
        assert outcome.status is Status.OK, (config.label(), outcome.message)


def test_sabotaged_variants_are_rejected(runner, builder):
    problem = GEMM.parse_problem({"M": 65, "N": 97, "K": 73})
    config = GEMM.default_config(problem)
    padded = GEMM.config(
        {
            "template": "padded",
            "BM": 128,
            "BN": 128,
            "stages": config["stages"],
            "bounds": config["bounds"],
            "consumers": 1,
            "tiles_per_block": 1,
        }
    )
    for variant in (config, padded):
        assert_sabotage_caught(
            runner,
            builder,
            GEMM,
            problem,
            variant,
            "v0 *= alpha;",
            "v0 = (r == 0 && c == 0) ? __int_as_float(0x7fc00000) : v0 * alpha;",
            expect="1 of",
            header="tunebox/gemm_tiles.cuh",
        )
    assert_sabotage_caught(
        runner,
        builder,
        GEMM,
        problem,
        config,
        "for (i64 step = 0; step < count; ++step)",
        "for (i64 step = 0; step < count - 1; ++step)",
        expect="elements wrong",
        header="tunebox/async_copy.cuh",  # the mma mainloop's ring (tb::cp_async_ring)
    )
    assert_sabotage_caught(
        runner,
        builder,
        GEMM,
        problem,
        padded,
        "const int k_steps = (int)((K + WG_BK - 1) / WG_BK);",
        "const int k_steps = (int)((K + WG_BK - 1) / WG_BK) - 1;",
        expect="elements wrong",
    )


@pytest.mark.parametrize("template", ["mma", "wgmma"])
@pytest.mark.parametrize("out_dtype", ["bfloat16", "float32"])
def test_times_and_torch_baseline_agrees(runner, builder, out_dtype, template):
    pytest.importorskip("torch")
    problem = GEMM.parse_problem({"M": 1024, "N": 1024, "K": 1024, "out_dtype": out_dtype})
    config = GEMM.default_config(problem)
    if template == "wgmma":
        config = GEMM.config(
            {
                "template": "wgmma",
                "BM": 128,
                "BN": 256,
                "stages": 4,
                "bounds": config["bounds"],
                "consumers": 2,
                "tiles_per_block": 2,
            }
        )
    outcomes = retime_with_baseline(runner, builder, GEMM, problem, config)
    assert outcomes[0].status is Status.OK and len(outcomes[0].samples_ms) >= 10, outcomes[0].message
    assert outcomes[1].status is Status.OK and outcomes[1].baseline.startswith("torch: "), outcomes[1].message
