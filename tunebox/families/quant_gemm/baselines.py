"""The torch baselines of family quant_gemm: what a user without the kernel would call.

W is dequantized by the quant family's torch form (``quant.baselines.torch_baseline``: unpack, decode,
scale; NaN canonical) to bfloat16 without NVFP4's tensor scale, which is exact (an e2m1 value times an
e8m0 or e4m3 scale fits bfloat16); the tensor scale multiplies the product instead (as the alpha of
a scaled GEMM), since folding it into bfloat16 weights rounds every weight (relative error 2^-9)
beyond the family's tolerance.

- ``matmul``: ``torch.matmul(a, w.t())`` on weights materialised once (cuBLAS, what a user serving the
  model keeps in memory); ``into`` writes the caller's ``d`` in place (``out=d``). The weights are
  dequantized again only when the caller's values or scales change (their pointers or versions).
- ``dequantize then matmul``: the dequantization timed with the product, every call.
"""

from __future__ import annotations

from typing import Any

from ..base import Baseline
from ..quant.baselines import torch_baseline
from ..quant.problem import QuantProblem
from .problem import QuantGemmProblem


class _Weights:
    """W dequantized to bfloat16 (N x K), remembered for the last (values, scales) seen."""

    def __init__(self, p: QuantGemmProblem) -> None:
        self.dequantize = torch_baseline(QuantProblem("bfloat16", p.N, p.K, p.format, "dequantize")).run
        self.key: tuple[int, ...] = ()
        self.w: Any = None

    def fresh(self, t: dict[str, Any]) -> Any:
        import torch

        ones = torch.ones(1, dtype=torch.float32, device=t["values"].device)  # the tensor scale comes later
        bits = self.dequantize({"values": t["values"], "scales": t["scales"], "tensor_scale": ones})["x"]
        return bits.view(torch.bfloat16)

    def kept(self, t: dict[str, Any]) -> Any:
        v, s = t["values"], t["scales"]
        key = (v.data_ptr(), v._version, s.data_ptr(), s._version)
        if key != self.key:
            self.w, self.key = self.fresh(t), key
        return self.w


def torch_baselines(p: QuantGemmProblem) -> tuple[Baseline, ...]:
    import torch

    scaled = " * tensor_scale" if p.nvfp4 else ""
    weights = _Weights(p)

    def product(t: dict[str, Any], w: Any, out: Any = None) -> Any:
        d = torch.matmul(t["a"].view(torch.bfloat16), w.t(), out=out)
        if p.nvfp4:
            d.mul_(t["tensor_scale"].view(torch.float32))
        return d

    def into(t: dict[str, Any], out: dict[str, Any]) -> None:
        product(t, weights.kept(t), out["d"])

    return (
        Baseline(
            f"torch: torch.matmul(a, w.t()){scaled}, w the bfloat16 weights dequantized once",
            lambda t: {"d": product(t, weights.kept(t))},
            into,
        ),
        Baseline(
            f"torch: {p.format} dequantize (unpack, decode, scale) then torch.matmul(a, w.t()){scaled}",
            lambda t: {"d": product(t, weights.fresh(t))},
        ),
    )
