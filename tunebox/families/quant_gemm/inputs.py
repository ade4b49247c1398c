"""Seeded inputs of family quant_gemm.

A is ``random_bits`` bfloat16 (finite, nonzero, magnitudes in [2^-4, 2^4)). W is drawn the same way
as an N x K bfloat16 matrix and quantized by the quant family's reference (``quant.reference.quantize``),
so its scales are the ones a quantizer writes. ``inputs = "edges"`` then plants scale codes on the
first rows (where N has them), each on one block of the row:

- mxfp4 (e8m0): NaN (255); 2^-127 (0, the subnormal products); one element 2 * 2^127 = infinity (254,
  the block's other elements zero, so the row's sums are +-infinity); 2^73 and 2^2 (200 and 129: the
  kernels' two-factor path) and 2^1 (128: the largest one-factor scale).
- nvfp4 (e4m3): NaN (0x7F, 0xFF), +-0 (0x00, 0x80), 2^-9 (0x01, subnormal), 448 (0x7E) and -1 (0xB8).
"""

from __future__ import annotations

import numpy as np

from ...dtypes import element_type, random_bits
from ..quant.formats import pack_nibbles, unpack_nibbles
from ..quant.reference import quantize
from .problem import QuantGemmProblem

INF_CODE = 254  # e8m0 2^127: an element of value 2 (code 4) is 2^128, infinite
E8M0_PLANTS = (255, 0, INF_CODE, 200, 129, 128)  # rows 0, 1, ... (first block; the inf row's last block)
E4M3_PLANTS = (0x7F, 0xFF, 0x00, 0x80, 0x01, 0x7E, 0xB8)


def make_inputs(p: QuantGemmProblem, rng: np.random.Generator) -> dict[str, np.ndarray]:
    bf16 = element_type("bfloat16")
    a = random_bits(bf16, (p.M, p.K), rng)
    w = quantize(random_bits(bf16, (p.N, p.K), rng), "bfloat16", p.fmt, "row_major")
    if p.inputs == "edges":
        _plant(p, w["values"], w["scales"])
    return {"a": a, **w}


def _plant(p: QuantGemmProblem, values: np.ndarray, scales: np.ndarray) -> None:
    plants = E4M3_PLANTS if p.nvfp4 else E8M0_PLANTS
    for row, code in enumerate(plants[: p.N]):
        block = p.blocks_per_row - 1 if code == INF_CODE and not p.nvfp4 else 0
        scales[row, block] = code
        if code == INF_CODE and not p.nvfp4:
            codes = unpack_nibbles(values[row : row + 1], p.K)
            start = block * p.fmt.block
            codes[0, start : start + p.fmt.block] = 0
            codes[0, start] = 4  # e2m1 2.0
            values[row] = pack_nibbles(codes)[0]
