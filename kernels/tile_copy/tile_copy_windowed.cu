// Family tile_copy, template "windowed": a transpose of 2-byte elements, dst[i][j] = src[oy + j][ox + i],
// whose rows may have any alignment (odd Ns, Nd, origins).
//
// The BN source rows of destination tile (i0, j0) are staged as they lie in memory: source row q of the
// box (flat offset f_q = (oy + j0 + q) * Ns + ox + i0 of its first element) as its aligned window of
// BM + VEC elements from floor_to(f_q, VEC), in BM / VEC + 1 aligned vectors, so a staged row starts
// s_q = f_q mod VEC elements in. Destination row i's segment [j0, j0 + BN) is stored in tile.cuh's
// aligned-window slots: a slot's VEC elements (source rows q = first .. first + VEC - 1 of column i) are
// read from the stage one 2-byte load each, at element i + s_q of staged row q, and stored in one aligned
// vector. The stage keeps VEC - 1 spare rows before and after the box's rows, so a slot that starts before
// the segment or ends after it reads spare rows for the elements it does not store.
// INTERIOR (the box inside src, the tile inside dst, every window inside the array) loads whole
// windows; any other tile stages the box element by element (`pad` outside src) with s_q = 0 and
// clips its stores (CHECKED).
// Cfg (tunebox/families/tile_copy/windowed.py renders it): T the 2-byte bits type; BM x BN tile;
// THREADS; VEC elements per vector (2, 4 or 8); TPB tiles per block; PITCH bytes per staged row (a
// multiple of 4, at least 2 * (BM + VEC); an odd number of words puts a warp's two slots of a row, VEC
// staged rows apart, on other banks). Cfg::Args: src, dst, Ms, Ns, Md, Nd, oy, ox, pad,
// tiles_n, n_tiles.
#include "tunebox/copy_tiles.cuh"

namespace {

using namespace tb;

// Whether tile (i0, j0) takes the INTERIOR path: its source box inside src, the tile inside dst, and
// the last box row's window inside the array (the first one's starts at floor_to(f_0, VEC) >= 0).
template <int BM, int BN, int VEC>
__device__ __forceinline__ bool windowed_interior(i64 Ms, i64 Ns, i64 Md, i64 Nd, i64 oy, i64 ox, i64 i0, i64 j0) {
  const i64 r0 = oy + j0, c0 = ox + i0;
  return box_inside(r0, c0, BN, BM, Ms, Ns) && i0 + BM <= Md && j0 + BN <= Nd &&
         floor_to((r0 + BN - 1) * Ns + c0, VEC) + BM + VEC <= Ms * Ns;
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

// Moves destination tile (i0, j0) through `stage` (BN + 2 * (VEC - 1) rows of PITCH bytes; the box's
// row q at row q + VEC - 1).
template <class Cfg, bool CHECK>
__device__ __forceinline__ void windowed_tile(const u16* __restrict__ src, u16* __restrict__ dst,
                                              unsigned char* stage, i64 Ms, i64 Ns, i64 Md, i64 Nd, i64 oy, i64 ox,
                                              u16 pad, i64 i0, i64 j0) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, THREADS = Cfg::THREADS, VEC = Cfg::VEC, PITCH = Cfg::PITCH;
  typedef typename Raw<2 * VEC>::type R;
  unsigned char* rows = stage + (VEC - 1) * PITCH;  // the box's row 0
  const i64 r0 = oy + j0, c0 = ox + i0;
  // s_q = f_q mod VEC = (s0 + q * step) mod VEC (f_q grows by Ns a row; INTERIOR: f_0 >= 0, and the low
  // bits of a product are those of its 32-bit product); CHECKED rows are staged from their start
  const int s0 = CHECK ? 0 : (int)(((u32)r0 * (u32)Ns + (u32)c0) & (VEC - 1));
  const int step = CHECK ? 0 : (int)((u32)Ns & (VEC - 1));
  if (!CHECK) {
    constexpr int SLOTS = BM / VEC + 1;
    strided<BN * SLOTS, THREADS>([&](int idx) {
      const int q = idx / SLOTS, k = idx % SLOTS;
      const i64 from = (r0 + q) * Ns + c0 - ((s0 + q * step) & (VEC - 1)) + k * VEC;
      Vec<u16, VEC> v;
      v.raw = __ldg(reinterpret_cast<const R*>(src + from));
      u32* to = reinterpret_cast<u32*>(rows + q * PITCH + k * 2 * VEC);  // 4-byte aligned: PITCH may be
#pragma unroll
      for (int m = 0; m < VEC / 2; ++m) to[m] = reinterpret_cast<const u32*>(v.e)[m];  // an odd word count
    });
  } else {
    strided<BN * BM, THREADS>([&](int idx) {
      const int q = idx / BM, c = idx % BM;
      const i64 r = r0 + q, col = c0 + c;
      reinterpret_cast<u16*>(rows + q * PITCH)[c] = in_range(r, Ms) && in_range(col, Ns) ? src[r * Ns + col] : pad;
    });
  }
  __syncthreads();
  const u32 shared_rows = (u32)__cvta_generic_to_shared(rows);
  // two neighbouring threads take two neighbouring slots of one destination row (2 * VEC contiguous
  // elements of it), the next two the next row's (the next column of the stage)
  constexpr int SLOTS = BN / VEC + 1, PAIRS = (SLOTS + 1) / 2;
  const int width = segment_width<BN, CHECK>(Nd, j0);
  strided<PAIRS * BM * 2, THREADS>([&](int idx) {
    const int i = (idx / 2) % BM, k = idx / (2 * BM) * 2 + idx % 2;
    if (k >= SLOTS || (CHECK && i0 + i >= Md)) return;
    // destination row i's segment starts `lead` elements past an aligned offset (g >= 0)
    const int lead = (int)(((u32)(i0 + i) * (u32)Nd + (u32)j0) & (VEC - 1));
    const int first = k * VEC - lead;  // segment column (box row) of the slot's element 0
    if (first >= width) return;        // the spare slot of an aligned segment
    const u32 column = shared_rows + first * PITCH + 2 * i;
    const int twice_s = 2 * (s0 + first * step);  // twice s_q (mod 2 * VEC): the element's byte offset
    Vec<u16, VEC> v;
#pragma unroll
    for (int e = 0; e < VEC; ++e) v.e[e] = load_shared_u16(column + ((twice_s + 2 * e * step) & (2 * VEC - 2)) + e * PITCH);
    u16* base = dst + ((i0 + i) * Nd + j0 + first);
    if (first >= 0 && first + VEC <= width) {
      store_whole<VEC>(base, v);
    } else {
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        if ((unsigned)(first + e) < (unsigned)width) base[e] = v.e[e];
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
  static_assert(sizeof(typename Cfg::T) == 2 && VEC >= 2 && BM % VEC == 0 && BN % VEC == 0,
                "2-byte elements in vectors of whole words dividing the tile");
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
