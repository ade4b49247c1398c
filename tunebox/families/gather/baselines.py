"""gather's library baselines: what a torch user writes instead, in its cheapest form."""

from __future__ import annotations

from typing import Any

from ...dtypes import element_type
from ..base import Baseline
from ..indexed import signed
from .problem import GatherProblem


def torch_baseline(p: GatherProblem) -> Baseline:
    """``index_select`` (on the dense range, clipped to A and padded back with ``F.pad``) whose
    invalid entries are filled with the padding (``masked_fill_``) where any index may be invalid."""
    import torch

    pad = signed(p.pad_bits, element_type(p.element).itemsize)

    if p.whole_rows and p.all_valid:
        shift = f" + {p.offset}" if p.offset else ""

        def rows(t: dict[str, Any]) -> Any:
            return t["idx"].long() + p.offset if p.offset else t["idx"]

        return Baseline(
            f"torch: index_select(A, 0, idx{shift})",
            lambda t: {"out": torch.index_select(t["A"], 0, rows(t))},
            lambda t, out: torch.index_select(t["A"], 0, rows(t), out=out["out"]),
        )

    def valid_entries(t: dict[str, Any]) -> tuple[Any, Any]:
        index = t["idx"].long() + p.offset
        valid = (index >= 0) & (index < p.extent)
        if p.mask:
            valid &= t["mask"].view(torch.uint8) != 0
        return index.clamp(0, p.extent - 1), valid

    if p.whole_rows:

        def padded(t: dict[str, Any]) -> dict[str, Any]:
            rows, valid = valid_entries(t)
            out = torch.index_select(t["A"], 0, rows)
            return {"out": out.masked_fill_(~valid[:, None], pad)}

        def padded_into(t: dict[str, Any], out: dict[str, Any]) -> None:  # typed tensors: the padding as bits
            rows, valid = valid_entries(t)
            o = torch.index_select(t["A"], 0, rows, out=out["out"])
            o.view({2: torch.int16, 4: torch.int32}[o.element_size()]).masked_fill_(~valid[:, None], pad)

        return Baseline(
            f"torch: index_select(A, 0, clamp(idx + offset)).masked_fill_(~valid, {p.padding})", padded, padded_into
        )

    # the dense range clipped to A ([c0, c1)), padded back to the window: left and right elements
    c0 = min(max(p.dense_offset, 0), p.dense_extent)
    c1 = min(max(p.dense_offset + p.span, c0), p.dense_extent)
    left, right = c0 - p.dense_offset, p.dense_offset + p.span - c1
    sides = (left, right) if p.axis == 0 else (0, 0, left, right)
    checked = not p.all_valid
    if c1 <= c0:
        name = f"full({p.padding})"
    else:
        cut = f"A[:, {c0}:{c1}]" if p.axis == 0 else f"A[{c0}:{c1}, :]"
        index = "clamp(idx + offset)" if checked else "idx + offset" if p.offset else "idx"
        name = f"index_select({cut}, {p.axis}, {index})"
        if left or right:
            name = f"F.pad({name}, {sides}, {p.padding})"
    if checked:
        name += f".masked_fill_(~valid, {p.padding})"

    def sparse_view(t: dict[str, Any]) -> dict[str, Any]:
        import torch.nn.functional as F

        a = t["A"]
        if checked:
            index, valid = valid_entries(t)
        else:
            index = t["idx"].long() + p.offset if p.offset else t["idx"]
        if c1 <= c0:  # the window misses A: padding only
            out = torch.full(p.out_shape, pad, dtype=a.dtype, device=a.device)
        else:
            src = a[:, c0:c1] if p.axis == 0 else a[c0:c1, :]
            out = torch.index_select(src, p.axis, index)
            if left or right:
                out = F.pad(out, sides, value=pad)
        if checked:
            out = out.masked_fill_(~(valid[:, None] if p.axis == 0 else valid[None, :]), pad)
        return {"out": out}

    return Baseline(f"torch: {name}", sparse_view)
