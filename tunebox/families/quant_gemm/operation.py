"""The quant_gemm operation: parsing, buffers, seeded inputs, the reference, tolerance, work, distance,
the torch baselines and the problem of a caller's arrays.

Reference: ``D[m, n] = sum_k A[m, k] * Wdq[n, k]`` with Wdq the quant family's exact float32
dequantization (``quant.reference.dequantize``: element * scale, NVFP4 times the tensor scale, NaN for
a NaN scale), the product in float32 (rows of Wdq with NaN or infinity in float64, element by element,
so that IEEE's rules hold whatever BLAS does with them), rounded to bfloat16 (NaN as 0x7FC0).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ...dtypes import element_type
from ...errors import InvalidProblem
from ..base import Baseline, BufferSpec, Tolerance, Work
from ..contract import Operation
from ..gemm.products import product_tolerance, shape_distance
from ..gemm.split_k import split_buffers, split_slots
from ..indexed import matrix_shape
from ..quant import reference as quant_reference
from .baselines import torch_baselines
from .inputs import make_inputs
from .problem import FIELDS, NAME, QuantGemmProblem, parse_quant_gemm

BYTES = "uint8"  # values and scales: codes, two or one a byte


def dequantized(p: QuantGemmProblem, inputs: Mapping[str, np.ndarray]) -> np.ndarray:
    """Wdq (N x K) float32: the quant family's dequantization of values, scales and tensor_scale."""
    bits = quant_reference.dequantize(inputs, "float32", p.fmt, "row_major", p.K)
    return bits.view(np.float32)


def product(a: np.ndarray, w: np.ndarray) -> np.ndarray:
    """a (M x K) @ w (N x K)^T in float32; rows of w holding NaN or infinity in float64, one by one."""
    d = np.empty((a.shape[0], w.shape[0]), dtype=np.float64)
    finite = np.isfinite(w).all(axis=1)
    d[:, finite] = a @ w[finite].T
    with np.errstate(invalid="ignore", over="ignore"):
        for n in np.flatnonzero(~finite):
            d[:, n] = (a.astype(np.float64) * w[n].astype(np.float64)).sum(axis=1)
    return d


class QuantGemmOperation(Operation[QuantGemmProblem]):
    name = NAME
    fields = FIELDS
    draws = frozenset({"inputs"})  # how the inputs are drawn, not which problem: a caller's arrays cannot tell it
    array_fields = frozenset({"M", "N", "K"})  # format is an option

    def parse(self, data: Mapping[str, Any]) -> QuantGemmProblem:
        return parse_quant_gemm(data)

    def buffers(self, problem: QuantGemmProblem) -> tuple[BufferSpec, ...]:
        """Inputs a (M, K) bfloat16, values (N, kb) and scales (N, nb) bytes, NVFP4's tensor_scale (1,)
        float32; output d (M, N) bfloat16; the workspace of template wgmma's split-K."""
        p = problem
        specs = [
            BufferSpec("a", (p.M, p.K), "bfloat16", "input"),
            BufferSpec("values", (p.N, p.row_bytes), BYTES, "input"),
            BufferSpec("scales", (p.N, p.blocks_per_row), BYTES, "input"),
        ]
        if p.nvfp4:
            specs.append(BufferSpec("tensor_scale", (1,), "float32", "input"))
        return (
            *specs,
            BufferSpec("d", (p.M, p.N), "bfloat16", "output"),
            *split_buffers(p.M, p.N, split_slots(p.M, p.N)),
        )

    def make_inputs(self, problem: QuantGemmProblem, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return make_inputs(problem, rng)

    def reference(self, problem: QuantGemmProblem, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        bf16 = element_type("bfloat16")
        a = bf16.decode(inputs["a"]).astype(np.float32)
        return {"d": bf16.encode(product(a, dequantized(problem, inputs)))}

    def tolerance(self, problem: QuantGemmProblem, inputs: Mapping[str, np.ndarray]) -> Tolerance:
        """The gemm family's: rtol 1e-2 (D's bfloat16 rounding), atol 1e-2 * sqrt(K / 64) * mean|A| *
        |W| (the accumulation order), |W| the median over rows of a row's mean finite |Wdq| (planted
        rows of huge or infinite scales do not widen it)."""
        a = element_type("bfloat16").mean_magnitude(inputs["a"])
        w = np.abs(dequantized(problem, inputs))
        finite = np.isfinite(w)
        rows = np.where(finite, w, 0).sum(axis=1) / np.maximum(finite.sum(axis=1), 1)
        return product_tolerance(problem.K, float(a * np.median(rows)))

    def work(self, problem: QuantGemmProblem) -> Work:
        """A, the packed values, the scales (and NVFP4's tensor scale) read once, D written once;
        2 M N K flops."""
        p = problem
        read = p.M * p.K * 2 + p.N * (p.row_bytes + p.blocks_per_row) + (4 if p.nvfp4 else 0)
        return Work(read + p.M * p.N * 2, flops=2 * p.M * p.N * p.K)

    def distance(self, a: QuantGemmProblem, b: QuantGemmProblem) -> float | None:
        if (a.format, a.inputs) != (b.format, b.inputs):
            return None
        return shape_distance((a.M, a.N, a.K), (b.M, b.N, b.K))

    def baselines(self, problem: QuantGemmProblem) -> tuple[Baseline, ...]:
        return torch_baselines(problem)

    def from_arrays(self, arrays: Mapping[str, Any], **options: Any) -> QuantGemmProblem:
        """Arrays ``a`` (M, K) bfloat16, ``values`` (N, ceil(K / 2)) and ``scales`` (N, ceil(K / block))
        of codes (uint8, or torch's float4_e2m1fn_x2 values and float8_e8m0fnu / float8_e4m3fn scales), for
        nvfp4 ``tensor_scale`` (float32, one element), and ``d`` (M, N) bfloat16; option ``format``."""
        names = ["a", "values", "scales", "d"] + (["tensor_scale"] if options.get("format") == "nvfp4" else [])
        missing = [n for n in names if n not in arrays]
        if missing:
            raise InvalidProblem(f"{NAME}: tunebox.launch needs the arrays {names}; missing {missing}")
        m, k = matrix_shape(NAME, "a", arrays["a"])
        n = matrix_shape(NAME, "values", arrays["values"])[0]
        p = self.parse({"M": m, "N": n, "K": k, **options})
        p.fmt.check_storage(NAME, arrays)
        for spec in self.buffers(p):
            if spec.role != "workspace" and tuple(arrays[spec.name].shape) != spec.shape:
                raise InvalidProblem(
                    f"{NAME}: array {spec.name} has shape {list(arrays[spec.name].shape)}; a of shape "
                    f"{[m, k]} and {n} rows of values need {list(spec.shape)}"
                )
        return p
