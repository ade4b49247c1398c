// Family gemm (0-based, row-major, leading dimensions in elements):
//
//   D[m, n] = epilogue(alpha * sum_k A[m, k] * B[k, n])   for m < M, n < N, k < K
//
// A (M x lda) and B (K x ldb) are bfloat16 bits, the sum is float32, D (M x ldd) is bfloat16 or
// float32 (O = Cfg::O); epilogue is the identity or ReLU (Cfg::RELU). Elements of D at n >= N (up to
// ldd) are never written; elements of A at k >= K and of B at n >= N never reach D. Each kernel takes
// its configuration as one struct, `template <class Cfg>`, read by name (Cfg::BM, ...; the templates
// of tunebox/families/gemm/ render it), and its arguments as one struct passed by value,
// `const __grid_constant__ typename Cfg::Args a` (pad_rows: `Cfg::pad_rows_args`; the templates'
// `args` name the members, tunebox/families/kernel_args.py renders the struct). Each kernel is a thin
// wrapper handing the members to its body (`<kernel>_body`, with the old parameter list, restrict
// qualifiers included); tensor maps go to the body by reference, so TMA reads them in the kernel's
// parameter space (never a copy: ptxas reports no stack frame). Two kernels:
//
// `gemm`, the bounded mma.sync path (template mma). Block (bm, bn) computes the BM x BN tile of D
// at (bm * BM, bn * BN) with WM x WN warps (Cfg::WARPS_M x Cfg::WARPS_N), each owning a (BM / WM) x
// (BN / WN) warp tile of 16 x 8 MMA tiles (m16n8k16), over K in steps of BK through STAGES
// shared-memory buffers filled by cp.async. The shared tiles keep the fragment loads of a warp off
// each other's banks in one of two ways (SWIZZLE): rows padded by 8 elements (16 bytes;
// SWIZZLE = 0), or unpadded rows whose 16-byte chunks are permuted within each 128-byte line by the
// TMA swizzle pattern of SWIZZLE = 32, 64 or 128 bytes (tb::swizzled_offset; which one avoids conflicts
// depends on the tile widths). A 16-byte chunk (8 elements) of A or B moves by one cp.async when it
// lies inside the matrix and is 16-byte aligned; otherwise element by element with zeros outside
// (the bounded copy's mixed path). BOUNDS = false promises full tiles
// (M % BM = N % BN = K % BK = 0) and 16-byte aligned rows: every chunk is a cp.async, no test.
//
// `gemm_wgmma`, the Hopper path (sm_90a; templates wgmma and padded): one producer warpgroup whose
// first thread streams K in steps of 64 through STAGES shared-memory buffers with TMA (A as one
// BM x 64 box, B as BN / 64 boxes of 64 x 64, all with the 128-byte swizzle; the tensor maps' bounds
// zero-fill past M, N and K), and CONSUMERS warpgroups that each multiply BM / CONSUMERS rows of
// the tile by all BN columns with wgmma m64nBNk16 (A K-major, B N-major, straight from the swizzled
// buffers), keeping one stage's products in flight while the next stage's are issued. Buffers cycle
// through a full and an empty mbarrier each; a buffer is released once the products reading it are
// done. A block may take several tiles in turn (the grid is smaller than the tile count),
// overlapping one tile's epilogue with the next one's loads. The tensor maps need 16-byte aligned
// rows; the template padded first copies A and/or B into workspace rows of ceil(cols / 8) * 8
// elements with `pad_rows` (one launch). BOUNDS = false promises full tiles of D
// (M % BM = N % BN = 0): the epilogue stores without tests.
#include "tunebox/async_copy.cuh"
#include "tunebox/mma.cuh"
#include "tunebox/tma.cuh"
#include "tunebox/gemm_tiles.cuh"
#include "tunebox/pad_rows.cuh"

namespace {

using namespace tb;

// B fragment of the 16 x 8 block at (k0, n0) of a BK x BN tile (layout SWIZZLE): ldmatrix.x2.trans
// gives lane (g = lane / 4, t = lane % 4) the pairs (k = 2t, 2t + 1; n = g) of rows k0 .. k0 + 7 and
// k0 + 8 .. k0 + 15.
template <int BN, int SWIZZLE>
__device__ __forceinline__ void load_b_fragment(const u16* s, int k0, int n0, u32* b) {
  const int lane = threadIdx.x % 32;
  const u16* row = s + tile_index<BN, SWIZZLE>(k0 + (lane % 16), n0);
  ldmatrix_x2_trans(row, b);
}

constexpr int WG_BK = 64;  // K per stage: one 128-byte swizzle row of bfloat16

}  // namespace

// The dynamic shared memory (Cfg::SHARED_BYTES) holds STAGES buffers of an A and a B tile.
template <class Cfg>
__device__ __forceinline__ void gemm_body(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B,
                                          typename Cfg::O* __restrict__ D, long long M, long long N, long long K,
                                          long long lda, long long ldb, long long ldd, float alpha) {
  using O = typename Cfg::O;
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, WM = Cfg::WARPS_M, WN = Cfg::WARPS_N;
  constexpr int STAGES = Cfg::STAGES, SWIZZLE = Cfg::SWIZZLE;
  constexpr bool BOUNDS = Cfg::BOUNDS, RELU = Cfg::RELU;
  constexpr int THREADS = WM * WN * 32;
  constexpr int WTM = BM / WM, WTN = BN / WN;  // warp tile
  constexpr int MT = WTM / 16, NT = WTN / 8;   // MMA tiles per warp
  constexpr int A_ELEMENTS = BM * pitch<BK, SWIZZLE>();
  constexpr int STAGE = A_ELEMENTS + BK * pitch<BN, SWIZZLE>();
  static_assert(WTM % 16 == 0 && WTN % 8 == 0 && BK % 16 == 0, "warp tiles of whole MMA tiles");
  static_assert(STAGES * STAGE * sizeof(u16) <= Cfg::SHARED_BYTES, "the stages fit in the dynamic shared memory");
  extern __shared__ __align__(16) u16 smem[];

  const i64 m0 = (i64)blockIdx.y * BM, n0 = (i64)blockIdx.x * BN;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int wm = warp / WN, wn = warp % WN;
  const bool a_vec = (lda % 8) == 0 && ((u64)A % 16) == 0;
  const bool b_vec = (ldb % 8) == 0 && ((u64)B % 16) == 0;
  const i64 tiles = (K + BK - 1) / BK;

  float acc[MT][NT][4];
  zero_fragments(acc);

  auto load_stage = [&](i64 kt, int stage) {
    u16* s = smem + stage * STAGE;
    load_tile<BM, BK, SWIZZLE, THREADS, BOUNDS>(A, M, K, lda, m0, kt * BK, s, a_vec);
    load_tile<BK, BN, SWIZZLE, THREADS, BOUNDS>(B, K, N, ldb, kt * BK, n0, s + A_ELEMENTS, b_vec);
  };

  cp_async_ring<STAGES>(tiles, load_stage, [&](i64, int stage) {
    const u16* sa = smem + stage * STAGE;
    const u16* sb = sa + A_ELEMENTS;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      u32 a[MT][4], b[NT][2];
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        const int r = wm * WTM + i * 16 + g, c = kk + 2 * t;
        a[i][0] = *reinterpret_cast<const u32*>(sa + tile_index<BK, SWIZZLE>(r, c));
        a[i][1] = *reinterpret_cast<const u32*>(sa + tile_index<BK, SWIZZLE>(r + 8, c));
        a[i][2] = *reinterpret_cast<const u32*>(sa + tile_index<BK, SWIZZLE>(r, c + 8));
        a[i][3] = *reinterpret_cast<const u32*>(sa + tile_index<BK, SWIZZLE>(r + 8, c + 8));
      }
#pragma unroll
      for (int j = 0; j < NT; ++j) load_b_fragment<BN, SWIZZLE>(sb, kk, wn * WTN + j * 8, b[j]);
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j) mma_bf16(acc[i][j], a[i], b[j]);
    }
  });

  const bool paired = pairs_aligned(D, ldd);
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        store_pair<O, BOUNDS, RELU>(D, M, N, ldd, m0 + wm * WTM + i * 16 + g + 8 * h, n0 + wn * WTN + j * 8 + 2 * t,
                                    acc[i][j][2 * h], acc[i][j][2 * h + 1], alpha, paired);
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::WARPS_M * Cfg::WARPS_N * 32) gemm(const __grid_constant__ typename Cfg::Args a) {
  gemm_body<Cfg>(a.A, a.B, a.D, a.M, a.N, a.K, a.lda, a.ldb, a.ldd, a.alpha);
}

// One block computes the tiles blockIdx.x, blockIdx.x + gridDim.x, ... of D (row-major tile order,
// tiles of N fastest): with more than one tile per block the producer streams the next tile's K steps
// through the ring while the consumers store the previous tile, so pipeline fill and epilogue overlap
// with products. The ring's mbarrier phases run on over the block's tiles (`step` counts K steps).
// The dynamic shared memory (Cfg::SHARED_BYTES) holds STAGES stages plus up to 1024 bytes of alignment.
// The tensor maps are references to the kernel's __grid_constant__ parameter: TMA reads them there.
template <class Cfg>
__device__ __forceinline__ void gemm_wgmma_body(const tb::TensorMap& a_map, const tb::TensorMap& b_map,
                                                typename Cfg::O* __restrict__ D, long long M, long long N,
                                                long long K, long long ldd, float alpha) {
  using O = typename Cfg::O;
  constexpr int BM = Cfg::BM, BN = Cfg::BN, CONSUMERS = Cfg::CONSUMERS, STAGES = Cfg::STAGES;
  constexpr bool BOUNDS = Cfg::BOUNDS, RELU = Cfg::RELU;
  constexpr int MT = BM / 64 / CONSUMERS;             // m64 tiles per consumer warpgroup
  constexpr int A_BYTES = BM * WG_BK * 2;             // one BM x 64 box
  constexpr int B_BOX = WG_BK * 64 * 2;               // one 64 x 64 box of B (8 KiB)
  constexpr int STAGE = A_BYTES + (BN / 64) * B_BOX;  // multiple of 1024
  static_assert(BM % (64 * CONSUMERS) == 0 && BN % 64 == 0 && BN <= 256, "whole wgmma tiles");
  static_assert(STAGES * STAGE + 1024 <= Cfg::SHARED_BYTES, "the stages and their alignment fit in shared memory");
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) u64 full[STAGES], empty[STAGES];
  unsigned char* smem = smem_raw + ((1024 - (shared_address(smem_raw) & 1023)) & 1023);  // swizzle period

  const int warpgroup = threadIdx.x / 128, tid = threadIdx.x % 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbarrier_init(&full[s], 1);
      mbarrier_init(&empty[s], CONSUMERS);
    }
  }
  __syncthreads();
  const int k_steps = (int)((K + WG_BK - 1) / WG_BK);
  const int tiles_n = (int)((N + BN - 1) / BN), tiles = tiles_n * (int)((M + BM - 1) / BM);

  if (warpgroup == 0) {  // producer
    if constexpr (CONSUMERS > 1) asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (tid == 0) {
      int step = 0;
      for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const int m0 = tile / tiles_n * BM, n0 = tile % tiles_n * BN;
        for (int kt = 0; kt < k_steps; ++kt, ++step) {
          const int s = step % STAGES;
          if (step >= STAGES) mbarrier_wait(&empty[s], (step / STAGES - 1) & 1);
          unsigned char* stage = smem + s * STAGE;
          mbarrier_expect_tx(&full[s], STAGE);
          tma_load_2d(stage, &a_map, kt * WG_BK, m0, &full[s]);
#pragma unroll
          for (int j = 0; j < BN / 64; ++j)
            tma_load_2d(stage + A_BYTES + j * B_BOX, &b_map, n0 + 64 * j, kt * WG_BK, &full[s]);
        }
      }
    }
    return;
  }

  if constexpr (CONSUMERS > 1) asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
  const int consumer = warpgroup - 1;
  const int warp = tid / 32, g = (tid % 32) / 4, t = tid % 4;
  const bool paired = pairs_aligned(D, ldd);
  float acc[MT][BN / 2];
  int step = 0;
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int m0 = tile / tiles_n * BM, n0 = tile % tiles_n * BN;
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int e = 0; e < BN / 2; ++e) acc[i][e] = 0.f;

    for (int kt = 0; kt < k_steps; ++kt, ++step) {
      const int s = step % STAGES;
      mbarrier_wait(&full[s], (step / STAGES) & 1);
      const unsigned char* stage = smem + s * STAGE;
#pragma unroll
      for (int i = 0; i < MT; ++i) pin_registers<BN / 2>(acc[i]);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < WG_BK / 16; ++kk) {
        // B: 16 rows of every 64-column box (boxes B_BOX apart, 8-row groups 1024 bytes apart).
        const u64 b = wgmma_descriptor(stage + A_BYTES + kk * 16 * 128, B_BOX, 1024);
#pragma unroll
        for (int i = 0; i < MT; ++i) {
          // A: 64 rows of 128 bytes (8-row groups 1024 bytes apart), 16 elements in from column kk * 16.
          const u64 a = wgmma_descriptor(stage + (consumer * MT + i) * 64 * 128 + kk * 32, 16, 1024);
          Wgmma<BN>::run(acc[i], a, b);
        }
      }
      wgmma_commit();
      wgmma_wait<1>();  // this stage's products may still run; the previous stage's are done
      if (tid == 0 && kt > 0) mbarrier_arrive(&empty[(step - 1) % STAGES]);
    }
    wgmma_wait<0>();
    if (tid == 0) mbarrier_arrive(&empty[(step - 1) % STAGES]);  // the tile's last stage
#pragma unroll
    for (int i = 0; i < MT; ++i) pin_registers<BN / 2>(acc[i]);

#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < BN / 8; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          store_pair<O, BOUNDS, RELU>(D, M, N, ldd, (i64)m0 + (consumer * MT + i) * 64 + warp * 16 + g + 8 * h,
                                      (i64)n0 + j * 8 + 2 * t, acc[i][4 * j + 2 * h], acc[i][4 * j + 2 * h + 1],
                                      alpha, paired);
  }
}

template <class Cfg>
__global__ void __launch_bounds__(128 * (Cfg::CONSUMERS + 1))
    gemm_wgmma(const __grid_constant__ typename Cfg::Args a) {
  gemm_wgmma_body<Cfg>(a.a_map, a.b_map, a.D, a.M, a.N, a.K, a.ldd, a.alpha);
}
