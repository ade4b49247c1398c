"""Template ``tiled`` (``quant_gemm_tiled`` in kernels/quant_gemm/quant_gemm.cu), for M from 64: a block
tile of BM tokens x BN output columns, K in steps of BK through a cp.async pipeline of A, the packed
codes and the scales in shared memory; tokens as the mma's A operand, weight rows (decoded from
shared memory in registers) as its B operand."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...limits import MAX_GRID_X, MAX_GRID_Y
from ...rules import Rules, shared_memory_fits
from ..base import Arg, Instantiation, LaunchGeometry, instantiate
from ..contract import KernelTemplate, TemplateConfig, choice
from ..gemm.common import MAX_ACCUMULATORS, pipeline_stages
from .common import KERNEL, access_bytes, kernel_args, power_ceiling, problem_members
from .problem import QuantGemmProblem

MAX_FRAGMENT_REGISTERS = 200  # accumulators + decoded weights + paired activations per thread


@dataclass(frozen=True)
class TiledConfig(TemplateConfig):
    BM: int = choice(32, 64, 128, 256, doc="block tile rows of D (tokens)")
    BN: int = choice(32, 64, 128, 256, doc="block tile columns of D (rows of W)")
    BK: int = choice(64, 128, 256, doc="K step per shared-memory stage")
    warps_m: int = choice(1, 2, 4, doc="warps along M")
    warps_n: int = choice(1, 2, 4, doc="warps along N")
    stages: int = pipeline_stages()


def scale_bytes(p: QuantGemmProblem, config: TiledConfig) -> int:
    """Scale codes of a row in one K step."""
    return config.BK // p.fmt.block


def shared_bytes(p: QuantGemmProblem, config: TiledConfig) -> int:
    """The stages: A (BM x BK bfloat16), codes (BN rows of BK / 2 + 16 bytes), scales (BN rows of at
    least 4 bytes)."""
    c = config
    return c.stages * (c.BM * c.BK * 2 + c.BN * (c.BK // 2 + 16) + c.BN * max(4, scale_bytes(p, c)))


def fragment_registers(config: TiledConfig) -> int:
    """Per thread: the warp tile's float32 accumulators, its decoded weight words and token rows."""
    wtm, wtn = config.BM // config.warps_m, config.BN // config.warps_n
    return wtm * wtn // 32 + wtn // 8 * 4 + wtm // 16 * 8


class TiledTemplate(KernelTemplate[QuantGemmProblem, TiledConfig]):
    """Block (bn, bm) of a (N / BN) x (M / BM) grid computes one tile of D with warps_m x warps_n warps."""

    name = "tiled"
    config_type = TiledConfig
    rule_names = (
        "warp_tiles_whole_mma",
        "accumulators_fit",
        "fragment_registers_fit",
        "bm_within_m",
        "bk_within_k",
        "stages_at_least_2",
        "shared_memory_fits",
        "grid_fits",
    )
    kernel = KERNEL

    def default(self, problem: QuantGemmProblem) -> TiledConfig:
        bm = 64 if problem.M > 32 else 32
        bk = 128 if problem.K > 64 else 64
        return TiledConfig(BM=bm, BN=128, BK=bk, warps_m=2, warps_n=2, stages=3)

    def violations(self, problem: QuantGemmProblem, config: TiledConfig) -> list[str]:
        p, c = problem, config
        rules = Rules(self.name)
        if rules.require(
            "warp_tiles_whole_mma",
            c.BM % (16 * c.warps_m) == 0 and c.BN % (8 * c.warps_n) == 0,
            f"warp tiles of whole 16 x 8 MMA tiles need BM % (16 x warps_m) = BN % (8 x warps_n) = 0 "
            f"(BM={c.BM}, BN={c.BN}, warps {c.warps_m} x {c.warps_n})",
        ):
            accumulators = c.BM * c.BN // (32 * c.warps_m * c.warps_n)
            if rules.require(
                "accumulators_fit",
                accumulators <= MAX_ACCUMULATORS,
                f"{accumulators} float32 accumulators per thread (at most {MAX_ACCUMULATORS})",
            ):
                rules.require(
                    "fragment_registers_fit",
                    fragment_registers(c) <= MAX_FRAGMENT_REGISTERS,
                    lambda: (
                        f"{fragment_registers(c)} registers of fragments per thread (at most {MAX_FRAGMENT_REGISTERS})"
                    ),
                )
        rules.require(
            "bm_within_m",
            max(32, power_ceiling(p.M)) >= c.BM,
            f"BM={c.BM} is past M={p.M} rounded up to a power of two: token tiles would idle",
        )
        rules.require(
            "bk_within_k",
            max(64, power_ceiling(p.K)) >= c.BK,
            f"BK={c.BK} is past K={p.K} rounded up to a power of two: K steps would be padding",
        )
        rules.require(
            "stages_at_least_2",
            c.stages >= 2,
            "the pipeline loads the next K step while this one is multiplied: stages >= 2",
        )
        shared = shared_bytes(p, c)
        shared_memory_fits(rules, shared)
        x, y, _ = self.geometry(p, c).grid
        rules.require(
            "grid_fits", x <= MAX_GRID_X and y <= MAX_GRID_Y, f"the grid of {x} x {y} blocks exceeds the limits"
        )
        return rules.broken

    def render(self, problem: QuantGemmProblem, config: TiledConfig) -> Instantiation:
        p, c = problem, config
        return instantiate(
            self.kernel,
            "quant_gemm_tiled",
            {
                **problem_members(p),
                "BLOCK": p.fmt.block,
                "SB": min(access_bytes(p.blocks_per_row), scale_bytes(p, c)),
                "BM": c.BM,
                "BN": c.BN,
                "BK": c.BK,
                "WARPS_M": c.warps_m,
                "WARPS_N": c.warps_n,
                "STAGES": c.stages,
                "SHARED_BYTES": shared_bytes(p, c),
            },
        )

    def geometry(self, problem: QuantGemmProblem, config: TiledConfig) -> LaunchGeometry:
        p, c = problem, config
        grid = (math.ceil(p.N / c.BN), math.ceil(p.M / c.BM), 1)
        return LaunchGeometry(grid, (32 * c.warps_m * c.warps_n, 1, 1), shared_bytes(p, c))

    def args(self, problem: QuantGemmProblem, config: TiledConfig) -> tuple[Arg, ...]:
        return kernel_args(problem)
