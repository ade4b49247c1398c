// tunebox bfloat16 pairs: two bfloat16 values in a 32-bit word (element 0 in the low half) and sm_90's
// packed arithmetic on them, one instruction a pair: add, subtract, min, max and the rounding of two
// float32 values here (the multiply and `dup` are fp4.cuh's, which the quant_gemm kernels decode with).
// On the device each operation rounds once, to nearest even, from the exact result (subnormals kept).
// The host forms (for the unit tests, which run kernels on the host) compute in float32 and round that
// to bfloat16: the same bits wherever the float32 result is exact or lies no closer than 2^-24 of its
// own magnitude to a point halfway between two bfloat16 values, which every caller's operands here
// ensure (each says why); NaN results are unspecified.
#pragma once

namespace tb {
namespace bf16x2 {

typedef unsigned int u32;

#ifndef __CUDA_ARCH__
inline float half_value(u32 x, int h) {
  const u32 b = (x >> h & 0xFFFFu) << 16;
  float f;
  __builtin_memcpy(&f, &b, 4);
  return f;
}
inline u32 rounded_half(float r) {  // float32 to bfloat16 bits, nearest even
  u32 b;
  __builtin_memcpy(&b, &r, 4);
  return (b + 0x7FFFu + ((b >> 16) & 1u)) >> 16;
}
template <class F>
inline u32 each_half(u32 x, u32 y, F f) {
  const u32 lo = rounded_half(f(half_value(x, 0), half_value(y, 0)));
  return lo | rounded_half(f(half_value(x, 16), half_value(y, 16))) << 16;
}
#endif

__device__ __forceinline__ u32 add(u32 x, u32 y) {
#ifdef __CUDA_ARCH__
  u32 d;
  asm("add.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(x), "r"(y));
  return d;
#else
  return each_half(x, y, [](float a, float b) { return a + b; });
#endif
}

__device__ __forceinline__ u32 sub(u32 x, u32 y) {
#ifdef __CUDA_ARCH__
  u32 d;
  asm("sub.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(x), "r"(y));
  return d;
#else
  return each_half(x, y, [](float a, float b) { return a - b; });
#endif
}

// float32 lo and hi (no NaN) rounded to bfloat16, nearest even, as one pair (exact on the host too).
__device__ __forceinline__ u32 from_floats(float lo, float hi) {
#ifdef __CUDA_ARCH__
  u32 d;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
#else
  return rounded_half(lo) | rounded_half(hi) << 16;
#endif
}

// The smaller of each pair of nonnegative values.
__device__ __forceinline__ u32 min(u32 x, u32 y) {
#ifdef __CUDA_ARCH__
  u32 d;
  asm("min.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(x), "r"(y));
  return d;
#else
  return each_half(x, y, [](float a, float b) { return a < b ? a : b; });
#endif
}

// The larger of each pair of halves as unsigned 16-bit integers (for nonnegative bfloat16 values, the
// larger value).
__device__ __forceinline__ u32 max_u16(u32 x, u32 y) {
#ifdef __CUDA_ARCH__
  u32 d;
  asm("max.u16x2 %0, %1, %2;" : "=r"(d) : "r"(x), "r"(y));
  return d;
#else
  const u32 lo = (x & 0xFFFFu) > (y & 0xFFFFu) ? x & 0xFFFFu : y & 0xFFFFu;
  const u32 hi = (x >> 16) > (y >> 16) ? x >> 16 : y >> 16;
  return lo | hi << 16;
#endif
}

// The larger of each pair of halves as signed 16-bit integers.
__device__ __forceinline__ u32 max_s16(u32 x, u32 y) {
#ifdef __CUDA_ARCH__
  u32 d;
  asm("max.s16x2 %0, %1, %2;" : "=r"(d) : "r"(x), "r"(y));
  return d;
#else
  const short xl = (short)(x & 0xFFFFu), yl = (short)(y & 0xFFFFu), xh = (short)(x >> 16), yh = (short)(y >> 16);
  return (u32)(unsigned short)(xl > yl ? xl : yl) | (u32)(unsigned short)(xh > yh ? xh : yh) << 16;
#endif
}

}  // namespace bf16x2
}  // namespace tb
