"""What every gemm template shares: the tunable fields they have in common (the same domains and
docs in each template's configuration), the output members of the configuration struct, the element
types of the argument structs' pointers, and the rules on shared memory and full tiles."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from ...dtypes import element_type
from ...rules import Rules, shared_memory_fits
from ...tma import MAX_COORDINATE
from ...tma import violations as tensor_map_violations
from ..base import Arg, BufferArg, CType, ScalarArg, TensorMapArg
from ..contract import choice
from .operation import GemmProblem

MAX_ACCUMULATORS = 128  # float32 accumulators per thread (Tylo's register limit)


def tile_rows() -> Any:
    return choice(32, 64, 128, 256, doc="block tile rows of D")


def tile_columns() -> Any:
    return choice(32, 64, 128, 256, doc="block tile columns of D")


def pipeline_stages() -> Any:
    return choice(1, 2, 3, 4, doc="shared-memory buffers in the load pipeline (cp.async, or TMA with wgmma)")


def bounds_choice() -> Any:
    return choice("true", "false", doc="'false' promises full tiles (and, for mma, 16-byte aligned rows)")


def output_members(p: GemmProblem) -> dict[str, int | bool | CType]:
    """The configuration struct's members that the problem fixes: D's element type and the epilogue."""
    return {"O": CType(output_ctype(p)), "RELU": p.relu}


def input_ctype(p: GemmProblem) -> str:
    """The C++ type of A's and B's elements (bfloat16 bits): the kernels' ``const unsigned short*``."""
    return element_type(p.dtype).ctype


def output_ctype(p: GemmProblem) -> str:
    """The C++ type of D's elements (``Cfg::O``)."""
    return element_type(p.out_dtype).ctype


def pointer_args(p: GemmProblem) -> tuple[Arg, ...]:
    """The members of ``Cfg::Args`` of the kernels reading A and B through pointers (templates mma and
    decode): A, B, D, M, N, K, lda, ldb, ldd, alpha."""
    return (
        BufferArg("A", f"const {input_ctype(p)}"),
        BufferArg("B", f"const {input_ctype(p)}"),
        BufferArg("D", output_ctype(p)),
        *(ScalarArg("i64", getattr(p, name), name) for name in ("M", "N", "K", "lda", "ldb", "ldd")),
        ScalarArg("f32", p.alpha, "alpha"),
    )


COMMON_RULES = ("shared_memory_fits", "full_tiles")  # common_rules's (full_tiles: bounds='false' only)


class ProblemSides(Protocol):
    """What tma_rules reads of a problem: the sides of its product."""

    @property
    def M(self) -> int: ...
    @property
    def N(self) -> int: ...
    @property
    def K(self) -> int: ...


TMA_RULES = ("coordinates_32bit",)  # tma_rules's own (the tensor maps' are tma.violations's)


def common_rules(rules: Rules, p: GemmProblem, bm: int, bn: int, bounds: str, shared_bytes: int) -> None:
    """The rules of every template: the stages fit in shared memory; bounds='false' needs full tiles."""
    shared_memory_fits(rules, shared_bytes)
    if bounds == "false":
        rules.require(
            "full_tiles",
            p.M % bm == 0 and p.N % bn == 0,
            f"bounds='false' needs full tiles of D: M % BM = N % BN = 0 ({p.M} % {bm}, {p.N} % {bn})",
        )


def tma_rules(rules: Rules, p: GemmProblem | ProblemSides, maps: Callable[[], Iterable[TensorMapArg]]) -> None:
    """The TMA templates' last rules: 32-bit coordinates, then (only where no earlier rule broke, so
    that the maps can be built) the rules of ``cuTensorMapEncodeTiled`` each of ``maps()`` breaks on
    any 256-byte aligned address (the buffers' own are known at launch only)."""
    rules.require(
        "coordinates_32bit",
        max(p.M, p.N, p.K) <= MAX_COORDINATE,
        f"TMA coordinates are 32-bit: M, N and K must stay below 2^31 ({p.M}, {p.N}, {p.K})",
    )
    if not rules.broken:
        rules.broken += [
            f"tensor map of {arg.buffer}: {b}"
            for arg in maps()
            for b in tensor_map_violations(dataclasses.replace(arg.request, address=256))
        ]
