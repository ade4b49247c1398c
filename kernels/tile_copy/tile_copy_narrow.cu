// Family tile_copy, template "narrow": copies and transposes whose destination rows hold a few elements
// (Nd <= tunebox's NARROW_ROWS), moved as one flat destination of Md * Nd elements:
//
//   not transposed: dst[i][j] = src[oy + i][ox + j]
//   transposed:     dst[i][j] = src[oy + j][ox + i]
//
// The flat destination is cut into chunks of CHUNK = THREADS * ITEMS * VEC elements, block b taking
// chunks b * TPB .. b * TPB + TPB - 1. Each thread stores ITEMS aligned VEC-element vectors of a chunk
// (vector k at chunk offset (k * THREADS + threadIdx.x) * VEC), each element read from where it lies in
// src by its own load: across a warp those loads walk each source row it touches contiguously, so the
// loads share sectors in L1 and every destination sector is written whole by one store. A chunk whose
// source box lies inside src (and that ends inside dst) reads without checks (INTERIOR); any other tests
// each element (`pad` outside src) and stops at dst's end (CHECKED).
// Cfg (tunebox/families/tile_copy/narrow.py renders it): T the element's bits type; THREADS; VEC elements
// per vector; ITEMS vectors per thread and chunk; TPB chunks per block; TRANSPOSE.
// Cfg::Args: src, dst, Ms, Ns, Md, Nd, oy, ox, pad, n_chunks. dst is aligned to the vector (the run time
// gives kernels arrays aligned to 256 bytes).
#include "tunebox/tile.cuh"

namespace {

using namespace tb;

// Whether the chunk of destination rows [i_first, i_last] reads only inside src.
template <bool TRANSPOSE>
__device__ __forceinline__ bool chunk_inside(i64 Ms, i64 Ns, int nd, i64 oy, i64 ox, i64 i_first, i64 i_last) {
  const i64 rows = i_last - i_first + 1;
  return TRANSPOSE ? box_inside(oy, ox + i_first, nd, rows, Ms, Ns) : box_inside(oy + i_first, ox, rows, nd, Ms, Ns);
}

// Moves the chunk that starts at flat destination offset `start` (a multiple of the chunk); CHECK: not
// INTERIOR.
template <class Cfg, bool CHECK>
__device__ __forceinline__ void narrow_chunk(const typename Cfg::T* __restrict__ src, typename Cfg::T* __restrict__ dst,
                                             i64 Ms, i64 Ns, int nd, i64 oy, i64 ox, typename Cfg::T pad, i64 start,
                                             i64 total) {
  using E = typename Cfg::T;
  constexpr int THREADS = Cfg::THREADS, VEC = Cfg::VEC, ITEMS = Cfg::ITEMS;
  const i64 row0 = start / nd;
  const int col0 = (int)(start - row0 * nd);
  Vec<E, VEC> v[ITEMS];
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    const int offset = col0 + (k * THREADS + (int)threadIdx.x) * VEC;  // from the chunk's first row
    i64 i = row0 + offset / nd;
    int j = offset % nd;
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const i64 r = Cfg::TRANSPOSE ? oy + j : oy + i, c = Cfg::TRANSPOSE ? ox + i : ox + j;
      v[k].e[e] = !CHECK || (in_range(r, Ms) && in_range(c, Ns)) ? src[r * Ns + c] : pad;
      if (++j == nd) {
        j = 0;
        ++i;
      }
    }
  }
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    const i64 f = start + (i64)(k * THREADS + (int)threadIdx.x) * VEC;
    if (!CHECK || f + VEC <= total) {
      *reinterpret_cast<typename Raw<VEC * sizeof(E)>::type*>(dst + f) = v[k].raw;
    } else {
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        if (f + e < total) dst[f + e] = v[k].e[e];
    }
  }
}

}  // namespace

template <class Cfg>
__device__ __forceinline__ void tile_copy_narrow_body(const typename Cfg::T* __restrict__ src,
                                                      typename Cfg::T* __restrict__ dst, long long Ms, long long Ns,
                                                      long long Md, long long Nd, long long oy, long long ox,
                                                      typename Cfg::T pad, long long n_chunks) {
  constexpr int CHUNK = Cfg::THREADS * Cfg::ITEMS * Cfg::VEC;
  const int nd = (int)Nd;  // at most NARROW_ROWS
  const i64 total = Md * Nd;
#pragma unroll 1
  for (int t = 0; t < Cfg::TPB; ++t) {
    const i64 chunk = (i64)blockIdx.x * Cfg::TPB + t;
    if (chunk >= n_chunks) return;
    const i64 start = chunk * CHUNK, end = start + CHUNK;
    if (end <= total && chunk_inside<Cfg::TRANSPOSE>(Ms, Ns, nd, oy, ox, start / nd, (end - 1) / nd))
      narrow_chunk<Cfg, false>(src, dst, Ms, Ns, nd, oy, ox, pad, start, total);
    else
      narrow_chunk<Cfg, true>(src, dst, Ms, Ns, nd, oy, ox, pad, start, total);
  }
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS) tile_copy_narrow(const __grid_constant__ typename Cfg::Args a) {
  tile_copy_narrow_body<Cfg>(a.src, a.dst, a.Ms, a.Ns, a.Md, a.Nd, a.oy, a.ox, a.pad, a.n_chunks);
}
