"""The quant operation: parsing, buffers, seeded inputs, the numpy reference, work, distance, the torch
baseline and the problem of a caller's arrays."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np

from ...dtypes import element_type
from ...errors import InvalidProblem
from ..base import Baseline, BufferSpec, Work
from ..contract import Operation
from ..indexed import matrix_shape
from . import reference
from .baselines import torch_baseline
from .inputs import make_inputs
from .problem import FIELDS, NAME, QuantProblem, parse_quant

BYTES = "uint8"  # values and scales: codes, one or two a byte
Role = Literal["input", "output"]
AMAX_SLOTS = 1024  # NVFP4 quantize's workspace: the prologue's partial maxima (float32 bits)


class QuantOperation(Operation[QuantProblem]):
    name = NAME
    fields = FIELDS
    draws = frozenset({"inputs"})  # how x is drawn, not which problem: a caller's arrays cannot tell it
    array_fields = frozenset({"dtype", "rows", "cols"})  # format, direction and scale_layout are options

    def parse(self, data: Mapping[str, Any]) -> QuantProblem:
        return parse_quant(data)

    def buffers(self, problem: QuantProblem) -> tuple[BufferSpec, ...]:
        """x (rows, cols) of dtype; values (rows, rb) and scales (``scale_shape``) of bytes; NVFP4's
        tensor_scale (1,) float32. Quantize writes values, scales (and tensor_scale, with the amax
        workspace); dequantize reads them and writes x."""
        p = problem
        low: Role = "output" if p.quantize else "input"
        high: Role = "input" if p.quantize else "output"
        specs = [
            BufferSpec("x", (p.rows, p.cols), p.element, high),
            BufferSpec("values", (p.rows, p.row_bytes), BYTES, low),
            BufferSpec("scales", p.scale_shape, BYTES, low),
        ]
        if p.format == "nvfp4":
            specs.append(BufferSpec("tensor_scale", (1,), "float32", low))
            if p.reads_twice:
                specs.append(BufferSpec("amax", (AMAX_SLOTS,), "float32", "workspace"))
        return tuple(specs)

    def make_inputs(self, problem: QuantProblem, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return make_inputs(problem, rng)

    def reference(self, problem: QuantProblem, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        p = problem
        if p.quantize:
            return reference.quantize(inputs["x"], p.element, p.fmt, p.scale_layout)
        return {"x": reference.dequantize(inputs, p.element, p.fmt, p.scale_layout, p.cols)}

    def work(self, problem: QuantProblem) -> Work:
        """x, values and scales once each (a quantize's swizzled padding codes too; a dequantize reads
        the real ones), and NVFP4's tensor scale; NVFP4 quantize reads x twice: its tensor scale
        needs the whole tensor's amax before any block is scaled, and x does not fit on chip."""
        p = problem
        x = p.rows * p.cols * element_type(p.element).itemsize
        scales = math.prod(p.scale_shape) if p.quantize else p.rows * p.blocks_per_row
        total = x + p.rows * p.row_bytes + scales
        if p.format == "nvfp4":
            total += 4 + (x if p.reads_twice else 0)
        return Work(total)

    def distance(self, a: QuantProblem, b: QuantProblem) -> float | None:
        if (a.element, a.format, a.direction, a.scale_layout, a.inputs) != (
            b.element,
            b.format,
            b.direction,
            b.scale_layout,
            b.inputs,
        ):
            return None
        return abs(math.log2(a.rows / b.rows)) + abs(math.log2(a.cols / b.cols))

    def baselines(self, problem: QuantProblem) -> tuple[Baseline, ...]:
        return (torch_baseline(problem),)

    def from_arrays(self, arrays: Mapping[str, Any], **options: Any) -> QuantProblem:
        """Arrays ``x`` (rows, cols; bfloat16 or float32), ``values`` and ``scales`` (their codes'
        bytes: uint8, or the torch type of the format's codes: float4_e2m1fn_x2 (two fp4 a byte, same
        shape), float8_e4m3fn / float8_e5m2 values, float8_e8m0fnu / float8_e4m3fn scales) and, for
        nvfp4, ``tensor_scale`` (float32, one element); options ``format``, ``direction`` and
        ``scale_layout`` (as the problem keys)."""
        names = ["x", "values", "scales"] + (["tensor_scale"] if options.get("format") == "nvfp4" else [])
        missing = [n for n in names if n not in arrays]
        if missing:
            raise InvalidProblem(f"{NAME}: tunebox.launch needs the arrays {names}; missing {missing}")
        rows, cols = matrix_shape(NAME, "x", arrays["x"])
        problem = self.parse({"dtype": str(arrays["x"].dtype), "rows": rows, "cols": cols, **options})
        problem.fmt.check_storage(NAME, arrays)
        return problem
