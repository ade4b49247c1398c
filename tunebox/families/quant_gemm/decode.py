"""Template ``decode`` (``quant_gemm_decode`` in kernels/quant_gemm/quant_gemm.cu), for small M: weight
rows as the mma's A operand, tokens as its B operand, K in spans of 128 whose codes a thread loads in
one 16-byte access a row, split over a thread-block cluster of ``splits`` blocks that add their sums
through distributed shared memory in a fixed order."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...limits import MAX_GRID_X, MAX_GRID_Y, SM_COUNT
from ...rules import Rules
from ..base import Arg, Instantiation, LaunchGeometry, instantiate
from ..contract import KernelTemplate, TemplateConfig, choice
from .common import (
    KERNEL,
    kernel_args,
    problem_members,
    second_factor_choice,
    second_predicated,
    warp_layout_rules,
    warps_n,
)
from .problem import QuantGemmProblem

SPAN = 128  # elements of K a warp takes at a time (32 a thread)


@dataclass(frozen=True)
class DecodeConfig(TemplateConfig):
    rows: int = choice(16, 32, doc="output columns (rows of W) per warp: 16 or 32 (one or two m16 tiles)")
    warps: int = choice(1, 2, 4, 8, doc="warps per block")
    warps_k: int = choice(1, 2, 4, doc="warps of a block splitting its K range (the others split rows)")
    tokens: int = choice(8, 16, 32, 64, doc="tokens per block (n8 tiles of 8); more blocks along grid.z")
    unroll: int = choice(1, 2, 4, doc="spans of 128 a warp keeps loading ahead (loads in flight)")
    splits: int = choice(1, 2, 4, 8, doc="blocks splitting K: one thread-block cluster, reduced in rank order")
    second_factor: str = second_factor_choice()


def full_spans(p: QuantGemmProblem) -> int:
    return p.K // SPAN


def shared_bytes(config: DecodeConfig) -> int:
    """The warps' float32 sums: warps_k x tokens x (rows of the block + 4) (rows padded off banks; at
    most 69 KB in this space). The domains also bound the accumulators (at most 64 a thread) and the
    codes in flight (at most 64 registers)."""
    return config.warps_k * config.tokens * (config.rows * warps_n(config) + 4) * 4


class DecodeTemplate(KernelTemplate[QuantGemmProblem, DecodeConfig]):
    """Block (x, y, z) computes rows x * rows * warps_n .. of D's columns for tokens z * tokens .., over
    the y-th of ``splits`` ranges of K."""

    name = "decode"
    config_type = DecodeConfig
    rule_names = ("warps_k_divides_warps", "tokens_within_m", "warps_along_n_busy", "splits_within_spans", "grid_fits")
    kernel = KERNEL

    def default(self, problem: QuantGemmProblem) -> DecodeConfig | None:
        """None past M = 64 (the tiled template's); else 16 rows a warp, up to 4 warps along N, every
        token up to 64, two spans in flight, and the fewest splits that give two blocks per SM (or
        leave each warp two spans)."""
        p = problem
        if p.M > 64:
            return None
        tokens = max(t for t in (8, 16, 32, 64) if t <= max(8, -(-p.M // 8) * 8))
        warps = max(w for w in (1, 2, 4) if (w - 1) * 16 < p.N)
        for splits in (1, 2, 4, 8):
            config = DecodeConfig(16, warps, 1, tokens, 2, splits, "branch")
            if math.prod(self.geometry(p, config).grid) >= 2 * SM_COUNT or 2 * splits > full_spans(p):
                break
        return config

    def violations(self, problem: QuantGemmProblem, config: DecodeConfig) -> list[str]:
        p, c = problem, config
        rules = Rules(self.name)
        warp_layout_rules(rules, p, c)
        rules.require(
            "splits_within_spans",
            c.splits * c.warps_k <= max(1, full_spans(p)),
            lambda: (
                f"splits x warps_k = {c.splits * c.warps_k} exceeds the {full_spans(p)} whole spans of {SPAN} "
                f"in K={p.K}: warps would idle"
            ),
        )
        x, _, z = self.geometry(p, c).grid
        rules.require(
            "grid_fits",
            x <= MAX_GRID_X and z <= MAX_GRID_Y,
            f"the grid of {x} x {c.splits} x {z} blocks exceeds the limits",
        )
        return rules.broken

    def render(self, problem: QuantGemmProblem, config: DecodeConfig) -> Instantiation:
        c = config
        return instantiate(
            self.kernel,
            "quant_gemm_decode",
            {
                **problem_members(problem),
                "ROWS": c.rows,
                "WARPS_N": warps_n(c),
                "WARPS_K": c.warps_k,
                "TOKENS": c.tokens,
                "UNROLL": c.unroll,
                "SPLITS": c.splits,
                "SECOND_PREDICATED": second_predicated(problem, c.second_factor),
                "SHARED_BYTES": shared_bytes(c),
            },
        )

    def geometry(self, problem: QuantGemmProblem, config: DecodeConfig) -> LaunchGeometry:
        p, c = problem, config
        grid = (math.ceil(p.N / (c.rows * warps_n(c))), c.splits, math.ceil(p.M / c.tokens))
        return LaunchGeometry(grid, (32 * c.warps, 1, 1), shared_bytes(c))

    def args(self, problem: QuantGemmProblem, config: DecodeConfig) -> tuple[Arg, ...]:
        return kernel_args(problem)
