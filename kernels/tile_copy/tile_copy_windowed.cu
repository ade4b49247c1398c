// Family tile_copy, template "windowed": a transpose of 2-byte elements, dst[i][j] = src[oy + j][ox + i],
// whose rows may have any alignment (odd Ns, Nd, origins).
//
// Destination tiles are sector-aligned in memory: tile column t of destination row i covers the columns
// [t * BN - L_i, (t + 1) * BN - L_i) of the row (clipped to [0, Nd)), L_i = (i * Nd) mod SECTOR, so every
// 32-byte sector of dst but those holding a row's two ends is written whole by one block (a sector
// written in two parts by two blocks costs the memory a read). Tile (i0, j0 = t * BN) therefore reads
// the BN + SECTOR - 1 source rows oy + j0 - SECTOR + 1 .. oy + j0 + BN - 1 (box row q: destination
// column j0 - SECTOR + 1 + q), columns ox + i0 .. ox + i0 + BM - 1.
// Each box row is staged as it lies in memory: its sector-aligned window of BM + SECTOR elements from
// floor_to(f_q, SECTOR) (f_q the flat offset of its first element), in (BM + SECTOR) / VEC aligned
// vectors, so it starts s_q = f_q mod SECTOR elements into its staged row (windows of whole sectors: a
// warp's 16-byte cp.asyncs of windows starting mid-sector cost L2 1.4 times the sectors, ncu in
// results/README.md, thirtieth session). A destination vector's VEC elements (box rows
// q .. q + VEC - 1 of column i) are read from the stage one 2-byte load each, at element i + s_q of staged
// row q, and stored in one aligned access.
// INTERIOR (every box row a destination column needs, and its window, inside src) loads whole windows;
// any other tile stages the box element by element (`pad` outside src; s_q = 0: CHECKED). Both clip
// their stores to dst. A block's TPB tiles go through a ring of STAGES stages: windows staged by
// cp.async STAGES - 1 tiles ahead of the stores (when the pitch keeps them 16-byte aligned; through
// registers otherwise).
// Cfg (tunebox/families/tile_copy/windowed.py renders it): T the 2-byte bits type; BM x BN tile (BN a
// multiple of SECTOR); THREADS; VEC elements per vector (2, 4 or 8); TPB tiles per block; PITCH bytes per
// staged row (a multiple of 4, at least 2 * (BM + SECTOR); an odd number of words puts a warp's two slots of
// a row, VEC staged rows apart, on other banks); STAGES; STAGE_BYTES bytes per stage (a multiple of 16).
// Cfg::Args: src, dst, Ms, Ns, Md, Nd, oy, ox, pad,
// tiles_n (tile columns: enough for BN * tiles_n - SECTOR + 1 >= Nd), n_tiles.
#include "tunebox/async_copy.cuh"
#include "tunebox/copy_tiles.cuh"

namespace {

using namespace tb;

constexpr int SECTOR = 16;  // elements: 32 bytes

// Whether tile (i0, j0) takes the INTERIOR path: its box's columns inside src (for the destination rows
// inside dst), the box rows of its destination columns inside [0, Nd) inside src, and the last one's
// window inside the array (a window starts at floor_to(f, SECTOR) >= 0).
template <int BM, int BN>
__device__ __forceinline__ bool windowed_interior(i64 Ms, i64 Ns, i64 Md, i64 Nd, i64 oy, i64 ox, i64 i0, i64 j0) {
  const i64 c0 = ox + i0, rows = Md - i0 < BM ? Md - i0 : BM;
  const i64 j_first = j0 - SECTOR + 1 > 0 ? j0 - SECTOR + 1 : 0, j_end = j0 + BN < Nd ? j0 + BN : Nd;
  return c0 >= 0 && c0 + rows <= Ns && oy + j_first >= 0 && oy + j_end <= Ms &&
         floor_to((oy + j_end - 1) * Ns + c0, SECTOR) + BM + SECTOR <= Ms * Ns;
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

// tile.cuh's strided with the thread's index read afresh at each call, a value NVVM cannot hoist out of
// the ring's loop over tiles (hoisting every unrolled index's arithmetic across tiles took 128 registers).
template <int TOTAL, int THREADS, class F>
__device__ __forceinline__ void strided_per_tile(F&& f) {
  int thread;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(thread));
#pragma unroll
  for (int k = 0; k < (TOTAL + THREADS - 1) / THREADS; ++k) {
    const int idx = thread + k * THREADS;
    if (TOTAL % THREADS == 0 || idx < TOTAL) f(idx);
  }
}

// The stage's s_q = f_q mod SECTOR, f_q the flat offset of box row q's first element, as (s0 + q * step)
// mod SECTOR (f_q grows by Ns a row; the low bits of a product are those of its 32-bit product, negative
// factors included); CHECKED rows are staged from their start (s0 = step = 0).
struct RowOffsets {
  int s0, step;
};

template <bool CHECK>
__device__ __forceinline__ RowOffsets row_offsets(i64 Ns, i64 oy, i64 ox, i64 i0, i64 j0) {
  if (CHECK) return {0, 0};
  const i64 rb = oy + j0 - SECTOR + 1, c0 = ox + i0;
  return {(int)(((u32)rb * (u32)Ns + (u32)c0) & (SECTOR - 1)), (int)((u32)Ns & (SECTOR - 1))};
}

// Stages tile (i0, j0)'s BN + SECTOR - 1 source rows (box row 0: destination column j0 - SECTOR + 1) in
// `stage`: INTERIOR whole windows (by cp.async where the pitch keeps them aligned: the caller commits and
// waits), CHECKED element by element.
template <class Cfg, bool CHECK>
__device__ __forceinline__ void stage_tile(const u16* __restrict__ src, unsigned char* stage, i64 Ms, i64 Ns, i64 Nd,
                                           i64 oy, i64 ox, u16 pad, i64 i0, i64 j0) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, THREADS = Cfg::THREADS, VEC = Cfg::VEC, PITCH = Cfg::PITCH;
  constexpr int ROWS = BN + SECTOR - 1;
  const i64 jb = j0 - SECTOR + 1, rb = oy + jb, c0 = ox + i0;
  if (!CHECK) {
    constexpr int SLOTS = (BM + SECTOR) / VEC;
    const RowOffsets o = row_offsets<false>(Ns, oy, ox, i0, j0);
    strided_per_tile<ROWS * SLOTS, THREADS>([&](int idx) {
      const int q = idx / SLOTS, k = idx % SLOTS;
      if ((u64)(jb + q) >= (u64)Nd) return;  // no destination column: never read
      const u16* from = src + ((rb + q) * Ns + c0 - ((o.s0 + q * o.step) & (SECTOR - 1)) + k * VEC);
      unsigned char* to = stage + q * PITCH + k * 2 * VEC;
      if constexpr (PITCH % (2 * VEC) == 0) {
        cp_async_copy<2 * VEC>(to, from);
      } else {  // an odd word count: words
        Vec<u16, VEC> v;
        v.raw = __ldg(reinterpret_cast<const typename Raw<2 * VEC>::type*>(from));
#pragma unroll
        for (int m = 0; m < VEC / 2; ++m) reinterpret_cast<u32*>(to)[m] = reinterpret_cast<const u32*>(v.e)[m];
      }
    });
  } else {
    strided_per_tile<ROWS * BM, THREADS>([&](int idx) {
      const int q = idx / BM, c = idx % BM;
      const i64 r = rb + q, col = c0 + c;
      reinterpret_cast<u16*>(stage + q * PITCH)[c] = in_range(r, Ms) && in_range(col, Ns) ? src[r * Ns + col] : pad;
    });
  }
}

// Stores destination tile (i0, j0) from its `stage`, clipped to dst.
template <class Cfg, bool CHECK>
__device__ __forceinline__ void store_tile(u16* __restrict__ dst, const unsigned char* stage, i64 Ns, i64 Md, i64 Nd,
                                           i64 oy, i64 ox, i64 i0, i64 j0) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, THREADS = Cfg::THREADS, VEC = Cfg::VEC, PITCH = Cfg::PITCH;
  const RowOffsets o = row_offsets<CHECK>(Ns, oy, ox, i0, j0);
  const u32 shared_stage = (u32)__cvta_generic_to_shared(stage);
  // two neighbouring threads take two neighbouring vectors of one destination row (a sector when VEC is
  // 8), the next two the next row's (the next column of the stage)
  constexpr int VECTORS = BN / VEC;
  strided_per_tile<BM * VECTORS, THREADS>([&](int idx) {
    const int i = (idx / 2) % BM, k = idx / (2 * BM) * 2 + idx % 2;
    if (i0 + i >= Md) return;
    const int lead = (int)(((u32)(i0 + i) * (u32)Nd) & (SECTOR - 1));  // L_i
    const i64 j = j0 - lead + k * VEC;  // the vector's first destination column
    if (j >= Nd || j + VEC <= 0) return;
    const int q = SECTOR - 1 - lead + k * VEC;  // its box row
    const u32 column = shared_stage + q * PITCH + 2 * i;
    const int twice_s = 2 * (o.s0 + q * o.step);  // twice s_q (mod 2 * SECTOR): the element's byte offset
    Vec<u16, VEC> v;
#pragma unroll
    for (int e = 0; e < VEC; ++e)
      v.e[e] = load_shared_u16(column + ((twice_s + 2 * e * o.step) & (2 * SECTOR - 2)) + e * PITCH);
    u16* base = dst + ((i0 + i) * Nd + j);
    if (j >= 0 && j + VEC <= Nd) {
      store_whole<VEC>(base, v);
    } else {
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        if ((u64)(j + e) < (u64)Nd) base[e] = v.e[e];
    }
  });
}

}  // namespace

template <class Cfg>
__device__ __forceinline__ void tile_copy_windowed_body(const u16* __restrict__ src, u16* __restrict__ dst, long long Ms,
                                                        long long Ns, long long Md, long long Nd, long long oy,
                                                        long long ox, u16 pad, long long tiles_n, long long n_tiles) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, VEC = Cfg::VEC, TPB = Cfg::TPB, STAGES = Cfg::STAGES;
  static_assert(sizeof(typename Cfg::T) == 2 && VEC >= 2 && BM % VEC == 0 && BN % SECTOR == 0,
                "2-byte elements in vectors of whole words dividing the tile, tile rows of whole sectors");
  static_assert(Cfg::PITCH % 4 == 0 && Cfg::PITCH >= 2 * (BM + SECTOR), "a staged row holds its window in words");
  static_assert(STAGES >= 1 && STAGES <= TPB && Cfg::STAGE_BYTES % 16 == 0 &&
                    Cfg::STAGE_BYTES >= (BN + SECTOR - 1) * Cfg::PITCH,
                "a ring of at most TPB aligned stages, each the rows a tile reads");
  extern __shared__ __align__(16) unsigned char smem[];
  const i64 first = (i64)blockIdx.x * TPB;
  if (first >= n_tiles) return;
  const i64 count = n_tiles - first < TPB ? n_tiles - first : TPB;
  auto at = [&](i64 step, i64& i0, i64& j0) {
    const i64 tile = first + step;
    i0 = (tile / tiles_n) * BM;
    j0 = (tile % tiles_n) * BN;
  };
  // STAGES - 1 tiles' windows in flight (cp.async) while a tile is stored
  cp_async_ring<STAGES>(
      count,
      [&](i64 step, int buffer) {
        i64 i0, j0;
        at(step, i0, j0);
        unsigned char* stage = smem + buffer * Cfg::STAGE_BYTES;
        if (windowed_interior<BM, BN>(Ms, Ns, Md, Nd, oy, ox, i0, j0))
          stage_tile<Cfg, false>(src, stage, Ms, Ns, Nd, oy, ox, pad, i0, j0);
        else
          stage_tile<Cfg, true>(src, stage, Ms, Ns, Nd, oy, ox, pad, i0, j0);
      },
      [&](i64 step, int buffer) {
        i64 i0, j0;
        at(step, i0, j0);
        const unsigned char* stage = smem + buffer * Cfg::STAGE_BYTES;
        if (windowed_interior<BM, BN>(Ms, Ns, Md, Nd, oy, ox, i0, j0))
          store_tile<Cfg, false>(dst, stage, Ns, Md, Nd, oy, ox, i0, j0);
        else
          store_tile<Cfg, true>(dst, stage, Ns, Md, Nd, oy, ox, i0, j0);
      });
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS) tile_copy_windowed(const __grid_constant__ typename Cfg::Args a) {
  tile_copy_windowed_body<Cfg>(a.src, a.dst, a.Ms, a.Ns, a.Md, a.Nd, a.oy, a.ox, a.pad, a.tiles_n, a.n_tiles);
}
