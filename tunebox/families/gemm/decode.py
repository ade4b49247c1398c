"""Template ``decode``: few tokens (M up to a few hundred), where B's reading is the time: mma.sync with
the operands' roles swapped, a ring of shared-memory buffers filled by cp.async (any leading
dimensions) or TMA (16-byte aligned rows), split-K over a thread-block cluster added in a fixed order
(kernels/gemm/gemm_decode.cu; sm_90: clusters, distributed shared memory, TMA)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...limits import MAX_GRID_X, MAX_GRID_Y, SM_COUNT
from ...rules import Rules
from ...tma import SWIZZLE_BYTES, TensorMapRequest
from ..base import Arg, BufferArg, Instantiation, LaunchGeometry, ScalarArg, TensorMapArg, instantiate
from ..contract import KernelTemplate, TemplateConfig, choice
from .common import (
    MAX_ACCUMULATORS,
    TMA_RULES,
    common_rules,
    output_ctype,
    output_members,
    pointer_args,
    tma_rules,
)
from .mma import PAD
from .operation import GemmProblem

SUM_PAD = 4  # floats padding a token's row of partial sums (kernels/gemm/gemm_decode.cu's PITCH)
TMA_ALIGN = 1024  # bytes the TMA ring may spend aligning its buffers
BOX = 64  # elements across a TMA box: one 128-byte swizzle row


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
    load: str = choice("cp_async", "tma", doc="the ring's filling: cp.async chunks, or TMA boxes (128B swizzle)")


def stage_bytes(config: DecodeConfig) -> int:
    """One ring buffer: B's BK x BN tile and A's tokens x BK tile, rows padded with swizzle 'none'."""
    pad = PAD if config.swizzle == "none" else 0
    return (config.BK * (config.BN + pad) + config.tokens * (config.BK + pad)) * 2


def shared_bytes(config: DecodeConfig) -> int:
    """Dynamic shared memory: the ring's buffers (TMA: and 1024 bytes to align them to the swizzle
    period), which the warps' float32 partial sums reuse once drained (warps_k x tokens x (BN + 4))."""
    sums = config.warps_k * config.tokens * (config.BN + SUM_PAD) * 4
    align = TMA_ALIGN if config.load == "tma" else 0
    return max(config.stages * stage_bytes(config) + align, sums)


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
        "tma_boxes",
        "rows_aligned",
        *TMA_RULES,
        "shared_memory_fits",
    )
    kernel = "gemm/gemm_decode.cu"

    def default(self, problem: GemmProblem) -> DecodeConfig | None:
        """None past M = 64 (the tiled templates'); else every token in one block (the next power of two
        from 8), 64 columns a block, 2 x 4 warps, four stages of 128, TMA where its rules hold (cp.async
        otherwise), and the fewest splits that give every SM two blocks (or leave each split four K
        steps)."""
        p = problem
        if p.M > 64:
            return None
        tokens = min(t for t in (8, 16, 32, 64) if t >= p.M)
        steps = math.ceil(p.K / 128)

        def config(splits: int, load: str) -> DecodeConfig:
            return DecodeConfig(64, tokens, 128, 2, 4, 4, "128B" if load == "tma" else "none", splits, load)

        splits = 1
        for more in (2, 4, 8):
            if math.prod(self.geometry(p, config(splits, "tma")).grid) >= 2 * SM_COUNT or 4 * more > steps:
                break
            splits = more
        tma = config(splits, "tma")
        return tma if not self.violations(p, tma) else config(splits, "cp_async")

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
            c.tokens == 8 or c.tokens // 2 < p.M,
            f"tokens={c.tokens} for M={p.M}: half the block's tokens would idle (take at most the next power of 2)",
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
        if c.load == "tma":
            rules.require(
                "tma_boxes",
                c.BN % BOX == 0 and c.BK % BOX == 0 and c.swizzle == "128B",
                f"load 'tma' moves whole boxes of {BOX} columns with the 128-byte swizzle: BN and BK multiples of "
                f"{BOX} and swizzle '128B' (BN={c.BN}, BK={c.BK}, swizzle={c.swizzle!r})",
            )
            rules.require(
                "rows_aligned",
                not p.unaligned(),
                f"load 'tma' needs 16-byte rows of A and B (lda, ldb multiples of 8; {p.lda}, {p.ldb}): use 'cp_async'",
            )
            tma_rules(rules, p, lambda: self.tensor_maps(p, c))
        common_rules(rules, p, c.BN, c.tokens, "true", shared_bytes(c))
        return rules.broken

    def render(self, problem: GemmProblem, config: DecodeConfig) -> Instantiation:
        c = config
        return instantiate(
            self.kernel,
            "gemm_decode_tma" if c.load == "tma" else "gemm_decode",
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
                "TMA": c.load == "tma",
                "SHARED_BYTES": shared_bytes(c),
            },
        )

    def geometry(self, problem: GemmProblem, config: DecodeConfig) -> LaunchGeometry:
        c = config
        grid = (math.ceil(problem.N / c.BN), c.splits, math.ceil(problem.M / c.tokens))
        return LaunchGeometry(grid, (32 * c.warps_n * c.warps_k, 1, 1), shared_bytes(c))

    def args(self, problem: GemmProblem, config: DecodeConfig) -> tuple[Arg, ...]:
        """cp.async: the members of ``pointer_args``; TMA: a_map, b_map, D, M, N, K, ldd, alpha."""
        p = problem
        if config.load == "cp_async":
            return pointer_args(p)
        return (
            *self.tensor_maps(p, config),
            BufferArg("D", output_ctype(p)),
            *(ScalarArg("i64", getattr(p, name), name) for name in ("M", "N", "K", "ldd")),
            ScalarArg("f32", p.alpha, "alpha"),
        )

    def tensor_maps(self, problem: GemmProblem, config: DecodeConfig) -> tuple[TensorMapArg, ...]:
        """TMA maps with the 128-byte swizzle: A in boxes of tokens x 64, B of BK x 64."""
        (a, m, k, lda), (b, _, n, ldb) = problem.operands()
        return tuple(
            TensorMapArg(
                name,
                TensorMapRequest("bfloat16", (rows, cols), (ld * 2, 2), box, 0, "128B", l2_promotion="128B"),
                name=f"{name.lower()}_map",
            )
            for name, rows, cols, ld, box in ((a, m, k, lda, (config.tokens, BOX)), (b, k, n, ldb, (config.BK, BOX)))
        )
