"""gather_elements' library baseline: what a torch user writes instead (advanced indexing, with the
invalid entries clamped and filled with the padding where any may be invalid)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...dtypes import element_type
from ..base import Baseline
from ..indexed import signed

if TYPE_CHECKING:
    from .operation import ElementGatherProblem


def torch_baseline(problem: ElementGatherProblem) -> Baseline:
    """``A[ri, ci]`` (or broadcast ``A[ri[:, None], ci[None, :]]``), through clamped indices and
    ``masked_fill_`` with the padding unless every entry is valid."""
    import torch

    p = problem
    pad = signed(p.pad_bits, element_type(p.element).itemsize)
    shape = "ri[:, None], ci[None, :]" if p.broadcast else "ri, ci"

    def indices(t: dict[str, Any]) -> tuple[Any, Any]:
        r, c = t["ri"].long(), t["ci"].long()
        return (r[:, None], c[None, :]) if p.broadcast else (r, c)

    if p.all_valid:
        return Baseline(f"torch: A[{shape}]", lambda t: {"out": t["A"][indices(t)]})

    def padded(t: dict[str, Any]) -> dict[str, Any]:
        r, c = indices(t)
        valid = (r >= 0) & (r < p.rows) & (c >= 0) & (c < p.cols)
        if p.mask:
            valid = valid & (t["mask"].view(torch.uint8) != 0)
        out = t["A"][r.clamp(0, p.rows - 1), c.clamp(0, p.cols - 1)]
        return {"out": out.masked_fill_(~valid, pad)}

    return Baseline(f"torch: A[clamp({shape})].masked_fill_(~valid, {p.padding})", padded)
