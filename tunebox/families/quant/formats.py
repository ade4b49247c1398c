"""The block-scaled formats of family quant and their codes, bit for bit (numpy).

Element formats (OCP MX v1.0 section 5.3; e4m3 is the "fn" kind, no infinity):

- e2m1 (fp4): sign, 2 exponent bits (bias 1), 1 mantissa bit; magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6;
  no infinity, no NaN. Two a byte: element 2c in the low nibble of byte c, 2c + 1 in the high one
  (cuTile's reinterpret of a UInt8 tile as Float4_E2M1FN).
- e4m3: bias 7, 3 mantissa bits, largest 448 (0x7E), NaN 0x7F / 0xFF, no infinity, subnormals
  down to 2^-9.
- e5m2: bias 15, 2 mantissa bits, largest 57344 (0x7B), infinity 0x7C / 0xFC, NaN above it,
  subnormals down to 2^-16.

Scale formats: e8m0 (MX: 2^(c - 127) for code c in 0..254, 2^-127 for 0; 255 is NaN) and e4m3
(NVFP4, the same e4m3 as the elements, nonnegative as produced).

Conversion to an element format (``encode``): round to nearest, ties to even, from the exact value;
a magnitude past the largest finite value saturates to it (OCP's "clamped to the maximum normal",
also for e5m2, whose infinity the quantizer never writes); the sign is the input's, zeros included
(-0.0 and negative values that round to zero are negative zeros).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import InvalidProblem


@dataclass(frozen=True)
class ElementFormat:
    name: str
    bits: int  # 4 or 8
    mantissa: int  # mantissa bits
    bias: int
    max_code: int  # the largest finite magnitude's code: saturation
    emax: int  # exponent of the largest power of two of the format (OCP's emax_elem)
    nan_code: int  # what an element of a block whose scale is NaN is written as

    @property
    def sign_bit(self) -> int:
        return 1 << (self.bits - 1)

    @property
    def max_value(self) -> float:
        return float(decode_table(self)[self.max_code])


E2M1 = ElementFormat("e2m1", 4, 1, 1, 0x7, 2, 0x0)  # no NaN code: a NaN block's elements are +0
E4M3 = ElementFormat("e4m3", 8, 3, 7, 0x7E, 8, 0x7F)
E5M2 = ElementFormat("e5m2", 8, 2, 15, 0x7B, 15, 0x7F)


@dataclass(frozen=True)
class Format:
    """A block-scaled format: its element format, elements per scale (``block``) and scale format."""

    name: str
    element: ElementFormat
    block: int
    scale: str  # "e8m0" or "e4m3"
    kernel_id: int  # tb::quant::Format

    @property
    def packed(self) -> bool:
        """Two elements a byte (fp4)."""
        return self.element.bits == 4

    @property
    def value_storage(self) -> str:
        """The torch element type whose bytes are this format's value codes (uint8 always works too)."""
        return {"e2m1": "float4_e2m1fn_x2", "e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}[self.element.name]

    @property
    def scale_storage(self) -> str:
        """The torch element type whose bytes are this format's scale codes (uint8 always works too)."""
        return {"e8m0": "float8_e8m0fnu", "e4m3": "float8_e4m3fn"}[self.scale]

    def row_bytes(self, cols: int) -> int:
        """Bytes of a row of ``cols`` element codes (an odd fp4 row ends with a padding nibble)."""
        return -(-cols // 2) if self.packed else cols

    def check_storage(self, family: str, arrays: Mapping[str, Any]) -> None:
        """Refuses caller ``values`` or ``scales`` whose element type is neither uint8 nor this format's
        torch storage type (tunebox.launch: a float8_e4m3fn tensor of scales for an e8m0 format, say)."""
        for name, storage in (("values", self.value_storage), ("scales", self.scale_storage)):
            given = str(arrays[name].dtype)
            if given not in ("uint8", storage):
                raise InvalidProblem(
                    f"{family}: {name} of {self.name} are uint8 or {storage} (their codes' bytes), not {given}"
                )


FORMATS = {
    "mxfp4": Format("mxfp4", E2M1, 32, "e8m0", 0),
    "nvfp4": Format("nvfp4", E2M1, 16, "e4m3", 1),
    "mxfp8_e4m3": Format("mxfp8_e4m3", E4M3, 32, "e8m0", 2),
    "mxfp8_e5m2": Format("mxfp8_e5m2", E5M2, 32, "e8m0", 3),
}


def block_format(name: object) -> Format:
    if not isinstance(name, str) or name not in FORMATS:
        raise InvalidProblem(f"quant: format must be one of {sorted(FORMATS)}, got {name!r}")
    return FORMATS[name]


def encode(q: np.ndarray, fmt: ElementFormat) -> np.ndarray:
    """Codes (uint8) of float32 ``q`` in ``fmt``: nearest value, ties to even, saturating, signed
    zeros kept. Computed from the exact value in float64: with binade t = max(floor(log2 |q|),
    1 - bias) (the subnormal binade below), the code is ((t + bias - 1) << mantissa) + n, n =
    round(|q| / 2^(t - mantissa)); an n that carries out of the mantissa lands on the next binade's
    first code. NaN is not an input here (a NaN block's elements are written as ``nan_code``)."""
    a = np.abs(q.astype(np.float64))
    _, exponent = np.frexp(a)  # a = m * 2^exponent, m in [0.5, 1): floor(log2 a) = exponent - 1
    t = np.where(a > 0, np.maximum(exponent.astype(np.int64) - 1, 1 - fmt.bias), 1 - fmt.bias)
    with np.errstate(invalid="ignore", over="ignore"):
        n = np.rint(np.ldexp(np.where(np.isfinite(a), a, 0.0), fmt.mantissa - t)).astype(np.int64)
    code = np.minimum(((t + fmt.bias - 1) << fmt.mantissa) + n, fmt.max_code)
    code = np.where(np.isinf(a), fmt.max_code, code)
    return (code | np.where(np.signbit(q), fmt.sign_bit, 0)).astype(np.uint8)


def decode_table(fmt: ElementFormat) -> np.ndarray:
    """float32 value of every code of ``fmt`` (NaN codes NaN; e5m2's infinities infinite)."""
    codes = np.arange(1 << fmt.bits, dtype=np.int64)
    magnitude = codes & (fmt.sign_bit - 1)
    field, mantissa = magnitude >> fmt.mantissa, magnitude & ((1 << fmt.mantissa) - 1)
    normal = np.ldexp(1.0 + mantissa / (1 << fmt.mantissa), field - fmt.bias)
    subnormal = np.ldexp(mantissa / (1 << fmt.mantissa), 1 - fmt.bias)
    values = np.where(field > 0, normal, subnormal)
    if fmt is E4M3:
        values = np.where(magnitude == 0x7F, np.nan, values)
    elif fmt is E5M2:
        values = np.where(magnitude == 0x7C, np.inf, np.where(magnitude > 0x7C, np.nan, values))
    return np.where(codes & fmt.sign_bit, -values, values).astype(np.float32)


def e8m0_table() -> np.ndarray:
    """float32 value of every e8m0 code: 2^(c - 127) (2^-127 a float32 subnormal), NaN for 255."""
    return np.append(np.ldexp(1.0, np.arange(255) - 127), np.nan).astype(np.float32)


def scale_table(fmt: Format) -> np.ndarray:
    """float32 value of every scale code of ``fmt``."""
    return e8m0_table() if fmt.scale == "e8m0" else decode_table(E4M3)


def pack_nibbles(codes: np.ndarray) -> np.ndarray:
    """Rows of 4-bit codes -> rows of bytes: element 2c low nibble of byte c, 2c + 1 high; an odd
    row's last high nibble is 0."""
    rows, cols = codes.shape
    if cols % 2:
        codes = np.concatenate([codes, np.zeros((rows, 1), dtype=np.uint8)], axis=1)
    return (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)


def unpack_nibbles(values: np.ndarray, cols: int) -> np.ndarray:
    """The inverse of ``pack_nibbles``: rows of ``cols`` 4-bit codes (an odd row's padding dropped)."""
    codes = np.empty((values.shape[0], 2 * values.shape[1]), dtype=np.uint8)
    codes[:, 0::2] = values & 0xF
    codes[:, 1::2] = values >> 4
    return codes[:, :cols]
