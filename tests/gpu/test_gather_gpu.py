"""gather and scatter on the GPU, verified bit for bit by the worker: every mode (sentinels,
out-of-range indices, masks, offsets, every padding) on odd shapes with both index types and all
dtypes, the Warp tile_load_indexed / cuTile sparse-view forms of gather (a window of the other axis
from a dense offset, running off either end; axis 1 column gathers), all-invalid indices, repeated
gather indices, rows and offsets beyond 2^31, and scatter leaving every untargeted element untouched
(still poison: see tunebox.families.scatter); sabotaged variants are rejected; the torch baselines
match the reference. The element form (family gather_elements: 2-D index tiles, or 1-D tiles
broadcast) the same way: every mode, all-invalid tiles, repeated indices, rows beyond 2^31."""

from __future__ import annotations

import random

import pytest
from gpu_jobs import assert_sabotage_caught, evaluate, retime_with_baseline

from tunebox.families import get
from tunebox.records import Status

pytestmark = pytest.mark.gpu
GATHER, SCATTER, ELEMENTS = get("gather"), get("scatter"), get("gather_elements")
DTYPES = ["float32", "bfloat16", "float16"]
INDEX_DTYPES = ["int32", "int64"]
PADDINGS = [{"padding": m} for m in ("zero", "neg_zero", "nan", "pos_inf", "neg_inf")] + [
    {"padding": "value", "pad_value": -3.25}
]
HUGE_TIMEOUT_S = 300  # seeded inputs of 8 GiB are made and uploaded inside the job

# Odd shapes: D not a multiple of any vector (or a multiple of only some), N and K odd.
GATHER_ODD = [
    {"rows": 1001, "cols": 73, "count": 999, "sentinel_rate": 0.1, "oob_rate": 0.1},
    {"rows": 257, "cols": 130, "count": 4097, "offset": -3, "mask": True, "mask_rate": 0.3, "sentinel_rate": 0.05},
    {"rows": 33, "cols": 1, "count": 1001, "offset": 5, "oob_rate": 0.2},
    {"rows": 7, "cols": 4099, "count": 3, "mask": True, "mask_rate": 0.34},
    {"rows": 999, "cols": 66, "count": 777, "offset": 2},  # every index valid: check_bounds='false' runs too
]
# The sparse-view forms on odd shapes: windows that start before column 0, run past the end, sit at
# vector-aligned offsets or at odd ones; axis 1 column gathers with windows of rows.
GATHER_SPARSE = [
    {"rows": 1001, "cols": 73, "count": 999, "dense_offset": -5, "window": 40, "sentinel_rate": 0.1, "oob_rate": 0.1},
    {
        "rows": 257,
        "cols": 130,
        "count": 4097,
        "offset": -3,
        "dense_offset": 64,
        "window": 96,
        "mask": True,
        "mask_rate": 0.3,
        "sentinel_rate": 0.05,
    },
    {"rows": 33, "cols": 130, "count": 1001, "dense_offset": 101, "window": 77, "oob_rate": 0.2},
    {"rows": 999, "cols": 66, "count": 777, "offset": 2, "dense_offset": 2, "window": 64},  # every index valid
    {
        "rows": 1001,
        "cols": 73,
        "count": 999,
        "axis": 1,
        "dense_offset": -4,
        "window": 37,
        "sentinel_rate": 0.1,
        "oob_rate": 0.1,
    },
    {
        "rows": 130,
        "cols": 257,
        "count": 4097,
        "axis": 1,
        "offset": -3,
        "mask": True,
        "mask_rate": 0.3,
        "sentinel_rate": 0.05,
    },  # the default window: all N rows
    {"rows": 7, "cols": 33, "count": 1001, "axis": 1, "dense_offset": 3, "window": 9},  # every index valid
    {"rows": 2000, "cols": 5, "count": 3, "axis": 1, "dense_offset": 1, "window": 1999, "oob_rate": 0.34},
]
ELEMENTS_ODD = [
    {
        "rows": 1001,
        "cols": 73,
        "tile": [37, 999],
        "sentinel_rate": 0.1,
        "oob_rate": 0.1,
        "mask": True,
        "mask_rate": 0.2,
    },
    {"rows": 257, "cols": 4099, "tile": [129, 130], "broadcast": True, "sentinel_rate": 0.05, "oob_rate": 0.1},
    {"rows": 33, "cols": 1, "tile": [1, 4097], "oob_rate": 0.3},
    {"rows": 7, "cols": 3, "tile": [1, 1]},  # every index valid: check_bounds='false' runs too
    {"rows": 999, "cols": 66, "tile": [65, 3001], "broadcast": True},  # every index valid
]
SCATTER_ODD = [
    {"rows": 1001, "cols": 73, "count": 999},
    {"rows": 4097, "cols": 130, "count": 2049, "offset": -3, "mask": True, "mask_rate": 0.3},
    {"rows": 1001, "cols": 1, "count": 333, "offset": 5},
    {"rows": 7, "cols": 4099, "count": 7, "mask": True, "mask_rate": 0.5},
    {"rows": 3001, "cols": 66, "count": 1, "offset": 2},
]


def configs_for(family, problem):
    """A spread of valid variants: every vector width and check_bounds value with one, four and
    sixteen rows per block, at a seeded choice of threads."""
    seen, chosen = set(), []
    configs = [c for c in family.space if not family.violations(problem, c)]
    random.Random(str(problem)).shuffle(configs)
    for c in configs:
        key = (c["vec_bytes"], c["check_bounds"], c["rows_per_block"])
        if c["rows_per_block"] in (1, 4, 16) and key not in seen:
            seen.add(key)
            chosen.append(c)
    return chosen


def assert_all_ok(runner, builder, family, problem, configs) -> None:
    assert configs
    for config in configs:
        outcome = evaluate(runner, builder, family, problem, config)
        assert outcome.status is Status.OK, (problem, config.label(), outcome.message)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
@pytest.mark.parametrize("shape", GATHER_ODD, ids=str)
def test_gather_every_mode_is_exact(runner, builder, dtype, index_dtype, shape):
    problem = GATHER.parse_problem({"dtype": dtype, "index_dtype": index_dtype, "padding": "nan", **shape})
    configs = configs_for(GATHER, problem)
    assert {c["check_bounds"] for c in configs} == ({"true", "false"} if problem.all_valid else {"true"})
    assert_all_ok(runner, builder, GATHER, problem, configs)
    for padding in PADDINGS:  # the padding is a runtime argument: the default variant covers it
        p = GATHER.parse_problem({"dtype": dtype, "index_dtype": index_dtype, **shape, **padding})
        assert_all_ok(runner, builder, GATHER, p, [GATHER.default_config(p)])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
@pytest.mark.parametrize("shape", GATHER_SPARSE, ids=str)
def test_gather_sparse_views_are_exact(runner, builder, dtype, index_dtype, shape):
    problem = GATHER.parse_problem({"dtype": dtype, "index_dtype": index_dtype, "padding": "nan", **shape})
    assert not problem.whole_rows
    configs = configs_for(GATHER, problem)
    assert {c["check_bounds"] for c in configs} == ({"true", "false"} if problem.all_valid else {"true"})
    assert_all_ok(runner, builder, GATHER, problem, configs)
    for padding in PADDINGS:
        p = GATHER.parse_problem({"dtype": dtype, "index_dtype": index_dtype, **shape, **padding})
        assert_all_ok(runner, builder, GATHER, p, [GATHER.default_config(p)])


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
def test_gather_sparse_view_all_invalid_or_outside(runner, builder, index_dtype):
    """Every element padding: all entries invalid, or the window missing A on the dense axis."""
    for axis in (0, 1):
        for extra in (
            {"sentinel_rate": 0.5, "oob_rate": 0.5, "window": 9},
            {"dense_offset": -20, "window": 20},
            {"dense_offset": 37, "window": 3, "mask": True, "mask_rate": 0.5},
        ):
            problem = GATHER.parse_problem(
                {
                    "dtype": "bfloat16",
                    "rows": 37,
                    "cols": 37,
                    "count": 513,
                    "axis": axis,
                    "index_dtype": index_dtype,
                    "padding": "neg_inf",
                    **extra,
                }
            )
            assert problem.valid_entries == 0 or problem.dense_inside == 0
            assert_all_ok(runner, builder, GATHER, problem, configs_for(GATHER, problem)[:4])


def element_configs(problem):
    """A seeded spread of valid gather_elements variants: each elems_per_thread x check_bounds once."""
    configs = [c for c in ELEMENTS.space if not ELEMENTS.violations(problem, c)]
    random.Random(str(problem)).shuffle(configs)
    return list({(c["elems_per_thread"], c["check_bounds"]): c for c in configs}.values())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
@pytest.mark.parametrize("shape", ELEMENTS_ODD, ids=str)
def test_gather_elements_every_mode_is_exact(runner, builder, dtype, index_dtype, shape):
    problem = ELEMENTS.parse_problem({"dtype": dtype, "index_dtype": index_dtype, "padding": "nan", **shape})
    configs = element_configs(problem)
    assert {c["check_bounds"] for c in configs} == ({"true", "false"} if problem.all_valid else {"true"})
    assert_all_ok(runner, builder, ELEMENTS, problem, configs)
    for padding in PADDINGS[1:]:
        p = ELEMENTS.parse_problem({"dtype": dtype, "index_dtype": index_dtype, **shape, **padding})
        assert_all_ok(runner, builder, ELEMENTS, p, [ELEMENTS.default_config(p)])


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
def test_gather_elements_all_invalid(runner, builder, index_dtype):
    for invalid in (
        {"sentinel_rate": 1.0},
        {"oob_rate": 1.0},
        {"sentinel_rate": 0.5, "oob_rate": 0.5},
        {"mask": True, "mask_rate": 1.0},
        {"broadcast": True, "sentinel_rate": 1.0},
    ):
        for padding in PADDINGS:
            problem = ELEMENTS.parse_problem(
                {
                    "dtype": "bfloat16",
                    "rows": 11,
                    "cols": 37,
                    "tile": [17, 513],
                    "index_dtype": index_dtype,
                    **invalid,
                    **padding,
                }
            )
            assert problem.valid_elements == 0
            assert_all_ok(runner, builder, ELEMENTS, problem, element_configs(problem)[:2])


def test_gather_elements_repeated_indices(runner, builder):
    """3 x 5 elements, 100 x 1000 entries: every element is read thousands of times."""
    problem = ELEMENTS.parse_problem({"dtype": "float16", "rows": 3, "cols": 5, "tile": [100, 1000]})
    assert_all_ok(runner, builder, ELEMENTS, problem, element_configs(problem))


@pytest.mark.parametrize("broadcast", [False, True])
def test_gather_elements_rows_beyond_2_31(runner, builder, broadcast):
    """N = 2^32 rows of one float16 (8 GiB): uniform int64 row draws reach rows above 2^31."""
    problem = ELEMENTS.parse_problem(
        {
            "dtype": "float16",
            "rows": 2**32,
            "cols": 1,
            "tile": [4097, 3],
            "index_dtype": "int64",
            "broadcast": broadcast,
            "sentinel_rate": 0.1,
            "oob_rate": 0.1,
        }
    )
    for config in [ELEMENTS.default_config(problem)] + element_configs(problem)[:2]:
        outcome = evaluate(runner, builder, ELEMENTS, problem, config, timeout_s=HUGE_TIMEOUT_S)
        assert outcome.status is Status.OK, (config.label(), outcome.message)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
@pytest.mark.parametrize("shape", SCATTER_ODD, ids=str)
def test_scatter_writes_targets_and_nothing_else(runner, builder, dtype, index_dtype, shape):
    """Every element of A that no valid entry targets must still hold the poison the worker wrote
    before the launch: reference() says so, and the worker compares all N x D elements."""
    problem = SCATTER.parse_problem({"dtype": dtype, "index_dtype": index_dtype, **shape})
    configs = configs_for(SCATTER, problem)
    assert {c["check_bounds"] for c in configs} == ({"true"} if problem.mask else {"true", "false"})
    assert_all_ok(runner, builder, SCATTER, problem, configs)


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
def test_all_sentinel_and_all_out_of_range(runner, builder, index_dtype):
    for invalid in (
        {"sentinel_rate": 1.0},
        {"oob_rate": 1.0},
        {"sentinel_rate": 0.5, "oob_rate": 0.5},
        {"mask": True, "mask_rate": 1.0},
    ):
        for padding in PADDINGS:
            problem = GATHER.parse_problem(
                {
                    "dtype": "bfloat16",
                    "rows": 11,
                    "cols": 37,
                    "count": 513,
                    "index_dtype": index_dtype,
                    **invalid,
                    **padding,
                }
            )
            assert problem.valid_entries == 0
            assert_all_ok(runner, builder, GATHER, problem, configs_for(GATHER, problem)[:4])
    problem = SCATTER.parse_problem(
        {
            "dtype": "float32",
            "rows": 513,
            "cols": 37,
            "count": 513,
            "index_dtype": index_dtype,
            "mask": True,
            "mask_rate": 1.0,
        }
    )
    assert problem.valid_entries == 0  # nothing written: A must come back all poison
    assert_all_ok(runner, builder, SCATTER, problem, configs_for(SCATTER, problem))


def test_gather_repeated_indices(runner, builder):
    """3 rows, 5001 indices: every row is read by well over a thousand entries."""
    problem = GATHER.parse_problem({"dtype": "float16", "rows": 3, "cols": 1000, "count": 5001})
    assert_all_ok(runner, builder, GATHER, problem, configs_for(GATHER, problem))


@pytest.mark.parametrize(
    ("index_dtype", "extra"),
    [
        ("int32", {"offset": 2**31}),  # idx -2^31 .. 2^31 - 1 reach rows 0 .. 2^32 - 1
        ("int64", {"offset": 2**31 + 12345, "sentinel_rate": 0.1, "oob_rate": 0.1}),
    ],
)
def test_gather_rows_beyond_2_31(runner, builder, index_dtype, extra):
    """N = 2^32 rows of one float16 (8 GiB): 4097 uniform draws read rows above 2^31 with
    certainty (a miss has probability 2^-4097), through 64-bit row offsets and index arithmetic."""
    problem = GATHER.parse_problem(
        {
            "dtype": "float16",
            "rows": 2**32,
            "cols": 1,
            "count": 4097,
            "index_dtype": index_dtype,
            "padding": "nan",
            **extra,
        }
    )
    configs = [GATHER.default_config(problem)] + configs_for(GATHER, problem)[:3]
    for config in configs:
        outcome = evaluate(runner, builder, GATHER, problem, config, timeout_s=HUGE_TIMEOUT_S)
        assert outcome.status is Status.OK, (config.label(), outcome.message)


@pytest.mark.parametrize(("index_dtype", "offset"), [("int32", 2**31), ("int64", -(2**40))])
def test_scatter_rows_beyond_2_31(runner, builder, index_dtype, offset):
    problem = SCATTER.parse_problem(
        {
            "dtype": "float16",
            "rows": 2**32,
            "cols": 1,
            "count": 4097,
            "index_dtype": index_dtype,
            "offset": offset,
            "mask": True,
            "mask_rate": 0.25,
        }
    )
    for config in [SCATTER.default_config(problem)] + configs_for(SCATTER, problem)[:3]:
        outcome = evaluate(runner, builder, SCATTER, problem, config, timeout_s=HUGE_TIMEOUT_S)
        assert outcome.status is Status.OK, (config.label(), outcome.message)


def test_sabotaged_variants_are_rejected(runner, builder):
    gather = GATHER.parse_problem({"dtype": "float32", "rows": 300, "cols": 77, "count": 301, "sentinel_rate": 0.1})
    scatter = SCATTER.parse_problem({"dtype": "float16", "rows": 300, "cols": 77, "count": 300})
    for family, problem in ((GATHER, gather), (SCATTER, scatter)):  # the last entry of each is written
        assert_sabotage_caught(
            runner,
            builder,
            family,
            problem,
            family.default_config(problem),
            "if (k >= K) return;",
            "if (k >= K - 1) return;",
        )
    elements = ELEMENTS.parse_problem({"dtype": "float32", "rows": 300, "cols": 77, "tile": [3, 301]})
    assert_sabotage_caught(
        runner,
        builder,
        ELEMENTS,
        elements,
        ELEMENTS.default_config(elements),
        "if (j < C) out[i * C + j]",
        "if (j < C - 1) out[i * C + j]",
    )
    # a scatter that ignores the mask writes rows that must stay untouched (bfloat16 poison 0x7fad)
    masked = SCATTER.parse_problem(
        {"dtype": "bfloat16", "rows": 300, "cols": 77, "count": 300, "mask": True, "mask_rate": 0.5}
    )
    assert_sabotage_caught(
        runner,
        builder,
        SCATTER,
        masked,
        SCATTER.default_config(masked),
        "if (MASK && __ldg(mask + k) == 0) return -1;",
        "",
        expect="expected 0x7fad",
    )


@pytest.mark.parametrize(
    ("family", "data"),
    [
        (GATHER, {"dtype": "bfloat16", "rows": 4096, "cols": 512, "count": 8192}),
        (
            GATHER,
            {
                "dtype": "float16",
                "rows": 4096,
                "cols": 130,
                "count": 8192,
                "index_dtype": "int64",
                "offset": 3,
                "sentinel_rate": 0.05,
                "oob_rate": 0.05,
                "mask": True,
                "mask_rate": 0.2,
                "padding": "neg_inf",
            },
        ),
        (GATHER, {"dtype": "bfloat16", "rows": 4096, "cols": 512, "count": 8192, "dense_offset": 64, "window": 256}),
        (
            GATHER,
            {
                "dtype": "float32",
                "rows": 4096,
                "cols": 130,
                "count": 8192,
                "dense_offset": -3,
                "window": 140,
                "sentinel_rate": 0.05,
                "mask": True,
                "mask_rate": 0.1,
                "padding": "nan",
            },
        ),
        (GATHER, {"dtype": "bfloat16", "rows": 4096, "cols": 512, "count": 8192, "axis": 1, "window": 64}),
        (
            GATHER,
            {
                "dtype": "float16",
                "rows": 300,
                "cols": 4099,
                "count": 8192,
                "axis": 1,
                "dense_offset": -2,
                "index_dtype": "int64",
                "offset": 1,
                "oob_rate": 0.1,
                "mask": True,
                "mask_rate": 0.2,
                "padding": "value",
                "pad_value": -3.25,
            },
        ),
        (ELEMENTS, {"dtype": "bfloat16", "rows": 4096, "cols": 512, "tile": [512, 1024]}),
        (
            ELEMENTS,
            {
                "dtype": "float32",
                "rows": 4096,
                "cols": 130,
                "tile": [64, 1024],
                "index_dtype": "int64",
                "sentinel_rate": 0.05,
                "oob_rate": 0.05,
                "mask": True,
                "mask_rate": 0.2,
                "padding": "neg_inf",
            },
        ),
        (
            ELEMENTS,
            {
                "dtype": "float16",
                "rows": 4096,
                "cols": 130,
                "tile": [512, 128],
                "broadcast": True,
                "sentinel_rate": 0.05,
            },
        ),
        (SCATTER, {"dtype": "bfloat16", "rows": 8192, "cols": 512, "count": 8192}),
        (
            SCATTER,
            {
                "dtype": "float32",
                "rows": 8192,
                "cols": 64,
                "count": 4096,
                "index_dtype": "int64",
                "mask": True,
                "mask_rate": 0.5,
            },
        ),
    ],
    ids=[
        "gather",
        "gather_masked_int64",
        "gather_sparse_view",
        "gather_window_masked",
        "gather_cols",
        "gather_cols_masked_int64",
        "elements",
        "elements_masked_int64",
        "elements_broadcast",
        "scatter",
        "scatter_masked_int64",
    ],
)
def test_variants_time_and_torch_baseline_matches(runner, builder, family, data):
    """K is a multiple of 4 here: the worker hands every input to torch through ``_signed``, which
    views a uint8 mask as int32 words."""
    pytest.importorskip("torch")
    problem = family.parse_problem(data)
    outcomes = retime_with_baseline(runner, builder, family, problem, family.default_config(problem))
    assert len(outcomes) == 2
    assert outcomes[0].status is Status.OK and len(outcomes[0].samples_ms) >= 10, outcomes[0].message
    assert outcomes[1].status is Status.OK, outcomes[1].message
    assert outcomes[1].baseline.startswith("torch: ")
