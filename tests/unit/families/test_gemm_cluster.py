"""gemm's template ``cluster`` without a GPU: every tile exactly once across the blocks of the clusters
(blocks past D's edge aside), whole clusters in the grid, the boxes each block loads and multicasts,
its rule, the named configuration struct and kernel, and NVRTC compilation for sm_90a of every
cluster shape with both schedules (168 registers, no spill)."""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import family_checks
import pytest

from tunebox.build.nvrtc import NvrtcBuilder
from tunebox.families.gemm import FAMILY
from tunebox.families.gemm.cluster import SHAPES
from tunebox.families.gemm.persistent import tile_coordinates
from tunebox.limits import CLUSTERS_AT_ONCE, SM_COUNT
from tunebox.params import Config
from tunebox.records import Status

G = FAMILY
# the persistent template's default at a large shape (128 x 256 tiles, cooperative, 4 stages), as a cluster
BASE = {**G.templates["persistent"].default(G.parse_problem({"M": 4096, "N": 4096, "K": 4096})).values()}
BASE.update(template="cluster", BN=128, cluster="2x1")


def config(**values) -> Config:
    return G.config({**BASE, **values})


def problem(**data):
    return G.parse_problem({"M": 3000, "N": 5000, "K": 1000, **data})


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("schedule, bm", [("cooperative", 128), ("pingpong", 64)])
def test_every_tile_exactly_once_across_the_clusters(shape: str, schedule: str, bm: int) -> None:
    """The kernel's walk: cluster k of the grid takes units k, k + clusters, ... (pingpong consumer c
    from k + c * clusters, every other one); block r of a cluster takes tile (m * CM + r % CM, n * CN +
    r // CM) of the unit's group (m, n); tiles past D's edge are the only extra ones."""
    cm, cn = SHAPES[shape]
    for m, n in itertools.product((128, 300, 1000, 4099), (128, 136, 5000)):
        p = problem(M=m, N=n)
        c = config(cluster=shape, schedule=schedule, BM=bm)
        if G.violations(p, c):
            continue
        tiles_m, tiles_n = math.ceil(m / bm), math.ceil(n / 128)
        groups_m, groups_n = math.ceil(tiles_m / cm), math.ceil(tiles_n / cn)
        units = groups_m * groups_n
        grid = G.geometry(p, c).grid[0]
        assert grid % (cm * cn) == 0 and grid // (cm * cn) <= CLUSTERS_AT_ONCE[cm * cn] and grid <= SM_COUNT
        clusters = grid // (cm * cn)
        walked = []
        for block in range(grid):
            rank, cluster = block % (cm * cn), block // (cm * cn)
            for start in (0,) if schedule == "cooperative" else (0, 1):
                step = 1 if schedule == "cooperative" else 2
                for unit in range(cluster + start * clusters, units, step * clusters):
                    gm, gn = tile_coordinates(unit, groups_m, groups_n, "m", 8)
                    walked.append((gm * cm + rank % cm, gn * cn + rank // cm))
        inside = [t for t in walked if t[0] < tiles_m and t[1] < tiles_n]
        assert sorted(inside) == list(itertools.product(range(tiles_m), range(tiles_n)))
        assert len(walked) == units * cm * cn


def test_each_block_loads_its_share_of_the_boxes() -> None:
    """A's box split by rows over the blocks of a tile row (1 x 2), B's by K rows over those of a tile
    column (2 x 1)."""
    for shape, a_rows, b_rows in (("2x1", 128, 32), ("1x2", 64, 64), ("2x2", 64, 32)):
        maps = {
            arg.name: arg.request.box for arg in G.args(problem(), config(cluster=shape)) if hasattr(arg, "request")
        }
        assert maps["a_map"] == (a_rows, 64) and maps["b_map"] == (b_rows, 64), shape


def test_the_cluster_must_fit_the_tiles() -> None:
    """16 x 4096 has one tile row: 1 x 2 fits, 2 x 1 would leave a block with nothing but the zero fill."""
    fragment = "a 2 x 1 cluster of tiles needs as many tiles"
    family_checks.assert_rule(G, problem(M=16, N=4096), config(cluster="1x2"), config(cluster="2x1"), fragment)
    fragment = "a 1 x 2 cluster of tiles needs as many tiles"
    family_checks.assert_rule(G, problem(M=4096, N=128), config(cluster="2x1"), config(cluster="1x2"), fragment)


def test_the_configuration_struct_and_kernel() -> None:
    source = G.render(problem(), config(cluster="1x2"))
    assert source.name_expression == "gemm_persistent_cluster<Cfg>" and source.arch_suffix == "a"
    struct = source.code[source.code.rindex("struct Cfg {") :]
    assert "CLUSTER_M = 1;" in struct and "CLUSTER_N = 2;" in struct and "SPLITS = 1;" in struct


def test_every_cluster_shape_compiles(tmp_path: Path) -> None:
    cases = [
        config(cluster=s, schedule=sch, BM=bm)
        for s in sorted(SHAPES)
        for sch, bm in (("cooperative", 128), ("pingpong", 64))
    ]
    builder = NvrtcBuilder("sm_90", cache_dir=tmp_path)
    try:
        results = builder.build([G.render(problem(), c) for c in cases])
    finally:
        builder.close()
    for c, result in zip(cases, results, strict=True):
        assert result.status is Status.OK, (c.label(), result.log[-2000:])
        assert result.registers == 168 and result.spill_bytes == 0, (c.label(), result.log)
        assert re.search(r"\b0 bytes stack frame", result.log), (c.label(), result.log)
