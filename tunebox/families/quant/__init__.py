"""Family ``quant``: block-scaled quantize and dequantize (issue 17, item 1).

A row-major x of ``rows`` x ``cols`` bfloat16 or float32 values to and from four block-scaled formats,
scale blocks running along rows:

- ``mxfp4``: e2m1 elements (two a byte), one e8m0 scale per 32 (OCP MX v1.0);
- ``nvfp4``: e2m1 elements, one e4m3 scale per 16, times a float32 tensor scale;
- ``mxfp8_e4m3`` / ``mxfp8_e5m2``: fp8 elements, one e8m0 scale per 32 (OCP MX v1.0).

Buffers: ``x`` (rows, cols); ``values`` (rows, rb) bytes, rb = ceil(cols / 2) for fp4 (element 2c in
the low nibble of byte c, cuTile's reinterpret order) or cols for fp8; ``scales`` bytes, row-major
(rows, ceil(cols / block)) or the 128 x 4 swizzled layout of Blackwell's block-scaled MMA (1-D); NVFP4's
``tensor_scale`` (1,) float32. ``direction`` says which side is written. The element formats and
their rounding are in ``formats.py``; the quantize / dequantize rules (amax, scale, NaN, infinity,
zeros, padding, layouts) in ``reference.py``, the numpy reference that verifies every bit; the
kernels in ``kernels/quant/quant.cu`` with their arithmetic in ``kernels/include/tunebox/quant.cuh``.

Problem keys: ``dtype``, ``rows``, ``cols``, ``format``, ``direction``, ``scale_layout`` (row_major or
swizzled_128x4) and ``inputs`` (random, or zeros: an all-zero x to quantize). One template,
``blocks`` (``blocks.py``); the torch baseline is in ``baselines.py``.
"""

from ..contract import Family
from .blocks import BlocksConfig, BlocksTemplate
from .formats import FORMATS, Format
from .operation import QuantOperation
from .problem import QuantProblem

FAMILY = Family(QuantOperation(), (BlocksTemplate(),))

__all__ = ["FAMILY", "FORMATS", "BlocksConfig", "BlocksTemplate", "Format", "QuantOperation", "QuantProblem"]
