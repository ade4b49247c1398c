// The gemm kernels' shared tiles and stores (kernels/gemm/gemm.cu's mma path and gemm_decode.cu):
// the layouts of a shared tile (rows padded, or 16-byte chunks swizzled), the bounded tile copy into
// it, and the epilogue's bounded stores of D.
#pragma once

#include "tunebox/async_copy.cuh"
#include "tunebox/tma.cuh"

namespace {

using namespace tb;

constexpr int PAD = 8;  // elements of padding per shared row (SWIZZLE = 0)

// Elements of one row of a shared tile of COLS columns, padding included.
template <int COLS, int SWIZZLE>
constexpr int pitch() {
  return SWIZZLE ? COLS : COLS + PAD;
}

// Index of element (r, c) of a shared tile of COLS columns in the layout SWIZZLE picks. The 16-byte
// chunks (8 aligned elements) stay contiguous in every layout.
template <int COLS, int SWIZZLE>
__device__ __forceinline__ int tile_index(int r, int c) {
  if constexpr (SWIZZLE == 0) {
    return r * (COLS + PAD) + c;
  } else {
    return (int)(swizzled_offset<SWIZZLE>((u32)(r * COLS + c) * 2) / 2);
  }
}

// Copies the ROWS x COLS tile at (r0, c0) of the R x C matrix g (leading dimension ld) into shared
// s (layout SWIZZLE), zero outside the matrix. `vec_ok`: rows may move in 16-byte chunks.
template <int ROWS, int COLS, int SWIZZLE, int THREADS, bool BOUNDS>
__device__ __forceinline__ void load_tile(const u16* __restrict__ g, i64 R, i64 C, i64 ld, i64 r0, i64 c0, u16* s,
                                          bool vec_ok) {
  constexpr int CHUNKS = ROWS * COLS / 8;
#pragma unroll
  for (int i = threadIdx.x; i < CHUNKS; i += THREADS) {
    const int r = i / (COLS / 8), c = (i % (COLS / 8)) * 8;
    u16* dst = s + tile_index<COLS, SWIZZLE>(r, c);
    const i64 gr = r0 + r, gc = c0 + c;
    cp_async_or_elements<8>(
        !BOUNDS || (vec_ok && gr < R && gc + 8 <= C), g, gr * ld + gc, [&](int e) -> u16& { return dst[e]; },
        [&](int e) { return gr < R && gc + e < C; }, u16(0));
  }
}

__device__ __forceinline__ u32 bf16_bits(float v) {
  u32 bits = __float_as_uint(v);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return 0x7fc0u;  // NaN stays NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);                    // round to nearest even
  return bits >> 16;
}

// Stores epilogue(alpha * v0) at D[r, c] and epilogue(alpha * v1) at D[r, c + 1] (c even), each only
// inside M x N when BOUNDS; `paired`: one 2-element store is aligned (ldd even, D aligned to it).
template <typename O, bool BOUNDS, bool RELU>
__device__ __forceinline__ void store_pair(O* D, i64 M, i64 N, i64 ldd, i64 r, i64 c, float v0, float v1,
                                           float alpha, bool paired) {
  if (BOUNDS && r >= M) return;
  v0 *= alpha;
  v1 *= alpha;
  if (RELU) {
    v0 = v0 > 0.f ? v0 : 0.f;
    v1 = v1 > 0.f ? v1 : 0.f;
  }
  O* out = D + r * ldd + c;
  const bool both = !BOUNDS || c + 1 < N;
  if constexpr (sizeof(O) == 2) {
    if (both && paired) {
      *reinterpret_cast<u32*>(out) = bf16_bits(v0) | (bf16_bits(v1) << 16);
      return;
    }
    if (!BOUNDS || c < N) out[0] = (O)bf16_bits(v0);
    if (both) out[1] = (O)bf16_bits(v1);
  } else {
    if (both && paired) {
      *reinterpret_cast<uint2*>(out) = make_uint2(__float_as_uint(v0), __float_as_uint(v1));
      return;
    }
    if (!BOUNDS || c < N) out[0] = __float_as_uint(v0);
    if (both) out[1] = __float_as_uint(v1);
  }
}

// Whether D's rows keep 2-element stores aligned.
template <typename O>
__device__ __forceinline__ bool pairs_aligned(const O* D, i64 ldd) {
  return ldd % 2 == 0 && (u64)D % (2 * sizeof(O)) == 0;
}

}  // namespace
