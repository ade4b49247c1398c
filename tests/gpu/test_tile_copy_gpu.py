"""tile_copy on the GPU: every padding and bounds mode on odd shapes and negative origins, both
orientations and all dtypes, verified bit for bit; a sabotaged variant is rejected and never stored."""

from __future__ import annotations

import itertools

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
    {"padding": "value", "pad_value": -3.25}]


def configs_for(problem):
    """A spread of valid variants: every bounds mode, vector width and staging layout."""
    space = FAMILY.space.restrict({"BM": [1, 8, 32], "BN": [32, 64, 128], "threads": [64, 128],
                                   "tiles_per_block": [1, 2]})
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
    problem = FAMILY.parse_problem({"dtype": "bfloat16", "src": [256, 512], "dst": [512, 256] if transpose
                                    else [128, 256], "origin": [0, 0] if transpose else [64, 128],
                                    "transpose": transpose})
    configs = [c for c in configs_for(problem) if c["bounds"] == "unchecked"]
    assert configs
    for config in configs:
        assert evaluate(runner, builder, FAMILY, problem, config).status is Status.OK, config.label()


def test_sabotaged_variant_is_rejected(runner, builder):
    problem = FAMILY.parse_problem({"dtype": "float32", "src": [300, 300], "dst": [300, 300]})
    assert_sabotage_caught(runner, builder, FAMILY, problem, FAMILY.default_config(problem),
                           "if (tile >= n_tiles) return;", "if (tile >= n_tiles - 1) return;")


def test_every_dtype_and_orientation_times(runner, builder):
    for dtype, transpose in itertools.product(["float32", "bfloat16"], [False, True]):
        problem = FAMILY.parse_problem({"dtype": dtype, "src": [2048, 1024], "dst": [1024, 2048] if transpose
                                        else [2048, 1024], "transpose": transpose})
        config = FAMILY.default_config(problem)
        outcome = runner.run(EvaluateJob("tile_copy", problem.to_dict(), variant(builder, FAMILY, problem, config),
                                         SCREEN, 7))
        assert outcome.status is Status.OK, outcome.message
        assert len(outcome.samples_ms) >= 10 and all(s > 0 for s in outcome.samples_ms)
        assert outcome.metrics and outcome.metrics.registers > 0
