"""Element types as raw bits: names, storage types, padding and poison bit patterns.

Kernels move elements as unsigned integers of the element's width, so every value here is an exact
bit pattern and verification compares bits (``-0.0`` and NaN payloads included).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import InvalidProblem
from .parallel import for_each_chunk

PADDING_MODES = ("zero", "neg_zero", "nan", "pos_inf", "neg_inf", "value")


@dataclass(frozen=True)
class ElementType:
    name: str
    itemsize: int  # bytes
    storage: type[np.unsignedinteger]  # numpy type carrying the bits
    ctype: str  # C++ type carrying the bits in kernels
    poison: int  # a NaN with a payload no valid output ever has: marks unwritten elements

    def bits_of(self, value: float) -> int:
        """Bits of ``value`` rounded to this type (round to nearest even)."""
        return int(self.encode(np.array([value], dtype=np.float64))[0])

    def encode(self, values: np.ndarray) -> np.ndarray:
        """float64 array -> storage bits of this type (round to nearest even)."""
        if self.name == "float32":
            return values.astype(np.float32).view(np.uint32)
        if self.name == "float16":
            return values.astype(np.float16).view(np.uint16)
        # Round once, from float64 to bfloat16's 8 significant bits (2**-133 steps below 2**-126);
        # the rounded value is exact in float32, whose top 16 bits are then the answer.
        with np.errstate(over="ignore", invalid="ignore"):
            mantissa, exponent = np.frexp(values)
            normal = np.ldexp(np.round(np.ldexp(mantissa, 8)), exponent - 8)
            rounded = np.where(np.abs(values) < 2.0**-126, np.round(values * 2.0**133) * 2.0**-133, normal)
            rounded = np.where(np.isfinite(values), rounded, values)
            bits = rounded.astype(np.float32).view(np.uint32) >> 16
        return np.where(np.isnan(values), 0x7FC0, bits).astype(np.uint16)

    def decode(self, bits: np.ndarray) -> np.ndarray:
        """Storage bits -> float64 values (exact)."""
        if self.name == "float32":
            return bits.view(np.float32).astype(np.float64)
        if self.name == "float16":
            return bits.view(np.float16).astype(np.float64)
        return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)

    def mean_magnitude(self, bits: np.ndarray) -> float:
        """The mean |value| of storage bits, summed in float64 from the values' own precision (each
        converts exactly; no float64 copy of the array: 0.6 of ``abs(decode(bits)).mean()``'s time on
        8000 x 8000 bfloat16, results/benchmarks/host_costs.json, and the same value up to the
        rounding of the sum's order)."""
        if self.name == "bfloat16":
            values = (bits.astype(np.uint32) << 16).view(np.float32)
        else:
            values = bits.view(np.float32 if self.name == "float32" else np.float16)
        return float(np.abs(values).mean(dtype=np.float64))

    def largest_magnitude(self, bits: np.ndarray) -> float:
        """max |value| of storage bits (0.0 for none; NaN where any value is NaN, as ``np.max``), read
        from the bits: in these sign-magnitude formats the magnitude bits order as |value| does, with
        infinity above every finite value and NaNs above infinity. One pass over the bits, no float copy
        (serving's 7000 x 7000 bfloat16 windows input: 0.19 s for ``abs(decode(bits)).max()``, 0.020 s here,
        on the CI machine: results/diagnostics/windows_tolerance_identity.json)."""
        if not bits.size:
            return 0.0
        sign = np.array(1 << (8 * self.itemsize - 1), dtype=self.storage)
        largest = np.bitwise_and(bits, ~sign).max()
        return float(abs(self.decode(np.array([largest], dtype=self.storage))[0]))


ELEMENT_TYPES: dict[str, ElementType] = {
    "float32": ElementType("float32", 4, np.uint32, "unsigned int", 0x7FBADBAD),
    "float16": ElementType("float16", 2, np.uint16, "unsigned short", 0x7DAD),
    "bfloat16": ElementType("bfloat16", 2, np.uint16, "unsigned short", 0x7FAD),
}


def element_type(name: object) -> ElementType:
    if not isinstance(name, str) or name not in ELEMENT_TYPES:
        raise InvalidProblem(f"unknown dtype {name!r}; use one of {', '.join(ELEMENT_TYPES)}")
    return ELEMENT_TYPES[name]


# byte buffers (family quant's packed values and scales, counters in workspace): codes, so every byte
# is valid and the poison only marks, not proves, an unwritten byte
BYTES = ElementType("uint8", 1, np.uint8, "unsigned char", 0xAD)


def buffer_type(name: str) -> ElementType:
    """The type of an output or workspace buffer: an element type, or uint8 (bytes)."""
    return BYTES if name == "uint8" else element_type(name)


def padding_bits(etype: ElementType, mode: str, value: float = 0.0) -> int:
    """Bit pattern written for out-of-bounds elements under padding ``mode``."""
    values = {"zero": 0.0, "neg_zero": -0.0, "nan": math.nan, "pos_inf": math.inf, "neg_inf": -math.inf, "value": value}
    if mode not in values:
        raise InvalidProblem(f"unknown padding {mode!r}; use one of {', '.join(PADDING_MODES)}")
    return etype.bits_of(values[mode])


def parse_padding(family: str, data: Mapping[str, Any]) -> tuple[str, float]:
    """A problem's ``padding`` (default "zero") and ``pad_value`` (a number, given only with padding =
    "value", finite in the problem's ``dtype``: a larger one would pad with infinity, which padding
    "pos_inf" / "neg_inf" names). Raises InvalidProblem saying what to give."""
    padding = data.get("padding", "zero")
    if padding not in PADDING_MODES:
        raise InvalidProblem(f"{family}: unknown padding {padding!r}; use one of {PADDING_MODES}")
    pad_value = data.get("pad_value", 0.0)
    if type(pad_value) not in (int, float) or (padding != "value" and "pad_value" in data):
        raise InvalidProblem(f"{family}: pad_value must be a number, given only with padding='value'")
    try:
        value = float(pad_value)
    except OverflowError:
        raise InvalidProblem(f"{family}: pad_value {pad_value} is too large for a float") from None
    etype = element_type(data.get("dtype"))
    with np.errstate(over="ignore"):
        stored = etype.decode(np.array([etype.bits_of(value)], etype.storage))[0]
    if math.isinf(stored):
        raise InvalidProblem(
            f"{family}: pad_value {value:g} is beyond {etype.name}'s range (it would pad with infinity); for an "
            "infinite pad give padding = 'pos_inf' or 'neg_inf'"
        )
    return padding, value


RANDOM_CHUNK_WORDS = 1 << 22  # 64-bit words per independently seeded chunk (32 MiB)


def random_bits(etype: ElementType, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Seeded random storage bits of finite, nonzero values: random sign, mantissa and the three
    lowest exponent bits, so magnitudes lie in [2**-4, 2**4). Never zero, NaN or infinite, so padding
    and unwritten elements always show. Drawn as raw bits; above ``RANDOM_CHUNK_WORDS`` words, in
    chunks drawn from child generators seeded by ``rng``, on all cores (the bits do not depend on
    the number of cores)."""
    count = int(np.prod(shape, dtype=np.int64))
    words = -(-count * etype.itemsize // 8)
    mantissa_bits = {"float32": 23, "float16": 10, "bfloat16": 7}[etype.name]
    exponent_bias = {"float32": 127, "float16": 15, "bfloat16": 127}[etype.name]
    t = etype.storage
    # keep the sign, the three lowest exponent bits and the mantissa, then add bias-4 to the
    # exponent (3 bits + bias-4 <= bias+3: no carry into the sign); in place, two passes
    keep = t((1 << (8 * etype.itemsize - 1)) | ((1 << (mantissa_bits + 3)) - 1))
    offset = t((exponent_bias - 4) << mantissa_bits)
    if words <= RANDOM_CHUNK_WORDS:
        raw = rng.bit_generator.random_raw(words)
        seeds = None
    else:
        raw = np.empty(words, dtype=np.uint64)
        seeds = rng.integers(0, 2**63, -(-words // RANDOM_CHUNK_WORDS))

    def fill(start: int, stop: int) -> None:
        if seeds is not None:
            child = np.random.PCG64(int(seeds[start // RANDOM_CHUNK_WORDS]))
            raw[start:stop] = child.random_raw(stop - start)
        bits = raw[start:stop].view(t)
        bits &= keep
        bits += offset

    for_each_chunk(words, RANDOM_CHUNK_WORDS, fill)
    return raw.view(t)[:count].reshape(shape)
