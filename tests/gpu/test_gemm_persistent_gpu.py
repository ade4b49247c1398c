"""gemm's template ``persistent`` on the GPU, verified by the worker against the float64 reference
within the family's tolerance (NaN never passes; D's padding columns must still hold poison): split-K
(verified, and bit for bit the same D at repeated launches), ragged,
tiny (1 x 1 x 1), decode and large shapes, odd leading dimensions (D's rows or N not in 16-byte
chunks: the direct epilogue only; else TMA stores too, clipped at M and at N with D's padding beyond
untouched), alpha and ReLU, bfloat16 and float32 output, both
schedules; blocks taking many tiles (the ring's phases across tiles, pingpong consumers with unequal
tile counts); a sabotaged variant (the last K step dropped) is rejected; counters a variant left set
do not fail the next (the worker re-zeroes them); the torch baseline times beside
it."""

from __future__ import annotations

import tempfile

import pytest
from gpu_jobs import (
    assert_gemm_launches_agree,
    assert_sabotage_caught,
    evaluate,
    retime_with_baseline,
    sabotaged,
    spread_configs,
)

from tunebox.families import get
from tunebox.records import Status

pytestmark = pytest.mark.gpu
GEMM = get("gemm")
SHAPES = [
    {"M": 1, "N": 1, "K": 1, "lda": 8, "ldb": 8, "ldd": 8},
    {"M": 3, "N": 8, "K": 1, "lda": 8, "ldb": 8, "ldd": 32},  # TMA stores of one 16-byte chunk a row
    {"M": 65, "N": 97, "K": 73, "lda": 80, "ldb": 104, "ldd": 104},
    {"M": 4099, "N": 4097, "K": 4095, "lda": 4096, "ldb": 4104, "ldd": 4104},  # ragged N: direct stores
    {"M": 4099, "N": 4104, "K": 4095, "lda": 4096, "ldb": 4104, "ldd": 4112},  # ragged M: TMA stores clip
    {"M": 4099, "N": 4097, "K": 4095, "lda": 4104, "ldb": 4112, "ldd": 4097},  # odd ldd: direct stores
    {"M": 16, "N": 4096, "K": 4096},  # decode
    {"M": 3000, "N": 5000, "K": 1000},
    {"M": 300, "N": 130, "K": 257, "lda": 264, "ldb": 136, "ldd": 131, "alpha": -0.75, "relu": True},
    {"M": 300, "N": 130, "K": 257, "lda": 264, "ldb": 136, "ldd": 132, "alpha": 0.5, "relu": True},
    {"M": 300, "N": 130, "K": 257, "lda": 264, "ldb": 136, "ldd": 136, "alpha": -0.75, "relu": True},
]
SCHEDULES = {"cooperative": ((128, 256), (256, 128), (128, 64)), "pingpong": ((64, 256), (128, 128), (64, 64))}


def persistent(**values):
    return GEMM.config(
        {
            "template": "persistent",
            "BM": 128,
            "BN": 256,
            "stages": 4,
            "schedule": "cooperative",
            "raster": "m",
            "group": 8,
            "epilogue": "tma",
            "producer_registers": 40,
            "consumer_registers": 232,
            "splits": 1,
            **values,
        }
    )


def configs_for(problem, schedule):
    """The schedule's tile shapes, each with every epilogue where valid, a spread of stages (fewer where
    shared memory asks), rasters and group widths; invalid combinations (D's alignment) left out."""
    configs = spread_configs(
        GEMM,
        problem,
        lambda **values: persistent(schedule=schedule, **values),
        SCHEDULES[schedule],
        ("tma", "direct", "staged"),
        [(4, "m", 8), (3, "n", 1), (5, "m", 16), (2, "n", 4)],
        (3, 2),
    )
    assert configs
    return configs


@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
@pytest.mark.parametrize("out_dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_persistent_gemm_is_within_tolerance(runner, builder, shape, out_dtype, schedule):
    problem = GEMM.parse_problem({**shape, "out_dtype": out_dtype})
    for config in configs_for(problem, schedule):
        outcome = evaluate(runner, builder, GEMM, problem, config, timeout_s=120)
        assert outcome.status is Status.OK, (config.label(), outcome.message)


def test_the_default_on_large_shapes(runner, builder):
    for shape in ({"M": 4096, "N": 4096, "K": 4096}, {"M": 8192, "N": 8192, "K": 1024}):
        problem = GEMM.parse_problem(shape)
        config = GEMM.template_config("persistent", GEMM.templates["persistent"].default(problem))
        outcome = evaluate(runner, builder, GEMM, problem, config, timeout_s=300)
        assert outcome.status is Status.OK, (shape, config.label(), outcome.message)


@pytest.mark.parametrize("schedule, bm", [("cooperative", 128), ("pingpong", 64)])
@pytest.mark.parametrize("stages", [2, 3, 5])
def test_blocks_taking_many_tiles(runner, builder, schedule, bm, stages):
    """Ring positions across tiles: 1, 2 and 5 K steps per tile against 2, 3 and 5 buffers; 133 and 1000+
    tiles over 132 blocks (pingpong consumers with one tile more than the other, or none)."""
    for shape in (
        {"M": 1024, "N": 2176, "K": 64},  # 8 x 17 = 136 tiles of 128 x 128 (64 x 128: 272)
        {"M": 2048, "N": 4096, "K": 73, "lda": 80},
        {"M": 4096, "N": 4096, "K": 300, "lda": 304},
        {"M": 128 * 133, "N": 128, "K": 257, "lda": 264},  # 133 tiles (cooperative)
    ):
        problem = GEMM.parse_problem(shape)
        for raster, group in (("m", 8), ("n", 2)):
            config = persistent(BM=bm, BN=128, stages=stages, schedule=schedule, raster=raster, group=group)
            outcome = evaluate(runner, builder, GEMM, problem, config, timeout_s=120)
            assert outcome.status is Status.OK, (shape, config.label(), outcome.message)


def test_a_dropped_k_step_is_caught(runner, builder):
    problem = GEMM.parse_problem({"M": 300, "N": 136, "K": 257, "lda": 264, "ldb": 136, "ldd": 136})  # TMA stores
    for schedule, bm in (("cooperative", 128), ("pingpong", 64)):
        assert_sabotage_caught(
            runner,
            builder,
            GEMM,
            problem,
            persistent(BM=bm, BN=128, schedule=schedule),
            "const int k_steps = (int)((K + BK - 1) / BK);",
            "const int k_steps = (int)((K + BK - 1) / BK) - 1;",
            expect="elements wrong",
            header="tunebox/persistent_gemm.cuh",  # the kernel's body (gemm_persistent.cu is its wrapper)
        )


@pytest.mark.parametrize("schedule, bm", [("cooperative", 128), ("pingpong", 64)])
def test_times_beside_the_torch_baseline(runner, builder, schedule, bm):
    pytest.importorskip("torch")
    problem = GEMM.parse_problem({"M": 4096, "N": 4096, "K": 4096})
    outcomes = retime_with_baseline(runner, builder, GEMM, problem, persistent(BM=bm, schedule=schedule))
    assert outcomes[0].status is Status.OK and len(outcomes[0].samples_ms) >= 10, outcomes[0].message
    assert outcomes[1].status is Status.OK and outcomes[1].baseline.startswith("torch: "), outcomes[1].message


SPLIT_SHAPES = [  # split-K takes the TMA epilogue: D's rows and N in 16-byte chunks
    {"M": 1, "N": 8, "K": 512},
    {"M": 16, "N": 4096, "K": 4096},  # decode
    {"M": 65, "N": 104, "K": 1000, "lda": 1000, "ldb": 104, "ldd": 104},  # clipped at M and N
    {"M": 128, "N": 1024, "K": 4096},
    {"M": 300, "N": 136, "K": 2570, "lda": 2576, "ldb": 136, "ldd": 136, "alpha": -0.75, "relu": True},
    {"M": 64, "N": 256, "K": 200, "lda": 200},  # 4 K steps: 8 splits are refused, 4 take one step each
]
SPLIT_CONFIGS = (  # (splits, schedule, BM, BN): each case tries the first three valid ones
    (2, "cooperative", 128, 128),
    (8, "pingpong", 64, 128),
    (4, "pingpong", 64, 64),
    (8, "cooperative", 128, 256),
    (4, "cooperative", 256, 128),
    (2, "pingpong", 128, 128),
)


@pytest.mark.parametrize("out_dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("shape", SPLIT_SHAPES, ids=str)
def test_split_k_is_within_tolerance(runner, builder, shape, out_dtype):
    """K split over 2, 4 and 8 work units per tile (where the problem's K steps and workspace allow; K
    steps not a multiple of the splits too), both schedules; the worker verifies each variant's first
    launch."""
    problem = GEMM.parse_problem({**shape, "out_dtype": out_dtype})
    tried = 0
    for splits, schedule, bm, bn in SPLIT_CONFIGS:
        config = persistent(BM=bm, BN=bn, schedule=schedule, splits=splits)
        if tried == 3 or GEMM.violations(problem, config):
            continue
        tried += 1
        outcome = evaluate(runner, builder, GEMM, problem, config, timeout_s=120)
        assert outcome.status is Status.OK, (config.label(), outcome.message)
    assert tried


def test_counters_a_variant_left_set_do_not_fail_the_next(runner, builder):
    """The worker zeroes split-K's arrival counters before every verified launch: a variant that never
    resets them (sabotaged) leaves them counted, and the next variant on the same problem still passes.
    Without the re-zeroing no unit of that variant would arrive last, and D would keep its poison."""
    problem = GEMM.parse_problem({"M": 16, "N": 4096, "K": 4096})
    config = persistent(BM=64, BN=128, schedule="pingpong", splits=4)
    with tempfile.TemporaryDirectory() as folder:
        reset = "if (last) atomicExch(counter, 0u);"
        leaky = sabotaged(GEMM.render(problem, config), reset, "", "tunebox/persistent_gemm.cuh", folder)
        evaluate(runner, builder, GEMM, problem, config, leaky)  # its verified launch leaves every counter at 4
    outcome = evaluate(runner, builder, GEMM, problem, config)
    assert outcome.status is Status.OK, outcome.message


@pytest.mark.parametrize("schedule, bm", [("cooperative", 128), ("pingpong", 64)])
def test_split_k_gives_the_same_d_at_every_launch(tmp_path, schedule, bm):
    """Repeated launches through tunebox.launch (workspace zeroed once, at allocation): each leaves the
    arrival counters zero for the next, and the fixed summation order gives D bit for bit the same."""
    pytest.importorskip("torch")
    assert_gemm_launches_agree(tmp_path, persistent(BM=bm, BN=128, schedule=schedule, splits=8))
