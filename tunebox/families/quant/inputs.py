"""Seeded inputs of family quant.

Quantize: ``random_bits`` (finite, nonzero, magnitudes in [2^-4, 2^4)) with blocks planted at distinct
seeded positions (as many as there are blocks; the first ones first):

- a NaN (negative, with a payload), +infinity and -infinity, each in an otherwise random block;
- a block of signed zeros, and a block of nonzero subnormals (the scale's lower clamp, float32
  subnormal arithmetic);
- MX: a block holding the dtype's largest finite value beside random ones (the largest scales,
  elements that round to signed zeros), and a block of ties: the element format's midpoints times a
  power of two with one element 2^emax_elem times it, so X is that power and every element is a tie
  or past the largest value (saturation);
- NVFP4: the tensor's largest magnitude (2^5, setting G so that its block's scale is 448), and a block
  of magnitudes near 2^-14 (s below 2^-6: the clamp).

``inputs = "zeros"``: an all-zero x, each zero's sign seeded.

Dequantize: uniform random bytes for the values (every code, the padding nibble of odd fp4 rows
too) and the scales (every code: NaN, e4m3 negatives and subnormals), the first scales planted with
the edge codes; NVFP4's tensor scale a random positive float32.
"""

from __future__ import annotations

import numpy as np

from ...dtypes import element_type, random_bits
from .formats import decode_table
from .problem import QuantProblem

E8M0_EDGES = (255, 0, 1, 254, 127)  # NaN, 2^-127, 2^-126, 2^127, 1
E4M3_EDGES = (0x7F, 0x00, 0x80, 0x01, 0x7E, 0xFF)  # NaN, +0, -0, 2^-9, 448, -NaN


def random_bytes(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    count = int(np.prod(shape, dtype=np.int64))
    return rng.bit_generator.random_raw(-(-count // 8)).view(np.uint8)[:count].reshape(shape)


def make_inputs(p: QuantProblem, rng: np.random.Generator) -> dict[str, np.ndarray]:
    if p.quantize:
        return {"x": quantize_input(p, rng)}
    scales = random_bytes(p.scale_shape, rng).reshape(-1)
    edges = E4M3_EDGES if p.fmt.scale == "e4m3" else E8M0_EDGES
    first = min(len(edges), p.rows * p.blocks_per_row)
    for i in range(first):  # the first blocks of row 0 (and of the next rows when a row has fewer)
        r, kb = divmod(i, p.blocks_per_row)
        scales[_scale_index(p, r, kb)] = edges[i]
    inputs = {"values": random_bytes((p.rows, p.row_bytes), rng), "scales": scales.reshape(p.scale_shape)}
    if p.format == "nvfp4":
        t = random_bits(element_type("float32"), (1,), rng)
        inputs["tensor_scale"] = t & np.uint32(0x7FFFFFFF)
    return inputs


def _scale_index(p: QuantProblem, r: int, kb: int) -> int:
    if not p.swizzled:
        return r * p.blocks_per_row + kb
    tiles_a_row = p.scale_grid[1] // 4
    return ((r // 128) * tiles_a_row + kb // 4) * 512 + (r % 32) * 16 + (r % 128 // 32) * 4 + kb % 4


def quantize_input(p: QuantProblem, rng: np.random.Generator) -> np.ndarray:
    et = element_type(p.element)
    if p.inputs == "zeros":
        signs = random_bits(et, (p.rows, p.cols), rng)
        return signs & et.storage(1 << (8 * et.itemsize - 1))
    x = random_bits(et, (p.rows, p.cols), rng)
    plants = _plants(p, rng)
    blocks = rng.choice(p.rows * p.blocks_per_row, size=min(len(plants), p.rows * p.blocks_per_row), replace=False)
    for block, values in zip(blocks, plants, strict=False):
        r, kb = divmod(int(block), p.blocks_per_row)
        c0 = kb * p.fmt.block
        n = min(p.fmt.block, p.cols - c0)
        segment = x[r, c0 : c0 + n]
        if values.size == 1:  # one element of a random block
            segment[rng.integers(n)] = values[0]
        else:
            segment[:] = values[:n] if values.size >= n else np.resize(values, n)
    return x


def _bits(p: QuantProblem, values: np.ndarray | list[float]) -> np.ndarray:
    """float64 values as the element's bits (rounded to nearest even; the ties are exact)."""
    return element_type(p.element).encode(np.asarray(values, dtype=np.float64))


def _plants(p: QuantProblem, rng: np.random.Generator) -> list[np.ndarray]:
    et = element_type(p.element)
    t = et.storage
    bf16 = p.element == "bfloat16"
    block = p.fmt.block
    nan = t(0xFFC1 if bf16 else 0xFFC00001)
    sign = t(1 << (8 * et.itemsize - 1))
    zeros = random_bits(et, (block,), rng) & sign
    mantissa = t((1 << (7 if bf16 else 23)) - 1)
    subnormals = (random_bits(et, (block,), rng) & (mantissa | sign)) | t(1)
    plants = [np.array([nan]), _bits(p, [np.inf]), _bits(p, [-np.inf]), zeros, subnormals]
    if p.format == "nvfp4":
        top = np.resize(_bits(p, [2.0**5, -(2.0**5) * 0.75, 3.0]), block)
        small = _bits(p, rng.uniform(-1.0, 1.0, block) * 2.0**-14)
        return [*plants, top, small]
    largest = np.array([t(0x7F7F if bf16 else 0x7F7FFFFF)])
    return [*plants, largest, _ties(p, rng)]


def _ties(p: QuantProblem, rng: np.random.Generator) -> np.ndarray:
    """The element format's midpoints (and one value past the largest) times 2^k, beside 2^(emax + k)."""
    magnitudes = np.unique(decode_table(p.fmt.element).astype(np.float64))
    magnitudes = magnitudes[np.isfinite(magnitudes) & (magnitudes >= 0)]
    midpoints = (magnitudes[:-1] + magnitudes[1:]) / 2
    past = (magnitudes[-1] + 2.0 ** (p.fmt.element.emax + 1)) / 2  # a tie rounding past the largest: saturates
    picked = rng.choice(np.append(midpoints, past), size=p.fmt.block - 1, replace=midpoints.size < p.fmt.block)
    signs = np.where(rng.integers(0, 2, picked.size) == 1, -1.0, 1.0)
    k = int(rng.integers(-20, 21))
    block = np.concatenate([[2.0**p.fmt.element.emax], picked * signs]) * 2.0**k
    return _bits(p, block)
