"""What the quant_gemm templates share: the kernel arguments, the members of the configuration struct
that the problem fixes, the widths of the global accesses that a row's alignment allows, and the warp
layout rules and the second scale factor's form of the small-M templates (decode, stream)."""

from __future__ import annotations

from typing import Any, Protocol

from ...rules import Rules
from ..base import Arg, BufferArg, ScalarArg, TensorMapArg
from ..contract import choice
from ..gemm.split_k import split_args
from .problem import QuantGemmProblem

KERNEL = "quant_gemm/quant_gemm.cu"


def access_bytes(row_bytes: int) -> int:
    """The widest access (16, 8, 4, 2 or 1 bytes) that keeps every row of ``row_bytes`` aligned: rows
    start at multiples of it (buffers are at least 256-byte aligned)."""
    width = 16
    while row_bytes % width:
        width //= 2
    return width


def problem_members(p: QuantGemmProblem) -> dict[str, int | bool]:
    """NVFP4 (e4m3 scales and a tensor scale, else mxfp4), and the access widths of a row of values
    (``VB``, bytes) and of A (``AV``, bytes)."""
    return {"NVFP4": p.nvfp4, "VB": access_bytes(p.row_bytes), "AV": access_bytes(2 * p.K)}


def second_factor_choice() -> Any:
    """The small-M templates' ``second_factor`` field (span_products in the kernel)."""
    return choice(
        "branch",
        "predicated",
        doc="mxfp4's second scale factor: a warp-uniform branch between two loop bodies, or multiplies under a "
        "predicate in one (fewer registers; they issue when off); nvfp4 has none, so both are one binary",
    )


def second_predicated(p: QuantGemmProblem, second_factor: str) -> bool:
    """The kernel's SECOND_PREDICATED: the predicated form where scales take a second factor (mxfp4)."""
    return second_factor == "predicated" and not p.nvfp4


def kernel_args(p: QuantGemmProblem) -> tuple[Arg, ...]:
    """The members of ``Cfg::Args``: a, values, scales, tensor_scale (nvfp4), d, then M, N, K, kb (bytes
    of a row of values) and nb (scales of a row)."""
    nv = (BufferArg("tensor_scale", "const float"),) if p.nvfp4 else ()
    scalars = {"M": p.M, "N": p.N, "K": p.K, "kb": p.row_bytes, "nb": p.blocks_per_row}
    return (
        BufferArg("a", "const unsigned short"),
        BufferArg("values", "const unsigned char"),
        BufferArg("scales", "const unsigned char"),
        *nv,
        BufferArg("d", "unsigned short"),
        *(ScalarArg("i64", v, name) for name, v in scalars.items()),
    )


def code_rows_rule(rules: Rules, p: QuantGemmProblem) -> None:
    """The TMA templates' (wgmma, registers) rule ``k_whole_code_rows``: rows of codes in whole 16-byte
    pieces."""
    rules.require(
        "k_whole_code_rows",
        p.K % 32 == 0,
        f"TMA loads rows of codes in whole 16-byte pieces: K must be a multiple of 32 (K={p.K}); use the "
        "tiled or decode template",
    )


def tma_kernel_args(p: QuantGemmProblem, maps: tuple[TensorMapArg, ...], splits: int) -> tuple[Arg, ...]:
    """The members of the TMA templates' ``Cfg::Args`` (wgmma, registers): their tensor ``maps``, values (the
    codes, for loads and L2 prefetches), scales, tensor_scale (nvfp4), d, partials and counters (split-K),
    then M, N, K, nb (scale codes of a row of W) and kb (bytes of a row of codes)."""
    nv = (BufferArg("tensor_scale", "const float"),) if p.nvfp4 else ()
    sizes = (("M", p.M), ("N", p.N), ("K", p.K), ("nb", p.blocks_per_row), ("kb", p.row_bytes))
    return (
        *maps,
        BufferArg("values", "const unsigned char"),
        BufferArg("scales", "const unsigned char"),
        *nv,
        BufferArg("d", "unsigned short"),
        *split_args(splits),
        *(ScalarArg("i64", v, name) for name, v in sizes),
    )


class WarpLayout(Protocol):
    """A small-M template's warps: ``warps`` a block, in warps / warps_k groups of ``rows`` rows of W
    whose ``warps_k`` warps split K; ``tokens`` tokens a block."""

    @property
    def rows(self) -> int: ...
    @property
    def warps(self) -> int: ...
    @property
    def warps_k(self) -> int: ...
    @property
    def tokens(self) -> int: ...


def warps_n(config: WarpLayout) -> int:
    """Warps along N (each a different group of ``rows`` rows)."""
    return max(1, config.warps // config.warps_k)


def warp_layout_rules(rules: Rules, p: QuantGemmProblem, c: WarpLayout) -> None:
    """The rules ``warps_k_divides_warps``, ``tokens_within_m`` and ``warps_along_n_busy``."""
    rules.require(
        "warps_k_divides_warps", c.warps % c.warps_k == 0, f"warps_k={c.warps_k} does not divide warps={c.warps}"
    )
    rules.require(
        "tokens_within_m",
        c.tokens <= max(8, -(-p.M // 8) * 8),
        f"tokens={c.tokens} past M={p.M} rounded up to 8: whole token tiles would idle",
    )
    rules.require(
        "warps_along_n_busy",
        (warps_n(c) - 1) * c.rows < p.N,
        lambda: f"{warps_n(c)} warps of {c.rows} rows along N={p.N}: whole warps would idle",
    )


def power_ceiling(n: int) -> int:
    """The least power of two >= n (n >= 1)."""
    return 1 << (n - 1).bit_length()
