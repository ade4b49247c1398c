// Family gemm (kernels/gemm/gemm.cu states the operation and the argument conventions), template
// decode: few rows of A (tokens), so the time is B's to read, and the operands swap roles on the
// tensor cores (mma.sync m16n8k16): D's columns are the mma's rows, B's K x BN tile read transposed by
// ldmatrix.trans as its A operand, and the tokens its columns (A's TOKENS x BK tile as its B operand).
//
// Block (x, y, z) computes D's columns x * BN .. x * BN + BN - 1 for tokens z * TOKENS .., over the
// y-th of SPLITS ranges of K's steps of BK (the steps cut as evenly as whole steps allow). Its warps,
// WARPS_N along the columns (BN / WARPS_N each) by WARPS_K along K (every WARPS_K-th k16 slice of a
// step), read the step's tiles from STAGES shared-memory buffers, filled one of two ways (Cfg::TMA):
// - cp.async (`gemm_decode`; tb::cp_async_ring and gemm_tiles.cuh's bounded tile copy: 16-byte
//   chunks where inside and aligned, elements with zeros past M, N and K otherwise, so any leading
//   dimension works), in the tile layout SWIZZLE picks;
// - TMA (`gemm_decode_tma`; 16-byte aligned rows of A and B): one thread issues each step's boxes
//   (B as BN / 64 boxes of BK x 64, A as BK / 64 boxes of TOKENS x 64, 128-byte swizzle, zeros past
//   M, N and K) STAGES - 1 steps ahead, completing on the buffer's mbarrier; the block waits on it.
// The warps' float32 sums, then the SPLITS blocks' (one thread-block cluster along y, through
// distributed shared memory), are added in a fixed order (tunebox/split_sums.cuh): D is the same from
// run to run, with no workspace and one launch. The epilogue (alpha, ReLU, bfloat16 or float32)
// stores pairs of columns.
#include "tunebox/async_copy.cuh"
#include "tunebox/gemm_tiles.cuh"
#include "tunebox/mma.cuh"
#include "tunebox/split_sums.cuh"
#include "tunebox/tma.cuh"

namespace {

// Index of element (r, c) of a ROWS x COLS tile stored as COLS / 64 TMA boxes of ROWS x 64 with the
// 128-byte swizzle, each 1024-byte aligned.
template <int ROWS>
__device__ __forceinline__ int boxed_index(int r, int c) {
  return c / 64 * ROWS * 64 + (int)(swizzled_offset<128>((u32)(r * 128 + c % 64 * 2)) / 2);
}

// A STAGES-deep TMA pipeline over steps 0 .. count - 1 run by every thread of the block (the ring
// of tb::cp_async_ring, with mbarriers): thread 0 calls load(step, buffer, bar) STAGES - 1 steps ahead
// to issue a step's boxes into one of the buffers, completing on bar (one arrival with its bytes);
// compute(step, buffer) runs once the buffer is full, and a block barrier after it frees the buffer.
template <int STAGES, class Load, class Compute>
__device__ __forceinline__ void tma_ring(u64* full, i64 count, Load load, Compute compute) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) mbarrier_init(&full[s], 1);
    for (int s = 0; s < STAGES - 1; ++s)
      if (s < count) load((i64)s, s, &full[s]);
  }
  __syncthreads();
  for (i64 step = 0; step < count; ++step) {
    const i64 next = step + STAGES - 1;
    if (threadIdx.x == 0 && next < count) load(next, (int)(next % STAGES), &full[next % STAGES]);
    mbarrier_wait(&full[step % STAGES], (u32)(step / STAGES) & 1);
    compute(step, (int)(step % STAGES));
    __syncthreads();
  }
}

}  // namespace

// The dynamic shared memory (Cfg::SHARED_BYTES) holds the ring's STAGES buffers of a B and an A tile
// (TMA: 1024-byte aligned, up to 1024 bytes spent aligning), then the WARPS_K partial sums (TOKENS x
// (BN + 4) float32 each). `a_map` and `b_map` are read with TMA only, A and B with cp.async only.
template <class Cfg>
__device__ __forceinline__ void gemm_decode_body(const tb::TensorMap* a_map, const tb::TensorMap* b_map,
                                                 const unsigned short* __restrict__ A,
                                                 const unsigned short* __restrict__ B, typename Cfg::O* __restrict__ D,
                                                 long long M, long long N, long long K, long long lda, long long ldb,
                                                 long long ldd, float alpha) {
  using O = typename Cfg::O;
  constexpr int BN = Cfg::BN, TOK = Cfg::TOKENS, BK = Cfg::BK, WN = Cfg::WARPS_N, WK = Cfg::WARPS_K;
  constexpr int STAGES = Cfg::STAGES, SPLITS = Cfg::SPLITS, SWIZZLE = Cfg::SWIZZLE;
  constexpr bool TMA = Cfg::TMA;
  constexpr int THREADS = WN * WK * 32, WTN = BN / WN, MT = WTN / 16, NT = TOK / 8;
  constexpr int B_ELEMENTS = TMA ? BK * BN : BK * pitch<BN, SWIZZLE>();
  constexpr int STAGE = B_ELEMENTS + (TMA ? TOK * BK : TOK * pitch<BK, SWIZZLE>());
  constexpr int ALIGN = TMA ? 1024 : 0;
  constexpr int PITCH = BN + 4;  // floats a token of a partial tile: its rows off the banks of the next
  static_assert(WTN % 16 == 0 && TOK % 8 == 0 && BK % (16 * WK) == 0, "warps of whole mma tiles and k16 slices");
  static_assert(!TMA || (BN % 64 == 0 && BK % 64 == 0 && SWIZZLE == 128), "TMA tiles of whole 128-byte boxes");
  static_assert(STAGES * STAGE * 2 + ALIGN <= Cfg::SHARED_BYTES && WK * TOK * PITCH * 4 <= Cfg::SHARED_BYTES,
                "the ring and the partial sums fit in the dynamic shared memory");
  extern __shared__ __align__(1024) u16 smem_raw[];
  __shared__ __align__(8) u64 full[TMA ? STAGES : 1];
  u16* smem = TMA ? smem_raw + ((1024 - (shared_address(smem_raw) & 1023)) & 1023) / 2 : smem_raw;

  const i64 n0 = (i64)blockIdx.x * BN, m0 = (i64)blockIdx.z * TOK;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, wn = warp % WN, wk = warp / WN;
  const i64 steps = (K + BK - 1) / BK, per = (steps + SPLITS - 1) / SPLITS;
  const i64 begin = min(steps, (i64)blockIdx.y * per), end = min(steps, begin + per);

  float acc[MT][NT][4];
  zero_fragments(acc);

  auto b_index = [](int k, int n) { return TMA ? boxed_index<BK>(k, n) : tile_index<BN, SWIZZLE>(k, n); };
  auto a_index = [](int m, int k) { return TMA ? boxed_index<TOK>(m, k) : tile_index<BK, SWIZZLE>(m, k); };
  auto compute = [&](i64, int buffer) {
    const u16* sb = smem + buffer * STAGE;
    const u16* sa = sb + B_ELEMENTS;
#pragma unroll
    for (int kk = wk * 16; kk < BK; kk += 16 * WK) {
      u32 a[MT][4], b[NT][2];  // b: ldmatrix_x4 fills two tiles' fragments at once
#pragma unroll
      for (int i = 0; i < MT; ++i)
        ldmatrix_x4_trans(sb + b_index(kk + lane % 8 + 8 * (lane / 16), wn * WTN + i * 16 + 8 * (lane / 8 % 2)), a[i]);
      if constexpr (NT == 1) {
        ldmatrix_x2(sa + a_index(lane % 8, kk + 8 * (lane / 8 % 2)), b[0]);
      } else {
#pragma unroll
        for (int j = 0; j < NT; j += 2)
          ldmatrix_x4(sa + a_index(j * 8 + lane % 8 + 8 * (lane / 16), kk + 8 * (lane / 8 % 2)), &b[j][0]);
      }
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j) mma_bf16(acc[i][j], a[i], b[j]);
    }
  };
  if constexpr (TMA) {
    auto load = [&](i64 step, int buffer, u64* bar) {
      u16* s = smem + buffer * STAGE;
      const int k0 = (int)((begin + step) * BK);
      mbarrier_expect_tx(bar, STAGE * 2);
#pragma unroll
      for (int j = 0; j < BN / 64; ++j) tma_load_2d(s + j * BK * 64, b_map, (int)n0 + 64 * j, k0, bar);
#pragma unroll
      for (int j = 0; j < BK / 64; ++j) tma_load_2d(s + B_ELEMENTS + j * TOK * 64, a_map, k0 + 64 * j, (int)m0, bar);
    };
    tma_ring<STAGES>(full, end - begin, load, compute);
  } else {
    const bool a_vec = lda % 8 == 0 && (u64)A % 16 == 0, b_vec = ldb % 8 == 0 && (u64)B % 16 == 0;
    auto load = [&](i64 step, int buffer) {
      u16* s = smem + buffer * STAGE;
      const i64 k0 = (begin + step) * BK;
      load_tile<BK, BN, SWIZZLE, THREADS, true>(B, K, N, ldb, k0, n0, s, b_vec);
      load_tile<TOK, BK, SWIZZLE, THREADS, true>(A, M, K, lda, m0, k0, s + B_ELEMENTS, a_vec);
    };
    cp_async_ring<STAGES>(end - begin, load, compute);
  }

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
  gemm_decode_body<Cfg>(nullptr, nullptr, a.A, a.B, a.D, a.M, a.N, a.K, a.lda, a.ldb, a.ldd, a.alpha);
}

template <class Cfg>
__global__ void __cluster_dims__(1, Cfg::SPLITS, 1) __launch_bounds__(Cfg::WARPS_N * Cfg::WARPS_K * 32)
    gemm_decode_tma(const __grid_constant__ typename Cfg::Args a) {
  gemm_decode_body<Cfg>(&a.a_map, &a.b_map, nullptr, nullptr, a.D, a.M, a.N, a.K, 0, 0, a.ldd, a.alpha);
}
