"""The quant_gemm problem: ``D (M x N) = A (M x K) @ dequant(W)^T`` with W an N x K matrix stored as
the quant family stores it (fp4 values along K, block scales, NVFP4's tensor scale), and the shapes
of its buffers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ...errors import InvalidProblem
from ..base import Problem
from ..indexed import MAX_ELEMENTS, positive, reject_unknown
from ..quant.formats import Format, block_format

NAME = "quant_gemm"
FORMATS = ("mxfp4", "nvfp4")
INPUTS = ("random", "edges")
FIELDS = {
    "M": "tokens: rows of A and D (positive)",
    "N": "output features: rows of W, columns of D (positive)",
    "K": "input features: columns of A and W, any number (W's last scale block of a row may be partial)",
    "format": "mxfp4 (e2m1, e8m0 per 32) or nvfp4 (e2m1, e4m3 per 16, float32 tensor scale)",
    "inputs": "random (default: random A; W random bfloat16 quantized by the quant family's reference) or "
    "edges (the same with planted scale codes: NaN, zero, subnormal, infinite and large blocks)",
}


@dataclass(frozen=True)
class QuantGemmProblem(Problem):
    M: int
    N: int
    K: int
    format: str
    inputs: str = "random"

    @property
    def dtype(self) -> str:
        return "bfloat16"  # A's and D's type

    @cached_property
    def fmt(self) -> Format:
        return block_format(self.format)

    @property
    def nvfp4(self) -> bool:
        return self.format == "nvfp4"

    @property
    def row_bytes(self) -> int:
        """kb: bytes of a row of values (two e2m1 codes a byte; an odd K ends with a padding nibble)."""
        return self.fmt.row_bytes(self.K)

    @property
    def blocks_per_row(self) -> int:
        """nb: scale blocks of a row (the last one partial when K is not a multiple of the block)."""
        return -(-self.K // self.fmt.block)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"M": self.M, "N": self.N, "K": self.K, "format": self.format}
        if self.inputs != "random":
            d["inputs"] = self.inputs
        return d


def parse_quant_gemm(data: Mapping[str, Any]) -> QuantGemmProblem:
    """Validate a quant_gemm problem description (raises InvalidProblem with a one-line reason)."""
    reject_unknown(NAME, data, set(FIELDS))
    m, n, k = (positive(NAME, data, key) for key in ("M", "N", "K"))
    for name, rows, cols in (("A", m, k), ("W", n, k), ("D", m, n)):
        if rows * cols >= MAX_ELEMENTS:
            raise InvalidProblem(f"{NAME}: {name} has {rows} x {cols} elements (limit 2^40)")
    fmt = data.get("format")
    if fmt not in FORMATS:
        raise InvalidProblem(f"{NAME}: format must be one of {list(FORMATS)}, got {fmt!r}")
    inputs = data.get("inputs", "random")
    if inputs not in INPUTS:
        raise InvalidProblem(f"{NAME}: inputs must be one of {list(INPUTS)}, got {inputs!r}")
    return QuantGemmProblem(m, n, k, fmt, inputs)
