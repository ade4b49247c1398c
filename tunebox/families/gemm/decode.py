"""Template ``decode``: few tokens (M up to a few hundred), where B's reading is the time: mma.sync with
the operands' roles swapped, a cp.async ring, split-K over a thread-block cluster added in a fixed order
(kernels/gemm/gemm_decode.cu). Any leading dimensions; no Hopper-only instruction but the cluster's
distributed shared memory (sm_90)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...limits import MAX_GRID_X, MAX_GRID_Y
from ...rules import Rules
from ...tma import SWIZZLE_BYTES
from ..base import Arg, Instantiation, LaunchGeometry, instantiate
from ..contract import KernelTemplate, TemplateConfig, choice
from .common import MAX_ACCUMULATORS, common_rules, output_members, pointer_args
from .mma import PAD
from .operation import GemmProblem

SM_COUNT = 132  # the H200's multiprocessors: the default's splits give every one two blocks
SUM_PAD = 4  # floats padding a token's row of partial sums (kernels/gemm/gemm_decode.cu's PITCH)


@dataclass(frozen=True)
class DecodeConfig(TemplateConfig):
    BN: int = choice(32, 64, 128, 256, doc="columns of D per block (the mma's rows)")
    tokens: int = choice(8, 16, 32, 64, 128, doc="rows of A and D per block (the mma's columns, n8 tiles)")
    BK: int = choice(32, 64, 128, 256, doc="K step per shared-memory stage")
    warps_n: int = choice(1, 2, 4, doc="warps along the block's columns")
    warps_k: int = choice(1, 2, 4, 8, doc="warps splitting each K step's k16 slices")
    stages: int = choice(2, 3, 4, 6, 8, doc="shared-memory buffers in the cp.async ring")
    swizzle: str = choice(*SWIZZLE_BYTES, doc="shared tiles: 'none' pads rows; 32B/64B/128B swizzle chunks")
    splits: int = choice(1, 2, 4, 8, doc="blocks splitting K: one thread-block cluster, summed in rank order")


def stage_bytes(config: DecodeConfig) -> int:
    """One ring buffer: B's BK x BN tile and A's tokens x BK tile, rows padded with swizzle 'none'."""
    pad = PAD if config.swizzle == "none" else 0
    return (config.BK * (config.BN + pad) + config.tokens * (config.BK + pad)) * 2


def shared_bytes(config: DecodeConfig) -> int:
    """Dynamic shared memory: the ring's buffers, which the warps' float32 partial sums reuse once
    drained (warps_k x tokens x (BN + 4))."""
    sums = config.warps_k * config.tokens * (config.BN + SUM_PAD) * 4
    return max(config.stages * stage_bytes(config), sums)


class DecodeTemplate(KernelTemplate[GemmProblem, DecodeConfig]):
    """Block (x, y, z) computes D's columns x * BN .. for tokens z * tokens .., over the y-th of
    ``splits`` ranges of K's steps."""

    name = "decode"
    config_type = DecodeConfig
    rule_names = (
        "warp_tiles_whole_mma",
        "k_slices_per_warp",
        "accumulators_fit",
        "tokens_within_m",
        "splits_within_k_steps",
        "grid_fits",
        "shared_memory_fits",
    )
    kernel = "gemm/gemm_decode.cu"

    def default(self, problem: GemmProblem) -> DecodeConfig | None:
        """None past M = 64 (the tiled templates'); else every token in one block (up to 64), 64
        columns a block, four warps along K, four stages of 64, and the fewest splits that give every
        SM two blocks (or leave each split four K steps)."""
        p = problem
        if p.M > 64:
            return None
        tokens = min(t for t in (8, 16, 32, 64) if t >= p.M)
        steps = math.ceil(p.K / 64)
        splits = 1
        for more in (2, 4, 8):
            blocks = math.prod(self.geometry(p, DecodeConfig(64, tokens, 64, 1, 4, 4, "none", splits)).grid)
            if blocks >= 2 * SM_COUNT or 4 * more > steps:
                break
            splits = more
        return DecodeConfig(64, tokens, 64, 1, 4, 4, "none", splits)

    def violations(self, problem: GemmProblem, config: DecodeConfig) -> list[str]:
        p, c = problem, config
        rules = Rules(self.name)
        if rules.require(
            "warp_tiles_whole_mma",
            c.BN % (16 * c.warps_n) == 0,
            f"warps_n={c.warps_n} warps need whole 16-column mma tiles of BN={c.BN}",
        ):
            accumulators = c.BN // c.warps_n // 16 * (c.tokens // 8) * 4
            rules.require(
                "accumulators_fit",
                accumulators <= MAX_ACCUMULATORS,
                f"{accumulators} float32 accumulators per thread (at most {MAX_ACCUMULATORS}): lower BN or tokens",
            )
        rules.require(
            "k_slices_per_warp",
            c.BK % (16 * c.warps_k) == 0,
            f"warps_k={c.warps_k} warps need as many k16 slices of BK={c.BK}",
        )
        rules.require(
            "tokens_within_m",
            c.tokens <= max(8, -(-p.M // 8) * 8),
            f"tokens={c.tokens} past M={p.M} rounded up to 8: whole token tiles would idle",
        )
        steps = math.ceil(p.K / c.BK)
        rules.require(
            "splits_within_k_steps",
            c.splits <= steps,
            f"{c.splits} K splits need as many K steps of {c.BK} (K={p.K} has {steps})",
        )
        x, _, z = self.geometry(p, c).grid
        rules.require(
            "grid_fits",
            x <= MAX_GRID_X and z <= MAX_GRID_Y,
            f"the grid of {x} x {c.splits} x {z} blocks exceeds the limits",
        )
        common_rules(rules, p, c.BN, c.tokens, "true", shared_bytes(c))
        return rules.broken

    def render(self, problem: GemmProblem, config: DecodeConfig) -> Instantiation:
        c = config
        return instantiate(
            self.kernel,
            "gemm_decode",
            {
                **output_members(problem),
                "BN": c.BN,
                "TOKENS": c.tokens,
                "BK": c.BK,
                "WARPS_N": c.warps_n,
                "WARPS_K": c.warps_k,
                "STAGES": c.stages,
                "SWIZZLE": SWIZZLE_BYTES[c.swizzle],
                "SPLITS": c.splits,
                "SHARED_BYTES": shared_bytes(c),
            },
        )

    def geometry(self, problem: GemmProblem, config: DecodeConfig) -> LaunchGeometry:
        c = config
        grid = (math.ceil(problem.N / c.BN), c.splits, math.ceil(problem.M / c.tokens))
        return LaunchGeometry(grid, (32 * c.warps_n * c.warps_k, 1, 1), shared_bytes(c))

    def args(self, problem: GemmProblem, config: DecodeConfig) -> tuple[Arg, ...]:
        return pointer_args(problem)
