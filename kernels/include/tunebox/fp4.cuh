// tunebox fp4 weights on bfloat16 tensor cores (family quant_gemm): e2m1 codes and their block scales
// as bfloat16x2 operands of mma.sync, exact.
//
// A word q of packed e2m1 codes holds elements 0..7 (element i in bits 4i..4i+3, the quant family's
// nibble order). `e2m1_pair<I>` moves elements I and I + 4 into one bfloat16x2 (I in the low half):
// the code's three magnitude bits land on bits 6..8 (exponent field 0..3 and the top mantissa bit) and
// its sign on bit 15, which reads as v * 2^-126 for the e2m1 value v (codes 0 and 1, values 0 and 0.5,
// are bfloat16 subnormals; every value is exact). One bfloat16x2 multiply by a block factor (the
// block scale times 2^126, or NVFP4's times 2^119) then gives v * scale, exactly: an e2m1 value times
// an e8m0 or e4m3 scale fits bfloat16's 8-bit significand and range (2^-128 .. 2^128, the latter
// infinite as in the float32 reference). e8m0 codes above 128 (scales from 2^2) would overflow one
// factor: they take two, 2^127 and then 2^(code - 128) (`rescale_word`).
//
// The activations' matching pairs (elements I and I + 4 of 8 consecutive bfloat16) come from
// `pair_with_fours`. Since the order of k inside an mma does not matter when both operands share it,
// mma slot pairs {2t, 2t + 1} and {2t + 8, 2t + 9} take pairs (2h, 2h + 4) and (2h + 1, 2h + 5) of a
// word at step h = 0, 1: one word of codes feeds two k16 steps.
//
// `decode_word_in_order` decodes a word in K order instead (elements 2j, 2j + 1 a bfloat16x2), for
// operands in shared memory that the activations meet in their own order (template wgmma).
//
// Integer and IEEE arithmetic only, so everything here also compiles for the host, where the unit
// tests check it against the quant family's reference (tests/unit/test_quant_gemm_device_math.py); the
// bfloat16x2 multiply's host form rounds a float32 product, exact here.
#pragma once

#include "tunebox/quant.cuh"

namespace tb {
namespace fp4 {

typedef unsigned int u32;

constexpr u32 BF16_NAN = 0x7FC0u;       // the NaN every NaN output is written as
constexpr u32 NEG_ZEROS = 0x80008000u;  // -0, -0: x * y + (-0) is x * y, signed zeros kept
constexpr u32 MX_ONE_FACTOR = 128u;     // e8m0 codes up to this one take one factor (2^(code - 1) <= 2^127)

__device__ __forceinline__ u32 dup(u32 half) { return half | half << 16; }

// Elements I and I + 4 of q as bfloat16x2 of v * 2^-126.
template <int I>
__device__ __forceinline__ u32 e2m1_pair(u32 q) {
  u32 x;
  if constexpr (I < 2)
    x = q << (6 - 4 * I);
  else
    x = q >> (4 * I - 6);
  const u32 z = x & 0x03C003C0u;       // magnitudes at bits 6..8 and 22..24, signs at 9 and 25
  return z + (z & 0x02000200u) * 63u;  // each sign moves up 6 bits: 2^9 * 63 = 2^15 - 2^9
}

// MX (e8m0 code c): whether the block takes two factors, its first factor and its second (1 for the
// one-factor codes, so that a warp can apply it to every block when any of its blocks needs it).
__device__ __forceinline__ bool e8m0_big(u32 c) { return c > MX_ONE_FACTOR && c < 255u; }
__device__ __forceinline__ u32 e8m0_factor(u32 c) {
  if (c == 255u) return dup(BF16_NAN);
  return dup(c > MX_ONE_FACTOR ? 0x7F00u : (c + 126u) << 7);  // 2^127, or 2^(c - 1): code 0 is 2^-127
}
__device__ __forceinline__ u32 e8m0_second(u32 c) { return dup(e8m0_big(c) ? (c - 1u) << 7 : 0x3F80u); }
// e8m0_factor of a code up to MX_ONE_FACTOR in one multiply-add: (c + 126) << 7 in both halves.
__device__ __forceinline__ u32 e8m0_small_factor(u32 c) { return c * 0x00800080u + 0x3F003F00u; }
// Whether any byte of q, a word of e8m0 codes, is past MX_ONE_FACTOR (a byte past 128: its top bit and a
// low bit set; the byte-wise sum carries into no other byte): a second factor, or NaN (255).
static_assert(MX_ONE_FACTOR == 128u, "e8m0_any_big tests bytes past 128");
__device__ __forceinline__ bool e8m0_any_big(u32 q) {
  return (q & ((q & 0x7F7F7F7Fu) + 0x7F7F7F7Fu) & 0x80808080u) != 0;
}

// NVFP4 (e4m3 code c): the scale times 2^119 (exact; 448 * 2^119 < 2^128), NaN for 0x7F and 0xFF. The
// products are v * scale * 2^-7: the kernels multiply the sums by 2^7 and the tensor scale.
// e4m3_finite_factor is that factor for the codes that are not NaN (a number for every code).
constexpr float NV_UNDO = 128.0f;
__device__ __forceinline__ bool e4m3_nan(u32 c) { return (c & 0x7Fu) == 0x7Fu; }
// Whether any byte of q, a word of e4m3 codes, is NaN (its low seven bits all set).
__device__ __forceinline__ bool e4m3_any_nan(u32 q) { return ((q & 0x7F7F7F7Fu) + 0x01010101u & 0x80808080u) != 0; }
__device__ __forceinline__ u32 e4m3_finite_factor(u32 c) {
  return dup(quant::as_bits(quant::e4m3_value(c) * 0x1p119f) >> 16);
}
__device__ __forceinline__ u32 e4m3_factor(u32 c) {
  if (e4m3_nan(c)) return dup(BF16_NAN);
  return e4m3_finite_factor(c);
}
// The factor of a kernel's sums: NVFP4's 2^7 (undoing its factors' 2^-7) times the tensor scale (the
// kernel argument struct's `tensor_scale`), 1 for MXFP4 (Cfg::NVFP4 false).
template <class Cfg>
__device__ __forceinline__ float output_scale(const typename Cfg::Args& a) {
  if constexpr (Cfg::NVFP4) return NV_UNDO * *a.tensor_scale;
  else return 1.f;
}

// x * y per bfloat16 half, rounded to nearest even (exact for the products above).
__device__ __forceinline__ u32 bf16x2_mul(u32 x, u32 y) {
#ifdef __CUDA_ARCH__
  u32 d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(x), "r"(y), "r"(NEG_ZEROS));
  return d;
#else
  u32 d = 0;
  for (int h = 0; h < 32; h += 16) {
    const float p = quant::as_float((x >> h & 0xFFFFu) << 16) * quant::as_float((y >> h & 0xFFFFu) << 16);
    const u32 b = quant::as_bits(p);
    d |= ((b & quant::ABS_MASK) > quant::INF_BITS ? BF16_NAN : quant::bf16_rne(b)) << h;
  }
  return d;
#endif
}

// e2m1_pair's bfloat16x2 from z, two codes in place at nibble I and I + 4 (I = 0 or 1; all else 0), in
// one multiply and one mask: z * (2^(6 - 4I) + 2^(12 - 4I)) puts each code at bits 6..9 (its magnitude at
// 6..8) and a copy at 12..15 (its sign at 15), in each half; the copies do not overlap, so nothing carries.
template <int I>
__device__ __forceinline__ u32 e2m1_spread(u32 z) {
  return z * ((1u << (6 - 4 * I)) * 65u) & 0x81C081C0u;
}

// The 8 elements of q times their block's first factor: out[I] holds elements I and I + 4 (see above).
__device__ __forceinline__ void decode_word(u32 q, u32 factor, u32 (&out)[4]) {
  const u32 high = q >> 8;  // elements 2, 3, 6, 7 at the nibbles of 0, 1, 4, 5
  out[0] = bf16x2_mul(e2m1_spread<0>(q & 0x000F000Fu), factor);
  out[1] = bf16x2_mul(e2m1_spread<1>(q & 0x00F000F0u), factor);
  out[2] = bf16x2_mul(e2m1_spread<0>(high & 0x000F000Fu), factor);
  out[3] = bf16x2_mul(e2m1_spread<1>(high & 0x00F000F0u), factor);
}

// Byte j of q in the low half and byte j of r in the high half (the other bytes: don't care).
__device__ __forceinline__ u32 byte_pair(u32 q, u32 r, int j) {
#ifdef __CUDA_ARCH__
  return __byte_perm(q, r, (u32)j | (4u + (u32)j) << 8);
#else
  return (q >> 8 * j & 0xFFu) | (r >> 8 * j & 0xFFu) << 16;
#endif
}

// The 8 elements of q times their block's first factor in K order: out[j] holds elements 2j and 2j + 1
// (element 2j low), as a K-major bfloat16 operand in shared memory holds them.
__device__ __forceinline__ void decode_word_in_order(u32 q, u32 factor, u32 (&out)[4]) {
  const u32 odd = q >> 4;  // each byte's second element at its low nibble
#pragma unroll
  for (int j = 0; j < 4; ++j) out[j] = bf16x2_mul(e2m1_spread<0>(byte_pair(q, odd, j) & 0x000F000Fu), factor);
}

// The second factor of a decoded word (mxfp4 blocks of scales from 2^2; 1 for the others).
__device__ __forceinline__ void rescale_word(u32 (&out)[4], u32 second) {
#pragma unroll
  for (int i = 0; i < 4; ++i) out[i] = bf16x2_mul(out[i], second);
}

// Eight consecutive bfloat16 r (r[i] holds elements 2i, 2i + 1) as the pairs decode_word makes:
// out[I] holds elements I and I + 4.
__device__ __forceinline__ void pair_with_fours(const u32 (&r)[4], u32 (&out)[4]) {
#ifdef __CUDA_ARCH__
  out[0] = __byte_perm(r[0], r[2], 0x5410);
  out[1] = __byte_perm(r[0], r[2], 0x7632);
  out[2] = __byte_perm(r[1], r[3], 0x5410);
  out[3] = __byte_perm(r[1], r[3], 0x7632);
#else
  out[0] = (r[0] & 0xFFFFu) | r[2] << 16;
  out[1] = r[0] >> 16 | (r[2] & 0xFFFF0000u);
  out[2] = (r[1] & 0xFFFFu) | r[3] << 16;
  out[3] = r[1] >> 16 | (r[3] & 0xFFFF0000u);
#endif
}

// float32 -> bfloat16 bits, nearest even, NaN as BF16_NAN.
__device__ __forceinline__ u32 bf16_out(float v) {
  const u32 b = quant::as_bits(v);
  return (b & quant::ABS_MASK) > quant::INF_BITS ? BF16_NAN : quant::bf16_rne(b);
}

}  // namespace fp4
}  // namespace tb
