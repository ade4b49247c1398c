"""quant_gemm's device arithmetic on the host: kernels/include/tunebox/fp4.cuh built by g++ and compared
with the quant family's reference. Every e2m1 code at every position of a word, times every scale
code (e8m0 and e4m3), must decode to the bfloat16 bits of the reference's float32 dequantized value
(NVFP4: times 2^-7, the kernels' factor), with the two-factor path for large e8m0 scales; the
one-multiply factor of small e8m0 codes must be the general one, and the tests of a word of scale codes
must find each code that takes a second factor; the activations' pairing must match the codes'; the
output rounding must be the reference's."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tunebox.dtypes import element_type
from tunebox.families.quant.formats import E2M1, E4M3, decode_table, e8m0_table
from tunebox.kernels_dir import kernels_dir

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="the host build needs g++")
BF16 = element_type("bfloat16")

MAIN = r"""
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#define __device__
#define __forceinline__ inline
static inline float __uint_as_float(unsigned b) { float f; std::memcpy(&f, &b, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned b; std::memcpy(&b, &f, 4); return b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
#include "tunebox/fp4.cuh"
using namespace tb::fp4;
int main(int argc, char** argv) {  // mode; stdin: u32 words (code word, scale code) or 4 words (pair)
  const std::string mode = argv[1];
  std::vector<u32> in, out;
  u32 w;
  while (std::fread(&w, 4, 1, stdin) == 1) in.push_back(w);
  if (mode == "pair") {
    for (size_t i = 0; i + 4 <= in.size(); i += 4) {
      const u32 r[4] = {in[i], in[i + 1], in[i + 2], in[i + 3]};
      u32 o[4];
      pair_with_fours(r, o);
      out.insert(out.end(), o, o + 4);
    }
  } else if (mode == "round") {
    for (u32 b : in) out.push_back(bf16_out(__uint_as_float(b)));
  } else if (mode == "any") {
    for (u32 q : in) out.push_back((e8m0_any_big(q) ? 1u : 0u) | (e4m3_any_nan(q) ? 2u : 0u));
  } else if (mode == "small") {
    for (u32 c : in) out.push_back(e8m0_small_factor(c));
    for (u32 c : in) out.push_back(e8m0_factor(c));
  } else {
    for (size_t i = 0; i + 2 <= in.size(); i += 2) {
      const u32 q = in[i], c = in[i + 1];
      u32 o[4];
      const bool in_order = mode.find("in_order") != std::string::npos;
      auto decode = [&](u32 factor) {
        if (in_order) decode_word_in_order(q, factor, o);
        else decode_word(q, factor, o);
      };
      if (mode.rfind("mxfp4", 0) == 0) {
        decode(e8m0_factor(c));
        if (e8m0_big(c)) rescale_word(o, e8m0_second(c));
      } else {
        decode(e4m3_factor(c));
      }
      out.insert(out.end(), o, o + 4);
    }
  }
  std::fwrite(out.data(), 4, out.size(), stdout);
  return 0;
}
"""


@pytest.fixture(scope="module")
def exe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("fp4_math")
    (where / "main.cpp").write_text(MAIN)
    built = where / "fp4"
    command = ["g++", "-std=c++17", "-O1", "-ffp-contract=off", f"-I{kernels_dir() / 'include'}"]
    done = subprocess.run([*command, str(where / "main.cpp"), "-o", str(built)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-4000:]
    return built


def run(exe: Path, mode: str, words: np.ndarray) -> np.ndarray:
    data = np.ascontiguousarray(words, dtype=np.uint32).tobytes()
    done = subprocess.run([str(exe), mode], input=data, capture_output=True, check=True)
    return np.frombuffer(done.stdout, dtype=np.uint32)


def words() -> np.ndarray:
    """Every code at every position (the word of eight equal codes), and random words."""
    same = np.array([sum(c << (4 * i) for i in range(8)) for c in range(16)], dtype=np.uint32)
    return np.concatenate([same, np.random.default_rng(1).integers(0, 1 << 32, 48, dtype=np.uint64).astype(np.uint32)])


@pytest.mark.parametrize("fmt", ["mxfp4", "nvfp4"])
@pytest.mark.parametrize("in_order", [False, True])
def test_decoded_words_are_the_references_values(exe: Path, fmt: str, in_order: bool) -> None:
    """decode_word's out[I] holds elements I and I + 4 (the mma pairing), decode_word_in_order's out[j]
    elements 2j and 2j + 1 (template wgmma's operand in shared memory)."""
    q = words()
    codes = np.arange(256, dtype=np.uint32)
    pairs = np.stack(np.meshgrid(q, codes, indexing="ij"), axis=-1).reshape(-1, 2)
    got = run(exe, f"{fmt}_in_order" if in_order else fmt, pairs).reshape(len(q), 256, 4)
    scale = e8m0_table() if fmt == "mxfp4" else decode_table(E4M3)
    if fmt == "nvfp4":
        scale = scale * np.float32(2.0**-7)
    nibbles = (q[:, None] >> (4 * np.arange(8, dtype=np.uint32))) & 0xF
    with np.errstate(over="ignore", invalid="ignore"):
        values = decode_table(E2M1)[nibbles][:, None, :] * scale[None, :, None]  # float32, exact or inf / NaN
    want = BF16.encode(values.astype(np.float64)).astype(np.uint32)  # (words, codes, element)
    low, high = got & 0xFFFF, got >> 16
    # in order, out[j] holds elements 2j (low) and 2j + 1 (high); else out[I] elements I and I + 4
    in_k_order = np.stack([low, high], axis=3).reshape(len(q), 256, 8)
    decoded = in_k_order if in_order else np.concatenate([low, high], axis=2)
    nan = np.isnan(values)
    is_nan = (decoded & 0x7FFF) > 0x7F80
    np.testing.assert_array_equal(is_nan, nan)
    np.testing.assert_array_equal(np.where(nan, 0, decoded), np.where(nan, 0, want))


def test_small_e8m0_codes_take_the_factor_in_one_multiply_add(exe: Path) -> None:
    codes = np.arange(129, dtype=np.uint32)  # up to MX_ONE_FACTOR; larger ones take e8m0_factor
    small, general = run(exe, "small", codes).reshape(2, -1)
    np.testing.assert_array_equal(small, general)


def test_word_tests_find_every_code_that_takes_a_second_factor(exe: Path) -> None:
    """e8m0_any_big: a byte of the word past MX_ONE_FACTOR (128; 255, NaN, too); e4m3_any_nan: a NaN
    byte (0x7F, 0xFF): each code at each byte of words whose other bytes are 0, 128, 127 or random."""
    rng = np.random.default_rng(3)
    codes = np.arange(256, dtype=np.uint32)
    fills = [np.zeros(256, np.uint32), np.full(256, 128, np.uint32), np.full(256, 127, np.uint32)]
    fills += [rng.integers(0, 256, 256).astype(np.uint32) for _ in range(4)]
    q = np.concatenate(
        [
            codes << (8 * at) | sum(fill << (8 * other) for other in range(4) if other != at)
            for at in range(4)
            for fill in fills
        ]
    ).astype(np.uint32)
    got = run(exe, "any", q)
    lanes = (q[:, None] >> (8 * np.arange(4, dtype=np.uint32))) & 0xFF
    np.testing.assert_array_equal(got & 1, (lanes > 128).any(axis=1))
    np.testing.assert_array_equal(got >> 1, ((lanes & 0x7F) == 0x7F).any(axis=1))


def test_activations_pair_as_the_codes(exe: Path) -> None:
    r = np.arange(8, dtype=np.uint32).reshape(2, 4) * 0x00020002 + np.array([0x00010000], dtype=np.uint32)
    got = run(exe, "pair", r).reshape(2, 4)
    elements = (r[:, :, None] >> np.array([0, 16], dtype=np.uint32)) & 0xFFFF  # (rows, word, half)
    flat = elements.reshape(2, 8)
    for i in range(4):
        np.testing.assert_array_equal(got[:, i] & 0xFFFF, flat[:, i])
        np.testing.assert_array_equal(got[:, i] >> 16, flat[:, i + 4])


def test_outputs_round_as_the_reference(exe: Path) -> None:
    x = np.random.default_rng(2).integers(0, 1 << 32, 200_000, dtype=np.uint64).astype(np.uint32)
    x = np.concatenate([x, np.array([0x7F800000, 0xFF800000, 0x7FC00001, 0xFFFFFFFF, 0x7F7FFFFF], dtype=np.uint32)])
    with np.errstate(invalid="ignore"):
        want = BF16.encode(x.view(np.float32).astype(np.float64))
    np.testing.assert_array_equal(run(exe, "round", x), want)
