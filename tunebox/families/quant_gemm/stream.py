"""Template ``stream`` (``quant_gemm_stream`` in kernels/quant_gemm/quant_gemm.cu), for small M: the decode
template's arithmetic with the weights streamed into a shared-memory ring by the TMA unit (bulk copies
of whole row chunks, mbarriers), one producer warp beside ``warps`` consumer warps, persistent blocks
over units of (rows of W, tokens), each unit over all of K (no split, no reduction)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...rules import Rules, shared_memory_fits
from ..base import Arg, Instantiation, LaunchGeometry, instantiate
from ..contract import KernelTemplate, TemplateConfig, choice
from .common import KERNEL, SM_COUNT, kernel_args, problem_members
from .problem import QuantGemmProblem

SM_SHARED_BYTES = 228 * 1024  # shared memory of one H200 SM, for all its blocks
BLOCK_RESERVED_BYTES = 1024  # what the hardware keeps of it per block
SM_THREADS = 2048


@dataclass(frozen=True)
class StreamConfig(TemplateConfig):
    rows: int = choice(16, 32, doc="rows of W (output columns) per consumer warp: one or two m16 tiles")
    warps: int = choice(1, 2, 4, 8, doc="consumer warps per block (plus one producer warp)")
    tokens: int = choice(8, 16, 32, 64, doc="tokens per unit (n8 tiles of 8)")
    chunk: int = choice(256, 512, 1024, doc="bytes of codes a row per ring stage (2 x chunk elements of K)")
    stages: int = choice(2, 3, 4, 6, 8, doc="ring stages: chunks in flight per block")
    blocks_per_sm: int = choice(1, 2, 4, doc="resident blocks per SM: the persistent grid's size over 132 SMs")


def whole_pieces(p: QuantGemmProblem) -> int:
    """K must be a multiple of this: rows of codes and of scales move in whole 16-byte copies and
    chunks end on whole spans of 128 (512 for mxfp4's scale per 32, 256 for nvfp4's per 16)."""
    return 16 * p.fmt.block


def block_rows(config: StreamConfig) -> int:
    return config.rows * config.warps


def shared_bytes(p: QuantGemmProblem, config: StreamConfig) -> int:
    """The ring: stages x the block's rows x (chunk + 64 bytes of codes, chunk x 2 / block + 16 of
    scales), then two mbarriers a stage."""
    c = config
    row = c.chunk + 64 + c.chunk * 2 // p.fmt.block + 16
    return c.stages * block_rows(c) * row + 2 * c.stages * 8


def units(p: QuantGemmProblem, config: StreamConfig) -> int:
    """Units of work: groups of the block's rows times tiles of tokens."""
    return math.ceil(p.N / block_rows(config)) * math.ceil(p.M / config.tokens)


def _power_ceiling(n: int) -> int:
    return 1 << (n - 1).bit_length()


class StreamTemplate(KernelTemplate[QuantGemmProblem, StreamConfig]):
    """At most 132 x blocks_per_sm persistent blocks of warps + 1 warps; block b computes units b,
    b + grid, ... (a unit: D's columns of one group of rows x its tokens of one tile)."""

    name = "stream"
    config_type = StreamConfig
    rule_names = (
        "k_in_whole_pieces",
        "tokens_within_m",
        "warps_along_n_busy",
        "chunk_within_row",
        "shared_memory_fits",
        "blocks_fit_an_sm",
    )
    kernel = KERNEL

    def default(self, problem: QuantGemmProblem) -> StreamConfig | None:
        """None past M = 64 or where K is not in whole pieces; else 16 rows a warp, 4 consumer warps,
        every token up to 64, chunks of 512 bytes in 4 stages, one block per SM."""
        p = problem
        if p.M > 64 or p.K % whole_pieces(p):
            return None
        tokens = max(t for t in (8, 16, 32, 64) if t <= max(8, -(-p.M // 8) * 8))
        return StreamConfig(rows=16, warps=4, tokens=tokens, chunk=512, stages=4, blocks_per_sm=1)

    def violations(self, problem: QuantGemmProblem, config: StreamConfig) -> list[str]:
        p, c = problem, config
        rules = Rules(self.name)
        rules.require(
            "k_in_whole_pieces",
            p.K % whole_pieces(p) == 0,
            f"K={p.K} is not a multiple of {whole_pieces(p)}: this template copies {p.format} rows in whole "
            "16-byte pieces (the decode template takes any K)",
        )
        rules.require(
            "tokens_within_m",
            c.tokens <= max(8, -(-p.M // 8) * 8),
            f"tokens={c.tokens} past M={p.M} rounded up to 8: whole token tiles would idle",
        )
        rules.require(
            "warps_along_n_busy",
            (c.warps - 1) * c.rows < p.N,
            lambda: f"{c.warps} warps of {c.rows} rows along N={p.N}: whole warps would idle",
        )
        rules.require(
            "chunk_within_row",
            c.chunk <= max(256, _power_ceiling(p.row_bytes)),
            f"chunk={c.chunk} bytes past a row's {p.row_bytes} rounded up to a power of two: stages would be padding",
        )
        shared = shared_bytes(p, c)
        if shared_memory_fits(rules, shared):
            threads = 32 * (c.warps + 1)
            rules.require(
                "blocks_fit_an_sm",
                c.blocks_per_sm * (shared + BLOCK_RESERVED_BYTES) <= SM_SHARED_BYTES
                and c.blocks_per_sm * threads <= SM_THREADS,
                lambda: (
                    f"{c.blocks_per_sm} blocks of {shared} bytes of shared memory and {threads} threads exceed "
                    f"an SM's {SM_SHARED_BYTES} bytes and {SM_THREADS} threads"
                ),
            )
        return rules.broken

    def render(self, problem: QuantGemmProblem, config: StreamConfig) -> Instantiation:
        p, c = problem, config
        return instantiate(
            self.kernel,
            "quant_gemm_stream",
            {
                **problem_members(p),
                "BLOCK": p.fmt.block,
                "ROWS": c.rows,
                "WARPS": c.warps,
                "TOKENS": c.tokens,
                "CHUNK": c.chunk,
                "STAGES": c.stages,
                "PER_SM": c.blocks_per_sm,
                "SHARED_BYTES": shared_bytes(p, c),
            },
        )

    def geometry(self, problem: QuantGemmProblem, config: StreamConfig) -> LaunchGeometry:
        p, c = problem, config
        grid = min(units(p, c), SM_COUNT * c.blocks_per_sm)
        return LaunchGeometry((grid, 1, 1), (32 * (c.warps + 1), 1, 1), shared_bytes(p, c))

    def args(self, problem: QuantGemmProblem, config: StreamConfig) -> tuple[Arg, ...]:
        return kernel_args(problem)
