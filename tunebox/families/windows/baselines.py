"""The windows operation's torch baselines, each in its cheapest form: a view where no padding is
needed, pooling with ``ceil_mode=True`` where its windows are these."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ...dtypes import element_type, padding_bits
from ..base import Baseline

if TYPE_CHECKING:
    from .operation import WindowsProblem


def torch_baselines(p: WindowsProblem) -> tuple[Baseline, ...]:
    """A fitted to the windows' reach (``F.pad`` where they reach past A, a view where they do not),
    then ``unfold`` twice and ``contiguous`` (unfold), ``avg_pool2d`` with ``divisor_override=1`` on
    float32 (sum), or ``max_pool2d`` (max; min as the negated max of the negation) and ``float``.
    Reductions also time the pooling with ``ceil_mode=True`` on A itself (no padded copy) where its
    windows are these."""
    import torch
    import torch.nn.functional as F

    (th, tw), (sr, sc) = p.window, p.step
    (reach_rows, reach_cols), element = p.reach, element_type(p.element)
    grows = reach_rows > p.rows or reach_cols > p.cols
    extra = (0, reach_cols - p.cols, 0, reach_rows - p.rows)  # F.pad: (left, right, top, bottom); < 0 crops

    def source(t: dict[str, Any], as_float: bool) -> Any:
        a = t["A"].view(getattr(torch, p.element))
        return a.float() if as_float else a

    def fitted(t: dict[str, Any], pad: float, as_float: bool = False) -> Any:
        a = source(t, as_float)
        return F.pad(a, extra, value=pad) if grows else a[:reach_rows, :reach_cols]

    def fit(name: str, pad: str) -> str:
        return f"F.pad({name}, {extra}, value={pad})" if grows else f"{name}[:{reach_rows}, :{reach_cols}]"

    if p.op == "unfold":
        pad = float(element.decode(np.array([padding_bits(element, p.padding, p.pad_value)], element.storage))[0])
        return (
            Baseline(
                f"torch: {fit('A', str(pad))}.unfold(0, {th}, {sr}).unfold(1, {tw}, {sc}).contiguous()",
                lambda t: {"out": fitted(t, pad).unfold(0, th, sr).unfold(1, tw, sc).contiguous()},
            ),
        )
    windows = f"({th}, {tw}), ({sr}, {sc})"
    native = _ceil_mode_fits(p.rows, th, sr) and _ceil_mode_fits(p.cols, tw, sc)
    if p.op == "sum":

        def summed(a: Any, ceil_mode: bool) -> dict[str, Any]:
            return {"out": F.avg_pool2d(a[None], (th, tw), (sr, sc), ceil_mode=ceil_mode, divisor_override=1)[0]}

        padded = Baseline(
            f"torch: F.avg_pool2d({fit('A.float()', '0')}[None], {windows}, divisor_override=1)[0]",
            lambda t: summed(fitted(t, 0.0, as_float=True), False),
        )
        ceiled = Baseline(
            f"torch: F.avg_pool2d(A.float()[None], {windows}, ceil_mode=True, divisor_override=1)[0]",
            lambda t: summed(source(t, as_float=True), True),
        )
    else:
        sign, infinity = (1.0, "-inf") if p.op == "max" else (-1.0, "inf")
        negate = "" if sign > 0 else "-"

        def pooled(a: Any, ceil_mode: bool) -> dict[str, Any]:
            return {"out": sign * F.max_pool2d(sign * a[None], (th, tw), (sr, sc), ceil_mode=ceil_mode)[0].float()}

        padded = Baseline(
            f"torch: {negate}F.max_pool2d({negate}{fit('A', infinity)}[None], {windows})[0].float()",
            lambda t: pooled(fitted(t, -sign * math.inf), False),
        )
        ceiled = Baseline(
            f"torch: {negate}F.max_pool2d({negate}A[None], {windows}, ceil_mode=True)[0].float()",
            lambda t: pooled(source(t, as_float=False), True),
        )
    return (padded, ceiled) if native else (padded,)


def _ceil_mode_fits(size: int, window: int, step: int) -> bool:
    """Whether torch's pooling with ``ceil_mode=True`` (no padding) makes this axis's ceil(size / step)
    windows: its count, ceil((size - window) / step) + 1, less a last window that would start past the
    end."""
    if size < window:
        return False
    count = (size - window + step - 1) // step + 1
    if (count - 1) * step >= size:
        count -= 1
    return count == -(-size // step)
