"""Family ``quant_gemm``: weight-only FP4 GEMM on Hopper (bfloat16 tensor cores, no FP4 ones).

``D (M x N, bfloat16) = A (M x K, bfloat16) @ Wdq^T`` with W an N x K matrix (torch's nn.Linear weight:
out_features x in_features) quantized along K exactly as the quant family quantizes an N x K tensor:
``values`` (N, ceil(K / 2)) bytes of e2m1 codes, ``scales`` (N, ceil(K / block)) row-major (e8m0 per
32 for mxfp4, e4m3 per 16 for nvfp4) and NVFP4's float32 ``tensor_scale`` (1,); Wdq is the quant
family's dequantization (``quant/reference.py``). Sums are float32, D is rounded to bfloat16.

Problem keys: ``M``, ``N``, ``K`` (any positive), ``format`` (mxfp4 or nvfp4) and ``inputs`` (random, or
edges: planted NaN, zero, subnormal, infinite and large scale blocks). Buffers: a, values, scales,
[tensor_scale], d. Verified against the reference within the gemm family's tolerance
(``operation.py``); the torch baselines (``baselines.py``) are cuBLAS on weights dequantized once, and
dequantize-then-matmul.

Templates (``kernels/quant_gemm/quant_gemm.cu``, the decoding in ``kernels/include/tunebox/fp4.cuh``):
``decode`` (small M: weights as the mma's A operand, split K over a thread-block cluster), ``stream``
(small M, K in whole 16-byte pieces: the same arithmetic, the weights streamed into shared memory by
the TMA unit, persistent blocks) and ``tiled`` (M from 64: a cp.async pipeline of A and packed W tiles,
W decoded from shared memory) and ``wgmma`` (Hopper: gemm's persistent kernel, W's codes loaded by TMA and
decoded by three producer warps into the wgmma's bfloat16 operand in shared memory; K a multiple of 32)
and ``registers`` (Hopper: D's transpose by wgmma with W decoded in registers as its A operand, the
activations from shared memory; K a multiple of 32).
"""

from ..contract import Family
from .decode import DecodeConfig, DecodeTemplate
from .operation import QuantGemmOperation
from .problem import QuantGemmProblem
from .registers import RegistersConfig, RegistersTemplate
from .stream import StreamConfig, StreamTemplate
from .tiled import TiledConfig, TiledTemplate
from .wgmma import WgmmaConfig, WgmmaTemplate

FAMILY = Family(
    QuantGemmOperation(), (DecodeTemplate(), StreamTemplate(), TiledTemplate(), WgmmaTemplate(), RegistersTemplate())
)

__all__ = [
    "FAMILY",
    "DecodeConfig",
    "DecodeTemplate",
    "QuantGemmOperation",
    "QuantGemmProblem",
    "RegistersConfig",
    "RegistersTemplate",
    "StreamConfig",
    "StreamTemplate",
    "TiledConfig",
    "TiledTemplate",
    "WgmmaConfig",
    "WgmmaTemplate",
]
