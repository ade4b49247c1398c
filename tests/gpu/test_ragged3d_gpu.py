"""ragged3d on the GPU, verified bit for bit by the worker: pack and unpack of every dtype with rows
of H x D that take 16-byte vectors, narrower ones or single elements; lengths 0 (empty sequences), 1,
exactly BM and Lmax; unpack's zero fill past each length; a sabotaged variant that skips the last row
of each tile is rejected; the torch baselines match the reference."""

from __future__ import annotations

import random

import pytest
from gpu_jobs import assert_sabotage_caught, evaluate, retime_with_baseline

from tunebox.families import get
from tunebox.records import Status

pytestmark = pytest.mark.gpu
RAGGED = get("ragged3d")
DTYPES = ["float32", "bfloat16", "float16"]
SHAPES = [  # (B, Lmax, H, D, lengths): BM = 16 in the spread below meets lengths 16 and 32 exactly
    (5, 37, 3, 7, [0, 1, 16, 37, 32]),  # H x D = 21: element by element
    (4, 64, 2, 6, [64, 0, 0, 1]),  # H x D = 12: 4- or 8-byte vectors
    (6, 129, 8, 16, [129, 128, 127, 16, 1, 0]),  # H x D = 128: 16-byte vectors
    (1, 1, 1, 1, [1]),
    (3, 50, 4, 8, [0, 0, 0]),  # nothing to pack; unpack writes only zeros
]


def configs_for(problem):
    """Every vector width with BM 1, 16 and 128 where valid, at a seeded choice of threads."""
    configs = [c for c in RAGGED.space if not RAGGED.violations(problem, c) and c["BM"] in (1, 16, 128)]
    random.Random(str(problem)).shuffle(configs)
    return list({(c["vec_bytes"], c["BM"]): c for c in configs}.values())


def problem_of(dtype, direction, shape):
    b, lmax, h, d, lengths = shape
    return RAGGED.parse_problem({"dtype": dtype, "batch": b, "max_len": lmax, "heads": h, "depth": d,
                                 "direction": direction, "lengths": lengths})


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("direction", ["pack", "unpack"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_every_mode_is_exact(runner, builder, dtype, direction, shape):
    problem = problem_of(dtype, direction, shape)
    configs = configs_for(problem) + [RAGGED.default_config(problem)]
    for config in configs:
        outcome = evaluate(runner, builder, RAGGED, problem, config)
        assert outcome.status is Status.OK, (config.label(), outcome.message)


@pytest.mark.parametrize("direction", ["pack", "unpack"])
def test_a_variant_that_skips_rows_is_rejected(runner, builder, direction):
    problem = problem_of("bfloat16", direction, SHAPES[2])
    config = RAGGED.config({"BM": 16, "threads": 128, "vec_bytes": 16})
    assert_sabotage_caught(runner, builder, RAGGED, problem, config, "filled * row, (rows - filled) * row",
                           "(filled - (filled > 0)) * row, (rows - filled) * row")  # each tile's last row dropped


@pytest.mark.parametrize("direction", ["pack", "unpack"])
def test_times_and_torch_baseline_matches(runner, builder, direction):
    pytest.importorskip("torch")
    problem = RAGGED.parse_problem({"dtype": "bfloat16", "batch": 8, "max_len": 512, "heads": 8, "depth": 128,
                                    "direction": direction, "lengths": "uniform"})
    outcomes = retime_with_baseline(runner, builder, RAGGED, problem, RAGGED.default_config(problem))
    assert outcomes[0].status is Status.OK and len(outcomes[0].samples_ms) >= 10, outcomes[0].message
    assert len(outcomes) == (3 if direction == "pack" else 2)  # pack: torch.cat and x[mask]
    for baseline in outcomes[1:]:
        assert baseline.status is Status.OK and baseline.baseline.startswith("torch: "), baseline.message
