// Family tile_copy, template "paired": a transpose of 2-byte elements, dst[i][j] = src[oy + j][ox + i],
// whose shared-memory transpose moves 32-bit words (tunebox/pairs.cuh).
//
// The source block of destination tile (i0, j0) is BN source rows x BM columns. A thread loads the same
// columns of source rows 2p and 2p + 1 and packs each column c into a pair word: destination row c,
// columns 2p and 2p + 1. The staged tile holds BN / 2 rows of BM words (layout STAGING of 4-byte words,
// tb::staged_index); destination row i reads words (q, i), q < BN / 2, and stores them in vectors.
// Bounds modes as tile_copy.cu's: FAST promises a full tile inside src with every row aligned; INTERIOR
// a full tile inside src (rows of any alignment); CHECKED nothing (a tail row without a partner pairs
// with the padding). Cfg as tile_copy.cu's (tunebox/families/tile_copy/paired.py renders it; T is 2
// bytes wide, VEC >= 2, TRANSPOSE true), Cfg::Args the same struct.
#include "tunebox/pairs.cuh"

namespace {

using namespace tb;

enum PairPath { PAIR_FAST = 0, PAIR_INTERIOR = 1, PAIR_CHECKED = 2 };

// The path of tile (i0, j0). INTERIOR also needs the second of the two vectors that a slot reads of
// row 2p + 1 inside src: the last row's segment ends at least 2 * VEC elements before src does.
template <int BM, int BN, int VEC, int BOUNDS>
__device__ __forceinline__ int pair_path(i64 Ms, i64 Ns, i64 Md, i64 Nd, i64 oy, i64 ox, i64 i0, i64 j0) {
  if (BOUNDS == UNCHECKED) return PAIR_FAST;
  if (BOUNDS == CHECKED) return PAIR_CHECKED;
  const i64 r0 = oy + j0, c0 = ox + i0;
  if (!(box_inside(r0, c0, BN, BM, Ms, Ns) && i0 + BM <= Md && j0 + BN <= Nd)) return PAIR_CHECKED;
  if (Ns % VEC == 0 && ((ox % VEC) + VEC) % VEC == 0 && Nd % VEC == 0) return PAIR_FAST;
  return (r0 + BN - 1) * Ns + c0 + BM + 2 * VEC <= Ms * Ns ? PAIR_INTERIOR : PAIR_CHECKED;
}

// Moves destination tile (i0, j0) through the staged word tile `stage` on path PATH.
template <class Cfg, int PATH>
__device__ __forceinline__ void paired_tile(const u16* __restrict__ src, u16* __restrict__ dst, u32* stage, i64 Ms,
                                            i64 Ns, i64 Md, i64 Nd, i64 oy, i64 ox, u16 pad, i64 i0, i64 j0) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, THREADS = Cfg::THREADS, VEC = Cfg::VEC, STAGING = Cfg::STAGING;
  constexpr int HP = BN / 2;  // word rows: source row pairs
  auto at = [&](int p, int c) -> u32& { return stage[staged_index<u32, BM, STAGING, VEC / 2>(p, c)]; };
  const i64 r0 = oy + j0, c0 = ox + i0;
  if (PATH == PAIR_FAST) {
    constexpr int PER_ROW = BM / VEC, TOTAL = HP * PER_ROW;
    strided<TOTAL, THREADS>([&](int idx) {
      const int p = idx / PER_ROW, c = (idx % PER_ROW) * VEC;
      const u16* a = src + (r0 + 2 * p) * Ns + c0 + c;
      const Halves<VEC> va = load_halves<VEC>(a), vb = load_halves<VEC>(a + Ns);
#pragma unroll
      for (int m = 0; m < VEC / 2; ++m) interleave(va.w[m], vb.w[m], at(p, c + 2 * m), at(p, c + 2 * m + 1));
    });
  } else {
    constexpr int SLOTS = BM / VEC + 1, TOTAL = HP * SLOTS;
    strided<TOTAL, THREADS>([&](int idx) {
      const int p = idx / SLOTS;
      load_pair_slot<VEC, BM, PATH == PAIR_CHECKED>(src, Ms, Ns, r0 + 2 * p, c0, idx % SLOTS, pad,
                                                   [&](int c, u32 w) { at(p, c) = w; });
    });
  }
  __syncthreads();
  if (PATH == PAIR_FAST) {
    constexpr int PER_ROW = BN / VEC, STORES = BM * PER_ROW / THREADS;
#pragma unroll
    for (int k = 0; k < STORES; ++k) {
      const int idx = threadIdx.x + k * THREADS;
      const int i = idx / PER_ROW, j = (idx % PER_ROW) * VEC;
      Halves<VEC> v;
#pragma unroll
      for (int m = 0; m < VEC / 2; ++m) v.w[m] = at(j / 2 + m, i);
      *reinterpret_cast<typename Raw<2 * VEC>::type*>(dst + (i0 + i) * Nd + j0 + j) = v.raw;
    }
  } else {
    constexpr int SLOTS = BN / VEC + 1, TOTAL = BM * SLOTS;
    strided<TOTAL, THREADS>([&](int idx) {
      const int i = idx / SLOTS;
      store_pair_slot<VEC, BN, PATH == PAIR_CHECKED>(dst, Md, Nd, i0 + i, j0, idx % SLOTS,
                                                    [&](int q) { return at(q, i); });
    });
  }
  __syncthreads();  // the next tile reuses the stage
}

}  // namespace

template <class Cfg>
__device__ __forceinline__ void tile_copy_paired_body(const u16* __restrict__ src, u16* __restrict__ dst, long long Ms,
                                                      long long Ns, long long Md, long long Nd, long long oy,
                                                      long long ox, u16 pad, long long tiles_n, long long n_tiles) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, VEC = Cfg::VEC, BOUNDS = Cfg::BOUNDS, TPB = Cfg::TPB;
  static_assert(sizeof(typename Cfg::T) == 2 && Cfg::TRANSPOSE && VEC >= 2 && BN % 2 == 0,
                "pairs of 2-byte elements of a transpose, in vectors of whole words");
  static_assert(BN / 2 * (Cfg::STAGING == PADDED ? BM + 1 : BM) * 4 <= Cfg::SHARED_BYTES,
                "the staged word tile fits in the dynamic shared memory of the launch");
  extern __shared__ __align__(16) unsigned char smem[];
  u32* stage = reinterpret_cast<u32*>(smem);
  for_block_tiles<BM, BN, TPB>(tiles_n, n_tiles, [&](i64 i0, i64 j0) {
    const int path = pair_path<BM, BN, VEC, BOUNDS>(Ms, Ns, Md, Nd, oy, ox, i0, j0);
    if (path == PAIR_FAST)
      paired_tile<Cfg, PAIR_FAST>(src, dst, stage, Ms, Ns, Md, Nd, oy, ox, pad, i0, j0);
    else if (path == PAIR_INTERIOR)
      paired_tile<Cfg, PAIR_INTERIOR>(src, dst, stage, Ms, Ns, Md, Nd, oy, ox, pad, i0, j0);
    else
      paired_tile<Cfg, PAIR_CHECKED>(src, dst, stage, Ms, Ns, Md, Nd, oy, ox, pad, i0, j0);
  });
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS) tile_copy_paired(const __grid_constant__ typename Cfg::Args a) {
  tile_copy_paired_body<Cfg>(a.src, a.dst, a.Ms, a.Ns, a.Md, a.Nd, a.oy, a.ox, a.pad, a.tiles_n, a.n_tiles);
}
