"""Element types: padding and poison bit patterns, bfloat16 rounding, encode/decode, random inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tunebox import dtypes, parallel
from tunebox.dtypes import ELEMENT_TYPES, PADDING_MODES, element_type, padding_bits, parse_padding, random_bits
from tunebox.errors import InvalidProblem
from tunebox.families import get

PADDING = {
    "float32": {
        "zero": 0x00000000,
        "neg_zero": 0x80000000,
        "nan": 0x7FC00000,
        "pos_inf": 0x7F800000,
        "neg_inf": 0xFF800000,
        "value": 0xC0500000,
    },
    "bfloat16": {
        "zero": 0x0000,
        "neg_zero": 0x8000,
        "nan": 0x7FC0,
        "pos_inf": 0x7F80,
        "neg_inf": 0xFF80,
        "value": 0xC050,
    },
    "float16": {
        "zero": 0x0000,
        "neg_zero": 0x8000,
        "nan": 0x7E00,
        "pos_inf": 0x7C00,
        "neg_inf": 0xFC00,
        "value": 0xC280,
    },
}


def test_element_types() -> None:
    assert set(ELEMENT_TYPES) == {"float32", "float16", "bfloat16"}
    f32, f16, bf16 = (element_type(n) for n in ("float32", "float16", "bfloat16"))
    assert (f32.itemsize, f32.storage, f32.ctype) == (4, np.uint32, "unsigned int")
    assert (f16.itemsize, f16.storage, f16.ctype) == (2, np.uint16, "unsigned short")
    assert (bf16.itemsize, bf16.storage, bf16.ctype) == (2, np.uint16, "unsigned short")


@pytest.mark.parametrize("dtype", sorted(PADDING))
@pytest.mark.parametrize("mode", PADDING_MODES)
def test_padding_bits(dtype: str, mode: str) -> None:
    got = padding_bits(element_type(dtype), mode, -3.25)
    assert type(got) is int
    assert got == PADDING[dtype][mode], f"{dtype}/{mode}: {got:#x}"


@pytest.mark.parametrize("dtype", sorted(PADDING))
def test_padding_value_is_ignored_unless_mode_value(dtype: str) -> None:
    et = element_type(dtype)
    assert padding_bits(et, "zero", 7.0) == 0
    assert padding_bits(et, "value") == 0  # default value 0.0
    assert padding_bits(et, "value", -0.0) == PADDING[dtype]["neg_zero"]
    assert padding_bits(et, "value", math.inf) == PADDING[dtype]["pos_inf"]


def test_unknown_padding_raises() -> None:
    with pytest.raises(InvalidProblem, match="ZERO"):
        padding_bits(element_type("float32"), "ZERO")
    with pytest.raises(InvalidProblem, match="undetermined"):
        padding_bits(element_type("float16"), "undetermined")


@pytest.mark.parametrize("name", ["float64", "Float32", "bf16", "", None, 4, np.float32, "int32"], ids=repr)
def test_unknown_dtype_raises(name: object) -> None:
    with pytest.raises(InvalidProblem, match="dtype"):
        element_type(name)


@pytest.mark.parametrize(
    ("value", "bits"),
    [
        (1.0, 0x3F80),
        (1 + 2**-8, 0x3F80),  # halfway between 0x3f80 and 0x3f81: ties to even (down)
        (1 + 3 * 2**-8, 0x3F82),  # halfway between 0x3f81 and 0x3f82: ties to even (up)
        (-(1 + 2**-8), 0xBF80),
        (-(1 + 3 * 2**-8), 0xBF82),
        (1 + 2**-8 + 2**-20, 0x3F81),  # just above halfway: up
        (1 + 2**-8 - 2**-20, 0x3F80),  # just below halfway: down
        (2 + 2**-7, 0x4000),  # halfway at exponent 1: ties to even
        (3.0, 0x4040),
        (-3.25, 0xC050),
        (2.0**-133, 0x0001),  # smallest bfloat16 subnormal
        (3.3895313892515355e38, 0x7F7F),  # largest finite bfloat16
        (3.4e38, 0x7F80),  # rounds past the largest finite value to +inf
    ],
)
def test_bfloat16_round_to_nearest_even(value: float, bits: int) -> None:
    assert element_type("bfloat16").bits_of(value) == bits


def test_bfloat16_rounds_float64_once() -> None:
    """float64 -> bfloat16 must round once: 1 + 2^-8 + 2^-30 lies just above the halfway point
    between 1.0 (0x3f80) and 1.0078125 (0x3f81), so the nearest bfloat16 is 0x3f81. Rounding first
    to float32 (which lands exactly on the halfway point) and then ties-to-even gives 0x3f80."""
    bf16 = element_type("bfloat16")
    assert bf16.bits_of(1 + 2**-8 + 2**-30) == 0x3F81
    assert bf16.bits_of(-(1 + 2**-8 + 2**-30)) == 0xBF81
    # float16 (converted directly by numpy) already rounds once
    assert element_type("float16").bits_of(1 + 2**-11 + 2**-40) == 0x3C01


@pytest.mark.parametrize("dtype", sorted(ELEMENT_TYPES))
def test_encode_decode_round_trip(dtype: str) -> None:
    et = element_type(dtype)
    bits = (
        np.arange(1 << 16, dtype=np.uint64).astype(et.storage)
        if et.itemsize == 2
        else np.random.default_rng(0).integers(0, 2**32, 1 << 16, dtype=np.uint64).astype(np.uint32)
    )
    with np.errstate(invalid="ignore"):  # signalling NaN patterns quieten in the float64 cast
        values = et.decode(bits)
    assert values.dtype == np.float64
    finite = ~np.isnan(values)
    again = et.encode(values[finite])
    assert again.dtype == et.storage
    np.testing.assert_array_equal(again, bits[finite])  # every non-NaN pattern, -0.0 and infs included
    # NaN patterns decode to NaN and encode to a NaN
    assert np.isnan(et.decode(et.encode(values[~finite]))).all()


@pytest.mark.parametrize("dtype", sorted(ELEMENT_TYPES))
def test_encode_of_exact_values(dtype: str) -> None:
    et = element_type(dtype)
    values = np.array([0.0, -0.0, 1.0, -2.5, 0.375, 1024.0, np.inf, -np.inf])
    np.testing.assert_array_equal(et.decode(et.encode(values)), values)
    assert np.signbit(et.decode(et.encode(np.array([-0.0]))))[0]


@pytest.mark.parametrize("dtype", sorted(ELEMENT_TYPES))
def test_poison_is_a_non_canonical_nan(dtype: str) -> None:
    et = element_type(dtype)
    poison = np.array([et.poison], dtype=et.storage)
    with np.errstate(invalid="ignore"):
        assert np.isnan(et.decode(poison))[0]
    assert et.poison != padding_bits(et, "nan")
    assert et.poison not in {padding_bits(et, m, -3.25) for m in PADDING_MODES}
    assert et.poison < 1 << (8 * et.itemsize)
    # no value that encode produces (every NaN is canonicalised) is the poison
    assert int(et.encode(np.array([np.nan]))[0]) != et.poison


@pytest.mark.parametrize("dtype", sorted(ELEMENT_TYPES))
def test_random_bits_deterministic(dtype: str) -> None:
    et = element_type(dtype)
    a = random_bits(et, (33, 17), np.random.default_rng(123))
    b = random_bits(et, (33, 17), np.random.default_rng(123))
    c = random_bits(et, (33, 17), np.random.default_rng(124))
    assert a.shape == (33, 17) and a.dtype == et.storage
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def _zero_or_nan(et, bits: np.ndarray) -> tuple[int, int]:
    magnitude = bits.astype(np.uint64) & ((1 << (8 * et.itemsize - 1)) - 1)
    values = et.decode(bits)
    return int((magnitude == 0).sum()), int((~np.isfinite(values)).sum())


@pytest.mark.parametrize("dtype", sorted(ELEMENT_TYPES))
def test_random_bits_no_zeros_no_nan(dtype: str) -> None:
    et = element_type(dtype)
    for seed in range(4):
        bits = random_bits(et, (256, 257), np.random.default_rng(seed))
        assert _zero_or_nan(et, bits) == (0, 0)
        assert len(np.unique(bits)) > 1000


@pytest.mark.parametrize("dtype", sorted(ELEMENT_TYPES))
def test_random_bits_never_zero_on_a_larger_array(dtype: str) -> None:
    """numpy's float32 ziggurat returns exactly +-0.0 with probability about 2^-23 per draw; with
    seed 17 a (1024, 1024) draw holds one. random_bits promises "never zeros"."""
    et = element_type(dtype)
    bits = random_bits(et, (1024, 1024), np.random.default_rng(17))
    zeros, nans = _zero_or_nan(et, bits)
    assert nans == 0
    assert zeros == 0, f"{zeros} zero element(s) in random_bits({dtype}, (1024, 1024), seed 17)"


def test_chunked_random_bits_do_not_depend_on_the_number_of_cores(monkeypatch) -> None:
    """Above the chunk size, chunks come from child generators seeded by the caller's: the same bits
    on one core or many, still finite, nonzero and in [2^-4, 2^4)."""
    monkeypatch.setattr(dtypes, "RANDOM_CHUNK_WORDS", 1000)
    results = []
    for cores in (1, 7):
        monkeypatch.setattr(parallel.os, "cpu_count", lambda cores=cores: cores)
        results.append(dtypes.random_bits(dtypes.element_type("float32"), (37, 1001), np.random.default_rng(9)))
    np.testing.assert_array_equal(results[0], results[1])
    values = np.abs(results[0].view(np.float32))
    assert ((values >= 2.0**-4) & (values < 2.0**4)).all()
    assert len(np.unique(results[0])) > 30_000  # the chunks are not copies of each other
    monkeypatch.setattr(dtypes, "RANDOM_CHUNK_WORDS", 1 << 22)
    small = dtypes.random_bits(dtypes.element_type("float32"), (37, 1001), np.random.default_rng(9))
    assert not np.array_equal(small, results[0])  # one draw below the chunk size, as before


def test_for_each_chunk_covers_every_item_once() -> None:
    seen = np.zeros(10_007, dtype=np.int64)

    def mark(start: int, stop: int) -> None:
        seen[start:stop] += 1

    parallel.for_each_chunk(10_007, 1000, mark)
    assert (seen == 1).all()
    parallel.for_each_chunk(0, 1000, mark)
    assert (seen == 1).all()


@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16"])
def test_mean_magnitude_is_the_mean_of_the_decoded_magnitudes(name):
    """The gemm tolerances' scale, without a float64 copy: the mean |value| of the decoded bits, up to
    the rounding of the sum's order."""
    et = element_type(name)
    rng = np.random.default_rng(7)
    for shape in [(1, 1), (65, 73), (777, 1001)]:
        bits = et.encode(rng.standard_normal(shape) * 3.0)
        assert et.mean_magnitude(bits) == pytest.approx(float(np.abs(et.decode(bits)).mean()), rel=1e-14)
    wide = et.encode(rng.standard_normal((1000, 16)))
    assert et.mean_magnitude(wide[:, :5]) == pytest.approx(float(np.abs(et.decode(wide[:, :5])).mean()), rel=1e-14)


@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16"])
def test_largest_magnitude_is_the_max_of_the_decoded_magnitudes(name):
    """The windows sums' tolerance scale, read from the bits: equal to ``max(abs(decode(bits)))`` on
    arbitrary bit patterns (negative zeros, subnormals, infinities, NaNs, which win as in ``np.max``), on
    strided views, and 0.0 on no elements."""
    et = element_type(name)
    rng = np.random.default_rng(11)
    with np.errstate(invalid="ignore"):
        for _ in range(300):
            bits = rng.integers(0, 1 << (8 * et.itemsize), size=int(rng.integers(1, 40)), dtype=np.uint64)
            bits = bits.astype(et.storage)
            expected = float(np.max(np.abs(et.decode(bits))))
            got = et.largest_magnitude(bits)
            assert got == expected or (math.isnan(got) and math.isnan(expected)), bits
    finite = et.encode(rng.standard_normal((300, 40)) * 1e3)
    finite[7, 3] = et.bits_of(-7e3)  # the largest magnitude is negative
    assert et.largest_magnitude(finite[:, ::3]) == float(np.max(np.abs(et.decode(finite[:, ::3]))))
    assert et.largest_magnitude(finite) == abs(float(et.decode(np.array([et.bits_of(-7e3)], et.storage))[0]))
    assert et.largest_magnitude(finite[:0]) == 0.0
    signed_zeros = np.array([et.bits_of(-0.0), et.bits_of(0.0)], dtype=et.storage)
    assert et.largest_magnitude(signed_zeros) == 0.0


@pytest.mark.parametrize(
    ("dtype", "largest", "too_large"),
    [
        ("float16", 65504.0, 65520.0),
        ("bfloat16", 3.3895313892515355e38, 3.4e38),
        ("float32", 3.4028234663852886e38, 1e39),
    ],
)
def test_a_pad_value_beyond_the_type_is_refused_naming_the_infinite_paddings(
    dtype: str, largest: float, too_large: float
) -> None:
    """1e30 as a float16 pad was accepted and padded with infinity (which padding = 'pos_inf' names)."""
    assert parse_padding("tile_copy", {"dtype": dtype, "padding": "value", "pad_value": -largest}) == (
        "value",
        -largest,
    )
    for value in (too_large, -too_large, 1e300):  # 65520 rounds to float16's infinity
        with pytest.raises(InvalidProblem, match=f"beyond {dtype}'s range.*padding = 'pos_inf' or 'neg_inf'"):
            parse_padding("tile_copy", {"dtype": dtype, "padding": "value", "pad_value": value})


@pytest.mark.parametrize(
    ("family", "problem"),
    [
        ("tile_copy", {"src": [64, 64], "dst": [80, 80]}),
        ("gather", {"rows": 64, "cols": 64, "count": 16}),
        ("gather_elements", {"rows": 64, "cols": 64, "tile": [8, 8]}),
        ("windows", {"rows": 64, "cols": 64, "window": [3, 3], "step": [1, 1], "op": "unfold"}),
    ],
)
def test_every_padded_family_refuses_a_pad_value_beyond_its_type(family: str, problem: dict[str, object]) -> None:
    data = {**problem, "dtype": "float16", "padding": "value", "pad_value": 1e30}
    with pytest.raises(InvalidProblem, match=f"{family}: pad_value 1e\\+30 is beyond float16's range"):
        get(family).parse_problem(data)
