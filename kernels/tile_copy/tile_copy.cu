// Family tile_copy: dst (Md, Nd) <- src (Ms, Ns) read at origin (oy, ox), optionally transposed.
//
//   not transposed: dst[i][j] = src[oy + i][ox + j]
//   transposed:     dst[i][j] = src[oy + j][ox + i]
// Destination elements whose source lies outside src take the padding bits `pad`.
//
// Template parameters: E element bits type; BM x BN destination tile; THREADS per block; VEC
// elements per vector access; BOUNDS (tb::Bounds); STAGING 0 (registers only, not transposed) or a
// tb::Staging layout (transposed through shared memory); TPB tiles per block.
#include "tunebox/tile.cuh"

namespace {

using namespace tb;


// Whether tile (i0, j0) can take the unchecked path: full, inside src, and every vector aligned.
template <int BM, int BN, int VEC, bool TRANSPOSE>
__device__ __forceinline__ bool interior(i64 Ms, i64 Ns, i64 Md, i64 Nd, i64 oy, i64 ox, i64 i0,
                                         i64 j0) {
  const bool aligned = Ns % VEC == 0 && ((ox % VEC) + VEC) % VEC == 0 && Nd % VEC == 0;
  const bool src_ok = TRANSPOSE ? box_inside(oy + j0, ox + i0, BN, BM, Ms, Ns)
                                : box_inside(oy + i0, ox + j0, BM, BN, Ms, Ns);
  return aligned && src_ok && i0 + BM <= Md && j0 + BN <= Nd;
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

template <typename E, int BM, int BN, int THREADS, int VEC, int STAGING, bool CHECK>
__device__ __forceinline__ void transpose_tile(const E* __restrict__ src, E* __restrict__ dst,
                                               E* stage, i64 Ms, i64 Ns, i64 Md, i64 Nd, i64 oy,
                                               i64 ox, E pad, i64 i0, i64 j0) {
  // Source block: BN rows (destination columns) x BM columns (destination rows).
  constexpr int SRC_PER_ROW = BM / VEC;
  constexpr int LOADS = BN * SRC_PER_ROW / THREADS;
#pragma unroll
  for (int k = 0; k < LOADS; ++k) {
    const int idx = threadIdx.x + k * THREADS;
    const int r = idx / SRC_PER_ROW, c = (idx % SRC_PER_ROW) * VEC;
    Vec<E, VEC> v;
    load_vec<E, VEC, CHECK>(src, Ms, Ns, oy + j0 + r, ox + i0 + c, pad, v);
#pragma unroll
    for (int e = 0; e < VEC; ++e) stage[staged_index<E, BM, STAGING, VEC>(r, c + e)] = v.e[e];
  }
  __syncthreads();
  constexpr int DST_PER_ROW = BN / VEC;
  constexpr int STORES = BM * DST_PER_ROW / THREADS;
#pragma unroll
  for (int k = 0; k < STORES; ++k) {
    const int idx = threadIdx.x + k * THREADS;
    const int i = idx / DST_PER_ROW, j = (idx % DST_PER_ROW) * VEC;
    Vec<E, VEC> v;
#pragma unroll
    for (int e = 0; e < VEC; ++e) v.e[e] = stage[staged_index<E, BM, STAGING, VEC>(j + e, i)];
    store_vec<E, VEC, CHECK>(dst, Md, Nd, i0 + i, j0 + j, v);
  }
  __syncthreads();  // the next tile reuses the stage
}

}  // namespace

template <typename E, int BM, int BN, int THREADS, int VEC, int BOUNDS, int STAGING, int TPB>
__global__ void __launch_bounds__(THREADS)
    tile_copy(const E* __restrict__ src, E* __restrict__ dst, long long Ms, long long Ns,
              long long Md, long long Nd, long long oy, long long ox, E pad, long long tiles_n,
              long long n_tiles) {
  constexpr bool TRANSPOSE = STAGING != 0;
  extern __shared__ __align__(16) unsigned char smem[];
  E* stage = reinterpret_cast<E*>(smem);
#pragma unroll 1
  for (int t = 0; t < TPB; ++t) {
    const i64 tile = (i64)blockIdx.x * TPB + t;
    if (tile >= n_tiles) return;
    const i64 i0 = (tile / tiles_n) * BM, j0 = (tile % tiles_n) * BN;
    const bool fast = BOUNDS == UNCHECKED ||
                      (BOUNDS == SPLIT && interior<BM, BN, VEC, TRANSPOSE>(Ms, Ns, Md, Nd, oy, ox, i0, j0));
    if constexpr (TRANSPOSE) {
      if (fast)
        transpose_tile<E, BM, BN, THREADS, VEC, STAGING, false>(src, dst, stage, Ms, Ns, Md, Nd, oy, ox, pad, i0, j0);
      else
        transpose_tile<E, BM, BN, THREADS, VEC, STAGING, true>(src, dst, stage, Ms, Ns, Md, Nd, oy, ox, pad, i0, j0);
    } else {
      if (fast)
        copy_tile<E, BM, BN, THREADS, VEC, false>(src, dst, Ms, Ns, Md, Nd, oy, ox, pad, i0, j0);
      else
        copy_tile<E, BM, BN, THREADS, VEC, true>(src, dst, Ms, Ns, Md, Nd, oy, ox, pad, i0, j0);
    }
  }
}
