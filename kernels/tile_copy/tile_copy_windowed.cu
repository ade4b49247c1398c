// Family tile_copy, template "windowed": a transpose of 2-byte elements, dst[i][j] = src[oy + j][ox + i],
// whose rows may have any alignment (odd Ns, Nd, origins).
//
// Destination tiles are sector-aligned in memory: tile column t of destination row i covers the columns
// [t * BN - L_i, (t + 1) * BN - L_i) of the row (clipped to [0, Nd)), L_i = (i * Nd) mod SECTOR, so every
// 32-byte sector of dst but those holding a row's two ends is written whole by one block (a sector
// written in two parts by two blocks costs the memory a read). Tile (i0, j0 = t * BN) therefore reads
// the BN + SECTOR - 1 source rows oy + j0 - SECTOR + 1 .. oy + j0 + BN - 1 (box row q: destination
// column j0 - SECTOR + 1 + q), columns ox + i0 .. ox + i0 + BM - 1.
// Each box row is staged as it lies in memory: its aligned window of BM + VEC elements from
// floor_to(f_q, VEC) (f_q the flat offset of its first element), in BM / VEC + 1 aligned vectors, so it
// starts s_q = f_q mod VEC elements into its staged row. A destination vector's VEC elements (box rows
// q .. q + VEC - 1 of column i) are read from the stage one 2-byte load each, at element i + s_q of staged
// row q, and stored in one aligned access.
// INTERIOR (every box row a destination column needs, and its window, inside src) loads whole windows;
// any other tile stages the box element by element (`pad` outside src; s_q = 0: CHECKED). Both clip
// their stores to dst.
// Cfg (tunebox/families/tile_copy/windowed.py renders it): T the 2-byte bits type; BM x BN tile (BN a
// multiple of SECTOR); THREADS; VEC elements per vector (2, 4 or 8); TPB tiles per block; PITCH bytes per
// staged row (a multiple of 4, at least 2 * (BM + VEC); an odd number of words puts a warp's two slots of
// a row, VEC staged rows apart, on other banks). Cfg::Args: src, dst, Ms, Ns, Md, Nd, oy, ox, pad,
// tiles_n (tile columns: enough for BN * tiles_n - SECTOR + 1 >= Nd), n_tiles.
#include "tunebox/copy_tiles.cuh"

namespace {

using namespace tb;

constexpr int SECTOR = 16;  // elements: 32 bytes

// Whether tile (i0, j0) takes the INTERIOR path: its box's columns inside src (for the destination rows
// inside dst), the box rows of its destination columns inside [0, Nd) inside src, and the last one's
// window inside the array (a window starts at floor_to(f, VEC) >= 0).
template <int BM, int BN, int VEC>
__device__ __forceinline__ bool windowed_interior(i64 Ms, i64 Ns, i64 Md, i64 Nd, i64 oy, i64 ox, i64 i0, i64 j0) {
  const i64 c0 = ox + i0, rows = Md - i0 < BM ? Md - i0 : BM;
  const i64 j_first = j0 - SECTOR + 1 > 0 ? j0 - SECTOR + 1 : 0, j_end = j0 + BN < Nd ? j0 + BN : Nd;
  return c0 >= 0 && c0 + rows <= Ns && oy + j_first >= 0 && oy + j_end <= Ms &&
         floor_to((oy + j_end - 1) * Ns + c0, VEC) + BM + VEC <= Ms * Ns;
}

// The VEC 2-byte elements of v stored at p (aligned) in one access (NVVM split a 16-byte store of
// computed words into four).
template <int VEC>
__device__ __forceinline__ void store_whole(u16* p, const Vec<u16, VEC>& v) {
  const u32* w = reinterpret_cast<const u32*>(v.e);
  if constexpr (VEC == 8) {
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
                 : "memory");
  } else {
    *reinterpret_cast<typename Raw<2 * VEC>::type*>(p) = v.raw;
  }
}

// The 2-byte element at shared address `address` (NVVM, given a generic pointer, recomputes a slot
// row's address for each of its elements).
__device__ __forceinline__ u16 load_shared_u16(u32 address) {
  u16 value;
  asm volatile("ld.shared.u16 %0, [%1];" : "=h"(value) : "r"(address));
  return value;
}

// Moves destination tile (i0, j0) through `stage` (BN + SECTOR - 1 rows of PITCH bytes).
template <class Cfg, bool CHECK>
__device__ __forceinline__ void windowed_tile(const u16* __restrict__ src, u16* __restrict__ dst,
                                              unsigned char* stage, i64 Ms, i64 Ns, i64 Md, i64 Nd, i64 oy, i64 ox,
                                              u16 pad, i64 i0, i64 j0) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, THREADS = Cfg::THREADS, VEC = Cfg::VEC, PITCH = Cfg::PITCH;
  constexpr int ROWS = BN + SECTOR - 1;
  typedef typename Raw<2 * VEC>::type R;
  const i64 jb = j0 - SECTOR + 1, rb = oy + jb, c0 = ox + i0;  // box row 0: destination column jb
  // s_q = f_q mod VEC = (s0 + q * step) mod VEC (f_q grows by Ns a row; the low bits of a product are
  // those of its 32-bit product, negative factors included); CHECKED rows are staged from their start
  const int s0 = CHECK ? 0 : (int)(((u32)rb * (u32)Ns + (u32)c0) & (VEC - 1));
  const int step = CHECK ? 0 : (int)((u32)Ns & (VEC - 1));
  if (!CHECK) {
    constexpr int SLOTS = BM / VEC + 1;
    strided<ROWS * SLOTS, THREADS>([&](int idx) {
      const int q = idx / SLOTS, k = idx % SLOTS;
      if ((u64)(jb + q) >= (u64)Nd) return;  // no destination column: never read
      const i64 from = (rb + q) * Ns + c0 - ((s0 + q * step) & (VEC - 1)) + k * VEC;
      Vec<u16, VEC> v;
      v.raw = __ldg(reinterpret_cast<const R*>(src + from));
      u32* to = reinterpret_cast<u32*>(stage + q * PITCH + k * 2 * VEC);  // 4-byte aligned: PITCH may be
#pragma unroll
      for (int m = 0; m < VEC / 2; ++m) to[m] = reinterpret_cast<const u32*>(v.e)[m];  // an odd word count
    });
  } else {
    strided<ROWS * BM, THREADS>([&](int idx) {
      const int q = idx / BM, c = idx % BM;
      const i64 r = rb + q, col = c0 + c;
      reinterpret_cast<u16*>(stage + q * PITCH)[c] = in_range(r, Ms) && in_range(col, Ns) ? src[r * Ns + col] : pad;
    });
  }
  __syncthreads();
  const u32 shared_stage = (u32)__cvta_generic_to_shared(stage);
  // two neighbouring threads take two neighbouring vectors of one destination row (a sector when VEC is
  // 8), the next two the next row's (the next column of the stage)
  constexpr int VECTORS = BN / VEC;
  strided<BM * VECTORS, THREADS>([&](int idx) {
    const int i = (idx / 2) % BM, k = idx / (2 * BM) * 2 + idx % 2;
    if (i0 + i >= Md) return;
    const int lead = (int)(((u32)(i0 + i) * (u32)Nd) & (SECTOR - 1));  // L_i
    const i64 j = j0 - lead + k * VEC;  // the vector's first destination column
    if (j >= Nd || j + VEC <= 0) return;
    const int q = SECTOR - 1 - lead + k * VEC;  // its box row
    const u32 column = shared_stage + q * PITCH + 2 * i;
    const int twice_s = 2 * (s0 + q * step);  // twice s_q (mod 2 * VEC): the element's byte offset
    Vec<u16, VEC> v;
#pragma unroll
    for (int e = 0; e < VEC; ++e)
      v.e[e] = load_shared_u16(column + ((twice_s + 2 * e * step) & (2 * VEC - 2)) + e * PITCH);
    u16* base = dst + ((i0 + i) * Nd + j);
    if (j >= 0 && j + VEC <= Nd) {
      store_whole<VEC>(base, v);
    } else {
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        if ((u64)(j + e) < (u64)Nd) base[e] = v.e[e];
    }
  });
  __syncthreads();  // the next tile reuses the stage
}

}  // namespace

template <class Cfg>
__device__ __forceinline__ void tile_copy_windowed_body(const u16* __restrict__ src, u16* __restrict__ dst, long long Ms,
                                                        long long Ns, long long Md, long long Nd, long long oy,
                                                        long long ox, u16 pad, long long tiles_n, long long n_tiles) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, VEC = Cfg::VEC;
  static_assert(sizeof(typename Cfg::T) == 2 && VEC >= 2 && BM % VEC == 0 && BN % SECTOR == 0,
                "2-byte elements in vectors of whole words dividing the tile, tile rows of whole sectors");
  static_assert(Cfg::PITCH % 4 == 0 && Cfg::PITCH >= 2 * (BM + VEC), "a staged row holds its window in words");
  extern __shared__ __align__(16) unsigned char smem[];
  for_block_tiles<BM, BN, Cfg::TPB>(tiles_n, n_tiles, [&](i64 i0, i64 j0) {
    if (windowed_interior<BM, BN, VEC>(Ms, Ns, Md, Nd, oy, ox, i0, j0))
      windowed_tile<Cfg, false>(src, dst, smem, Ms, Ns, Md, Nd, oy, ox, pad, i0, j0);
    else
      windowed_tile<Cfg, true>(src, dst, smem, Ms, Ns, Md, Nd, oy, ox, pad, i0, j0);
  });
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS) tile_copy_windowed(const __grid_constant__ typename Cfg::Args a) {
  tile_copy_windowed_body<Cfg>(a.src, a.dst, a.Ms, a.Ns, a.Md, a.Nd, a.oy, a.ox, a.pad, a.tiles_n, a.n_tiles);
}
