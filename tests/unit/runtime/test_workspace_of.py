"""``tunebox.launch`` binds only the workspace the served variant's launches name (``workspace_of``):
split-K's partial sums (up to 32 MiB) only for a variant that splits, the padded copies only for the
padded template, nothing for a data-movement kernel."""

from __future__ import annotations

from tunebox.families import get
from tunebox.runtime.launch import workspace_of

GEMM = get("gemm")
PERSISTENT = {
    "template": "persistent",
    "BM": 128,
    "BN": 128,
    "stages": 4,
    "schedule": "cooperative",
    "raster": "m",
    "group": 1,
    "epilogue": "tma",
    "producer_registers": 40,
    "consumer_registers": 232,
}


def names(family, problem, config) -> list[str]:
    assert not family.violations(problem, config)
    return [b.name for b in workspace_of(family, problem, config)]


def test_split_k_workspace_only_for_a_variant_that_splits():
    problem = GEMM.parse_problem({"M": 128, "N": 4096, "K": 4096})
    assert {b.name for b in GEMM.buffers(problem) if b.role == "workspace"} == {"partials", "counters"}
    assert names(GEMM, problem, GEMM.config({**PERSISTENT, "splits": 1})) == []
    assert names(GEMM, problem, GEMM.config({**PERSISTENT, "splits": 4})) == ["partials", "counters"]


def test_the_padded_copies_only_for_the_padded_template():
    problem = GEMM.parse_problem({"M": 4099, "N": 4097, "K": 4095})
    padded = {"template": "padded", "BM": 128, "BN": 256, "stages": 2, "bounds": "true", "consumers": 2}
    assert names(GEMM, problem, GEMM.config({**padded, "tiles_per_block": 1})) == ["A_padded", "B_padded"]
    assert names(GEMM, problem, GEMM.default_config(problem)) == []  # mma reads A and B in place


def test_a_data_movement_kernel_binds_no_workspace():
    tile_copy = get("tile_copy")
    problem = tile_copy.parse_problem({"dtype": "float32", "src": [1000, 1000], "dst": [1000, 1000]})
    assert names(tile_copy, problem, tile_copy.default_config(problem)) == []
