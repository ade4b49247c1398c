"""gemm's template ``decode`` on the GPU, verified by the worker against the float64 reference within
the family's tolerance (NaN never passes; D's padding columns must still hold poison): tiny (1 x 1 x 1),
decode and small-batch shapes, ragged shapes with odd leading dimensions (element copies at the
edges), alpha and ReLU, bfloat16 and float32 output, every split count (one thread-block cluster),
both shared-memory layouts and loads (cp.async, TMA), warps along N and K; D bit for bit the same over
repeated launches; sabotaged variants (the last K step dropped, a partial sum left out) are rejected;
the torch baseline times beside it."""

from __future__ import annotations

import pytest
from gpu_jobs import assert_gemm_launches_agree, assert_sabotage_caught, evaluate, retime_with_baseline

from tunebox.families import get
from tunebox.families.gemm import DecodeConfig
from tunebox.records import Status

pytestmark = pytest.mark.gpu
GEMM = get("gemm")
SHAPES = [
    {"M": 1, "N": 1, "K": 1},
    {"M": 3, "N": 8, "K": 1, "lda": 8, "ldb": 8, "ldd": 32},
    {"M": 16, "N": 4096, "K": 4096},  # decode
    {"M": 7, "N": 4099, "K": 4111, "lda": 4113, "ldb": 4101, "ldd": 4103},  # odd everything
    {"M": 33, "N": 1000, "K": 1000, "alpha": -0.75, "relu": True},
    {"M": 64, "N": 1024, "K": 4096},
    {"M": 128, "N": 520, "K": 2570, "lda": 2576, "ldb": 520, "ldd": 521, "alpha": 0.5, "relu": True},
    {"M": 300, "N": 130, "K": 257, "lda": 264, "ldb": 136, "ldd": 131},  # three blocks of tokens
]
CONFIGS = (  # BN, tokens, BK, warps_n, warps_k, stages, swizzle, splits, load: each case takes the valid ones
    (64, 16, 64, 1, 4, 4, "none", 1, "cp_async"),
    (32, 8, 128, 2, 4, 8, "128B", 8, "cp_async"),
    (128, 64, 64, 2, 2, 3, "none", 4, "cp_async"),
    (64, 32, 128, 1, 8, 4, "64B", 2, "cp_async"),
    (256, 8, 64, 4, 1, 6, "32B", 8, "cp_async"),
    (64, 128, 64, 4, 2, 3, "none", 2, "cp_async"),
    (64, 16, 64, 1, 4, 4, "128B", 1, "tma"),
    (128, 8, 128, 2, 4, 6, "128B", 8, "tma"),
    (256, 32, 64, 4, 2, 3, "128B", 4, "tma"),
    (64, 64, 256, 1, 4, 2, "128B", 2, "tma"),
)


def decode(values):
    """The configuration of DecodeConfig's fields in their order."""
    return GEMM.template_config("decode", DecodeConfig(*values))


@pytest.mark.parametrize("out_dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_decode_gemm_is_within_tolerance(runner, builder, shape, out_dtype):
    problem = GEMM.parse_problem({**shape, "out_dtype": out_dtype})
    configs = [decode(values) for values in CONFIGS if not GEMM.violations(problem, decode(values))]
    default = GEMM.templates["decode"].default(problem)
    if default is not None:
        configs.append(GEMM.template_config("decode", default))
    assert configs
    for config in configs:
        outcome = evaluate(runner, builder, GEMM, problem, config, timeout_s=120)
        assert outcome.status is Status.OK, (config.label(), outcome.message)


@pytest.mark.parametrize("load, swizzle", [("cp_async", "none"), ("tma", "128B")])
def test_a_dropped_k_step_is_caught(runner, builder, load, swizzle):
    problem = GEMM.parse_problem({"M": 16, "N": 136, "K": 257, "lda": 264})
    assert_sabotage_caught(
        runner,
        builder,
        GEMM,
        problem,
        decode((64, 16, 64, 1, 4, 4, swizzle, 2, load)),
        "const i64 steps = (K + BK - 1) / BK,",
        "const i64 steps = (K + BK - 1) / BK - 1,",
        expect="elements wrong",
    )


def test_a_dropped_partial_sum_is_caught(runner, builder):
    """The cluster's blocks past the first, or the block's warps past the first, left out of the sums
    (tunebox/split_sums.cuh, shared with quant_gemm's decode)."""
    problem = GEMM.parse_problem({"M": 16, "N": 136, "K": 1000})
    config = decode((64, 16, 64, 1, 4, 4, "128B", 4, "tma"))
    for dropped in (
        "for (int c = 1; c < SPLITS; ++c) v[i] += load_cluster(sums + at + i, c);",
        "for (int w = 1; w < WK; ++w) total += sums[w * SUMS + at];",
    ):
        sums = "tunebox/split_sums.cuh"
        assert_sabotage_caught(
            runner, builder, GEMM, problem, config, dropped, "", expect="elements wrong", header=sums
        )


def test_times_beside_the_torch_baseline(runner, builder):
    pytest.importorskip("torch")
    problem = GEMM.parse_problem({"M": 16, "N": 4096, "K": 4096})
    outcomes = retime_with_baseline(
        runner, builder, GEMM, problem, decode((64, 16, 64, 1, 4, 4, "none", 4, "cp_async"))
    )
    assert outcomes[0].status is Status.OK and len(outcomes[0].samples_ms) >= 10, outcomes[0].message
    assert outcomes[1].status is Status.OK and outcomes[1].baseline.startswith("torch: "), outcomes[1].message


def test_split_k_gives_the_same_d_at_every_launch(tmp_path):
    """Five launches through tunebox.launch of an 8-way cluster split: the fixed summation order gives D
    bit for bit the same."""
    pytest.importorskip("torch")
    for load, swizzle in (("cp_async", "none"), ("tma", "128B")):
        (tmp_path / load).mkdir()
        assert_gemm_launches_agree(tmp_path / load, decode((64, 16, 64, 1, 4, 4, swizzle, 8, load)))
