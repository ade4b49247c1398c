// Families gather and scatter: rows moved by index (0-based, row-major).
//
//   gather:  out[k, :] = valid(k) ? A[idx[k] + offset, :] : pad        for k < K; A is (N, D), out (K, D)
//   scatter: A[idx[k] + offset, :] = V[k, :]                         for each k < K with valid(k)
// valid(k) = mask[k] != 0 (masked kernels only) and 0 <= idx[k] + offset < N: negative rows are out
// of range (no wrap-around), so -1 is a padding sentinel that never touches memory. An invalid gather
// row writes the padding bits without reading A; an invalid scatter row writes nothing. CHECK=false
// promises that every index is valid (the mask, if any, is still honoured).
//
// The Warp tile_load_indexed / cuTile sparse-view forms of gather, with a dense range of `window`
// elements from `start` (dense_offset) on the other axis, padding wherever it leaves A:
//   gather_window (axis 0): out[k, j] = A[idx[k] + offset, start + j]    for j < window; out (K, window)
//   gather_cols   (axis 1): out[j, k] = A[start + j, idx[k] + offset]    for j < window; out (window, K)
// where for axis 1 valid(k) tests 0 <= idx[k] + offset < D. The dense range is always checked.
//
// Configuration (the kernels' struct Cfg, see the end of this file): E element bits type; I index
// type (int or long long); RPB rows (indices) per block; THREADS per block, split into RPB teams of
// THREADS / RPB threads, one team per row, whose threads stride over the row's vectors; VEC elements
// per vector access; CHECK bounds test.
// A row moves in VEC-element vectors when the row pitch D and both base addresses allow it, else in
// the widest narrower vector that fits (element by element at worst): the width is chosen once per
// launch, so every D works. Row offsets use 64-bit arithmetic: N beyond 2^31 rows and offsets beyond
// 2^31 work with either index type. gather_cols gives each thread VEC consecutive entries (indices
// read once) and each block RPB output rows; see there.
#include "tunebox/tile.cuh"

namespace {

using namespace tb;

// The row entry k refers to, or -1 when it is invalid. The sum wraps in unsigned arithmetic instead
// of overflowing; with |offset| < 2^62 (enforced on the host) a wrapped sum is never below N.
template <typename I, bool CHECK, bool MASK>
__device__ __forceinline__ i64 target_row(const I* __restrict__ idx, const u8* __restrict__ mask, i64 k, i64 N,
                                          i64 offset) {
  if (MASK && __ldg(mask + k) == 0) return -1;
  const u64 r = (u64)(i64)__ldg(idx + k) + (u64)offset;
  if (!CHECK) return (i64)r;
  return r < (u64)N ? (i64)r : -1;
}

// Threads 0 .. RPB-1 read the block's indices (and mask bytes) once, into shared memory.
template <typename I, int RPB, bool CHECK, bool MASK>
__device__ __forceinline__ void stage_rows(const I* __restrict__ idx, const u8* __restrict__ mask, i64 N, i64 K,
                                           i64 offset, i64* rows) {
  if (threadIdx.x < RPB) {
    const i64 k = (i64)blockIdx.x * RPB + threadIdx.x;
    rows[threadIdx.x] = k < K ? target_row<I, CHECK, MASK>(idx, mask, k, N, offset) : -1;
  }
  __syncthreads();
}

// Copies the D-element row src to dst (team lane `lane` of TEAM), or fills dst with `pad` when src
// is null, in W-element vectors.
template <typename E, int W, int TEAM>
__device__ __forceinline__ void move_row(const E* __restrict__ src, E* __restrict__ dst, i64 D, int lane, E pad) {
  typedef typename Raw<W * sizeof(E)>::type R;
  const i64 n = D / W;
  R* d = reinterpret_cast<R*>(dst);
  if (src != nullptr) {
    const R* s = reinterpret_cast<const R*>(src);
#pragma unroll 4
    for (i64 v = lane; v < n; v += TEAM) d[v] = __ldg(s + v);
  } else {
    Vec<E, W> p;
#pragma unroll
    for (int e = 0; e < W; ++e) p.e[e] = pad;
#pragma unroll 4
    for (i64 v = lane; v < n; v += TEAM) d[v] = p.raw;
  }
}

template <typename E, int RPB, int THREADS, int W>
__device__ __forceinline__ void gather_block(const E* __restrict__ A, E* __restrict__ out, i64 D, i64 K, E pad,
                                             const i64* rows) {
  constexpr int TEAM = THREADS / RPB;
  const int t = threadIdx.x / TEAM;
  const i64 k = (i64)blockIdx.x * RPB + t;
  if (k >= K) return;
  const i64 r = rows[t];
  move_row<E, W, TEAM>(r >= 0 ? A + r * D : nullptr, out + k * D, D, threadIdx.x % TEAM, pad);
}

template <typename E, int RPB, int THREADS, int W>
__device__ __forceinline__ void scatter_block(const E* __restrict__ V, E* __restrict__ A, i64 D, i64 K,
                                              const i64* rows) {
  constexpr int TEAM = THREADS / RPB;
  const int t = threadIdx.x / TEAM;
  const i64 k = (i64)blockIdx.x * RPB + t;
  if (k >= K) return;
  const i64 r = rows[t];
  if (r < 0) return;  // an invalid entry writes nothing
  move_row<E, W, TEAM>(V + k * D, A + r * D, D, threadIdx.x % TEAM, E(0));
}

// The block's rows at the widest vector of at most W elements that fits the problem.
template <typename E, int RPB, int THREADS, int W>
__device__ __forceinline__ void gather_at_width(const E* __restrict__ A, E* __restrict__ out, i64 D, i64 K, E pad,
                                                const i64* rows) {
  if constexpr (W > 1) {
    if (!vector_fits<E, W>(D, A, out)) return gather_at_width<E, RPB, THREADS, W / 2>(A, out, D, K, pad, rows);
  }
  gather_block<E, RPB, THREADS, W>(A, out, D, K, pad, rows);
}

template <typename E, int RPB, int THREADS, int W>
__device__ __forceinline__ void scatter_at_width(const E* __restrict__ V, E* __restrict__ A, i64 D, i64 K,
                                                 const i64* rows) {
  if constexpr (W > 1) {
    if (!vector_fits<E, W>(D, V, A)) return scatter_at_width<E, RPB, THREADS, W / 2>(V, A, D, K, rows);
  }
  scatter_block<E, RPB, THREADS, W>(V, A, D, K, rows);
}

template <typename E, typename I, int RPB, int THREADS, int VEC, bool CHECK, bool MASK>
__device__ __forceinline__ void gather(const E* __restrict__ A, const I* __restrict__ idx, const u8* __restrict__ mask,
                                       E* __restrict__ out, i64 N, i64 D, i64 K, i64 offset, E pad) {
  static_assert(THREADS % RPB == 0, "every row gets a whole team of threads");
  __shared__ i64 rows[RPB];
  stage_rows<I, RPB, CHECK, MASK>(idx, mask, N, K, offset, rows);
  gather_at_width<E, RPB, THREADS, VEC>(A, out, D, K, pad, rows);
}

// ---- gather_window (axis 0): a segment of each row.

// True when segments of `window` elements from column `start` of D-element rows, and the output
// rows of `window` elements, move in W-element vectors: no vector then straddles either end of a row.
template <typename E, int W>
__device__ __forceinline__ bool segment_fits(i64 D, i64 start, i64 window, const void* a, const void* b) {
  constexpr u64 BYTES = W * sizeof(E);
  return (D % W) == 0 && (start % W) == 0 && (window % W) == 0 && ((u64)a % BYTES) == 0 &&
         ((u64)b % BYTES) == 0;
}

// dst[j] = row[start + j] for j < window where 0 <= start + j < D, else `pad` (all of dst when row
// is null), in W-element vectors (team lane `lane` of TEAM).
template <typename E, int W, int TEAM>
__device__ __forceinline__ void move_segment(const E* __restrict__ row, E* __restrict__ dst, i64 D, i64 start,
                                             i64 window, int lane, E pad) {
  typedef typename Raw<W * sizeof(E)>::type R;
  const i64 n = window / W;
  // [lo, hi): the positions j inside the row (multiples of W, as segment_fits holds)
  i64 lo = 0, hi = 0;
  if (row != nullptr) {
    lo = start < 0 ? (-start < window ? -start : window) : 0;
    hi = D - start < window ? D - start : window;
    if (hi < lo) hi = lo;
  }
  const i64 v0 = lo / W, v1 = hi / W;
  Vec<E, W> p;
#pragma unroll
  for (int e = 0; e < W; ++e) p.e[e] = pad;
  R* d = reinterpret_cast<R*>(dst);
#pragma unroll 4
  for (i64 v = lane; v < n; v += TEAM)
    d[v] = (v >= v0 && v < v1) ? __ldg(reinterpret_cast<const R*>(row + start + v * W)) : p.raw;
}

template <typename E, int RPB, int THREADS, int W>
__device__ __forceinline__ void gather_window_block(const E* __restrict__ A, E* __restrict__ out, i64 D, i64 K,
                                                    i64 start, i64 window, E pad, const i64* rows) {
  constexpr int TEAM = THREADS / RPB;
  const int t = threadIdx.x / TEAM;
  const i64 k = (i64)blockIdx.x * RPB + t;
  if (k >= K) return;
  const i64 r = rows[t];
  move_segment<E, W, TEAM>(r >= 0 ? A + r * D : nullptr, out + k * window, D, start, window, threadIdx.x % TEAM,
                           pad);
}

template <typename E, int RPB, int THREADS, int W>
__device__ __forceinline__ void gather_window_at_width(const E* __restrict__ A, E* __restrict__ out, i64 D, i64 K,
                                                       i64 start, i64 window, E pad, const i64* rows) {
  if constexpr (W > 1) {
    if (!segment_fits<E, W>(D, start, window, A, out))
      return gather_window_at_width<E, RPB, THREADS, W / 2>(A, out, D, K, start, window, pad, rows);
  }
  gather_window_block<E, RPB, THREADS, W>(A, out, D, K, start, window, pad, rows);
}

template <typename E, typename I, int RPB, int THREADS, int VEC, bool CHECK, bool MASK>
__device__ __forceinline__ void gather_segments(const E* __restrict__ A, const I* __restrict__ idx,
                                                const u8* __restrict__ mask, E* __restrict__ out, i64 N, i64 D,
                                                i64 K, i64 offset, i64 start, i64 window, E pad) {
  static_assert(THREADS % RPB == 0, "every row gets a whole team of threads");
  __shared__ i64 rows[RPB];
  stage_rows<I, RPB, CHECK, MASK>(idx, mask, N, K, offset, rows);
  gather_window_at_width<E, RPB, THREADS, VEC>(A, out, D, K, start, window, pad, rows);
}

// ---- gather_cols (axis 1): a column of A per entry, a window of rows.
//
// Block b covers entries [kb * THREADS * VEC, (kb + 1) * THREADS * VEC) (kb = b % tiles, entry tiles
// fastest, so concurrent blocks share A's rows in L2) and the strips of RPB output rows rb = b / tiles,
// rb + passes, ... (passes = gridDim.x / tiles: one strip each unless the grid limit caps it). Thread t
// reads the indices (and mask bytes) of its VEC consecutive entries once, then writes them in every
// output row of its strips: consecutive threads store consecutive vectors (coalesced).

// Output rows r0 .. r0 + RPB - 1 of the thread's entries k0 .. k0 + VEC - 1 (column cols[e], or -1),
// stored as W-element vectors (K % W == 0 and `out` aligned: a vector lies wholly below K or not).
template <typename E, int RPB, int VEC, int W>
__device__ __forceinline__ void columns_block(const E* __restrict__ A, E* __restrict__ out, i64 N, i64 D, i64 K,
                                              i64 start, i64 window, E pad, const i64* cols, i64 k0, i64 r0) {
  typedef typename Raw<W * sizeof(E)>::type R;
#pragma unroll
  for (int i = 0; i < RPB; ++i) {
    const i64 r = r0 + i;
    if (r >= window) return;
    const bool row_ok = in_range(start + r, N);
    const E* a = A + (row_ok ? start + r : 0) * D;
    E* o = out + r * K + k0;
#pragma unroll
    for (int s = 0; s < VEC / W; ++s) {
      if (k0 + s * W >= K) break;
      Vec<E, W> v;
#pragma unroll
      for (int e = 0; e < W; ++e) {
        const i64 c = cols[s * W + e];
        v.e[e] = (row_ok && c >= 0) ? __ldg(a + c) : pad;
      }
      *reinterpret_cast<R*>(o + s * W) = v.raw;
    }
  }
}

template <typename E, int RPB, int VEC, int W>
__device__ __forceinline__ void columns_at_width(const E* __restrict__ A, E* __restrict__ out, i64 N, i64 D, i64 K,
                                                 i64 start, i64 window, E pad, const i64* cols, i64 k0, i64 r0) {
  if constexpr (W > 1) {
    if ((K % W) != 0 || ((u64)out % (W * sizeof(E))) != 0)
      return columns_at_width<E, RPB, VEC, W / 2>(A, out, N, D, K, start, window, pad, cols, k0, r0);
  }
  columns_block<E, RPB, VEC, W>(A, out, N, D, K, start, window, pad, cols, k0, r0);
}

template <typename E, typename I, int RPB, int THREADS, int VEC, bool CHECK, bool MASK>
__device__ __forceinline__ void gather_columns(const E* __restrict__ A, const I* __restrict__ idx,
                                               const u8* __restrict__ mask, E* __restrict__ out, i64 N, i64 D, i64 K,
                                               i64 offset, i64 start, i64 window, E pad) {
  constexpr i64 TILE = (i64)THREADS * VEC;
  const i64 tiles = (K + TILE - 1) / TILE;
  const i64 b = blockIdx.x;
  const i64 k0 = (b % tiles) * TILE + (i64)threadIdx.x * VEC;
  if (k0 >= K) return;
  i64 cols[VEC];
#pragma unroll
  for (int e = 0; e < VEC; ++e) cols[e] = k0 + e < K ? target_row<I, CHECK, MASK>(idx, mask, k0 + e, D, offset) : -1;
  // the grid is a multiple of `tiles`; when the strips outnumber it, each block takes every pass-th strip
  const i64 passes = (i64)gridDim.x / tiles;
  for (i64 rb = b / tiles; rb * RPB < window; rb += passes)
    columns_at_width<E, RPB, VEC, VEC>(A, out, N, D, K, start, window, pad, cols, k0, rb * RPB);
}

template <typename E, typename I, int RPB, int THREADS, int VEC, bool CHECK, bool MASK>
__device__ __forceinline__ void scatter(const E* __restrict__ V, const I* __restrict__ idx,
                                        const u8* __restrict__ mask, E* __restrict__ A, i64 N, i64 D, i64 K,
                                        i64 offset) {
  static_assert(THREADS % RPB == 0, "every row gets a whole team of threads");
  __shared__ i64 rows[RPB];
  stage_rows<I, RPB, CHECK, MASK>(idx, mask, N, K, offset, rows);
  scatter_at_width<E, RPB, THREADS, VEC>(V, A, D, K, rows);
}

}  // namespace

// The kernels' one template argument is the named configuration struct (rendered by
// tunebox/families/indexed_rows.py): Cfg::E element bits type, Cfg::I index type (int or long long),
// Cfg::RPB rows (indices) per block, Cfg::THREADS per block, Cfg::VEC elements per vector access,
// Cfg::CHECK bounds test. Whether a mask is read is the kernel's name (the *_masked kernels).
// Each kernel takes its arguments as one struct, Cfg::Args (rendered from the template's args, in
// the order of the body's parameters), and hands its members to its body, whose restrict-qualified
// pointers keep the aliasing facts of separate parameters.
template <class Cfg>
using Elem = typename Cfg::E;
template <class Cfg>
using Index = typename Cfg::I;

template <class Cfg>
__device__ __forceinline__ void gather_rows_body(const Elem<Cfg>* __restrict__ A, const Index<Cfg>* __restrict__ idx,
                                                 Elem<Cfg>* __restrict__ out, long long N, long long D, long long K,
                                                 long long offset, Elem<Cfg> pad) {
  using E = Elem<Cfg>;
  using I = Index<Cfg>;
  gather<E, I, Cfg::RPB, Cfg::THREADS, Cfg::VEC, Cfg::CHECK, false>(A, idx, nullptr, out, N, D, K, offset, pad);
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS) gather_rows(const __grid_constant__ typename Cfg::Args a) {
  gather_rows_body<Cfg>(a.A, a.idx, a.out, a.N, a.D, a.K, a.offset, a.pad);
}

template <class Cfg>
__device__ __forceinline__ void gather_rows_masked_body(const Elem<Cfg>* __restrict__ A,
                                                        const Index<Cfg>* __restrict__ idx,
                                                        const unsigned char* __restrict__ mask,
                                                        Elem<Cfg>* __restrict__ out, long long N, long long D,
                                                        long long K, long long offset, Elem<Cfg> pad) {
  using E = Elem<Cfg>;
  using I = Index<Cfg>;
  gather<E, I, Cfg::RPB, Cfg::THREADS, Cfg::VEC, Cfg::CHECK, true>(A, idx, mask, out, N, D, K, offset, pad);
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS) gather_rows_masked(const __grid_constant__ typename Cfg::Args a) {
  gather_rows_masked_body<Cfg>(a.A, a.idx, a.mask, a.out, a.N, a.D, a.K, a.offset, a.pad);
}

template <class Cfg>
__device__ __forceinline__ void scatter_rows_body(const Elem<Cfg>* __restrict__ V, const Index<Cfg>* __restrict__ idx,
                                                  Elem<Cfg>* __restrict__ A, long long N, long long D, long long K,
                                                  long long offset) {
  using E = Elem<Cfg>;
  using I = Index<Cfg>;
  scatter<E, I, Cfg::RPB, Cfg::THREADS, Cfg::VEC, Cfg::CHECK, false>(V, idx, nullptr, A, N, D, K, offset);
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS) scatter_rows(const __grid_constant__ typename Cfg::Args a) {
  scatter_rows_body<Cfg>(a.V, a.idx, a.A, a.N, a.D, a.K, a.offset);
}

template <class Cfg>
__device__ __forceinline__ void scatter_rows_masked_body(const Elem<Cfg>* __restrict__ V,
                                                         const Index<Cfg>* __restrict__ idx,
                                                         const unsigned char* __restrict__ mask,
                                                         Elem<Cfg>* __restrict__ A, long long N, long long D,
                                                         long long K, long long offset) {
  using E = Elem<Cfg>;
  using I = Index<Cfg>;
  scatter<E, I, Cfg::RPB, Cfg::THREADS, Cfg::VEC, Cfg::CHECK, true>(V, idx, mask, A, N, D, K, offset);
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS) scatter_rows_masked(const __grid_constant__ typename Cfg::Args a) {
  scatter_rows_masked_body<Cfg>(a.V, a.idx, a.mask, a.A, a.N, a.D, a.K, a.offset);
}

template <class Cfg>
__device__ __forceinline__ void gather_window_body(const Elem<Cfg>* __restrict__ A, const Index<Cfg>* __restrict__ idx,
                                                   Elem<Cfg>* __restrict__ out, long long N, long long D, long long K,
                                                   long long offset, long long start, long long window,
                                                   Elem<Cfg> pad) {
  using E = Elem<Cfg>;
  using I = Index<Cfg>;
  gather_segments<E, I, Cfg::RPB, Cfg::THREADS, Cfg::VEC, Cfg::CHECK, false>(A, idx, nullptr, out, N, D, K, offset,
                                                                             start, window, pad);
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS) gather_window(const __grid_constant__ typename Cfg::Args a) {
  gather_window_body<Cfg>(a.A, a.idx, a.out, a.N, a.D, a.K, a.offset, a.start, a.window, a.pad);
}

template <class Cfg>
__device__ __forceinline__ void gather_window_masked_body(const Elem<Cfg>* __restrict__ A,
                                                          const Index<Cfg>* __restrict__ idx,
                                                          const unsigned char* __restrict__ mask,
                                                          Elem<Cfg>* __restrict__ out, long long N, long long D,
                                                          long long K, long long offset, long long start,
                                                          long long window, Elem<Cfg> pad) {
  using E = Elem<Cfg>;
  using I = Index<Cfg>;
  gather_segments<E, I, Cfg::RPB, Cfg::THREADS, Cfg::VEC, Cfg::CHECK, true>(A, idx, mask, out, N, D, K, offset,
                                                                            start, window, pad);
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS) gather_window_masked(const __grid_constant__ typename Cfg::Args a) {
  gather_window_masked_body<Cfg>(a.A, a.idx, a.mask, a.out, a.N, a.D, a.K, a.offset, a.start, a.window, a.pad);
}

template <class Cfg>
__device__ __forceinline__ void gather_cols_body(const Elem<Cfg>* __restrict__ A, const Index<Cfg>* __restrict__ idx,
                                                 Elem<Cfg>* __restrict__ out, long long N, long long D, long long K,
                                                 long long offset, long long start, long long window,
                                                 Elem<Cfg> pad) {
  using E = Elem<Cfg>;
  using I = Index<Cfg>;
  gather_columns<E, I, Cfg::RPB, Cfg::THREADS, Cfg::VEC, Cfg::CHECK, false>(A, idx, nullptr, out, N, D, K, offset,
                                                                            start, window, pad);
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS) gather_cols(const __grid_constant__ typename Cfg::Args a) {
  gather_cols_body<Cfg>(a.A, a.idx, a.out, a.N, a.D, a.K, a.offset, a.start, a.window, a.pad);
}

template <class Cfg>
__device__ __forceinline__ void gather_cols_masked_body(const Elem<Cfg>* __restrict__ A,
                                                        const Index<Cfg>* __restrict__ idx,
                                                        const unsigned char* __restrict__ mask,
                                                        Elem<Cfg>* __restrict__ out, long long N, long long D,
                                                        long long K, long long offset, long long start,
                                                        long long window, Elem<Cfg> pad) {
  using E = Elem<Cfg>;
  using I = Index<Cfg>;
  gather_columns<E, I, Cfg::RPB, Cfg::THREADS, Cfg::VEC, Cfg::CHECK, true>(A, idx, mask, out, N, D, K, offset,
                                                                           start, window, pad);
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS) gather_cols_masked(const __grid_constant__ typename Cfg::Args a) {
  gather_cols_masked_body<Cfg>(a.A, a.idx, a.mask, a.out, a.N, a.D, a.K, a.offset, a.start, a.window, a.pad);
}
