"""Template ``mma``: the bounded mma.sync m16n8k16 kernel ``gemm`` fed by a cp.async pipeline
(kernels/gemm/gemm.cu)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...limits import MAX_GRID_X, MAX_GRID_Y
from ...rules import Rules
from ...tma import SWIZZLE_BYTES
from ..base import Arg, Instantiation, LaunchGeometry, instantiate
from ..contract import KernelTemplate, TemplateConfig, choice
from .common import (
    COMMON_RULES,
    MAX_ACCUMULATORS,
    bounds_choice,
    common_rules,
    output_members,
    pipeline_stages,
    pointer_args,
    tile_columns,
    tile_rows,
)
from .operation import GemmProblem

PAD = 8  # elements of padding per shared-memory row with swizzle 'none' (kernels/gemm/gemm.cu)


@dataclass(frozen=True)
class MmaConfig(TemplateConfig):
    BM: int = tile_rows()
    BN: int = tile_columns()
    BK: int = choice(16, 32, 64, doc="K step per shared-memory stage")
    warps_m: int = choice(1, 2, 4, doc="warps along M")
    warps_n: int = choice(1, 2, 4, doc="warps along N")
    stages: int = pipeline_stages()
    swizzle: str = choice(*SWIZZLE_BYTES, doc="shared tiles: 'none' pads rows (mma); 32B/64B/128B swizzle chunks")
    bounds: str = bounds_choice()


class MmaTemplate(KernelTemplate[GemmProblem, MmaConfig]):
    """Block (bn, bm) of a (N / BN) x (M / BM) grid computes one tile of D with warps_m x warps_n warps."""

    name = "mma"
    config_type = MmaConfig
    rule_names = (
        "grid_fits",
        "warp_tiles_whole_mma",
        "accumulators_fit",
        "full_k_steps",
        "aligned_rows",
        *COMMON_RULES,
    )
    kernel = "gemm/gemm.cu"

    @staticmethod
    def shared_bytes(config: MmaConfig) -> int:
        """Dynamic shared memory per block: the stages' buffers of A and B, rows padded with swizzle 'none'."""
        pad = PAD if config.swizzle == "none" else 0
        return config.stages * (config.BM * (config.BK + pad) + config.BK * (config.BN + pad)) * 2

    def default(self, problem: GemmProblem) -> MmaConfig:
        tile = 128 if min(problem.M, problem.N) >= 128 else 64 if min(problem.M, problem.N) >= 64 else 32
        return MmaConfig(BM=tile, BN=tile, BK=32, warps_m=2, warps_n=2, stages=2, swizzle="none", bounds="true")

    def violations(self, problem: GemmProblem, config: MmaConfig) -> list[str]:
        p, c = problem, config
        bm, bn, bk, wm, wn = c.BM, c.BN, c.BK, c.warps_m, c.warps_n
        rules = Rules(self.name)
        rules.require(
            "grid_fits",
            math.ceil(p.M / bm) <= MAX_GRID_Y and math.ceil(p.N / bn) <= MAX_GRID_X,
            lambda: f"the grid of {math.ceil(p.N / bn)} x {math.ceil(p.M / bm)} blocks exceeds the limits",
        )
        if rules.require(
            "warp_tiles_whole_mma",
            bm % (16 * wm) == 0 and bn % (8 * wn) == 0,
            f"warp tiles of whole 16 x 8 MMA tiles need BM % (16 x warps_m) = BN % (8 x warps_n) = 0 "
            f"(BM={bm}, BN={bn}, warps {wm} x {wn})",
        ):
            rules.require(
                "accumulators_fit",
                (bm // wm // 16) * (bn // wn // 8) * 4 <= MAX_ACCUMULATORS,
                f"a {bm // wm} x {bn // wn} warp tile holds {(bm // wm) * (bn // wn) // 32} float32 "
                f"accumulators per thread (at most {MAX_ACCUMULATORS})",
            )
        if c.bounds == "false":
            rules.require(
                "full_k_steps",
                p.K % bk == 0,
                f"bounds='false' needs full K steps on path 'mma': K % BK = 0 ({p.K} % {bk})",
            )
            rules.require(
                "aligned_rows",
                p.lda % 8 == 0 and p.ldb % 8 == 0,
                f"bounds='false' needs 16-byte rows of A and B (lda, ldb multiples of 8; {p.lda}, {p.ldb})",
            )
        common_rules(rules, p, bm, bn, c.bounds, self.shared_bytes(c))
        return rules.broken

    def render(self, problem: GemmProblem, config: MmaConfig) -> Instantiation:
        c = config
        return instantiate(
            self.kernel,
            "gemm",
            {
                **output_members(problem),
                "BM": c.BM,
                "BN": c.BN,
                "BK": c.BK,
                "WARPS_M": c.warps_m,
                "WARPS_N": c.warps_n,
                "STAGES": c.stages,
                "SWIZZLE": SWIZZLE_BYTES[c.swizzle],
                "BOUNDS": c.bounds == "true",
                "SHARED_BYTES": self.shared_bytes(c),
            },
        )

    def geometry(self, problem: GemmProblem, config: MmaConfig) -> LaunchGeometry:
        tiles_n, tiles_m = math.ceil(problem.N / config.BN), math.ceil(problem.M / config.BM)
        return LaunchGeometry(
            (tiles_n, tiles_m, 1), (32 * config.warps_m * config.warps_n, 1, 1), self.shared_bytes(config)
        )

    def args(self, problem: GemmProblem, config: MmaConfig) -> tuple[Arg, ...]:
        return pointer_args(problem)
