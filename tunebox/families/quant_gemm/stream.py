"""Template ``stream`` (``quant_gemm_stream`` in kernels/quant_gemm/quant_gemm.cu), for small M: the decode
template's arithmetic with the weights streamed into a shared-memory ring by the TMA unit (bulk copies
of whole row chunks, mbarriers), one producer warp beside ``warps`` consumer warps, persistent blocks
over units of (rows of W, tokens), each unit over all of K in one block (the ``warps_k`` warps that
split a chunk's spans add their sums in shared memory, in a fixed order)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...limits import BLOCK_RESERVED_SHARED_BYTES, SM_COUNT, SM_SHARED_BYTES, SM_THREADS
from ...rules import Rules, shared_memory_fits
from ..base import Arg, Instantiation, LaunchGeometry, instantiate
from ..contract import KernelTemplate, TemplateConfig, choice
from .common import (
    KERNEL,
    kernel_args,
    power_ceiling,
    problem_members,
    second_factor_choice,
    second_predicated,
    warp_layout_rules,
    warps_n,
)
from .problem import QuantGemmProblem


@dataclass(frozen=True)
class StreamConfig(TemplateConfig):
    rows: int = choice(16, 32, doc="rows of W (output columns) per consumer warp: one or two m16 tiles")
    warps: int = choice(2, 4, 8, 16, doc="consumer warps per block (plus one producer warp)")
    warps_k: int = choice(1, 2, 4, 8, doc="consumer warps of a row group splitting each chunk's spans")
    tokens: int = choice(8, 16, 32, 64, doc="tokens per unit (n8 tiles of 8)")
    chunk: int = choice(256, 512, 1024, doc="bytes of codes a row per ring stage (2 x chunk elements of K)")
    stages: int = choice(2, 3, 4, 6, 8, doc="ring stages: chunks in flight per block")
    blocks_per_sm: int = choice(1, 2, 4, doc="resident blocks per SM: the persistent grid's size over 132 SMs")
    second_factor: str = second_factor_choice()


def whole_pieces(p: QuantGemmProblem) -> int:
    """K must be a multiple of this: rows of codes and of scales move in whole 16-byte copies and
    chunks end on whole spans of 128 (512 for mxfp4's scale per 32, 256 for nvfp4's per 16)."""
    return 16 * p.fmt.block


def block_rows(config: StreamConfig) -> int:
    return config.rows * warps_n(config)


def shared_bytes(p: QuantGemmProblem, config: StreamConfig) -> int:
    """The ring: stages x the block's rows x (chunk + 64 bytes of codes, chunk x 2 / block + 16 of
    scales); with warps_k > 1 two buffers of warps_k x tokens x (block rows + 4) float32 sums; two
    mbarriers a stage."""
    c = config
    row = c.chunk + 64 + c.chunk * 2 // p.fmt.block + 16
    sums = 2 * c.warps_k * c.tokens * (block_rows(c) + 4) * 4 if c.warps_k > 1 else 0
    return c.stages * block_rows(c) * row + sums + 2 * c.stages * 8


def units(p: QuantGemmProblem, config: StreamConfig) -> int:
    """Units of work: groups of the block's rows times tiles of tokens."""
    return math.ceil(p.N / block_rows(config)) * math.ceil(p.M / config.tokens)


class StreamTemplate(KernelTemplate[QuantGemmProblem, StreamConfig]):
    """At most 132 x blocks_per_sm persistent blocks of warps + 1 warps; block b computes units b,
    b + grid, ... (a unit: D's columns of one group of rows x its tokens of one tile), its consumer
    warps warps / warps_k groups of rows x warps_k ranges of spans."""

    name = "stream"
    config_type = StreamConfig
    rule_names = (
        "k_in_whole_pieces",
        "warps_k_divides_warps",
        "warps_k_within_chunk",
        "tokens_within_m",
        "warps_along_n_busy",
        "chunk_within_row",
        "shared_memory_fits",
        "blocks_fit_an_sm",
    )
    kernel = KERNEL

    def default(self, problem: QuantGemmProblem) -> StreamConfig | None:
        """None past M = 64 or where K is not in whole pieces; else one group of 16 rows a block whose 8
        consumer warps split each chunk of 512 bytes (a span each), every token up to 64, 4 stages, two
        blocks per SM up to 16 tokens (one past: their accumulators need the registers), the second factor
        as a branch."""
        p = problem
        if p.M > 64 or p.K % whole_pieces(p):
            return None
        tokens = max(t for t in (8, 16, 32, 64) if t <= max(8, -(-p.M // 8) * 8))
        per_sm = 2 if tokens <= 16 else 1
        return StreamConfig(16, 8, 8, tokens, chunk=512, stages=4, blocks_per_sm=per_sm, second_factor="branch")

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
            "warps_k_within_chunk",
            c.warps_k <= c.chunk // 64,
            f"warps_k={c.warps_k} exceeds the {c.chunk // 64} spans of 128 in a chunk of {c.chunk} bytes: "
            "warps would idle",
        )
        warp_layout_rules(rules, p, c)
        rules.require(
            "chunk_within_row",
            c.chunk <= max(256, power_ceiling(p.row_bytes)),
            f"chunk={c.chunk} bytes past a row's {p.row_bytes} rounded up to a power of two: stages would be padding",
        )
        shared = shared_bytes(p, c)
        if shared_memory_fits(rules, shared):
            threads = 32 * (c.warps + 1)
            rules.require(
                "blocks_fit_an_sm",
                c.blocks_per_sm * (shared + BLOCK_RESERVED_SHARED_BYTES) <= SM_SHARED_BYTES
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
                "WARPS_K": c.warps_k,
                "TOKENS": c.tokens,
                "CHUNK": c.chunk,
                "STAGES": c.stages,
                "PER_SM": c.blocks_per_sm,
                "SECOND_PREDICATED": second_predicated(p, c.second_factor),
                "SHARED_BYTES": shared_bytes(p, c),
            },
        )

    def geometry(self, problem: QuantGemmProblem, config: StreamConfig) -> LaunchGeometry:
        p, c = problem, config
        grid = min(units(p, c), SM_COUNT * c.blocks_per_sm)
        return LaunchGeometry((grid, 1, 1), (32 * (c.warps + 1), 1, 1), shared_bytes(p, c))

    def args(self, problem: QuantGemmProblem, config: StreamConfig) -> tuple[Arg, ...]:
        return kernel_args(problem)
