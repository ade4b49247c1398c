// tunebox block-scaled formats in packed arithmetic (family quant): two bfloat16 elements a word, one
// sm_90 instruction a pair (bf16x2.cuh), the same codes as quant.cuh's element-wise functions, and the
// keys NVFP4's tensor amax is taken over. Kept apart from quant.cuh, which quant_gemm includes too.
#pragma once

#include "tunebox/bf16x2.cuh"
#include "tunebox/fp4.cuh"

namespace tb {
namespace quant {

typedef unsigned int u32;

// The e2m1 codes of the two bfloat16 elements of word x times 2^-X (`inverse`: 2^-X in both halves, X
// the MX block's exponent) as one byte, the first element in the low nibble: e2m1_encode's codes, in
// packed arithmetic. q = x * 2^-X is exact (a power of two; the block's |q| stay below 8). |q| plus
// 2^(e + 6), e the exponent of |q|'s binade but at least 0, rounds |q| to e2m1's spacing there, 2^(e - 1)
// (the sum's unit in the last place), ties to even; taking 2^(e + 6) back is exact; 6 saturates. Times
// 2^-126 an e2m1 value becomes the bfloat16 whose bits 6..8 are its code (subnormal below 1: fp4.cuh's
// decoding read backwards). The sign is x's, zeros and values rounding to zero included. Host forms
// (bf16x2.cuh, fp4.cuh): every float32 result here is exact, but |q| + 2^6 for |q| < 1, which lies at least
// 2^-10 from a halfway point unless it is one (|q| has 8 significant bits).
__device__ __forceinline__ u32 e2m1_pair_byte(u32 x, u32 inverse) {
  namespace p = bf16x2;
  const u32 a = fp4::bf16x2_mul(x, inverse) & 0x7FFF7FFFu;
  const u32 step = p::max_u16(a & 0x7F807F80u, 0x3F803F80u) + 0x03000300u;
  const u32 y = p::min(p::sub(p::add(a, step), step), 0x40C040C0u);
  const u32 w = fp4::bf16x2_mul(y, 0x00800080u);               // codes at bits 6..8 of each half
  const u32 t = ((w & 0x01C001C0u) | (x >> 6 & 0x02000200u)) >> 6;  // each sign beside its code
  return (t | t >> 12) & 0xFFu;
}

// NVFP4's tensor amax (quant.cu's prologue) is a maximum over keys: |x|'s float32 bits plus the least
// normal's (bfloat16: 2^7 in each half of a word), as signed integers. An infinity's or a NaN's key
// wraps negative and loses to every finite one, zero's (KEY_ZERO) the least of those; key_amax turns
// the largest back into |x|'s float32 bits.
template <bool BF16>
constexpr u32 KEY_ZERO = BF16 ? 0x00800080u : 0x00800000u;

template <bool BF16>
__device__ __forceinline__ u32 key_max(u32 m, u32 word) {  // word: a float32, or two bfloat16
  if constexpr (BF16) {
    return bf16x2::max_s16(m, (word & 0x7FFF7FFFu) + KEY_ZERO<true>);
  } else {
    const int k = (int)((word & ABS_MASK) + KEY_ZERO<false>);
    return (int)m > k ? m : (u32)k;
  }
}

template <bool BF16>
__device__ __forceinline__ u32 key_amax(u32 m) {
  m -= KEY_ZERO<BF16>;  // no borrow: each key is at least KEY_ZERO's
  return BF16 ? ((m & 0xFFFFu) > (m >> 16) ? m & 0xFFFFu : m >> 16) << 16 : m;
}

}  // namespace quant
}  // namespace tb
