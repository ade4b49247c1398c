"""The torch baseline of family quant: the same conversion written with torch ops as a user would (pad
to whole blocks, amax per block, scale, round, pack; torch's own float8 casts for the fp8 elements
and the NVFP4 block scale), bit for bit the reference's rules (``reference.py``).

Constants that divide are 0-dim tensors on the device: torch divides by a Python number as a
multiplication by its reciprocal, which rounds differently."""

from __future__ import annotations

from typing import Any

from ..base import Baseline
from .formats import E2M1
from .problem import QuantProblem
from .reference import padded_shape

E2M1_TIES = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)  # midpoints of codes (0, 1), (1, 2), ... (6, 7)
NV_MIN_SCALE = 2.0**-6


def torch_baseline(p: QuantProblem) -> Baseline:
    """The composition, and its in-place form on a caller's typed tensors (codes in uint8 or torch's
    float8 / float4 storage types: read and written as their bytes)."""
    run = (lambda t: _quantize(p, t)) if p.quantize else (lambda t: _dequantize(p, t))

    def into(t: dict[str, Any], out: dict[str, Any]) -> None:
        results = run({name: _bits(tensor) for name, tensor in t.items()})
        for name, result in results.items():
            out[name].view(result.dtype).copy_(result)

    if p.quantize:
        return Baseline(f"torch: {p.format} quantize (amax, scale, round, pack)", run, into)
    return Baseline(f"torch: {p.format} dequantize (unpack, decode, scale)", run, into)


def _bits(tensor: Any) -> Any:
    """A one-byte code tensor (float8 / float4 storage) as its bytes; any other as it is."""
    import torch

    return tensor.view(torch.uint8) if tensor.element_size() == 1 else tensor


def _e2m1(q: Any) -> Any:
    """e2m1 codes of float32 q: round to nearest even by the midpoints, saturating, sign kept."""
    import torch

    a = q.abs()
    code = torch.zeros_like(q, dtype=torch.uint8)
    for i, tie in enumerate(E2M1_TIES):  # a tie goes to the even code: up from an odd one (i odd)
        code += (a >= tie if i % 2 else a > tie).to(torch.uint8)
    return code | (torch.signbit(q).to(torch.uint8) << 3)


def _swizzle(codes: Any) -> Any:
    import torch.nn.functional as F

    rows, nb = codes.shape
    pr, pc = padded_shape(rows, nb)
    padded = F.pad(codes, (0, pc - nb, 0, pr - rows))
    return padded.view(pr // 128, 4, 32, pc // 4, 4).permute(0, 3, 2, 1, 4).reshape(-1)


def _unswizzle(flat: Any, rows: int, nb: int) -> Any:
    pr, pc = padded_shape(rows, nb)
    return flat.view(pr // 128, pc // 4, 32, 4, 4).permute(0, 3, 2, 1, 4).reshape(pr, pc)[:rows, :nb]


def _quantize(p: QuantProblem, t: dict[str, Any]) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    fmt, block, nb = p.fmt, p.fmt.block, p.blocks_per_row
    x = t["x"].view(getattr(torch, p.element)).float()
    blocks = F.pad(x, (0, nb * block - p.cols)).view(p.rows, nb, block)
    amax = blocks.abs().amax(-1)
    bad = ~torch.isfinite(amax)
    out: dict[str, Any] = {}
    if fmt.scale == "e8m0":
        scale = ((amax.view(torch.int32) >> 23) - fmt.element.emax).clamp(min=0)
        scale = torch.where(bad, 255, scale)
        q = blocks * ((254 - scale.clamp(max=254)) << 23).view(torch.float32)[..., None]
    else:

        def device(v: float) -> Any:
            return torch.tensor(v, dtype=torch.float32, device=x.device)

        T = torch.where(torch.isfinite(x), x.abs(), 0.0).amax() / device(2688.0)
        s = amax / (6.0 * T)
        s = torch.where(s > 448.0, 448.0, torch.where(s >= NV_MIN_SCALE, s, NV_MIN_SCALE))
        e4m3 = s.to(torch.float8_e4m3fn)
        scale = torch.where(bad, 0x7F, e4m3.view(torch.uint8).to(torch.int32))
        mul = device(1.0) / (T * e4m3.float())
        q = torch.where(blocks == 0, blocks, blocks * mul[..., None])
        out["tensor_scale"] = T.reshape(1)
    if fmt.element is E2M1:
        codes = _e2m1(q)
    else:
        limit = fmt.element.max_value
        dtype = torch.float8_e4m3fn if fmt.element.name == "e4m3" else torch.float8_e5m2
        codes = q.clamp(-limit, limit).to(dtype).view(torch.uint8)
    codes = torch.where(bad[..., None], fmt.element.nan_code, codes).view(p.rows, nb * block)[:, : p.cols]
    if fmt.packed:
        codes = F.pad(codes, (0, p.cols % 2))
        codes = codes[:, 0::2] | (codes[:, 1::2] << 4)
    scales = scale.to(torch.uint8)
    out.update(values=codes.contiguous(), scales=_swizzle(scales) if p.swizzled else scales)
    return out


def _dequantize(p: QuantProblem, t: dict[str, Any]) -> dict[str, Any]:
    import torch

    fmt = p.fmt
    values = t["values"]
    scales = _unswizzle(t["scales"], p.rows, p.blocks_per_row) if p.swizzled else t["scales"]
    if fmt.packed:
        codes = torch.stack((values & 0xF, values >> 4), dim=-1).view(p.rows, -1)[:, : p.cols]
        table = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], device=values.device)
        elements = torch.cat((table, -table))[codes.long()]
    else:
        dtype = torch.float8_e4m3fn if fmt.element.name == "e4m3" else torch.float8_e5m2
        elements = values.view(dtype).float()
    if fmt.scale == "e8m0":
        code = scales.to(torch.int32)
        scale = torch.where(code == 0, 2.0**-127, (code << 23).view(torch.float32))
        scale = torch.where(code == 255, float("nan"), scale)
    else:
        scale = scales.view(torch.float8_e4m3fn).float()
    r = elements * scale.repeat_interleave(fmt.block, dim=1)[:, : p.cols]
    if p.format == "nvfp4":
        r = r * t["tensor_scale"].view(torch.float32)
    if p.element == "bfloat16":  # the cast rounds to nearest even; NaN becomes the canonical one here
        bits, nan = r.to(torch.bfloat16).view(torch.int16), 0x7FC0
    else:
        bits, nan = r.view(torch.int32), 0x7FC00000
    return {"x": torch.where(torch.isnan(r), nan, bits)}
