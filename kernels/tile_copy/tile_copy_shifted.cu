// Family tile_copy, template "shifted": a copy (not a transpose), dst[i][j] = src[oy + i][ox + j], whose
// destination rows move in aligned vectors whatever the alignment of Ns, Nd and the origin (crops, pads
// of odd widths).
//
// The row segment [j0, j0 + BN) of each row of destination tile (i0, j0) is covered by tile.cuh's
// aligned-window slots (BN / VEC + 1 of them). A slot's VEC elements start at source offset
// s = (oy + i) * Ns + ox + j0 + first: the two aligned source vectors from floor_to(s, VEC), funnel-
// shifted by s mod VEC elements, hold them in one piece (INTERIOR: the tile's source box inside src, and
// every vector it loads inside the array). Any other tile moves element by element, `pad` outside src
// (CHECKED). A slot cut by its segment's ends is stored element by element (store_slot_elements).
// Cfg (tunebox/families/tile_copy/shifted.py renders it): T the element's bits type; BM x BN tile;
// THREADS; VEC elements per vector (VEC * sizeof(T) a whole number of 32-bit words); TPB tiles per
// block. Cfg::Args: src, dst, Ms, Ns, Md, Nd, oy, ox, pad, tiles_n, n_tiles.
#include "tunebox/copy_tiles.cuh"

namespace {

using namespace tb;

// B bytes moved in one access, seen as B / 4 words.
template <int B>
union Words {
  typename Raw<B>::type raw;
  u32 w[B / 4];
};

// The B bytes that start `bytes` (0 <= bytes < B) into lo followed by hi: whole words shifted in
// log2(B / 4) conditional steps, then the remaining bytes by funnel shifts.
template <int B>
__device__ __forceinline__ Words<B> funnel_bytes(const Words<B>& lo, const Words<B>& hi, int bytes) {
  constexpr int WORDS = B / 4;
  u32 t[2 * WORDS];
#pragma unroll
  for (int q = 0; q < WORDS; ++q) {
    t[q] = lo.w[q];
    t[WORDS + q] = hi.w[q];
  }
  shift_words<WORDS>(t, bytes >> 2);
  const u32 bits = (u32)(bytes & 3) * 8u;
  Words<B> out;
#pragma unroll
  for (int m = 0; m < WORDS; ++m) out.w[m] = __funnelshift_r(t[m], t[m + 1], bits);
  return out;
}

// Whether tile (i0, j0) takes the INTERIOR path: its destination tile inside dst, its source box inside
// src, and the vectors of its first and last rows' slots inside the array (a slot's first vector starts
// at most 2 * (VEC - 1) elements before the row's segment, its second ends at most 2 * VEC after).
template <int BM, int BN, int VEC>
__device__ __forceinline__ bool interior(i64 Ms, i64 Ns, i64 Md, i64 Nd, i64 oy, i64 ox, i64 i0, i64 j0) {
  const i64 r0 = oy + i0, c0 = ox + j0;
  return box_inside(r0, c0, BM, BN, Ms, Ns) && i0 + BM <= Md && j0 + BN <= Nd && r0 * Ns + c0 >= 2 * VEC &&
         (r0 + BM - 1) * Ns + c0 + BN + 2 * VEC <= Ms * Ns;
}

// Moves destination tile (i0, j0): every slot of its rows' segments, on the INTERIOR path or CHECKED.
template <class Cfg, bool CHECK>
__device__ __forceinline__ void shifted_tile(const typename Cfg::T* __restrict__ src, typename Cfg::T* __restrict__ dst,
                                             i64 Ms, i64 Ns, i64 Md, i64 Nd, i64 oy, i64 ox, typename Cfg::T pad,
                                             i64 i0, i64 j0) {
  using E = typename Cfg::T;
  constexpr int BM = Cfg::BM, BN = Cfg::BN, THREADS = Cfg::THREADS, VEC = Cfg::VEC;
  constexpr int B = VEC * (int)sizeof(E), SLOTS = BN / VEC + 1;
  typedef typename Raw<B>::type R;
  strided<BM * SLOTS, THREADS>([&](int idx) {
    const i64 i = i0 + idx / SLOTS;
    if (CHECK && i >= Md) return;
    const i64 f = i * Nd + j0, aligned = floor_to(f, VEC);
    const int first = (idx % SLOTS) * VEC - (int)(f - aligned);  // segment column of the slot's element 0
    const int width = segment_width<BN, CHECK>(Nd, j0);
    if (first >= width) return;  // the spare slot of an aligned segment
    Vec<E, VEC> v;
    if (!CHECK) {
      const i64 s = (oy + i) * Ns + ox + j0 + first, from = floor_to(s, VEC);
      Words<B> lo, hi;
      lo.raw = __ldg(reinterpret_cast<const R*>(src + from));
      hi.raw = __ldg(reinterpret_cast<const R*>(src + from + VEC));
      v.raw = funnel_bytes<B>(lo, hi, (int)(s - from) * (int)sizeof(E)).raw;
    } else {
      const i64 r = oy + i;
      const bool row_ok = in_range(r, Ms);
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const i64 c = ox + j0 + first + e;
        v.e[e] = (unsigned)(first + e) < (unsigned)width && row_ok && in_range(c, Ns) ? src[r * Ns + c] : pad;
      }
    }
    store_slot_elements<VEC>(dst, aligned + (idx % SLOTS) * VEC, first, width, v);
  });
}

}  // namespace

template <class Cfg>
__device__ __forceinline__ void tile_copy_shifted_body(const typename Cfg::T* __restrict__ src,
                                                       typename Cfg::T* __restrict__ dst, long long Ms, long long Ns,
                                                       long long Md, long long Nd, long long oy, long long ox,
                                                       typename Cfg::T pad, long long tiles_n, long long n_tiles) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, VEC = Cfg::VEC;
  static_assert(VEC * sizeof(typename Cfg::T) % 4 == 0 && BN % VEC == 0, "whole words per vector, whole vectors");
  // the walk of for_block_tiles, written out: through its lambda NVVM reads the padding path's elements
  // as ld.global.nc, another build than the one the recorded variants measured
#pragma unroll 1
  for (int t = 0; t < Cfg::TPB; ++t) {
    const i64 tile = (i64)blockIdx.x * Cfg::TPB + t;
    if (tile >= n_tiles) return;
    const i64 i0 = (tile / tiles_n) * BM, j0 = (tile % tiles_n) * BN;
    if (interior<BM, BN, VEC>(Ms, Ns, Md, Nd, oy, ox, i0, j0))
      shifted_tile<Cfg, false>(src, dst, Ms, Ns, Md, Nd, oy, ox, pad, i0, j0);
    else
      shifted_tile<Cfg, true>(src, dst, Ms, Ns, Md, Nd, oy, ox, pad, i0, j0);
  }
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS) tile_copy_shifted(const __grid_constant__ typename Cfg::Args a) {
  tile_copy_shifted_body<Cfg>(a.src, a.dst, a.Ms, a.Ns, a.Md, a.Nd, a.oy, a.ox, a.pad, a.tiles_n, a.n_tiles);
}
