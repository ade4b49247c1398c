// tunebox block-scaled formats (family quant): element and scale encodings, bit for bit.
//
// The rules are stated in tunebox/families/quant/formats.py and reference.py; the numpy reference
// computes the same bits. Elements travel as float32 bits (bfloat16 bits shifted up 16, exact).
// Everything here is integer or IEEE float32 arithmetic (the kernels are compiled without fast-math:
// no flush to zero, correctly rounded division), so it also compiles for the host, where the unit
// tests run it against the reference (tests/unit/families/test_quant_device_math.py); only the fp8
// pair conversion has a device form of its own (cvt.rn.satfinite, sm_89+), the same rounding.
#pragma once

namespace tb {
namespace quant {

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;

enum Format { MXFP4 = 0, NVFP4 = 1, MXFP8_E4M3 = 2, MXFP8_E5M2 = 3 };

constexpr u32 ABS_MASK = 0x7FFFFFFFu;
constexpr u32 INF_BITS = 0x7F800000u;
constexpr u32 NAN_F32 = 0x7FC00000u;  // the NaN every dequantized NaN becomes (bfloat16: 0x7FC0)
constexpr float NV_E4M3_MIN = 0.015625f;  // 2^-6, the smallest normal e4m3: NVFP4's least block scale

__device__ __forceinline__ float as_float(u32 b) { return __uint_as_float(b); }
__device__ __forceinline__ u32 as_bits(float f) { return __float_as_uint(f); }

// Round float32 q to the nearest value of a float format with M mantissa bits and exponent bias
// BIAS (ties to even), magnitudes past the largest finite code MAXCODE saturating to it (an
// infinity too); the sign bit (at bit SIGN) is q's, zeros included. A float32 zero or subnormal
// (below 2^-126) rounds to zero in every format here.
template <int M, int BIAS, u32 MAXCODE, int SIGN>
__device__ __forceinline__ u32 float_rne(float q) {
  const u32 b = as_bits(q), a = b & ABS_MASK, sign = (b >> 31) << SIGN;
  const int e = (int)(a >> 23);
  if (e == 0) return sign;
  int t = e - 127;  // the exponent of q's binade, raised to the format's subnormal binade
  if (t < 1 - BIAS) t = 1 - BIAS;
  const int shift = t - M - (e - 150);  // q = sig * 2^(e - 150); the code's unit is 2^(t - M)
  const u32 sig = (a & 0x7FFFFFu) | 0x800000u;
  u32 n = 0;
  if (shift < 25) {  // sig < 2^24: from 25 on the quotient is below one half
    n = sig >> shift;
    const u32 rem = sig & ((1u << shift) - 1u), half = 1u << (shift - 1);
    n += (rem > half || (rem == half && (n & 1u))) ? 1u : 0u;
  }
  u32 code = ((u32)(t + BIAS - 1) << M) + n;  // a carry out of the mantissa moves up a binade
  return (code < MAXCODE ? code : MAXCODE) | sign;
}

// e2m1 code (bit 3 the sign) of float32 q, not a NaN: round to nearest even on {0, .5, 1, 1.5, 2, 3, 4, 6},
// saturating at 6 (an infinity too); float_rne<1, 1, 7, 3>'s rounding. |q| clamped to 6, plus c = 2^(e + 22)
// (e the exponent of its binade, at least 0), rounds to e2m1's spacing there, 2^(e - 1) (the sum's unit in the
// last place), ties to even; taking c back is exact. Times 2^-126 an e2m1 value is the float32 (subnormal
// below 1) whose bits 22..24 are its code. Mostly float arithmetic: a quantize's integer pipe is the busy one.
// __fadd_rn is never contracted or reassociated.
__device__ __forceinline__ u32 e2m1_encode(float q) {
  const float a = fminf(fabsf(q), 6.0f);
  const float c = as_float(as_bits(fmaxf(a, 1.0f)) & INF_BITS) * 0x1p22f;  // 2^(max(e, 0) + 22)
  const float r = __fadd_rn(__fadd_rn(a, c), -c);
  return as_bits(r * 0x1p-126f) >> 22 | (as_bits(q) >> 28 & 8u);
}

// Two fp8 codes (FMT MXFP8_E4M3 or MXFP8_E5M2) of finite float32 values, lo in bits 0-7 and hi in
// bits 8-15: round to nearest even, saturating at 448 / 57344, signs kept.
template <int FMT>
__device__ __forceinline__ u32 fp8_encode2(float lo, float hi) {
#ifdef __CUDA_ARCH__
  u16 r;
  if (FMT == MXFP8_E4M3)
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
#else
  if (FMT == MXFP8_E4M3) return float_rne<3, 7, 0x7Eu, 7>(lo) | float_rne<3, 7, 0x7Eu, 7>(hi) << 8;
  return float_rne<2, 15, 0x7Bu, 7>(lo) | float_rne<2, 15, 0x7Bu, 7>(hi) << 8;
#endif
}

// The MX shared scale (e8m0 code) of a block whose |x| maximum has float32 bits amax:
// X = floor(log2(amax)) - EMAX, at least -127, code X + 127; a NaN or infinite amax gives NaN (0xFF).
// floor(log2(amax)) is amax's biased exponent less 127 (and any amax below 2^-126 clamps to -127).
template <int EMAX>
__device__ __forceinline__ u32 e8m0_of_amax(u32 amax) {
  if (amax >= INF_BITS) return 0xFFu;
  const int code = (int)(amax >> 23) - EMAX;
  return code > 0 ? (u32)code : 0u;
}

// 2^-X of scale code c (c <= 254 - EMAX): a normal float32, so q = x * 2^-X is exact above 2^-126.
__device__ __forceinline__ float e8m0_inverse(u32 c) { return as_float((254u - c) << 23); }

// 2^X of scale code c (not 0xFF): 2^-127 for code 0 is a float32 subnormal, exact.
__device__ __forceinline__ float e8m0_value(u32 c) { return as_float(c ? c << 23 : 0x00400000u); }

// Values of element and scale codes, exact in float32: the code's exponent and mantissa fields are
// placed at float32's, then the bias difference is multiplied in (exact: the products are at
// least 2^-136). NaN and infinity codes are the callers' to test (e4m3: magnitude 0x7F; e5m2: 0x7C
// infinity, above it NaN).
__device__ __forceinline__ float e2m1_value(u32 c) {
  return as_float(((c & 7u) << 22) | ((c & 8u) << 28)) * 0x1p126f;
}
__device__ __forceinline__ float e4m3_value(u32 c) {
  return as_float(((c & 0x7Fu) << 20) | ((c & 0x80u) << 24)) * 0x1p120f;
}
__device__ __forceinline__ float e5m2_value(u32 c) {
  return as_float(((c & 0x7Fu) << 21) | ((c & 0x80u) << 24)) * 0x1p112f;
}

// float32 -> bfloat16 bits, round to nearest even (overflow to infinity); NaN is the caller's.
__device__ __forceinline__ u32 bf16_rne(u32 b) { return (b + 0x7FFFu + ((b >> 16) & 1u)) >> 16; }

// The NVFP4 block scale code (e4m3) of a finite block with |x| maximum amax, D = 6 * T (T the
// tensor scale): s = amax / D, clamped to [2^-6, 448] (a NaN s, 0 / 0 of an all-zero tensor,
// becomes 2^-6), rounded to e4m3 (ties to even; fp8_encode2's, a normal s in range).
__device__ __forceinline__ u32 nvfp4_scale(float amax, float D) {
  float s = amax / D;
  s = s > 448.0f ? 448.0f : (s >= NV_E4M3_MIN ? s : NV_E4M3_MIN);
  return fp8_encode2<MXFP8_E4M3>(s, 0.0f) & 0xFFu;
}

}  // namespace quant
}  // namespace tb
