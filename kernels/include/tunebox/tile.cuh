// tunebox device tile library v1: bounded 2-D tile loads and stores over row-major arrays.
//
// Elements are moved as raw bits (E is an unsigned integer of the element's width), so no CUDA
// headers are needed and padding values are exact bit patterns chosen on the host.
//
// Coordinates are zero-based (row, column) into a logical (rows, cols) array with leading
// dimension `cols`. A checked access tests validity *before* forming a pointer, so negative origins
// and edge tiles never touch memory outside the array.
#pragma once

namespace tb {

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;

// Bounds modes of a tile kernel.
enum Bounds { CHECKED = 0, SPLIT = 1, UNCHECKED = 2 };
// Shared-memory staging layouts of a transposing tile kernel.
enum Staging { PLAIN = 1, PADDED = 2, SWIZZLED = 3 };

// Raw<B>: an integer or vector type of exactly B bytes, loaded and stored in one access.
template <int B> struct Raw;
template <> struct Raw<1> { typedef u8 type; };
template <> struct Raw<2> { typedef u16 type; };
template <> struct Raw<4> { typedef u32 type; };
template <> struct Raw<8> { typedef uint2 type; };
template <> struct Raw<16> { typedef uint4 type; };

// N elements of E that travel together as one N*sizeof(E)-byte access.
template <typename E, int N> union Vec {
  typename Raw<N * sizeof(E)>::type raw;
  E e[N];
};

__device__ __forceinline__ bool in_range(i64 x, i64 extent) { return (u64)x < (u64)extent; }

// True when rows of D elements starting at a and b move in W-element vectors (of E): D a multiple of
// W and both addresses aligned to the vector. Kernels choose the widest W that fits, halving from
// their configured width down to 1 (which always fits).
template <typename E, int W>
__device__ __forceinline__ bool vector_fits(i64 D, const void* a, const void* b) {
  constexpr u64 BYTES = W * sizeof(E);
  return (D % W) == 0 && ((u64)a % BYTES) == 0 && ((u64)b % BYTES) == 0;
}

// Loads N consecutive elements of row r starting at column c into v. CHECK=false promises that
// the whole vector is inside the array and its address is N*sizeof(E)-aligned. Otherwise the
// vector is loaded in one access when it is entirely valid and aligned, else element by element,
// with `pad` for every element outside the array (the bounded copy's mixed path).
template <typename E, int N, bool CHECK>
__device__ __forceinline__ void load_vec(const E* __restrict__ a, i64 rows, i64 cols, i64 r, i64 c,
                                         E pad, Vec<E, N>& v) {
  typedef typename Raw<N * sizeof(E)>::type R;
  if (!CHECK) {
    v.raw = __ldg(reinterpret_cast<const R*>(a + r * cols + c));
    return;
  }
  const bool row_ok = in_range(r, rows);
  const i64 off = r * cols + c;
  if (row_ok && c >= 0 && c + N <= cols && (off % N) == 0) {
    v.raw = __ldg(reinterpret_cast<const R*>(a + off));
    return;
  }
#pragma unroll
  for (int e = 0; e < N; ++e) v.e[e] = (row_ok && in_range(c + e, cols)) ? a[off + e] : pad;
}

// Stores N consecutive elements to row r from column c (c >= 0), clipping every element outside
// the array. CHECK=false promises a fully valid, aligned vector.
template <typename E, int N, bool CHECK>
__device__ __forceinline__ void store_vec(E* __restrict__ a, i64 rows, i64 cols, i64 r, i64 c,
                                          const Vec<E, N>& v) {
  typedef typename Raw<N * sizeof(E)>::type R;
  if (!CHECK) {
    *reinterpret_cast<R*>(a + r * cols + c) = v.raw;
    return;
  }
  if (!in_range(r, rows)) return;
  const i64 off = r * cols + c;
  if (c + N <= cols && (off % N) == 0) {
    *reinterpret_cast<R*>(a + off) = v.raw;
    return;
  }
#pragma unroll
  for (int e = 0; e < N; ++e)
    if (c + e < cols) a[off + e] = v.e[e];
}

// Element offset of (r, c) in a shared tile of `rows` x W elements staged with layout S.
// PADDED adds one 32-bit bank word to each row. SWIZZLED XORs the column's bank word with
// (r / G) mod min(words per row, 32), G being the vector width in elements: the G-strided column
// reads of a transposing store then hit distinct banks, and a row's vector stays in its row.
template <typename E, int W, int S, int G>
__device__ __forceinline__ int staged_index(int r, int c) {
  constexpr int PER_WORD = sizeof(E) >= 4 ? 1 : 4 / sizeof(E);
  constexpr int WORDS = W / PER_WORD < 32 ? W / PER_WORD : 32;
  if (S == PADDED) return r * (W + PER_WORD) + c;
  if (S == SWIZZLED) return r * W + (c ^ (PER_WORD * ((r / G) % WORDS)));
  return r * W + c;
}

// Largest multiple of n that is <= x (n > 0, x may be negative).
__device__ __forceinline__ i64 floor_to(i64 x, int n) {
  const i64 r = x % n;
  return x - (r < 0 ? r + n : r);
}

// Aligned-window access to the row segment [c0, c0 + W) of row r of a (rows, cols) array.
// The segment is covered by W/N + 1 slots: slot k is the N-element vector that starts at the
// aligned flat offset floor_to(r*cols + c0, N) + k*N. Every element of the segment belongs to
// exactly one slot, and every slot that lies wholly inside the array moves in one aligned vector
// access, whatever the row's alignment (unaligned leading dimensions, odd origins).

// The segment's columns inside the row: W, or with CHECK the part before the row's end (c0 >= 0).
template <int W, bool CHECK>
__device__ __forceinline__ int segment_width(i64 cols, i64 c0) {
  return CHECK ? (int)(cols - c0 < W ? cols - c0 : W) : W;
}

// Writes a slot's N elements `v` (a union of `raw`, one access, and elements `e`) at flat offset
// `base` of a, the slot's element 0 at segment column `first`: in one vector access when all of them
// lie in the segment's first `width` columns, else only those that do (a slot shared with a
// neighbouring segment or row keeps the neighbour's elements).
template <int N, typename E, typename V>
__device__ __forceinline__ void store_slot_elements(E* __restrict__ a, i64 base, int first, int width, const V& v) {
  if (first >= 0 && first + N <= width) {
    *reinterpret_cast<typename Raw<N * sizeof(E)>::type*>(a + base) = v.raw;
    return;
  }
#pragma unroll
  for (int e = 0; e < N; ++e)
    if ((unsigned)(first + e) < (unsigned)width) a[base + e] = v.e[e];
}

// Loads slot k of the segment, calling put(col, value) for each of its elements inside the
// segment. CHECK=false promises a valid row, a segment inside the row and a slot vector inside
// the array; otherwise elements whose source lies outside the array get `pad` (validity is checked
// before any pointer is formed) and a slot vector that is not wholly inside the array moves
// element by element.
template <typename E, int N, int W, bool CHECK, typename Put>
__device__ __forceinline__ void load_slot(const E* __restrict__ a, i64 rows, i64 cols, i64 r,
                                          i64 c0, int k, E pad, Put put) {
  typedef typename Raw<N * sizeof(E)>::type R;
  const i64 f = r * cols + c0;
  const i64 aligned = floor_to(f, N);
  const int first = k * N - (int)(f - aligned);  // segment column of the slot's element 0
  if (first >= W) return;                        // the spare slot of an aligned segment
  const i64 base = aligned + (i64)k * N;
  Vec<E, N> v;
  if (!CHECK) {
    v.raw = __ldg(reinterpret_cast<const R*>(a + base));
#pragma unroll
    for (int e = 0; e < N; ++e)
      if ((unsigned)(first + e) < (unsigned)W) put(first + e, v.e[e]);
    return;
  }
  const bool row_ok = in_range(r, rows);
  const bool whole = row_ok && base >= 0 && base + N <= rows * cols;
  if (whole) v.raw = __ldg(reinterpret_cast<const R*>(a + base));
#pragma unroll
  for (int e = 0; e < N; ++e) {
    const int col = first + e;
    if ((unsigned)col >= (unsigned)W) continue;
    const bool ok = row_ok && in_range(c0 + col, cols);
    put(col, ok ? (whole ? v.e[e] : a[base + e]) : pad);
  }
}

// Stores slot k of the segment (c0 >= 0) from get(col), clipping at the row's end. A slot shared
// with a neighbouring segment or row is written element by element, only its own elements.
// CHECK=false promises a valid row and a segment inside the row.
template <typename E, int N, int W, bool CHECK, typename Get>
__device__ __forceinline__ void store_slot(E* __restrict__ a, i64 rows, i64 cols, i64 r, i64 c0,
                                           int k, Get get) {
  if (CHECK && !in_range(r, rows)) return;
  const i64 f = r * cols + c0;
  const i64 aligned = floor_to(f, N);
  const int first = k * N - (int)(f - aligned);
  const int width = segment_width<W, CHECK>(cols, c0);
  if (first >= width) return;
  const i64 base = aligned + (i64)k * N;
  Vec<E, N> v;
#pragma unroll
  for (int e = 0; e < N; ++e)
    v.e[e] = (unsigned)(first + e) < (unsigned)width ? get(first + e) : E(0);
  store_slot_elements<N>(a, base, first, width, v);
}

// True when every element of origin + [0,h) x [0,w) lies inside a (rows, cols) array.
__device__ __forceinline__ bool box_inside(i64 r0, i64 c0, i64 h, i64 w, i64 rows, i64 cols) {
  return r0 >= 0 && c0 >= 0 && r0 + h <= rows && c0 + w <= cols;
}

// Calls f(i) for every i < TOTAL, thread t of the block's THREADS taking t, t + THREADS, ... (the
// loop unrolled; no test where THREADS divides TOTAL).
template <int TOTAL, int THREADS, class F>
__device__ __forceinline__ void strided(F&& f) {
#pragma unroll
  for (int k = 0; k < (TOTAL + THREADS - 1) / THREADS; ++k) {
    const int idx = threadIdx.x + k * THREADS;
    if (TOTAL % THREADS == 0 || idx < TOTAL) f(idx);
  }
}

}  // namespace tb
