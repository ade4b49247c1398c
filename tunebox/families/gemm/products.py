"""What the product families (gemm, quant_gemm) share about a problem D = A B of M x N x K: the
tolerance of a bfloat16 product accumulated in float32, and the distance between two shapes."""

from __future__ import annotations

import math

from ..base import Tolerance


def product_tolerance(k: int, scale: float) -> Tolerance:
    """rtol 1e-2 (D's bfloat16 rounding) and atol 1e-2 * sqrt(K / 64) * ``scale`` (the accumulation
    order; ``scale`` the typical |a_ik b_kj|, e.g. mean|A| * mean|B| times |alpha|)."""
    return Tolerance(rtol=1e-2, atol=1e-2 * math.sqrt(k / 64) * scale)


def shape_distance(a: tuple[int, int, int], b: tuple[int, int, int]) -> float:
    """Sum over M, N and K of |log2| of their ratio (0: the same shape)."""
    return sum(abs(math.log2(x / y)) for x, y in zip(a, b, strict=True))
