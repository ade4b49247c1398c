"""quant_gemm on the GPU, verified by the worker against the reference within the family's tolerance
(NaN and infinity only bit for bit): every template at M = 1, 3, 16, 64, 256 on odd shapes (odd N, K
not a multiple of the block nor of 128, K below one span) in both formats, at its default and a seeded
seeded variant, every structural value of each template's parameters once on one odd shape, on inputs
with planted NaN, zero, subnormal, infinite and large (two-factor) scale blocks; the sweep's shapes at
the family default; a sabotaged cluster reduction is caught; the torch baselines match the reference
and are timed."""

from __future__ import annotations

import random

import pytest
from gpu_jobs import assert_sabotage_caught, evaluate, retime_with_baseline

from tunebox.families import get
from tunebox.records import Status

pytestmark = pytest.mark.gpu
QG = get("quant_gemm")
TOKENS = [1, 3, 16, 64, 256]
SHAPES = [(4099, 4111), (33, 300), (7, 100)]  # (N, K): odd N; K % 32, K % 128 != 0; K below one span
TIMEOUT_S = 300


def problem(**fields):
    return QG.parse_problem(fields)


def spread(p, template: str, keys: tuple[str, ...] = ()):
    """The template's default (where it has one), one seeded valid variant, and variants covering each
    value of ``keys`` once."""
    configs = [c for c in QG.space.restrict({"template": [template]}) if not QG.violations(p, c)]
    random.Random(p.key() + template).shuffle(configs)
    chosen = {("any", 0): configs[0]}
    for key in keys:
        chosen.update({(key, c[key]): c for c in configs if (key, c[key]) not in chosen})
    default = QG.templates[template].default(p)
    first = [QG.template_config(template, default)] if default is not None else []
    return list({c.items: c for c in first + list(chosen.values())}.values())


@pytest.mark.parametrize("template", ["decode", "tiled"])
@pytest.mark.parametrize("fmt", ["mxfp4", "nvfp4"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("m", TOKENS)
def test_every_template_on_odd_shapes_and_edge_scales(runner, builder, m, shape, fmt, template):
    n, k = shape
    p = problem(M=m, N=n, K=k, format=fmt, inputs="edges")
    configs = spread(p, template)
    for config in configs:
        outcome = evaluate(runner, builder, QG, p, config, timeout_s=TIMEOUT_S)
        assert outcome.status is Status.OK, (p.key(), config.label(), outcome.message)


@pytest.mark.parametrize("template", ["decode", "tiled"])
@pytest.mark.parametrize("fmt", ["mxfp4", "nvfp4"])
@pytest.mark.parametrize("m", [3, 64])
def test_every_structural_value(runner, builder, m, fmt, template):
    """Every splits, warps_k, unroll, rows and tokens of decode; every stages, BK, BM and warps of tiled."""
    p = problem(M=m, N=4099, K=4111, format=fmt, inputs="edges")
    keys = (
        ("splits", "warps_k", "unroll", "rows", "tokens")
        if template == "decode"
        else ("stages", "BK", "BM", "warps_m", "warps_n")
    )
    for config in spread(p, template, keys):
        outcome = evaluate(runner, builder, QG, p, config, timeout_s=TIMEOUT_S)
        assert outcome.status is Status.OK, (p.key(), config.label(), outcome.message)


@pytest.mark.parametrize("fmt", ["mxfp4", "nvfp4"])
@pytest.mark.parametrize("m", TOKENS)
def test_the_sweep_shapes_at_the_default(runner, builder, m, fmt):
    for n, k in ((4096, 4096), (14336, 4096), (4096, 14336)):
        p = problem(M=m, N=n, K=k, format=fmt)
        outcome = evaluate(runner, builder, QG, p, QG.default_config(p), timeout_s=TIMEOUT_S)
        assert outcome.status is Status.OK, (p.key(), outcome.message)


def test_sabotaged_reductions_are_caught(runner, builder):
    p = problem(M=3, N=4099, K=4111, format="mxfp4")
    cluster = QG.config(
        {"template": "decode", "rows": 16, "warps": 4, "warps_k": 2, "tokens": 8, "unroll": 2, "splits": 4}
    )
    sums = "tunebox/split_sums.cuh"  # the warps' and the cluster's reduction
    dropped = ("for (int c = 1; c < SPLITS; ++c) v[i] += load_cluster(sums + at + i, c);", "")
    assert_sabotage_caught(runner, builder, QG, p, cluster, *dropped, expect="elements wrong", header=sums)
    warps = ("for (int w = 1; w < WK; ++w) total += sums[w * SUMS + at];", "")
    assert_sabotage_caught(runner, builder, QG, p, cluster, *warps, expect="elements wrong", header=sums)
    tail = QG.config({**dict(cluster.items), "splits": 1, "warps_k": 1})
    scale = (": (valid > 0 ? (u32)__ldg(sc) : 0u);", ": 0u;")  # the partial span's mxfp4 scale dropped
    assert_sabotage_caught(runner, builder, QG, p, tail, *scale, expect="elements wrong")


@pytest.mark.parametrize("fmt", ["mxfp4", "nvfp4"])
@pytest.mark.parametrize("m", [16, 256])
def test_variants_time_and_torch_baselines_match(runner, builder, m, fmt):
    pytest.importorskip("torch")
    p = problem(M=m, N=4096, K=4096, format=fmt)
    outcomes = retime_with_baseline(runner, builder, QG, p, QG.default_config(p))
    assert len(outcomes) == 3
    assert outcomes[0].status is Status.OK and len(outcomes[0].samples_ms) >= 10, outcomes[0].message
    for baseline in outcomes[1:]:
        assert baseline.status is Status.OK, baseline.message
        assert baseline.baseline.startswith("torch: ")
