"""gemm's template ``cluster`` on the GPU (the persistent kernel on thread-block clusters sharing A or B
boxes by TMA multicast), verified by the worker against the float64 reference within the family's
tolerance: clusters of 2 x 1, 1 x 2 and 2 x 2 tiles with both schedules, on shapes whose tile counts
are and are not multiples of the cluster's (blocks computing past D's edge store nothing), decode and
large shapes, odd leading dimensions (direct and staged stores), alpha and ReLU, float32 output; blocks taking
many units (the ring's phases with every block's consumers releasing each buffer); a sabotaged
variant (each block loading the same part of the shared B box) is rejected."""

from __future__ import annotations

import pytest
from gpu_jobs import assert_sabotage_caught, evaluate

from tunebox.families import get
from tunebox.records import Status

pytestmark = pytest.mark.gpu
GEMM = get("gemm")
SHAPES = [
    {"M": 300, "N": 136, "K": 257, "lda": 264, "ldb": 136, "ldd": 136},  # 3 x 2 tiles of 128 x 128: a ghost row
    {"M": 65, "N": 97, "K": 73, "lda": 80, "ldb": 104, "ldd": 104},  # direct stores; ghost tiles
    {"M": 16, "N": 4096, "K": 4096},  # decode
    {"M": 3000, "N": 5000, "K": 1000},
    {"M": 4099, "N": 4104, "K": 4095, "lda": 4096, "ldb": 4104, "ldd": 4112},  # TMA stores clip at M
    {"M": 300, "N": 130, "K": 257, "lda": 264, "ldb": 136, "ldd": 131, "alpha": -0.75, "relu": True},
]
TILES = {"cooperative": ((128, 128), (128, 256), (256, 128)), "pingpong": ((64, 128), (64, 64), (128, 128))}


# the persistent template's default at a large shape (128 x 256 tiles, cooperative, 4 stages), as a cluster
BASE = {**GEMM.templates["persistent"].default(GEMM.parse_problem({"M": 4096, "N": 4096, "K": 4096})).values()}
BASE.update(template="cluster", BN=128, cluster="2x1")


def cluster(**values):
    return GEMM.config({**BASE, **values})


def configs_for(problem, schedule, shape):
    """The first valid tile shape of the schedule with the TMA epilogue, else direct stores."""
    for (bm, bn), epilogue in ((tile, e) for e in ("tma", "direct") for tile in TILES[schedule]):
        config = cluster(BM=bm, BN=bn, schedule=schedule, epilogue=epilogue, cluster=shape)
        if not GEMM.violations(problem, config):
            return [config]
    return []


@pytest.mark.parametrize("shape", ["2x1", "1x2", "2x2"])
@pytest.mark.parametrize("schedule", ["cooperative", "pingpong"])
@pytest.mark.parametrize("out_dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("problem_shape", SHAPES, ids=str)
def test_clustered_gemm_is_within_tolerance(runner, builder, problem_shape, out_dtype, schedule, shape):
    problem = GEMM.parse_problem({**problem_shape, "out_dtype": out_dtype})
    configs = configs_for(problem, schedule, shape)
    if not configs:  # a cluster wider than the problem's tiles (decode's one tile row): a rule refuses it
        assert GEMM.violations(
            problem, cluster(schedule=schedule, BM=64 if schedule == "pingpong" else 128, cluster=shape)
        )
        return
    for config in configs:
        outcome = evaluate(runner, builder, GEMM, problem, config, timeout_s=120)
        assert outcome.status is Status.OK, (config.label(), outcome.message)


@pytest.mark.parametrize("shape", ["2x1", "1x2", "2x2"])
@pytest.mark.parametrize("schedule, bm", [("cooperative", 128), ("pingpong", 64)])
def test_the_staged_epilogue_on_clusters(runner, builder, shape, schedule, bm):
    """Epilogue 'staged' in every block of a cluster at odd rows of D: ldd = 131 with alpha and ReLU (a ghost
    tile row under 2 x 1 and 2 x 2: it stores nothing), and float32 D at 1001 x 1001."""
    odd_float = {"M": 1001, "N": 1001, "K": 300, "lda": 304, "ldb": 1008, "ldd": 1001, "out_dtype": "float32"}
    for problem_shape in (SHAPES[5], odd_float):
        problem = GEMM.parse_problem(problem_shape)
        config = cluster(BM=bm, BN=128, stages=3, schedule=schedule, epilogue="staged", cluster=shape)
        assert not GEMM.violations(problem, config), config.label()
        outcome = evaluate(runner, builder, GEMM, problem, config, timeout_s=120)
        assert outcome.status is Status.OK, (problem_shape, config.label(), outcome.message)


@pytest.mark.parametrize("schedule, bm", [("cooperative", 128), ("pingpong", 64)])
@pytest.mark.parametrize("stages", [2, 5])
def test_blocks_taking_many_units(runner, builder, schedule, bm, stages):
    """Ring positions across units with remote releases: 1 and 5 K steps per tile against 2 and 5
    buffers; more units than clusters, unequal counts per pingpong consumer."""
    for shape in ({"M": 1024, "N": 2176, "K": 64}, {"M": 4096, "N": 4096, "K": 300, "lda": 304}):
        problem = GEMM.parse_problem(shape)
        for name, raster, group in (("2x1", "m", 8), ("1x2", "n", 2), ("2x2", "m", 4)):
            config = cluster(BM=bm, BN=128, stages=stages, schedule=schedule, raster=raster, group=group, cluster=name)
            outcome = evaluate(runner, builder, GEMM, problem, config, timeout_s=120)
            assert outcome.status is Status.OK, (shape, config.label(), outcome.message)


def test_a_block_loading_the_wrong_part_is_caught(runner, builder):
    problem = GEMM.parse_problem({"M": 300, "N": 136, "K": 257, "lda": 264, "ldb": 136, "ldd": 136})
    assert_sabotage_caught(
        runner,
        builder,
        GEMM,
        problem,
        cluster(cluster="2x1"),
        "kt * BK + part * PART",
        "kt * BK",
        expect="elements wrong",
    )
