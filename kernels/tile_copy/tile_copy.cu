// Family tile_copy: dst (Md, Nd) <- src (Ms, Ns) read at origin (oy, ox), optionally transposed.
//
//   not transposed: dst[i][j] = src[oy + i][ox + j]
//   transposed:     dst[i][j] = src[oy + j][ox + i]
// Destination elements whose source lies outside src take the padding bits `pad`.
//
// Template parameters: E element bits type; BM x BN destination tile; THREADS per block; VEC
// elements per vector access; BOUNDS (tb::Bounds); STAGING 0 (registers only, not transposed) or a
// tb::Staging layout (through shared memory, aligned-window accesses); TPB tiles per block;
// TRANSPOSE.
#include "tunebox/tile.cuh"

namespace {

using namespace tb;


// How a tile is moved: FAST promises a full tile inside src with every row aligned; INTERIOR a
// full tile inside src (rows of any alignment, staged path only); CHECKED promises nothing.
enum Path { FAST_PATH = 0, INTERIOR_PATH = 1, CHECKED_PATH = 2 };

template <int BM, int BN, int VEC, int BOUNDS, bool STAGED, bool TRANSPOSE>
__device__ __forceinline__ int choose_path(i64 Ms, i64 Ns, i64 Md, i64 Nd, i64 oy, i64 ox, i64 i0, i64 j0) {
  if (BOUNDS == UNCHECKED) return FAST_PATH;
  if (BOUNDS == CHECKED) return CHECKED_PATH;
  constexpr int H = TRANSPOSE ? BN : BM, W = TRANSPOSE ? BM : BN;
  const i64 r0 = oy + (TRANSPOSE ? j0 : i0), c0 = ox + (TRANSPOSE ? i0 : j0);
  if (!(box_inside(r0, c0, H, W, Ms, Ns) && i0 + BM <= Md && j0 + BN <= Nd)) return CHECKED_PATH;
  if (Ns % VEC == 0 && ((ox % VEC) + VEC) % VEC == 0 && Nd % VEC == 0) return FAST_PATH;
  // INTERIOR loads whole aligned slot vectors: the last one must end inside src.
  const i64 last = (r0 + H - 1) * Ns + c0;
  return STAGED && floor_to(last, VEC) + (W / VEC + 1) * VEC <= Ms * Ns ? INTERIOR_PATH : CHECKED_PATH;
}

template <typename E, int BM, int BN, int THREADS, int VEC, bool CHECK>
__device__ __forceinline__ void copy_tile(const E* __restrict__ src, E* __restrict__ dst, i64 Ms,
                                          i64 Ns, i64 Md, i64 Nd, i64 oy, i64 ox, E pad, i64 i0,
                                          i64 j0) {
  constexpr int PER_ROW = BN / VEC;
  constexpr int ITEMS = BM * PER_ROW / THREADS;
  Vec<E, VEC> buf[ITEMS];
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    const int idx = threadIdx.x + k * THREADS;
    const int r = idx / PER_ROW, c = (idx % PER_ROW) * VEC;
    load_vec<E, VEC, CHECK>(src, Ms, Ns, oy + i0 + r, ox + j0 + c, pad, buf[k]);
  }
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    const int idx = threadIdx.x + k * THREADS;
    const int r = idx / PER_ROW, c = (idx % PER_ROW) * VEC;
    store_vec<E, VEC, CHECK>(dst, Md, Nd, i0 + r, j0 + c, buf[k]);
  }
}

// Moves one tile through shared memory. The source block (H x W: BN x BM when transposed, else
// BM x BN) is loaded into the stage, then the destination tile is stored from it. Except on the
// FAST path, both sides use aligned-window slots, so rows of any alignment move in aligned vectors.
template <typename E, int BM, int BN, int THREADS, int VEC, int STAGING, bool TRANSPOSE, int PATH>
__device__ __forceinline__ void staged_tile(const E* __restrict__ src, E* __restrict__ dst, E* stage,
                                            i64 Ms, i64 Ns, i64 Md, i64 Nd, i64 oy, i64 ox, E pad,
                                            i64 i0, i64 j0) {
  constexpr int H = TRANSPOSE ? BN : BM, W = TRANSPOSE ? BM : BN;
  constexpr bool CHECK = PATH == CHECKED_PATH;
  const i64 r0 = oy + (TRANSPOSE ? j0 : i0), c0 = ox + (TRANSPOSE ? i0 : j0);
  auto at = [&](int r, int c) -> E& { return stage[staged_index<E, W, STAGING, VEC>(r, c)]; };
  if (PATH == FAST_PATH) {
    constexpr int PER_ROW = W / VEC, LOADS = H * PER_ROW / THREADS;
#pragma unroll
    for (int k = 0; k < LOADS; ++k) {
      const int idx = threadIdx.x + k * THREADS;
      const int r = idx / PER_ROW, c = (idx % PER_ROW) * VEC;
      Vec<E, VEC> v;
      load_vec<E, VEC, false>(src, Ms, Ns, r0 + r, c0 + c, pad, v);
#pragma unroll
      for (int e = 0; e < VEC; ++e) at(r, c + e) = v.e[e];
    }
  } else {
    constexpr int SLOTS = W / VEC + 1, TOTAL = H * SLOTS;
#pragma unroll
    for (int k = 0; k < (TOTAL + THREADS - 1) / THREADS; ++k) {
      const int idx = threadIdx.x + k * THREADS;
      if (TOTAL % THREADS == 0 || idx < TOTAL) {
        const int r = idx / SLOTS;
        load_slot<E, VEC, W, CHECK>(src, Ms, Ns, r0 + r, c0, idx % SLOTS, pad,
                                    [&](int c, E v) { at(r, c) = v; });
      }
    }
  }
  __syncthreads();
  auto value = [&](int i, int j) -> E { return TRANSPOSE ? at(j, i) : at(i, j); };
  if (PATH == FAST_PATH) {
    constexpr int PER_ROW = BN / VEC, STORES = BM * PER_ROW / THREADS;
#pragma unroll
    for (int k = 0; k < STORES; ++k) {
      const int idx = threadIdx.x + k * THREADS;
      const int i = idx / PER_ROW, j = (idx % PER_ROW) * VEC;
      Vec<E, VEC> v;
#pragma unroll
      for (int e = 0; e < VEC; ++e) v.e[e] = value(i, j + e);
      store_vec<E, VEC, false>(dst, Md, Nd, i0 + i, j0 + j, v);
    }
  } else {
    constexpr int SLOTS = BN / VEC + 1, TOTAL = BM * SLOTS;
#pragma unroll
    for (int k = 0; k < (TOTAL + THREADS - 1) / THREADS; ++k) {
      const int idx = threadIdx.x + k * THREADS;
      if (TOTAL % THREADS == 0 || idx < TOTAL) {
        const int i = idx / SLOTS;
        store_slot<E, VEC, BN, CHECK>(dst, Md, Nd, i0 + i, j0, idx % SLOTS,
                                      [&](int j) { return value(i, j); });
      }
    }
  }
  __syncthreads();  // the next tile reuses the stage
}

}  // namespace

template <typename E, int BM, int BN, int THREADS, int VEC, int BOUNDS, int STAGING, int TPB,
          bool TRANSPOSE>
__global__ void __launch_bounds__(THREADS)
    tile_copy(const E* __restrict__ src, E* __restrict__ dst, long long Ms, long long Ns,
              long long Md, long long Nd, long long oy, long long ox, E pad, long long tiles_n,
              long long n_tiles) {
  constexpr bool STAGED = STAGING != 0;
  extern __shared__ __align__(16) unsigned char smem[];
  E* stage = reinterpret_cast<E*>(smem);
#pragma unroll 1
  for (int t = 0; t < TPB; ++t) {
    const i64 tile = (i64)blockIdx.x * TPB + t;
    if (tile >= n_tiles) return;
    const i64 i0 = (tile / tiles_n) * BM, j0 = (tile % tiles_n) * BN;
    const int path = choose_path<BM, BN, VEC, BOUNDS, STAGED, TRANSPOSE>(Ms, Ns, Md, Nd, oy, ox, i0, j0);
    if constexpr (STAGED) {
      if (path == FAST_PATH)
        staged_tile<E, BM, BN, THREADS, VEC, STAGING, TRANSPOSE, FAST_PATH>(src, dst, stage, Ms, Ns, Md, Nd, oy, ox,
                                                                       pad, i0, j0);
      else if (path == INTERIOR_PATH)
        staged_tile<E, BM, BN, THREADS, VEC, STAGING, TRANSPOSE, INTERIOR_PATH>(src, dst, stage, Ms, Ns, Md, Nd, oy,
                                                                           ox, pad, i0, j0);
      else
        staged_tile<E, BM, BN, THREADS, VEC, STAGING, TRANSPOSE, CHECKED_PATH>(src, dst, stage, Ms, Ns, Md, Nd, oy,
                                                                          ox, pad, i0, j0);
    } else {
      if (path == FAST_PATH)
        copy_tile<E, BM, BN, THREADS, VEC, false>(src, dst, Ms, Ns, Md, Nd, oy, ox, pad, i0, j0);
      else
        copy_tile<E, BM, BN, THREADS, VEC, true>(src, dst, Ms, Ns, Md, Nd, oy, ox, pad, i0, j0);
    }
  }
}
