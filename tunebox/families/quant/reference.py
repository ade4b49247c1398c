"""The numpy reference of family quant: quantize and dequantize, bit for bit, and the scale layouts.

Scale blocks run along each row: block kb of row r holds columns [kb * B, kb * B + B); the last
block of a row whose length is not a multiple of B is padded with zeros (as OCP's reference code
pads), which take part in its amax and are not stored. Arithmetic is float32 (IEEE, no flush to
zero), in the order stated here, so that a kernel reproduces every bit.

MX quantize (mxfp4, mxfp8_e4m3, mxfp8_e5m2; OCP MX v1.0 section 6.3), per block:

1. amax = max |x|. If the block holds a NaN or an infinity the scale is NaN (e8m0 255), as OCP's
   reference code (microxcaling) and torchao have it; a NaN scale makes every value of the block NaN
   whatever its elements, which are written as x / NaN converts: the element format's NaN code
   (0x7F for e4m3 and e5m2; e2m1 has none: 0, tunebox's choice).
2. X = floor(log2(amax)) - emax_elem (2 for e2m1, 8 for e4m3, 15 for e5m2), raised to -127 if
   lower (an all-zero block: -127); the scale code is X + 127 (never above 254 for finite input).
3. Each element is ``encode(x * 2^-X)`` (``formats.encode``: ties to even, saturating at the
   largest finite value, signed zeros kept). x * 2^-X is exact in float32 unless below 2^-126,
   where every element format rounds to zero anyway.

NVFP4 quantize (two-level: e4m3 block scales times a float32 tensor scale, as torchao's two-level
scheme, whose clamp of s this takes; the order of operations, the reciprocal R and the handling of
non-finite values are tunebox's, there being no bit-exact specification):

1. G = max |x| over the tensor's finite values (0 if none); T = G / 2688 (2688 = 6 * 448), the
   stored tensor scale.
2. A block holding a NaN or an infinity gets the e4m3 NaN scale (0x7F) and zero elements.
3. Otherwise s = amax / (6 * T), clamped to [2^-6, 448] (the 0 / 0 of an all-zero tensor gives 2^-6),
   rounded to e4m3 (ties to even): the scale code S.
4. Each element is ``encode(x * R)`` with R = 1 / (T * value(S)); a zero x stays a signed zero (R is
   infinite when T * value(S) is 0). Past 6 it saturates.

Dequantize (every format): value = element * scale (NVFP4: (element * scale) * T), each product
rounded to float32, then rounded to the output dtype (ties to even). A NaN result (a NaN scale or
element, 0 * infinity) is written as the canonical NaN, 0x7FC00000 (bfloat16 0x7FC0). The padding
nibble of an odd fp4 row and the swizzled layout's padding scales are ignored.

Scale layouts: ``row_major`` (rows x nb codes) and ``swizzled_128x4`` (the layout Blackwell's
block-scaled MMA reads, cuBLAS's and CUTLASS's): the scale matrix padded with zero codes to a
multiple of 128 rows and 4 blocks, stored as 512-byte tiles of 128 rows x 4 blocks, tiles row-tile
major; in a tile, scale (r, c) is at byte (r % 32) * 16 + (r // 32) * 4 + c.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ...dtypes import element_type
from ...parallel import for_each_chunk
from .formats import E4M3, Format, decode_table, encode, pack_nibbles, scale_table, unpack_nibbles

LAYOUTS = ("row_major", "swizzled_128x4")
NV_MIN_SCALE = np.float32(2.0**-6)  # the smallest normal e4m3: NVFP4's least block scale
CHUNK_ELEMENTS = 1 << 20  # rows are processed in chunks of about this many elements, on all cores
ABS_MASK, INF_BITS = np.uint32(0x7FFFFFFF), np.uint32(0x7F800000)
NAN_BITS = {"float32": 0x7FC00000, "bfloat16": 0x7FC0}


def padded_shape(rows: int, nb: int) -> tuple[int, int]:
    """Rows and blocks of the swizzled layout: multiples of 128 and 4."""
    return -(-rows // 128) * 128, -(-nb // 4) * 4


def swizzle(codes: np.ndarray) -> np.ndarray:
    """Row-major scale codes (rows, nb) -> the 128 x 4 swizzled layout (1-D, padding zero)."""
    rows, nb = codes.shape
    pr, pc = padded_shape(rows, nb)
    padded = np.zeros((pr, pc), dtype=np.uint8)
    padded[:rows, :nb] = codes
    return padded.reshape(pr // 128, 4, 32, pc // 4, 4).transpose(0, 3, 2, 1, 4).reshape(-1)


def unswizzle(flat: np.ndarray, rows: int, nb: int) -> np.ndarray:
    """The inverse of ``swizzle``: the (rows, nb) codes (padding dropped)."""
    pr, pc = padded_shape(rows, nb)
    tiles = flat.reshape(pr // 128, pc // 4, 32, 4, 4).transpose(0, 3, 2, 1, 4)
    return tiles.reshape(pr, pc)[:rows, :nb]


def as_float32(bits: np.ndarray, dtype: str) -> np.ndarray:
    """Element bits (uint16 bfloat16 or uint32 float32) as float32 values (exact)."""
    return (bits.astype(np.uint32) << 16).view(np.float32) if dtype == "bfloat16" else bits.view(np.float32)


def tensor_scale(x: np.ndarray, dtype: str) -> np.float32:
    """NVFP4's T = G / 2688, G the largest finite |x| (0 if none)."""
    flat = x.reshape(-1)
    parts = np.zeros(-(-flat.size // CHUNK_ELEMENTS) or 1, dtype=np.uint32)

    def part(start: int, stop: int) -> None:
        a = as_float32(flat[start:stop], dtype).view(np.uint32) & ABS_MASK
        parts[start // CHUNK_ELEMENTS] = np.where(a < INF_BITS, a, 0).max(initial=0)

    for_each_chunk(flat.size, CHUNK_ELEMENTS, part)
    return np.float32(parts.max().view(np.float32)) / np.float32(2688.0)


def quantize_rows(x: np.ndarray, dtype: str, fmt: Format, T: np.float32) -> tuple[np.ndarray, np.ndarray]:
    """(element codes (rows, cols), scale codes (rows, nb)) of rows ``x`` (element bits)."""
    rows, cols = x.shape
    nb = -(-cols // fmt.block)
    blocks = np.zeros((rows, nb * fmt.block), dtype=np.float32)
    blocks[:, :cols] = as_float32(x, dtype)
    blocks = blocks.reshape(rows, nb, fmt.block)
    amax = (blocks.view(np.uint32) & ABS_MASK).max(axis=2)  # as bits: NaN above infinity above the rest
    bad = amax >= INF_BITS
    with np.errstate(all="ignore"):
        if fmt.scale == "e8m0":
            scale = np.where(bad, 255, np.maximum((amax >> 23).astype(np.int64) - fmt.element.emax, 0))
            mul = ((254 - np.minimum(scale, 254)).astype(np.uint32) << 23).view(np.float32)
            q = blocks * mul[..., None]
        else:
            s = amax.view(np.float32) / (np.float32(6.0) * T)
            s = np.where(s > np.float32(448.0), np.float32(448.0), np.where(s >= NV_MIN_SCALE, s, NV_MIN_SCALE))
            scale = np.where(bad, 0x7F, encode(s.astype(np.float32), E4M3))
            mul = np.float32(1.0) / (T * decode_table(E4M3)[np.where(bad, 0, scale)])
            q = np.where(blocks == 0, blocks, blocks * mul[..., None])
        codes = encode(q, fmt.element)
    codes[bad] = fmt.element.nan_code
    return codes.reshape(rows, nb * fmt.block)[:, :cols], scale.astype(np.uint8)


def quantize(x: np.ndarray, dtype: str, fmt: Format, layout: str) -> dict[str, np.ndarray]:
    """values, scales (and NVFP4's tensor_scale, float32 bits) of the (rows, cols) element bits ``x``."""
    rows, cols = x.shape
    nb = -(-cols // fmt.block)
    T = tensor_scale(x, dtype) if fmt.name == "nvfp4" else np.float32(0.0)
    values = np.empty((rows, fmt.row_bytes(cols)), dtype=np.uint8)
    scales = np.empty((rows, nb), dtype=np.uint8)

    def chunk(start: int, stop: int) -> None:
        codes, scales[start:stop] = quantize_rows(x[start:stop], dtype, fmt, T)
        values[start:stop] = pack_nibbles(codes) if fmt.packed else codes

    for_each_chunk(rows, max(1, CHUNK_ELEMENTS // cols), chunk)
    out = {"values": values, "scales": swizzle(scales) if layout == "swizzled_128x4" else scales}
    if fmt.name == "nvfp4":
        out["tensor_scale"] = np.array([T], dtype=np.float32).view(np.uint32)
    return out


def dequantize(inputs: Mapping[str, np.ndarray], dtype: str, fmt: Format, layout: str, cols: int) -> np.ndarray:
    """The (rows, cols) element bits of ``dtype`` that ``inputs`` (values, scales, [tensor_scale]) hold."""
    values = inputs["values"]
    rows = values.shape[0]
    nb = -(-cols // fmt.block)
    scales = unswizzle(inputs["scales"], rows, nb) if layout == "swizzled_128x4" else inputs["scales"]
    T = inputs["tensor_scale"].view(np.float32)[0] if fmt.name == "nvfp4" else None
    elements, factors = decode_table(fmt.element), scale_table(fmt)
    et = element_type(dtype)
    out = np.empty((rows, cols), dtype=et.storage)

    def chunk(start: int, stop: int) -> None:
        v = values[start:stop]
        codes = unpack_nibbles(v, cols) if fmt.packed else v
        scale = np.repeat(factors[scales[start:stop]], fmt.block, axis=1)[:, :cols]
        with np.errstate(all="ignore"):
            r = elements[codes] * scale
            if T is not None:
                r = r * T
        bits = r.view(np.uint32) if dtype == "float32" else et.encode(r.astype(np.float64))
        out[start:stop] = np.where(np.isnan(r), NAN_BITS[dtype], bits)

    for_each_chunk(rows, max(1, CHUNK_ELEMENTS // cols), chunk)
    return out
