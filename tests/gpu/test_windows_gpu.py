"""windows on the GPU, checked by the worker against the numpy reference (outputs poisoned before every
launch; unfold and max/min bit for bit, sums within their tolerance): every op and dtype on overlapping,
adjacent and gapped windows, windows reaching past the array and stopping short of it, and windows
larger than the array; both stagings of template direct, template separable and every vector width where valid.
Sabotaged variants (a shifted read, a row left out of a reduction) are rejected; the torch baselines
(padded or cropped, and pooling with ceil_mode where its windows are these) agree with the reference;
a launch on torch tensors without a stored winner runs the default."""

from __future__ import annotations

import random

import pytest
from gpu_jobs import assert_sabotage_caught, evaluate, retime_with_baseline

from tunebox.families import get
from tunebox.records import Status
from tunebox.runtime.launch import Launcher

pytestmark = pytest.mark.gpu
WINDOWS = get("windows")
OPS = ["unfold", "sum", "max", "min"]
DTYPES = ["float32", "bfloat16", "float16"]
SHAPES = [  # (rows, cols, window, step)
    (37, 45, (4, 8), (3, 2)),  # overlapping; the last windows reach past both edges
    (64, 64, (8, 8), (8, 8)),  # adjacent, exact
    (29, 31, (2, 3), (5, 7)),  # gaps; the last windows stop short of the edges
    (3, 5, (6, 7), (1, 1)),  # windows larger than the array
    (130, 257, (16, 5), (4, 16)),  # tall windows, wide gaps between columns
]


def problem_of(op, dtype, shape, padding="nan"):
    rows, cols, window, step = shape
    data = {"dtype": dtype, "rows": rows, "cols": cols, "window": list(window), "step": list(step), "op": op}
    return WINDOWS.parse_problem({**data, "padding": padding} if op == "unfold" else data)


def configs_for(problem):
    """The default, and per (template, staging, vector) one seeded choice of block shape and threads."""
    configs = [c for c in WINDOWS.space if not WINDOWS.violations(problem, c)]
    random.Random(str(problem)).shuffle(configs)
    kinds = {(c["template"], c.as_dict().get("staging"), c.as_dict().get("vector")): c for c in configs}
    return [WINDOWS.default_config(problem), *kinds.values()]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_every_op_and_layout_is_correct(runner, builder, op, dtype):
    problems = [problem_of(op, dtype, shape) for shape in SHAPES]
    cases = [(p, c) for p in problems for c in configs_for(p)]
    builder.build([WINDOWS.render(p, c) for p, c in cases])  # compiled on every core, then served from the cache
    for problem, config in cases:
        outcome = evaluate(runner, builder, WINDOWS, problem, config)
        assert outcome.status is Status.OK, (problem.to_dict(), config.label(), outcome.message)


@pytest.mark.parametrize("padding", ["zero", "neg_zero", "pos_inf", "neg_inf"])
def test_unfold_paddings(runner, builder, padding):
    problem = problem_of("unfold", "bfloat16", SHAPES[0], padding)
    assert evaluate(runner, builder, WINDOWS, problem, WINDOWS.default_config(problem)).status is Status.OK


def test_unfold_pads_with_a_custom_value(runner, builder):
    problem = WINDOWS.parse_problem(
        {
            "dtype": "float16",
            "rows": 37,
            "cols": 45,
            "window": [4, 8],
            "step": [3, 2],
            "op": "unfold",
            "padding": "value",
            "pad_value": -2.5,
        }
    )
    assert evaluate(runner, builder, WINDOWS, problem, WINDOWS.default_config(problem)).status is Status.OK


def test_a_shifted_read_is_rejected(runner, builder):
    problem = problem_of("unfold", "float32", SHAPES[0])
    config = WINDOWS.config({"template": "direct", "BI": 2, "BJ": 4, "threads": 128, "vector": 4, "staging": "shared"})
    assert_sabotage_caught(
        runner,
        builder,
        WINDOWS,
        problem,
        config,
        "jj * SC + v * VEC + e)",
        "jj * SC + v * VEC)",
        expect="elements wrong",
    )


@pytest.mark.parametrize("op", ["sum", "max"])
def test_a_row_left_out_of_a_separable_reduction_is_rejected(runner, builder, op):
    problem = problem_of(op, "bfloat16", SHAPES[4])
    config = WINDOWS.config({"template": "separable", "BI": 2, "BJ": 4, "threads": 128})
    assert_sabotage_caught(
        runner,
        builder,
        WINDOWS,
        problem,
        config,
        "for (int a = 0; a < TH; ++a) acc",
        "for (int a = 1; a < TH; ++a) acc",
        expect="elements wrong",
    )


@pytest.mark.parametrize("op", OPS)
def test_times_and_torch_baseline_matches(runner, builder, op):
    pytest.importorskip("torch")
    # windows past the edges (F.pad pads), and short of them (a view; reductions also pool with ceil_mode)
    for shape, baselines in ((SHAPES[0], 1), (SHAPES[2], 1 if op == "unfold" else 2)):
        problem = problem_of(op, "bfloat16", shape)
        outcomes = retime_with_baseline(runner, builder, WINDOWS, problem, WINDOWS.default_config(problem))
        assert outcomes[0].status is Status.OK and len(outcomes[0].samples_ms) >= 10, outcomes[0].message
        assert len(outcomes) == 1 + baselines
        for baseline in outcomes[1:]:
            assert baseline.status is Status.OK and baseline.baseline.startswith("torch: "), baseline.message


def test_launch_on_torch_tensors(tmp_path):
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    from tunebox.store.winners import WinnersDB

    with WinnersDB(tmp_path / "empty.sqlite"):  # no winners: the family default runs
        pass
    launcher = Launcher(tmp_path / "empty.sqlite", cache_dir=tmp_path / "cubins")
    a = torch.randn(100, 75, device="cuda")
    windows = torch.empty(25, 15, 8, 5, device="cuda")
    sums = torch.empty(25, 15, device="cuda")
    answer = launcher("windows", {"A": a, "out": windows}, window=[8, 5], step=[4, 5], op="unfold")
    launcher("windows", {"A": a, "out": sums}, window=[8, 5], step=[4, 5], op="sum")
    torch.cuda.synchronize()
    assert answer.source == "default"
    assert torch.equal(windows, F.pad(a, (0, 0, 0, 4)).unfold(0, 8, 4).unfold(1, 5, 5))
    torch.testing.assert_close(sums, windows.sum(dim=(2, 3)), rtol=1e-5, atol=1e-4)
