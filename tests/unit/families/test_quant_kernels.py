"""quant's kernels without a GPU: the device arithmetic of kernels/include/tunebox/quant.cuh built for the
host and compared with the numpy reference on every bfloat16 value and two million random float32
ones; the rendered kernels run on the host (quant_host: every CUDA thread an OS thread) and compared
bit for bit with the reference over every format, direction, dtype and layout on odd shapes; and a
sample of variants compiled by NVRTC (sm_90). The host runs need g++."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import numpy as np
import pytest
import quant_host
from family_checks import compile_cases

from tunebox.dtypes import element_type
from tunebox.families.quant import FAMILY, FORMATS
from tunebox.families.quant.formats import E2M1, E4M3, E5M2, decode_table, e8m0_table, encode
from tunebox.records import Status

Q = FAMILY
F32 = np.float32
needs_gpp = pytest.mark.skipif(shutil.which("g++") is None, reason="the host builds need g++")


@pytest.fixture(scope="module")
def math_exe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return quant_host.build_math(tmp_path_factory.mktemp("quant_math"))


def words() -> np.ndarray:
    """Every bfloat16 pattern widened, and random float32 patterns; no NaN."""
    rng = np.random.default_rng(0)
    all_bits = np.concatenate(
        [
            np.arange(1 << 16, dtype=np.uint32) << 16,
            rng.integers(0, 1 << 32, 2_000_000, dtype=np.uint64).astype(np.uint32),
        ]
    )
    return all_bits[~np.isnan(all_bits.view(F32))]


@needs_gpp
@pytest.mark.parametrize("mode", ["e2m1_encode", "e2m1_rne", "fp8_e4m3", "fp8_e5m2"])
def test_element_rounding_matches_the_reference(math_exe: Path, mode: str) -> None:
    """The kernels' e2m1 encoding (and float_rne, the portable fp8 path) round as ``formats.encode``."""
    x = words()
    if mode.startswith("fp8"):
        fmt = E4M3 if mode == "fp8_e4m3" else E5M2
        x = x[: x.size // 2 * 2]
        got = quant_host.device_math(math_exe, mode, x)
        want = encode(x.view(F32), fmt).astype(np.uint32)
        np.testing.assert_array_equal(got, want[0::2] | want[1::2] << 8)  # lo in bits 0-7
    else:
        np.testing.assert_array_equal(quant_host.device_math(math_exe, mode, x), encode(x.view(F32), E2M1))


@needs_gpp
def test_packed_e2m1_pairs_match_the_reference(math_exe: Path) -> None:
    """quant_pairs.cuh's e2m1_pair_byte (MXFP4 from bfloat16, two elements a word) on every finite
    bfloat16 pattern, at block exponents from the least (2^-127) to the greatest, wherever the block's
    rule holds (|x| * 2^-X below 8): the codes ``formats.encode`` gives x * 2^-X, the first element in
    the low nibble. Pairs are (pattern, its negation's neighbour), so both halves see every pattern."""
    bits = np.arange(1 << 16, dtype=np.uint32)
    bits = bits[~np.isnan((bits << 16).view(F32))]
    partner = bits[::-1] ^ 0x8000
    for code in (0, 1, 2, 60, 120, 125, 126, 127, 128, 129, 130, 200, 252):
        scale = F32(2.0) ** (code - 127) if code else F32(2.0**-127)
        with np.errstate(over="ignore"):
            lo, hi = ((b << 16).view(F32) / scale for b in (bits, partner))
        keep = (np.abs(lo) < 8) & (np.abs(hi) < 8)
        inverse = (F32(1) / scale).view(np.uint32) >> 16
        pairs = np.stack([bits[keep] | partner[keep] << 16, np.full(keep.sum(), inverse | inverse << 16)], 1)
        got = quant_host.device_math(math_exe, "e2m1_pair_byte", pairs.reshape(-1))
        want = encode(lo[keep], E2M1).astype(np.uint32) | encode(hi[keep], E2M1).astype(np.uint32) << 4
        wrong = np.flatnonzero(got != want)
        assert wrong.size == 0, (code, pairs[wrong[:4]], got[wrong[:4]], want[wrong[:4]])


@needs_gpp
def test_scales_and_values_match_the_reference(math_exe: Path) -> None:
    amax = words() & 0x7FFFFFFF
    amax = np.concatenate([amax, np.array([0x7F800000, 0x7FC00000, 0], dtype=np.uint32)])
    for emax in (2, 8, 15):
        want = np.where(amax >= 0x7F800000, 255, np.maximum((amax >> 23).astype(np.int64) - emax, 0))
        np.testing.assert_array_equal(quant_host.device_math(math_exe, f"e8m0_{emax}", amax), want)
    codes = np.arange(255, dtype=np.uint32)
    np.testing.assert_array_equal(
        quant_host.device_math(math_exe, "e8m0_value", codes), e8m0_table()[:255].view(np.uint32)
    )
    inverse = quant_host.device_math(math_exe, "e8m0_inverse", codes[:239]).view(F32)
    np.testing.assert_array_equal(inverse * e8m0_table()[:239], np.ones(239, F32))
    for mode, fmt in (("e2m1_value", E2M1), ("e4m3_value", E4M3), ("e5m2_value", E5M2)):
        table = decode_table(fmt)
        finite = np.flatnonzero(np.isfinite(table))
        got = quant_host.device_math(math_exe, mode, finite.astype(np.uint32))
        np.testing.assert_array_equal(got, table[finite].view(np.uint32))


@needs_gpp
def test_nvfp4_scale_and_bf16_rounding(math_exe: Path) -> None:
    rng = np.random.default_rng(1)
    amax = rng.integers(0, 0x7F800000, 500_000, dtype=np.uint64).astype(np.uint32)
    d = rng.integers(0, 0x7F800000, 500_000, dtype=np.uint64).astype(np.uint32)
    amax[:1000], d[500:1500] = 0, 0  # 0 / x, x / 0 and 0 / 0
    got = quant_host.device_math(math_exe, "nvfp4_scale", np.stack([amax, d], 1).reshape(-1))
    with np.errstate(all="ignore"):
        s = amax.view(F32) / d.view(F32)
    s = np.where(s > F32(448), F32(448), np.where(s >= F32(2**-6), s, F32(2**-6)))
    np.testing.assert_array_equal(got, encode(s, E4M3))
    x = words()
    want = element_type("bfloat16").encode(x.view(F32).astype(np.float64))
    np.testing.assert_array_equal(quant_host.device_math(math_exe, "bf16_rne", x), want)


@needs_gpp
def test_tensor_amax_keys_skip_non_finite_values(math_exe: Path) -> None:
    """NVFP4's tensor amax keys (quant_pairs.cuh): the largest finite |x| of a float32 word, or of a word's
    two bfloat16 halves (every pattern against its reversed partner, NaN and infinity included), 0 if none."""
    x = np.concatenate([words(), np.array([0x7F800000, 0xFF800000, 0x7FC00000, 0xFFFFFFFF, 0, 0x80000001], np.uint32)])
    finite = np.where((x & 0x7FFFFFFF) < 0x7F800000, x & 0x7FFFFFFF, 0)
    np.testing.assert_array_equal(quant_host.device_math(math_exe, "key_amax_f32", x), finite)
    halves = np.arange(1 << 16, dtype=np.uint32)
    pairs = halves | halves[::-1] << 16
    a = np.stack([halves, halves[::-1]]) & 0x7FFF
    want = np.where(a < 0x7F80, a, 0).max(axis=0) << 16
    np.testing.assert_array_equal(quant_host.device_math(math_exe, "key_amax_bf16", pairs), want)


SHAPES = [(37, 101), (130, 70), (1, 1), (3, 64), (5, 33)]


def host_cases() -> list:
    """Every format x direction x dtype x layout on an odd shape, at the default and one seeded
    spread variant (every elems_per_thread, vec_bytes and blocks_per_thread turn up)."""
    rnd = random.Random(0)
    cases = []
    for i, (name, direction, dtype, layout) in enumerate(
        (f, d, t, s)
        for f in FORMATS
        for d in ("quantize", "dequantize")
        for t in ("bfloat16", "float32")
        for s in ("row_major", "swizzled_128x4")
    ):
        rows, cols = SHAPES[i % len(SHAPES)]
        p = Q.parse_problem(
            {"dtype": dtype, "rows": rows, "cols": cols, "format": name, "direction": direction, "scale_layout": layout}
        )
        valid = [c for c in Q.space if not Q.violations(p, c)]
        cases += [(p, Q.default_config(p)), (p, rnd.choice(valid))]
    return cases


@needs_gpp
def test_kernels_on_the_host_match_the_reference(tmp_path: Path) -> None:
    cases = host_cases()
    exe = quant_host.build(Q, cases, tmp_path)
    for index, (p, config) in enumerate(cases):
        inputs = Q.make_inputs(p, np.random.default_rng(index))
        got = quant_host.run(exe, index, Q, p, inputs, tmp_path)
        for name, want in Q.reference(p, inputs).items():
            wrong = np.flatnonzero(got[name].reshape(-1) != want.reshape(-1))
            assert wrong.size == 0, (p, config.label(), name, wrong[:8])


@needs_gpp
def test_nvfp4_dequantize_at_every_kind_of_tensor_scale_on_the_host(tmp_path: Path) -> None:
    """NVFP4 to bfloat16 takes packed pairs when T * 2^7 is finite and element-wise arithmetic otherwise:
    both, and the boundary between them, match the reference (T infinite, NaN, past 2^120, just below it,
    subnormal, zero)."""
    p = Q.parse_problem({"dtype": "bfloat16", "rows": 7, "cols": 96, "format": "nvfp4", "direction": "dequantize"})
    exe = quant_host.build(Q, [(p, Q.default_config(p))], tmp_path)
    inputs = Q.make_inputs(p, np.random.default_rng(1))
    for t in (np.inf, np.nan, 2.0**125, 2.0**120, 2.0**120 * (1 - 2.0**-24), 2.0**-140, 0.0, 3.0):
        inputs["tensor_scale"] = np.array([t], dtype=F32).view(np.uint32)
        got = quant_host.run(exe, 0, Q, p, inputs, tmp_path)
        np.testing.assert_array_equal(got["x"], Q.reference(p, inputs)["x"], err_msg=f"T = {t}")


@needs_gpp
def test_nvfp4_all_zero_tensor_on_the_host(tmp_path: Path) -> None:
    """T = 0: the prologue's maximum is 0, every scale 2^-6, elements signed zeros."""
    p = Q.parse_problem(
        {"dtype": "bfloat16", "rows": 5, "cols": 40, "format": "nvfp4", "direction": "quantize", "inputs": "zeros"}
    )
    exe = quant_host.build(Q, [(p, Q.default_config(p))], tmp_path)
    inputs = Q.make_inputs(p, np.random.default_rng(0))
    got = quant_host.run(exe, 0, Q, p, inputs, tmp_path)
    want = Q.reference(p, inputs)
    assert want["tensor_scale"][0] == 0 and (want["scales"] == 0x08).all()
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])


@needs_gpp
def test_blocks_stepped_across_rows_on_the_host(tmp_path: Path) -> None:
    """A thread's later blocks step on from its first (no division) where a row holds at least a CTA's
    groups of blocks; here they wrap into the next row (70 and 72 blocks a row, 64 groups, 4 blocks each)."""
    cases = []
    for direction in ("quantize", "dequantize"):
        for layout in ("row_major", "swizzled_128x4"):
            p = Q.parse_problem(
                {
                    "dtype": "bfloat16",
                    "rows": 5,
                    "cols": 16 * 70 - 3,
                    "format": "nvfp4",
                    "direction": direction,
                    "scale_layout": layout,
                }
            )
            cases.append(
                (
                    p,
                    Q.config(
                        {
                            "template": "blocks",
                            "threads": 64,
                            "elems_per_thread": 16,
                            "vec_bytes": 2,
                            "blocks_per_thread": 4,
                        }
                    ),
                )
            )
    exe = quant_host.build(Q, cases, tmp_path)
    for index, (p, config) in enumerate(cases):
        assert not Q.violations(p, config)
        inputs = Q.make_inputs(p, np.random.default_rng(index))
        got = quant_host.run(exe, index, Q, p, inputs, tmp_path)
        for name, want in Q.reference(p, inputs).items():
            np.testing.assert_array_equal(got[name].reshape(-1), want.reshape(-1), err_msg=f"{p}, {name}")


@needs_gpp
def test_nvfp4_quantize_of_tiny_tensors_on_the_host(tmp_path: Path) -> None:
    """float32 subnormals: T = G / 2688 and T * value(S) underflow in some blocks or all (R infinite: nonzero
    elements saturate, zeros keep their sign), and not in others."""
    p = Q.parse_problem({"dtype": "float32", "rows": 6, "cols": 48, "format": "nvfp4", "direction": "quantize"})
    exe = quant_host.build(Q, [(p, Q.default_config(p))], tmp_path)
    rng = np.random.default_rng(2)
    for largest in (2**13, 2**10, 3, 1):  # G = largest * 2^-149
        inputs = Q.make_inputs(p, rng)
        units = rng.choice(np.array([0, 1, 2, 3, 7, 100, largest], dtype=np.uint32), size=inputs["x"].shape)
        units.reshape(-1)[0] = largest
        inputs["x"] = units | rng.choice(np.array([0, 0x80000000], dtype=np.uint32), size=units.shape)
        got = quant_host.run(exe, 0, Q, p, inputs, tmp_path)
        for name, want in Q.reference(p, inputs).items():
            np.testing.assert_array_equal(got[name], want, err_msg=f"G = {largest} * 2^-149, {name}")


def test_variants_compile_for_sm_90(tmp_path: Path) -> None:
    """A spread of variants of every format, direction, dtype and layout (NVFP4 quantize with its
    two prologue helpers) compiles with NVRTC."""
    cases = host_cases()[1::4]
    assert {p.format for p, _ in cases} == set(FORMATS) and {p.direction for p, _ in cases} == {
        "quantize",
        "dequantize",
    }
    for (p, config), result in compile_cases(Q, cases, cache_dir=tmp_path):
        assert result.status is Status.OK, (p, config.label(), result.log[-800:])
