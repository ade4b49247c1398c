"""ragged3d on the GPU, verified bit for bit by the worker (outputs poisoned before every launch):
pack and unpack of every dtype with rows of H x D that take 16-byte vectors, narrower ones or single
elements; lengths 0 (empty sequences), 1, exactly BM and Lmax; unpack's zero fill past each length; a
sabotaged variant that skips the last row of each tile is rejected; the torch baselines match the
reference.

The TMA template: every swizzle mode x dtype (bfloat16, float32) x direction, groups of heads,
column blocks (BN), batched copies of 1, 2 and 4 chunks with D not a multiple of the batch, the same
lengths; sabotaged variants that drop each block's last store, or unpack's zeros, are rejected. And
one experiment: does TMA need memory in front of (or past) its buffers? The buffers are placed against
reserved, unmapped device memory (``ragged_probe``) and the results must still be exact. A load of a
box wholly out of bounds through a clipping map, whose base address lies BM rows in front of its
buffer, faults there (so the template's loads go through plain maps, see
kernels/ragged3d/ragged3d_tma.cu); stores and partly inside loads do not."""

from __future__ import annotations

import multiprocessing as mp
import random
from concurrent.futures import ProcessPoolExecutor

import pytest
import ragged_probe
from gpu_jobs import assert_sabotage_caught, evaluate, retime_with_baseline

from tunebox.families import get
from tunebox.records import Status
from tunebox.tma import SWIZZLE_BYTES

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
    """Every vector width with BM 1, 16 and 128 where valid, at a seeded choice of threads (template vector)."""
    vector = RAGGED.space.restrict({"template": ["vector"], "BM": [1, 16, 128]})
    configs = [c for c in vector if not RAGGED.violations(problem, c)]
    random.Random(str(problem)).shuffle(configs)
    return list({(c["vec_bytes"], c["BM"]): c for c in configs}.values())


def problem_of(dtype, direction, shape):
    b, lmax, h, d, lengths = shape
    return RAGGED.parse_problem(
        {
            "dtype": dtype,
            "batch": b,
            "max_len": lmax,
            "heads": h,
            "depth": d,
            "direction": direction,
            "lengths": lengths,
        }
    )


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
    config = RAGGED.config({"template": "vector", "BM": 16, "threads": 128, "vec_bytes": 16})
    assert_sabotage_caught(
        runner,
        builder,
        RAGGED,
        problem,
        config,
        "filled * row, (rows - filled) * row",
        "(filled - (filled > 0)) * row, (rows - filled) * row",
    )  # each tile's last row dropped


@pytest.mark.parametrize("direction", ["pack", "unpack"])
def test_times_and_torch_baseline_matches(runner, builder, direction):
    pytest.importorskip("torch")
    problem = RAGGED.parse_problem(
        {
            "dtype": "bfloat16",
            "batch": 8,
            "max_len": 512,
            "heads": 8,
            "depth": 128,
            "direction": direction,
            "lengths": "uniform",
        }
    )
    outcomes = retime_with_baseline(runner, builder, RAGGED, problem, RAGGED.default_config(problem))
    assert outcomes[0].status is Status.OK and len(outcomes[0].samples_ms) >= 10, outcomes[0].message
    assert len(outcomes) == (4 if direction == "pack" else 2)  # pack: torch.cat (two forms) and x[mask]
    for baseline in outcomes[1:]:
        assert baseline.status is Status.OK and baseline.baseline.startswith("torch: "), baseline.message


# ---------------------------------------------------------------------------------------------
# template tma

TMA_DTYPES = ["bfloat16", "float32"]
TMA_SHAPES = [  # (B, Lmax, H, D, lengths): 16-byte heads in both dtypes; BM = 16 meets lengths 16 and 32 exactly
    (5, 37, 4, 40, [0, 1, 16, 37, 32]),  # D = 40: chunks cut by D under every swizzle
    (6, 129, 8, 64, [129, 128, 127, 16, 1, 0]),
    (3, 50, 2, 8, [0, 0, 0]),  # nothing to pack; unpack writes only zeros (every tile wholly past its sequence)
]


def tma(**values):
    base = {"template": "tma", "BM": 16, "group": 1, "BN": 0, "swizzle": "none", "tma_blocks_per_op": 0}
    return RAGGED.config({**base, **values})


def tma_configs_for(problem, swizzle):
    """One valid tma config of the swizzle mode for each group and whole-rows-or-column-blocks (BN = 0 or
    not) with BM = 16, and a seeded one with BM 1 or 128, unbatched (batched copies: their own test)."""
    sub = RAGGED.space.restrict(
        {"template": ["tma"], "swizzle": [swizzle], "tma_blocks_per_op": [0], "BM": [1, 16, 128]}
    )
    configs = [c for c in sub if not RAGGED.violations(problem, c)]
    random.Random(f"{problem}/{swizzle}").shuffle(configs)
    chosen = {(c["group"], c["BN"] == 0): c for c in configs if c["BM"] == 16}
    return list(chosen.values()) + [c for c in configs if c["BM"] != 16][:1]


@pytest.mark.parametrize("dtype", TMA_DTYPES)
@pytest.mark.parametrize("direction", ["pack", "unpack"])
@pytest.mark.parametrize("swizzle", list(SWIZZLE_BYTES))
@pytest.mark.parametrize("shape", TMA_SHAPES, ids=str)
def test_tma_every_swizzle_is_exact(runner, builder, dtype, direction, swizzle, shape):
    problem = problem_of(dtype, direction, shape)
    configs = tma_configs_for(problem, swizzle)
    assert len({c["group"] for c in configs}) == len([g for g in (1, 2, 4, 8) if shape[2] % g == 0])
    for config in configs:
        outcome = evaluate(runner, builder, RAGGED, problem, config)
        assert outcome.status is Status.OK, (config.label(), outcome.message)


@pytest.mark.parametrize("dtype", TMA_DTYPES)
@pytest.mark.parametrize("direction", ["pack", "unpack"])
@pytest.mark.parametrize("per_op", [1, 2, 4])
def test_tma_batched_copies_are_exact(runner, builder, dtype, direction, per_op):
    """D = 5 chunks of 16 bytes: batches of 2 and 4 run past n_blocks (clipped, zero-filled); column
    blocks of 4 chunks (BN) leave a last block of 1; groups 1 and 2 (ranks 4 and 5)."""
    chunk = 16 // (2 if dtype == "bfloat16" else 4)
    problem = problem_of(dtype, direction, (5, 37, 4, 5 * chunk, [0, 1, 16, 37, 32]))
    for group in (1, 2):
        for bn in (0, 4 * chunk):
            config = tma(group=group, BN=bn, tma_blocks_per_op=per_op)
            assert not RAGGED.violations(problem, config), config.label()
            outcome = evaluate(runner, builder, RAGGED, problem, config)
            assert outcome.status is Status.OK, (config.label(), outcome.message)


@pytest.mark.parametrize("direction", ["pack", "unpack"])
def test_a_tma_variant_that_drops_a_store_is_rejected(runner, builder, direction):
    problem = problem_of("bfloat16", direction, TMA_SHAPES[1])
    config = tma(group=2)  # 8 chunks of 8 columns: 8 stores per block
    assert_sabotage_caught(
        runner,
        builder,
        RAGGED,
        problem,
        config,  # each block's last chunk dropped
        "for (int k = 0; k < ops; ++k) {\n    const int chunk",
        "for (int k = 0; k + 1 < ops; ++k) {\n    const int chunk",
    )


def test_a_tma_unpack_that_skips_its_zeros_is_rejected(runner, builder):
    """Without the zeros, rows past a sequence's end would hold the next sequence's rows."""
    problem = problem_of("bfloat16", "unpack", TMA_SHAPES[1])
    assert_sabotage_caught(
        runner,
        builder,
        RAGGED,
        problem,
        tma(group=2),
        "zeros[v] = make_uint4(0, 0, 0, 0);",
        ";",
        expect="elements wrong",
    )


# The experiment. Lmax = 40 with BM = 16: the last sequence (length 40) ends mid-tile, so clipped rows
# would lie past the end of x, of the ragged storage and of unpack's out; 1 KiB rows (bf16, 8 x 64).
UNMAPPED_PROBLEM = {
    "dtype": "bfloat16",
    "batch": 5,
    "max_len": 40,
    "heads": 8,
    "depth": 64,
    "lengths": [1, 0, 16, 7, 40],
}
UNMAPPED_CONFIGS = [
    tma().as_dict(),
    tma(group=2, swizzle="128B").as_dict(),
    tma(group=4, BN=32, tma_blocks_per_op=4).as_dict(),
]


@pytest.fixture
def isolated():
    """A fresh spawned process per probe: a fault poisons that process's CUDA context only."""
    with ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("spawn"), max_tasks_per_child=1) as pool:
        yield lambda fn, *args: pool.submit(fn, *args).result(timeout=300)


def test_the_unmapped_range_really_faults(isolated):
    """Control of the experiment below: an ordinary load in front of a buffer so placed faults."""
    assert "ILLEGAL_ADDRESS" in isolated(ragged_probe.read_in_front, 1 << 20)


@pytest.mark.parametrize("dyn", [0, 1, ragged_probe.CLIP_DYN, ragged_probe.CLIP_BM])
def test_a_wholly_clipped_tma_load_through_a_map_based_in_unmapped_memory_faults(isolated, dyn):
    """Why the template loads through plain maps only: loads through pack's clipping map (origin BM
    rows in front of its buffer) are exact with memory mapped there; without it, a box with a row
    inside still is, but a box wholly out of bounds (dyn = 0: a tile past its sequence) faults."""
    assert isolated(ragged_probe.load_through_clipping_map, "tail", dyn) == ""
    front = isolated(ragged_probe.load_through_clipping_map, "front", dyn)
    assert ("ILLEGAL_ADDRESS" in front) if dyn == 0 else front == "", front


@pytest.mark.parametrize("direction", ["pack", "unpack"])
def test_tma_needs_no_memory_in_front_of_its_buffers(isolated, direction):
    """pack's store map (the clipping map of out) has its base address BM rows in front of out, in
    unmapped memory (the seed asks the caller for that memory); every buffer starts right after unmapped
    memory. A fault or a wrong element fails this test."""
    reports = isolated(
        ragged_probe.run_next_to_unmapped, {**UNMAPPED_PROBLEM, "direction": direction}, UNMAPPED_CONFIGS, "front"
    )
    assert reports == [""] * len(UNMAPPED_CONFIGS), reports


@pytest.mark.parametrize("direction", ["pack", "unpack"])
def test_tma_needs_no_memory_past_its_buffers(isolated, direction):
    """The buffers end where unmapped memory begins: rows clipped past a buffer's end are never touched."""
    reports = isolated(
        ragged_probe.run_next_to_unmapped, {**UNMAPPED_PROBLEM, "direction": direction}, UNMAPPED_CONFIGS, "tail"
    )
    assert reports == [""] * len(UNMAPPED_CONFIGS), reports
