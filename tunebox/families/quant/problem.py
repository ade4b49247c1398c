"""The quant problem: what is converted (dtype, rows, cols, format, direction, scale layout) and the
shapes of its buffers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ...errors import InvalidProblem
from ..base import Problem
from ..indexed import MAX_ELEMENTS, positive, reject_unknown
from .formats import Format, block_format
from .reference import LAYOUTS, padded_shape

NAME = "quant"
DTYPES = ("bfloat16", "float32")
DIRECTIONS = ("quantize", "dequantize")
INPUTS = ("random", "zeros")
FIELDS = {
    "dtype": "the high-precision side: bfloat16 or float32",
    "rows": "rows of x (scale blocks run along rows)",
    "cols": "columns of x, any number (the last block of a row is padded with zeros)",
    "format": "mxfp4 (e2m1, e8m0 per 32), nvfp4 (e2m1, e4m3 per 16, float32 tensor scale), "
    "mxfp8_e4m3 or mxfp8_e5m2 (e8m0 per 32)",
    "direction": "quantize (x -> values, scales) or dequantize (values, scales -> x)",
    "scale_layout": "row_major (default: rows x blocks) or swizzled_128x4 (Blackwell's block-scaled MMA layout)",
    "inputs": "random (default: random values with planted NaN, infinity, zero, subnormal and saturating "
    "blocks; random codes to dequantize) or zeros (quantize only: an all-zero x, NVFP4's T = 0)",
}


@dataclass(frozen=True)
class QuantProblem(Problem):
    element: str  # bfloat16 or float32: x's type
    rows: int
    cols: int
    format: str
    direction: str
    scale_layout: str = "row_major"
    inputs: str = "random"

    @property
    def dtype(self) -> str:
        return self.element

    @property
    def quantize(self) -> bool:
        return self.direction == "quantize"

    @property
    def reads_twice(self) -> bool:
        """NVFP4 quantize: the tensor's amax (its tensor scale) is needed before any block is scaled."""
        return self.format == "nvfp4" and self.quantize

    @property
    def swizzled(self) -> bool:
        return self.scale_layout == "swizzled_128x4"

    @cached_property
    def fmt(self) -> Format:
        return block_format(self.format)

    @property
    def blocks_per_row(self) -> int:
        """nb: scale blocks a row (the last one partial when cols is not a multiple of the block)."""
        return -(-self.cols // self.fmt.block)

    @property
    def row_bytes(self) -> int:
        """rb: bytes of a row of values."""
        return self.fmt.row_bytes(self.cols)

    @property
    def scale_shape(self) -> tuple[int, ...]:
        """(rows, nb) row-major; the swizzled layout's padded codes as one dimension."""
        if self.swizzled:
            pr, pc = padded_shape(self.rows, self.blocks_per_row)
            return (pr * pc,)
        return (self.rows, self.blocks_per_row)

    @property
    def scale_grid(self) -> tuple[int, int]:
        """(rows, blocks a row) of scale codes a quantize writes: the swizzled layout's padding too."""
        if self.swizzled:
            return padded_shape(self.rows, self.blocks_per_row)
        return self.rows, self.blocks_per_row

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "dtype": self.element,
            "rows": self.rows,
            "cols": self.cols,
            "format": self.format,
            "direction": self.direction,
            "scale_layout": self.scale_layout,
        }
        if self.inputs != "random":
            d["inputs"] = self.inputs
        return d


def _word(data: Mapping[str, Any], key: str, allowed: tuple[str, ...], default: str | None = None) -> str:
    value = data.get(key, default)
    if not isinstance(value, str) or value not in allowed:
        raise InvalidProblem(f"{NAME}: {key} must be one of {list(allowed)}, got {value!r}")
    return value


def parse_quant(data: Mapping[str, Any]) -> QuantProblem:
    """Validate a quant problem description (raises InvalidProblem with a one-line reason)."""
    reject_unknown(NAME, data, set(FIELDS))
    dtype = _word(data, "dtype", DTYPES)
    rows, cols = positive(NAME, data, "rows"), positive(NAME, data, "cols")
    if rows * cols >= MAX_ELEMENTS:
        raise InvalidProblem(f"{NAME}: rows x cols = {rows} x {cols} has too many elements (limit 2^40)")
    block_format(data.get("format"))
    direction = _word(data, "direction", DIRECTIONS)
    layout = _word(data, "scale_layout", LAYOUTS, "row_major")
    inputs = _word(data, "inputs", INPUTS, "random")
    if inputs == "zeros" and direction != "quantize":
        raise InvalidProblem(f"{NAME}: inputs = 'zeros' describes x: it is given with direction = 'quantize' only")
    return QuantProblem(dtype, rows, cols, data["format"], direction, layout, inputs)
