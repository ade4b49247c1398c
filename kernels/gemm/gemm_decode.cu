// Family gemm (kernels/gemm/gemm.cu states the operation and the argument conventions), template
// decode: few rows of A (tokens), so the time is B's to read, and the operands swap roles on the
// tensor cores (mma.sync m16n8k16): D's columns are the mma's rows, B's K x BN tile read transposed by
// ldmatrix.trans as its A operand, and the tokens its columns (A's TOKENS x BK tile as its B operand).
//
// Block (x, y, z) computes D's columns x * BN .. x * BN + BN - 1 for tokens z * TOKENS .., over the
// y-th of SPLITS ranges of K's steps of BK (the steps cut as evenly as whole steps allow). Its warps,
// WARPS_N along the columns (BN / WARPS_N each) by WARPS_K along K (every WARPS_K-th k16 slice of a
// step), read the step's tiles from STAGES shared-memory buffers that cp.async fills
// (tb::cp_async_ring; gemm_tiles.cuh's bounded tile copy: 16-byte chunks where inside and aligned,
// elements with zeros past M, N and K otherwise, so any leading dimension works). The warps' float32
// sums, then the SPLITS blocks' (one thread-block cluster along y, through distributed shared memory),
// are added in a fixed order (tunebox/split_sums.cuh): D is the same from run to run, with no workspace
// and one launch. The epilogue (alpha, ReLU, bfloat16 or float32) stores pairs of columns.
#include "tunebox/async_copy.cuh"
#include "tunebox/gemm_tiles.cuh"
#include "tunebox/mma.cuh"
#include "tunebox/split_sums.cuh"

// The dynamic shared memory (Cfg::SHARED_BYTES) holds the ring's STAGES buffers of a B and an A tile,
// then the WARPS_K partial sums (TOKENS x (BN + 4) float32 each).
template <class Cfg>
__device__ __forceinline__ void gemm_decode_body(const unsigned short* __restrict__ A,
                                                 const unsigned short* __restrict__ B, typename Cfg::O* __restrict__ D,
                                                 long long M, long long N, long long K, long long lda, long long ldb,
                                                 long long ldd, float alpha) {
  using O = typename Cfg::O;
  constexpr int BN = Cfg::BN, TOK = Cfg::TOKENS, BK = Cfg::BK, WN = Cfg::WARPS_N, WK = Cfg::WARPS_K;
  constexpr int STAGES = Cfg::STAGES, SPLITS = Cfg::SPLITS, SWIZZLE = Cfg::SWIZZLE;
  constexpr int THREADS = WN * WK * 32, WTN = BN / WN, MT = WTN / 16, NT = TOK / 8;
  constexpr int B_ELEMENTS = BK * pitch<BN, SWIZZLE>(), STAGE = B_ELEMENTS + TOK * pitch<BK, SWIZZLE>();
  constexpr int PITCH = BN + 4;  // floats a token of a partial tile: its rows off the banks of the next
  static_assert(WTN % 16 == 0 && TOK % 8 == 0 && BK % (16 * WK) == 0, "warps of whole mma tiles and k16 slices");
  static_assert(STAGES * STAGE * 2 <= Cfg::SHARED_BYTES && WK * TOK * PITCH * 4 <= Cfg::SHARED_BYTES,
                "the ring and the partial sums fit in the dynamic shared memory");
  extern __shared__ __align__(16) u16 smem[];

  const i64 n0 = (i64)blockIdx.x * BN, m0 = (i64)blockIdx.z * TOK;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int wn = warp % WN, wk = warp / WN;
  const bool a_vec = lda % 8 == 0 && (u64)A % 16 == 0, b_vec = ldb % 8 == 0 && (u64)B % 16 == 0;
  const i64 steps = (K + BK - 1) / BK, per = (steps + SPLITS - 1) / SPLITS;
  const i64 begin = min(steps, (i64)blockIdx.y * per), end = min(steps, begin + per);

  float acc[MT][NT][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  auto load = [&](i64 step, int buffer) {
    u16* s = smem + buffer * STAGE;
    const i64 k0 = (begin + step) * BK;
    load_tile<BK, BN, SWIZZLE, THREADS, true>(B, K, N, ldb, k0, n0, s, b_vec);
    load_tile<TOK, BK, SWIZZLE, THREADS, true>(A, M, K, lda, m0, k0, s + B_ELEMENTS, a_vec);
  };
  auto compute = [&](i64, int buffer) {
    const u16* sb = smem + buffer * STAGE;
    const u16* sa = sb + B_ELEMENTS;
#pragma unroll
    for (int kk = wk * 16; kk < BK; kk += 16 * WK) {
      u32 a[MT][4], b[NT][2];
#pragma unroll
      for (int i = 0; i < MT; ++i)
        ldmatrix_x4_trans(sb + tile_index<BN, SWIZZLE>(kk + lane % 8 + 8 * (lane / 16),
                                                         wn * WTN + i * 16 + 8 * (lane / 8 % 2)),
                          a[i]);
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        b[j][0] = *reinterpret_cast<const u32*>(sa + tile_index<BK, SWIZZLE>(j * 8 + g, kk + 2 * t));
        b[j][1] = *reinterpret_cast<const u32*>(sa + tile_index<BK, SWIZZLE>(j * 8 + g, kk + 8 + 2 * t));
      }
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j) mma_bf16(acc[i][j], a[i], b[j]);
    }
  };
  cp_async_ring<STAGES>(end - begin, load, compute);

  float* sums = reinterpret_cast<float*>(smem);  // the ring is drained: its buffers hold the sums
  constexpr int SUMS = TOK * PITCH;
  store_fragment_sums<MT, NT, PITCH>(sums + wk * SUMS, acc, wn * WTN);
  const bool paired = pairs_aligned(D, ldd);
  add_split_sums<WK, TOK, BN, PITCH, SPLITS, THREADS, 2>(sums, [&](int token, int row, const float (&v)[2]) {
    store_pair<O, true, Cfg::RELU>(D, M, N, ldd, m0 + token, n0 + row, v[0], v[1], alpha, paired);
  });
}

template <class Cfg>
__global__ void __cluster_dims__(1, Cfg::SPLITS, 1) __launch_bounds__(Cfg::WARPS_N * Cfg::WARPS_K * 32)
    gemm_decode(const __grid_constant__ typename Cfg::Args a) {
  gemm_decode_body<Cfg>(a.A, a.B, a.D, a.M, a.N, a.K, a.lda, a.ldb, a.ldd, a.alpha);
}
