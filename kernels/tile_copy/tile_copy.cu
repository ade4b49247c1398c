// Family tile_copy: dst (Md, Nd) <- src (Ms, Ns) read at origin (oy, ox), optionally transposed.
//
//   not transposed: dst[i][j] = src[oy + i][ox + j]
//   transposed:     dst[i][j] = src[oy + j][ox + i]
// Destination elements whose source lies outside src take the padding bits `pad`.
//
// Two kernels here (the TMA template is in tile_copy_tma.cu):
//   tile_copy           template "vector": ld/st vectors, in registers or staged through shared memory;
//   tile_copy_cp_async  template "cp_async": the source blocks of a block's tiles stream into a ring of
//                       STAGES shared buffers by cp.async, STAGES - 1 tiles ahead of the stores.
// Each takes the configuration struct Cfg (tunebox/families/tile_copy/staged.py renders it): T element
// bits type; BM x BN destination tile; THREADS per block; VEC elements per vector access; BOUNDS
// (tb::Bounds); STAGING 0 (registers only, not transposed) or a tb::Staging layout (through shared
// memory); TPB tiles per block; STAGES shared buffers (cp_async only); TRANSPOSE; SHARED_BYTES the
// dynamic shared memory the launch gives, which the staged layout must fit. Each kernel takes its
// arguments as the one struct Cfg::Args (staged.py's args describe it): src, dst, Ms, Ns, Md, Nd, oy,
// ox, pad, tiles_n (destination tiles per row), n_tiles; a thin wrapper hands them to the kernel's
// body, whose __restrict__ pointers keep the aliasing facts.
#include "tunebox/async_copy.cuh"
#include "tunebox/copy_tiles.cuh"

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

template <int V>
struct Constant {
  enum { value = V };  // no storage: nothing for the object code to name
};

// Calls f(Constant<path>()): a path chosen at run time selects one of three instantiations of f.
template <typename F>
__device__ __forceinline__ void on_path(int path, F f) {
  if (path == FAST_PATH)
    f(Constant<FAST_PATH>());
  else if (path == INTERIOR_PATH)
    f(Constant<INTERIOR_PATH>());
  else
    f(Constant<CHECKED_PATH>());
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

// Loads the source block of tile (i0, j0) (H x W: BN x BM when transposed, else BM x BN) into the
// shared `stage` with layout STAGING. Except on the FAST path, rows move in aligned-window slots, so
// rows of any alignment move in aligned vectors.
template <typename E, int BM, int BN, int THREADS, int VEC, int STAGING, bool TRANSPOSE, int PATH>
__device__ __forceinline__ void load_block(const E* __restrict__ src, E* stage, i64 Ms, i64 Ns, i64 oy, i64 ox,
                                           E pad, i64 i0, i64 j0) {
  constexpr int H = TRANSPOSE ? BN : BM, W = TRANSPOSE ? BM : BN;
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
    strided<TOTAL, THREADS>([&](int idx) {
      const int r = idx / SLOTS;
      load_slot<E, VEC, W, PATH == CHECKED_PATH>(src, Ms, Ns, r0 + r, c0, idx % SLOTS, pad,
                                                [&](int c, E v) { at(r, c) = v; });
    });
  }
}

// Issues the loads of the source block of tile (i0, j0) into the shared `stage` (layout STAGING,
// which keeps each vector contiguous and aligned): one cp.async per vector that lies inside src and
// is aligned (every vector when !CHECK), element loads with `pad` outside src otherwise. The data is
// in place once the calling thread's group completed and the block synchronised.
template <typename E, int BM, int BN, int THREADS, int VEC, int STAGING, bool TRANSPOSE, bool CHECK>
__device__ __forceinline__ void cp_async_block(const E* __restrict__ src, E* stage, i64 Ms, i64 Ns, i64 oy, i64 ox,
                                               E pad, i64 i0, i64 j0) {
  constexpr int H = TRANSPOSE ? BN : BM, W = TRANSPOSE ? BM : BN;
  constexpr int PER_ROW = W / VEC, LOADS = H * PER_ROW / THREADS;
  const i64 r0 = oy + (TRANSPOSE ? j0 : i0), c0 = ox + (TRANSPOSE ? i0 : j0);
#pragma unroll
  for (int k = 0; k < LOADS; ++k) {
    const int idx = threadIdx.x + k * THREADS;
    const int r = idx / PER_ROW, c = (idx % PER_ROW) * VEC;
    const i64 gr = r0 + r, gc = c0 + c, off = gr * Ns + gc;
    const bool row_ok = in_range(gr, Ms);
    cp_async_or_elements<VEC>(
        !CHECK || (row_ok && gc >= 0 && gc + VEC <= Ns && off % VEC == 0), src, off,
        [&](int e) -> E& { return stage[staged_index<E, W, STAGING, VEC>(r, c + e)]; },
        [&](int e) { return row_ok && in_range(gc + e, Ns); }, pad);
  }
}

// Stores destination tile (i0, j0) from the source block in the shared `stage` (layout STAGING).
// Except on the FAST path, rows move in aligned-window slots clipped at dst's edges.
template <typename E, int BM, int BN, int THREADS, int VEC, int STAGING, bool TRANSPOSE, int PATH>
__device__ __forceinline__ void store_block(E* __restrict__ dst, const E* stage, i64 Md, i64 Nd, i64 i0, i64 j0) {
  constexpr int W = TRANSPOSE ? BM : BN;
  auto value = [&](int i, int j) -> E {
    return TRANSPOSE ? stage[staged_index<E, W, STAGING, VEC>(j, i)] : stage[staged_index<E, W, STAGING, VEC>(i, j)];
  };
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
    strided<TOTAL, THREADS>([&](int idx) {
      const int i = idx / SLOTS;
      store_slot<E, VEC, BN, PATH == CHECKED_PATH>(dst, Md, Nd, i0 + i, j0, idx % SLOTS,
                                                  [&](int j) { return value(i, j); });
    });
  }
}

// The first row and column of destination tile `tile` (tiles numbered row-major, tiles_n per row).
template <int BM, int BN>
__device__ __forceinline__ void tile_origin(i64 tile, i64 tiles_n, i64& i0, i64& j0) {
  i0 = (tile / tiles_n) * BM;
  j0 = (tile % tiles_n) * BN;
}

// Elements from one row to the next of a shared tile of W-element rows staged with layout S (the
// row pitch of tb::staged_index: one 32-bit bank word more per row when PADDED).
template <typename E, int W, int S>
constexpr int staged_pitch() {
  return S == PADDED ? W + (sizeof(E) >= 4 ? 1 : 4 / (int)sizeof(E)) : W;
}

}  // namespace

template <class Cfg>
__device__ __forceinline__ void tile_copy_body(const typename Cfg::T* __restrict__ src,
                                               typename Cfg::T* __restrict__ dst, long long Ms, long long Ns,
                                               long long Md, long long Nd, long long oy, long long ox,
                                               typename Cfg::T pad, long long tiles_n, long long n_tiles) {
  using E = typename Cfg::T;
  constexpr int BM = Cfg::BM, BN = Cfg::BN, THREADS = Cfg::THREADS, VEC = Cfg::VEC, BOUNDS = Cfg::BOUNDS;
  constexpr int STAGING = Cfg::STAGING, TPB = Cfg::TPB;
  constexpr bool TRANSPOSE = Cfg::TRANSPOSE, STAGED = STAGING != 0;
  constexpr int H = TRANSPOSE ? BN : BM, W = TRANSPOSE ? BM : BN;  // the staged source block
  static_assert(!STAGED || H * staged_pitch<E, W, STAGING>() * (int)sizeof(E) <= Cfg::SHARED_BYTES,
                "the staged source block fits in the dynamic shared memory of the launch");
  extern __shared__ __align__(16) unsigned char smem[];
  E* stage = reinterpret_cast<E*>(smem);
  for_block_tiles<BM, BN, TPB>(tiles_n, n_tiles, [&](i64 i0, i64 j0) {
    const int path = choose_path<BM, BN, VEC, BOUNDS, STAGED, TRANSPOSE>(Ms, Ns, Md, Nd, oy, ox, i0, j0);
    on_path(path, [&](auto chosen) {
      constexpr int PATH = decltype(chosen)::value;
      if constexpr (STAGED) {
        load_block<E, BM, BN, THREADS, VEC, STAGING, TRANSPOSE, PATH>(src, stage, Ms, Ns, oy, ox, pad, i0, j0);
        __syncthreads();
        store_block<E, BM, BN, THREADS, VEC, STAGING, TRANSPOSE, PATH>(dst, stage, Md, Nd, i0, j0);
        __syncthreads();  // the next tile reuses the stage
      } else {
        copy_tile<E, BM, BN, THREADS, VEC, PATH != FAST_PATH>(src, dst, Ms, Ns, Md, Nd, oy, ox, pad, i0, j0);
      }
    });
  });
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS) tile_copy(const __grid_constant__ typename Cfg::Args a) {
  tile_copy_body<Cfg>(a.src, a.dst, a.Ms, a.Ns, a.Md, a.Nd, a.oy, a.ox, a.pad, a.tiles_n, a.n_tiles);
}

template <class Cfg>
__device__ __forceinline__ void tile_copy_cp_async_body(const typename Cfg::T* __restrict__ src,
                                                        typename Cfg::T* __restrict__ dst, long long Ms, long long Ns,
                                                        long long Md, long long Nd, long long oy, long long ox,
                                                        typename Cfg::T pad, long long tiles_n, long long n_tiles) {
  using E = typename Cfg::T;
  constexpr int BM = Cfg::BM, BN = Cfg::BN, THREADS = Cfg::THREADS, VEC = Cfg::VEC, BOUNDS = Cfg::BOUNDS;
  constexpr int STAGING = Cfg::STAGING, TPB = Cfg::TPB, STAGES = Cfg::STAGES;
  constexpr bool TRANSPOSE = Cfg::TRANSPOSE;
  static_assert(STAGING != 0 && STAGES >= 1, "a ring of shared buffers");
  constexpr int H = TRANSPOSE ? BN : BM, W = TRANSPOSE ? BM : BN;
  constexpr int STAGE_BYTES = (H * staged_pitch<E, W, STAGING>() * (int)sizeof(E) + 15) / 16 * 16;  // one buffer
  static_assert(STAGES * STAGE_BYTES <= Cfg::SHARED_BYTES, "the ring fits in the dynamic shared memory of the launch");
  extern __shared__ __align__(16) unsigned char smem[];
  const i64 first = (i64)blockIdx.x * TPB;
  const int count = (int)(n_tiles - first < TPB ? n_tiles - first : TPB);
  auto stage = [&](int t) { return reinterpret_cast<E*>(smem + (t % STAGES) * STAGE_BYTES); };
  auto path_of = [&](i64 i0, i64 j0) {
    return choose_path<BM, BN, VEC, BOUNDS, true, TRANSPOSE>(Ms, Ns, Md, Nd, oy, ox, i0, j0);
  };
  auto load = [&](int t) {  // issues tile t's loads into its buffer
    i64 i0, j0;
    tile_origin<BM, BN>(first + t, tiles_n, i0, j0);
    if (path_of(i0, j0) == FAST_PATH)
      cp_async_block<E, BM, BN, THREADS, VEC, STAGING, TRANSPOSE, false>(src, stage(t), Ms, Ns, oy, ox, pad, i0, j0);
    else
      cp_async_block<E, BM, BN, THREADS, VEC, STAGING, TRANSPOSE, true>(src, stage(t), Ms, Ns, oy, ox, pad, i0, j0);
  };
#pragma unroll 1
  for (int t = 0; t < STAGES - 1; ++t) {
    if (t < count) load(t);
    cp_async_commit_group();  // one group per tile, empty past the run: wait<STAGES - 1> counts tiles
  }
#pragma unroll 1
  for (int t = 0; t < count; ++t) {
    if (t + STAGES - 1 < count) load(t + STAGES - 1);
    cp_async_commit_group();
    cp_async_wait_group<STAGES - 1>();  // tile t's group is complete
    __syncthreads();
    i64 i0, j0;
    tile_origin<BM, BN>(first + t, tiles_n, i0, j0);
    on_path(path_of(i0, j0), [&](auto chosen) {
      store_block<E, BM, BN, THREADS, VEC, STAGING, TRANSPOSE, decltype(chosen)::value>(dst, stage(t), Md, Nd, i0,
                                                                                       j0);
    });
    __syncthreads();  // the next iteration refills this buffer
  }
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS) tile_copy_cp_async(const __grid_constant__ typename Cfg::Args a) {
  tile_copy_cp_async_body<Cfg>(a.src, a.dst, a.Ms, a.Ns, a.Md, a.Nd, a.oy, a.ox, a.pad, a.tiles_n, a.n_tiles);
}
