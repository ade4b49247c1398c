"""quant without a GPU, the reference: element rounding against an enumeration of every value and
midpoint of each format, hand-worked MX and NVFP4 blocks (scale from amax, ties to even, saturation,
NaN / infinity / zero / subnormal blocks, the padded last block, nibble order), the swizzled scale
layout, dequantize rules (canonical NaN, subnormal products, the NVFP4 product order), MX's
quantize(dequantize(quantize(x))) == quantize(x), seeded inputs and problem parsing."""

from __future__ import annotations

import numpy as np
import pytest

from tunebox.errors import InvalidProblem
from tunebox.families import get
from tunebox.families.quant import FAMILY, FORMATS, QuantProblem
from tunebox.families.quant.formats import E2M1, E4M3, E5M2, decode_table, encode, pack_nibbles
from tunebox.families.quant.reference import dequantize, quantize, swizzle, unswizzle

Q = FAMILY
F32 = np.float32


def problem(**extra) -> QuantProblem:
    return Q.parse_problem(
        {"dtype": "float32", "rows": 1, "cols": 32, "format": "mxfp4", "direction": "quantize", **extra}
    )


def bits(values, dtype: str = "float32") -> np.ndarray:
    a = np.asarray(values, dtype=np.float32)
    return a.view(np.uint32) if dtype == "float32" else (a.view(np.uint32) >> 16).astype(np.uint16)


def test_registered() -> None:
    assert get("quant") is FAMILY and FAMILY.space.names() == ("blocks",)
    assert set(FORMATS) == {"mxfp4", "nvfp4", "mxfp8_e4m3", "mxfp8_e5m2"}


@pytest.mark.parametrize("fmt", [E2M1, E4M3, E5M2], ids=lambda f: f.name)
def test_encode_every_value_and_midpoint(fmt) -> None:
    """Each finite code's value encodes to that code; each midpoint of neighbours goes to the even
    code, a hair either side to the nearer one; past the largest value everything saturates."""
    table = decode_table(fmt)
    codes = np.arange(fmt.max_code + 1)
    values = table[codes].astype(np.float64)
    assert np.all(np.diff(values) > 0)
    for sign in (1.0, -1.0):
        got = encode((sign * values).astype(F32), fmt)
        np.testing.assert_array_equal(got, codes | (fmt.sign_bit if sign < 0 else 0))
        mid = (values[:-1] + values[1:]) / 2
        even = np.where(codes[:-1] % 2 == 0, codes[:-1], codes[1:])
        signed = fmt.sign_bit if sign < 0 else 0
        np.testing.assert_array_equal(encode((sign * mid).astype(F32), fmt), even | signed)
        below, above = np.nextafter(mid.astype(F32), F32(0)), np.nextafter(mid.astype(F32), F32(np.inf))
        np.testing.assert_array_equal(encode(sign * below, fmt), codes[:-1] | signed)
        np.testing.assert_array_equal(encode(sign * above, fmt), codes[1:] | signed)
        big = np.array([values[-1] * 1.01, 2 * values[-1], 3e38, np.inf], dtype=F32)
        assert set(encode(sign * big, fmt)) == {fmt.max_code | signed}


def test_encode_hand_cases() -> None:
    e2m1 = {0.0: 0, 0.25: 0, 0.26: 1, 0.75: 2, 1.25: 2, 1.75: 4, 2.5: 4, 3.5: 6, 5.0: 6, 5.5: 7, 7.0: 7, 9.0: 7}
    for v, c in e2m1.items():
        assert encode(np.array([v], F32), E2M1)[0] == c, v
    assert encode(np.array([-0.0, -0.2, -6.0], F32), E2M1).tolist() == [0x8, 0x8, 0xF]
    assert encode(np.array([448, 464, 470, 2.0**-9, 2.0**-10, 1.5 * 2.0**-9, -0.0], F32), E4M3).tolist() == [
        0x7E,
        0x7E,
        0x7E,
        0x01,
        0x00,
        0x02,
        0x80,
    ]
    assert encode(np.array([57344, 61440, 2.0**-16, 2.0**-17, 1e30], F32), E5M2).tolist() == [0x7B, 0x7B, 1, 0, 0x7B]


def test_decode_tables() -> None:
    np.testing.assert_array_equal(decode_table(E2M1)[:8], [0, 0.5, 1, 1.5, 2, 3, 4, 6])
    assert decode_table(E2M1)[8] == 0 and np.signbit(decode_table(E2M1)[8]) and decode_table(E2M1)[15] == -6
    e4m3, e5m2 = decode_table(E4M3), decode_table(E5M2)
    assert (e4m3[0x7E], e4m3[0x01], e4m3[0x08], e4m3[0xFE]) == (448, 2.0**-9, 2.0**-6, -448)
    assert np.isnan(e4m3[0x7F]) and np.isnan(e4m3[0xFF])
    assert (e5m2[0x7B], e5m2[0x01], e5m2[0x7C], e5m2[0xFC]) == (57344, 2.0**-16, np.inf, -np.inf)
    assert np.isnan(e5m2[0x7D:0x80]).all()


def test_mxfp4_block_by_hand() -> None:
    """amax 7 * 2^5: X = floor(log2(224)) - 2 = 5 (code 132); x / 2^5 rounds to even, 7 saturates to 6."""
    x = np.zeros(32, dtype=F32)
    x[:9] = [6.0, 3.0, -1.25, 0.25, 0.75, 7.0, -0.0, 2.5, 1.75]
    out = quantize(bits(x * 32).reshape(1, 32), "float32", FORMATS["mxfp4"], "row_major")
    assert out["scales"].tolist() == [[132]]
    codes = [7, 5, 0xA, 0, 2, 7, 0x8, 4, 4] + [0] * 23
    np.testing.assert_array_equal(out["values"], pack_nibbles(np.array([codes], dtype=np.uint8)))
    assert out["values"][0, :2].tolist() == [7 | 5 << 4, 0xA | 0 << 4]  # element 2c low, 2c + 1 high


@pytest.mark.parametrize("name", ["mxfp4", "mxfp8_e4m3", "mxfp8_e5m2"])
def test_mx_special_blocks(name: str) -> None:
    """NaN and infinity make the scale NaN (elements: the NaN code, e2m1 0); zeros give the least
    scale (2^-127) and signed zeros; the largest float32 the largest scale; subnormals scale 2^-127."""
    fmt = FORMATS[name]
    x = np.ones((6, 32), dtype=F32)
    x[0, 3], x[1, 0], x[2, 31] = np.nan, np.inf, -np.inf
    x[3] = np.where(np.arange(32) % 2, -0.0, 0.0)
    x[4, 5] = np.finfo(F32).max
    x[5] = np.float32(2.0**-132) * np.arange(1, 33)  # subnormals up to 2^-127
    out = quantize(bits(x), "float32", fmt, "row_major")
    scale = out["scales"][:, 0].tolist()
    assert scale[:4] == [255, 255, 255, 0] and scale[4] == 127 + 127 - fmt.element.emax and scale[5] == 0
    values = out["values"] if not fmt.packed else np.stack([out["values"] & 15, out["values"] >> 4], -1).reshape(6, 32)
    nan = fmt.element.nan_code
    assert (values[:3] == nan).all()
    np.testing.assert_array_equal(values[3], np.where(np.arange(32) % 2, fmt.element.sign_bit, 0))
    assert values[4, 5] == fmt.element.max_code and values[4, 0] == 0  # 1.0 / 2^X rounds to zero
    assert values[5].max() > 0  # m * 2^-140 * 2^127: a subnormal block keeps its elements


def test_partial_block_and_odd_row() -> None:
    """33 columns: the second block holds one element (31 zero pads); the odd row's last byte has a zero
    high nibble; the pads do not raise amax."""
    x = np.full((1, 33), 0.5, dtype=F32)
    x[0, 32] = 3.0
    out = quantize(bits(x), "float32", FORMATS["mxfp4"], "row_major")
    assert out["values"].shape == (1, 17) and out["scales"].tolist() == [[124, 126]]  # X = -3, then -1
    assert out["values"][0, 0] == 6 | 6 << 4  # 0.5 * 2^3 = 4
    assert out["values"][0, 16] == 7  # 3.0 * 2^1 = 6, beside a zero high nibble


def test_nvfp4_by_hand() -> None:
    """G = 2688 (T = 1): amax 6 -> s 1 (0x38), amax 12 -> s 2 (0x40, R = 0.5); a zero block's s clamps to
    2^-6 (0x08); a NaN block gets scale 0x7F, zero elements, and leaves G alone."""
    x = np.zeros((1, 64), dtype=F32)
    x[0, :3] = [6.0, -3.0, 6.0]  # block 0: amax 6
    x[0, 16:18] = [12.0, -5.0]  # block 1: amax 12; -5 * 0.5 = -2.5 -> -2 (tie to even)
    x[0, 48:50] = [np.nan, 2688.0]  # block 3: NaN (not part of G), and G = 2688 itself
    out = quantize(bits(x), "float32", FORMATS["nvfp4"], "row_major")
    assert out["tensor_scale"].view(F32)[0] == 1.0
    assert out["scales"].tolist() == [[0x38, 0x40, 0x08, 0x7F]]
    codes = np.stack([out["values"] & 15, out["values"] >> 4], -1).reshape(64)
    assert codes[:3].tolist() == [7, 0xD, 7] and codes[16:18].tolist() == [7, 0xC] and not codes[32:].any()


def test_nvfp4_all_zero_and_clamps() -> None:
    """All zeros: T = 0, every scale 2^-6, signed zeros. A block far below G: s under 2^-6 clamps up."""
    x = np.where(np.arange(32) % 3 == 0, -0.0, 0.0).astype(F32).reshape(1, 32)
    out = quantize(bits(x), "float32", FORMATS["nvfp4"], "row_major")
    assert out["tensor_scale"][0] == 0 and out["scales"].tolist() == [[0x08, 0x08]]
    codes = np.stack([out["values"] & 15, out["values"] >> 4], -1).reshape(32)
    np.testing.assert_array_equal(codes, np.where(np.arange(32) % 3 == 0, 8, 0))
    y = np.zeros((1, 32), dtype=F32)
    y[0, 0], y[0, 16] = 2688.0, 1e-3  # T = 1; block 1: s = 1e-3 / 6 < 2^-6
    out = quantize(bits(y), "float32", FORMATS["nvfp4"], "row_major")
    assert out["scales"].tolist() == [[0x7E, 0x08]]  # 2688 / 6 = 448


def test_swizzled_layout() -> None:
    codes = np.random.default_rng(0).integers(1, 256, (130, 5), dtype=np.uint8)
    flat = swizzle(codes)
    assert flat.shape == (256 * 8,)
    for r, c in [(0, 0), (1, 0), (31, 3), (32, 0), (127, 2), (128, 0), (129, 4)]:
        offset = ((r // 128) * 2 + c // 4) * 512 + (r % 32) * 16 + (r % 128 // 32) * 4 + c % 4
        assert flat[offset] == codes[r, c], (r, c)
    assert np.count_nonzero(flat) == codes.size  # padding is zero
    np.testing.assert_array_equal(unswizzle(flat, 130, 5), codes)


def test_dequantize_by_hand() -> None:
    """MX: element * 2^X (code 0: 2^-127, a subnormal product); NaN scale or element: canonical NaN;
    e5m2 infinity; bfloat16 rounds the float32 product. NVFP4: (element * scale) * T."""
    fmt = FORMATS["mxfp4"]
    values = pack_nibbles(np.array([[1, 7, 0xF, 2] + [0] * 28, [3] * 32], dtype=np.uint8))
    inputs = {"values": values, "scales": np.array([[0], [255]], dtype=np.uint8)}
    out = dequantize(inputs, "float32", fmt, "row_major", 32).view(F32)
    assert out[0, :4].tolist() == [2.0**-128, 6 * 2.0**-127, -6 * 2.0**-127, 2.0**-127]
    assert (out[1].view(np.uint32) == 0x7FC00000).all()
    e5m2 = {"values": np.array([[0x7C, 0xFC, 0x7D, 0x01]], dtype=np.uint8), "scales": np.array([[127]], np.uint8)}
    got = dequantize(e5m2, "bfloat16", FORMATS["mxfp8_e5m2"], "row_major", 4)
    assert got.tolist() == [[0x7F80, 0xFF80, 0x7FC0, 0x3780]]  # 2^-16 = 0x3780 in bfloat16
    e4m3 = {"values": np.array([[0x7E, 0x07]], dtype=np.uint8), "scales": np.array([[0]], np.uint8)}
    got = dequantize(e4m3, "bfloat16", FORMATS["mxfp8_e4m3"], "row_major", 2)
    assert got.tolist() == [[0x0460, 0x0001]]  # 1.75 * 2^-119; 7 * 2^-136 rounds to 2^-133
    nv = {
        "values": np.array([[0x77]], dtype=np.uint8),
        "scales": np.array([[0x38]], np.uint8),  # 1.0
        "tensor_scale": np.array([1 / 3], F32).view(np.uint32),
    }
    got = dequantize(nv, "float32", FORMATS["nvfp4"], "row_major", 2).view(F32)
    assert got.tolist() == [[F32(6.0) * F32(1 / 3)] * 2]


@pytest.mark.parametrize("name", ["mxfp4", "mxfp8_e4m3", "mxfp8_e5m2"])
def test_mx_quantize_of_dequantize_is_identity(name: str) -> None:
    """Quantized blocks (finite or not) survive a float32 round trip exactly."""
    p = Q.parse_problem({"dtype": "float32", "rows": 64, "cols": 100, "format": name, "direction": "quantize"})
    x = Q.make_inputs(p, np.random.default_rng(3))["x"]
    q = quantize(x, "float32", p.fmt, "swizzled_128x4")
    back = dequantize(q, "float32", p.fmt, "swizzled_128x4", p.cols)
    again = quantize(back, "float32", p.fmt, "swizzled_128x4")
    for key in ("values", "scales"):
        np.testing.assert_array_equal(again[key], q[key])


def test_seeded_inputs_plant_every_special() -> None:
    for name in FORMATS:
        p = Q.parse_problem({"dtype": "bfloat16", "rows": 9, "cols": 64, "format": name, "direction": "quantize"})
        x = Q.make_inputs(p, np.random.default_rng(1))["x"]
        np.testing.assert_array_equal(x, Q.make_inputs(p, np.random.default_rng(1))["x"])
        values = (x.astype(np.uint32) << 16).view(F32)
        assert np.isnan(values).sum() == 1 and (values == np.inf).sum() == 1 and (values == -np.inf).sum() == 1
        assert (values == 0).sum() >= p.fmt.block and ((x & 0x7F80) == 0).sum() >= 2 * p.fmt.block
        scales = Q.reference(p, {"x": x})["scales"]
        assert (scales == (0x7F if name == "nvfp4" else 255)).sum() == 3
    zeros = Q.parse_problem({**p.to_dict(), "inputs": "zeros"})
    assert not (Q.make_inputs(zeros, np.random.default_rng(1))["x"] & 0x7FFF).any()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"dtype": "float16"}, "dtype must be one of"),
        ({"format": "mxfp6"}, "format must be one of"),
        ({"format": ["mxfp4"]}, "format must be one of"),
        ({"direction": "both"}, "direction must be one of"),
        ({"scale_layout": "col_major"}, "scale_layout must be one of"),
        ({"rows": 0}, "rows must be a positive integer"),
        ({"cols": 2**21, "rows": 2**19}, "too many elements"),
        ({"direction": "dequantize", "inputs": "zeros"}, "direction = 'quantize' only"),
        ({"block": 16}, "unknown problem key"),
    ],
)
def test_bad_problems_say_what_to_do(data, message) -> None:
    with pytest.raises(InvalidProblem, match=message):
        problem(**data)


def test_problems_survive_their_dict_form() -> None:
    for p in (problem(), problem(scale_layout="swizzled_128x4", format="nvfp4", inputs="zeros")):
        assert Q.parse_problem(p.to_dict()) == p
    assert "inputs" not in problem().to_dict()
