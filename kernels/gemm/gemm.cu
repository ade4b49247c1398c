// Family gemm, bounded mma.sync path (0-based, row-major, leading dimensions in elements):
//
//   D[m, n] = epilogue(alpha * sum_k A[m, k] * B[k, n])   for m < M, n < N, k < K
//
// A (M x lda) and B (K x ldb) are bfloat16 bits, the sum is float32 (mma.sync m16n8k16), D (M x ldd)
// is bfloat16 or float32; epilogue is the identity or ReLU. Elements of D at n >= N (up to ldd) are
// never written; elements of A at k >= K and of B at n >= N are never read.
//
// Block (bm, bn) computes the BM x BN tile of D at (bm * BM, bn * BN) with WM x WN warps, each
// owning a (BM / WM) x (BN / WN) warp tile of 16 x 8 MMA tiles, over K in steps of BK through
// STAGES shared-memory buffers filled by cp.async. Shared rows are padded by 8 elements (16 bytes)
// so the fragment loads of a warp hit distinct banks. A 16-byte chunk (8 elements) of A or B moves
// by one cp.async when it lies inside the matrix and is 16-byte aligned; otherwise element by
// element with zeros outside (the bounded copy's mixed path). BOUNDS = false promises full tiles
// (M % BM = N % BN = K % BK = 0) and 16-byte aligned rows: every chunk is a cp.async, no test.
#include "tunebox/tile.cuh"

namespace {

using namespace tb;

constexpr int PAD = 8;  // elements of padding per shared row

__device__ __forceinline__ u32 shared_u32(const void* p) { return (u32)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(shared_u32(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(PENDING) : "memory");
}

// Copies the ROWS x COLS tile at (r0, c0) of the R x C matrix g (leading dimension ld) into shared
// s (row pitch COLS + PAD), zero outside the matrix. `vec_ok`: rows may move in 16-byte chunks.
template <int ROWS, int COLS, int THREADS, bool BOUNDS>
__device__ __forceinline__ void load_tile(const u16* __restrict__ g, i64 R, i64 C, i64 ld, i64 r0, i64 c0, u16* s,
                                          bool vec_ok) {
  constexpr int CHUNKS = ROWS * COLS / 8;
#pragma unroll
  for (int i = threadIdx.x; i < CHUNKS; i += THREADS) {
    const int r = i / (COLS / 8), c = (i % (COLS / 8)) * 8;
    u16* dst = s + r * (COLS + PAD) + c;
    const i64 gr = r0 + r, gc = c0 + c;
    if (!BOUNDS || (vec_ok && gr < R && gc + 8 <= C)) {
      cp_async16(dst, g + gr * ld + gc);
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) dst[e] = (gr < R && gc + e < C) ? g[gr * ld + gc + e] : u16(0);
    }
  }
}

__device__ __forceinline__ void mma_bf16(float* d, const u32* a, const u32* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// B fragment of the 16 x 8 block at (k0, n0) of a [BK][BN + PAD] tile: ldmatrix.x2.trans gives
// lane (g = lane / 4, t = lane % 4) the pairs (k = 2t, 2t + 1; n = g) of rows k0 .. k0 + 7 and k0 + 8 .. k0 + 15.
template <int PITCH>
__device__ __forceinline__ void load_b_fragment(const u16* s, int k0, int n0, u32* b) {
  const int lane = threadIdx.x % 32;
  const u16* row = s + (k0 + (lane % 16)) * PITCH + n0;
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
               : "=r"(b[0]), "=r"(b[1])
               : "r"(shared_u32(row)));
}

__device__ __forceinline__ u32 bf16_bits(float v) {
  u32 bits = __float_as_uint(v);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return 0x7fc0u;  // NaN stays NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);                    // round to nearest even
  return bits >> 16;
}

}  // namespace

template <typename O, int BM, int BN, int BK, int WM, int WN, int STAGES, bool BOUNDS, bool RELU>
__global__ void __launch_bounds__(WM * WN * 32)
    gemm(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B, O* __restrict__ D, long long M,
         long long N, long long K, long long lda, long long ldb, long long ldd, float alpha) {
  constexpr int THREADS = WM * WN * 32;
  constexpr int WTM = BM / WM, WTN = BN / WN;  // warp tile
  constexpr int MT = WTM / 16, NT = WTN / 8;   // MMA tiles per warp
  constexpr int A_PITCH = BK + PAD, B_PITCH = BN + PAD;
  constexpr int STAGE = BM * A_PITCH + BK * B_PITCH;
  static_assert(WTM % 16 == 0 && WTN % 8 == 0 && BK % 16 == 0, "warp tiles of whole MMA tiles");
  extern __shared__ __align__(16) u16 smem[];

  const i64 m0 = (i64)blockIdx.y * BM, n0 = (i64)blockIdx.x * BN;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int wm = warp / WN, wn = warp % WN;
  const bool a_vec = (lda % 8) == 0 && ((u64)A % 16) == 0;
  const bool b_vec = (ldb % 8) == 0 && ((u64)B % 16) == 0;
  const i64 tiles = (K + BK - 1) / BK;

  float acc[MT][NT][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  auto load_stage = [&](i64 kt, int stage) {
    u16* s = smem + stage * STAGE;
    load_tile<BM, BK, THREADS, BOUNDS>(A, M, K, lda, m0, kt * BK, s, a_vec);
    load_tile<BK, BN, THREADS, BOUNDS>(B, K, N, ldb, kt * BK, n0, s + BM * A_PITCH, b_vec);
  };

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < tiles) load_stage(s, s);
    cp_async_commit();
  }
  for (i64 kt = 0; kt < tiles; ++kt) {
    const i64 next = kt + STAGES - 1;
    if (next < tiles) load_stage(next, (int)(next % STAGES));
    cp_async_commit();
    cp_async_wait<STAGES - 1>();
    __syncthreads();
    const u16* sa = smem + (int)(kt % STAGES) * STAGE;
    const u16* sb = sa + BM * A_PITCH;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      u32 a[MT][4], b[NT][2];
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        const u16* p = sa + (wm * WTM + i * 16 + g) * A_PITCH + kk + 2 * t;
        a[i][0] = *reinterpret_cast<const u32*>(p);
        a[i][1] = *reinterpret_cast<const u32*>(p + 8 * A_PITCH);
        a[i][2] = *reinterpret_cast<const u32*>(p + 8);
        a[i][3] = *reinterpret_cast<const u32*>(p + 8 * A_PITCH + 8);
      }
#pragma unroll
      for (int j = 0; j < NT; ++j) load_b_fragment<B_PITCH>(sb, kk, wn * WTN + j * 8, b[j]);
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j) mma_bf16(acc[i][j], a[i], b[j]);
    }
    __syncthreads();  // the stage is refilled by the next iteration's load
  }
  cp_async_wait<0>();

#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const i64 r = m0 + wm * WTM + i * 16 + g + (e / 2) * 8;
        const i64 c = n0 + wn * WTN + j * 8 + 2 * t + (e % 2);
        if (BOUNDS && (r >= M || c >= N)) continue;
        float v = alpha * acc[i][j][e];
        if (RELU) v = v > 0.f ? v : 0.f;
        if constexpr (sizeof(O) == 2)
          D[r * ldd + c] = (O)bf16_bits(v);
        else
          D[r * ldd + c] = __float_as_uint(v);
      }
}
