"""Template ``cluster``: the persistent kernel (kernels/gemm/gemm_persistent.cu, ``gemm_persistent_cluster``)
on thread-block clusters of 2 blocks along M ("2x1": they share B's boxes), along N ("1x2": A's) or
4 ("2x2"). Each block loads its share of the boxes its cluster's blocks have in common and multicasts
it to them with TMA, so L2 serves each shared box once per cluster; every block's ring buffer is
released by the consumers of the whole cluster. No split-K."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...rules import Rules
from ..contract import choice
from .operation import GemmProblem
from .persistent import PersistentConfig, PersistentTemplate

SHAPES = {"2x1": (2, 1), "1x2": (1, 2), "2x2": (2, 2)}  # cluster -> tiles along M, N


@dataclass(frozen=True)
class ClusterConfig(PersistentConfig):
    splits: int = choice(1, doc="no split-K on clusters")
    cluster: str = choice(*SHAPES, doc="tiles along M x N of a thread-block cluster sharing A / B boxes by multicast")

    def cluster_shape(self) -> tuple[int, int]:
        return SHAPES[self.cluster]


class ClusterTemplate(PersistentTemplate):
    name = "cluster"
    config_type = ClusterConfig
    entry = "gemm_persistent_cluster"
    rule_names = tuple(rule for rule in PersistentTemplate.rule_names if not rule.startswith("split")) + (
        "cluster_within_tiles",
    )

    def default(self, problem: GemmProblem) -> ClusterConfig | None:
        return None  # a searched template: the persistent one is the default

    def cluster_rules(self, rules: Rules, problem: GemmProblem, config: PersistentConfig) -> None:
        cluster_m, cluster_n = config.cluster_shape()
        tiles_m, tiles_n = math.ceil(problem.M / config.BM), math.ceil(problem.N / config.BN)
        rules.require(
            "cluster_within_tiles",
            tiles_m >= cluster_m and tiles_n >= cluster_n,
            f"a {cluster_m} x {cluster_n} cluster of tiles needs as many tiles of {config.BM} x {config.BN}: "
            f"{problem.M} x {problem.N} has {tiles_m} x {tiles_n} (its other blocks would compute past D): "
            "a smaller cluster or tile",
        )
