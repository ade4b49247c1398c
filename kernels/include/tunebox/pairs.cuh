// Pairs of 2-byte elements from two consecutive rows, moved as 32-bit words.
//
// A pair word packs one column of rows a (low half) and a + 1 (high half) of an array of 2-byte
// elements. In a transpose those are two neighbouring elements of one destination row: a staged tile
// of pair words transposes at 32-bit granularity, as a tile of 4-byte elements does. Rows of any
// alignment move in the aligned-window slots of tile.cuh (load_slot, store_slot).
#pragma once

#include "tunebox/copy_tiles.cuh"

namespace tb {

// N 2-byte elements travelling as one 2N-byte access, also seen as N / 2 words (element 2m is the
// low half of word m).
template <int N>
union Halves {
  typename Raw<2 * N>::type raw;
  u16 e[N];
  u32 w[N / 2];
};

template <int N>
__device__ __forceinline__ Halves<N> load_halves(const u16* __restrict__ p) {
  Halves<N> v;
  v.raw = __ldg(reinterpret_cast<const typename Raw<2 * N>::type*>(p));
  return v;
}

// The pair words of columns c and c + 1 from word m of rows a and b (columns c, c + 1 of each):
// lo = (a[c], b[c]), hi = (a[c + 1], b[c + 1]).
__device__ __forceinline__ void interleave(u32 a, u32 b, u32& lo, u32& hi) {
  lo = __byte_perm(a, b, 0x5410);
  hi = __byte_perm(a, b, 0x7632);
}

// The N elements that start `shift` elements (0 <= shift < N) into `lo` followed by `hi`: whole words
// shifted one bit of shift / 2 at a time, then a half word when shift is odd.
template <int N>
__device__ __forceinline__ Halves<N> funnel(const Halves<N>& lo, const Halves<N>& hi, int shift) {
  constexpr int WORDS = N / 2;
  u32 t[2 * WORDS];
#pragma unroll
  for (int q = 0; q < WORDS; ++q) {
    t[q] = lo.w[q];
    t[WORDS + q] = hi.w[q];
  }
  shift_words<WORDS>(t, shift >> 1);
  const u32 select = shift & 1 ? 0x5432 : 0x3210;
  Halves<N> out;
#pragma unroll
  for (int m = 0; m < WORDS; ++m) out.w[m] = __byte_perm(t[m], t[m + 1], select);
  return out;
}

// Loads slot k of the segment [c0, c0 + W) of rows a and a + 1 of a (rows, cols) array (row a's
// aligned-window slot, load_slot's), calling put(col, word) with the pair word of each of its columns
// inside the segment. Row a + 1's elements of those columns start `cols mod N` elements into an aligned
// vector: two vectors, funnelled. CHECK=false promises both rows valid, the segment inside them and
// every vector inside the array; otherwise elements outside the array read `pad` (validity checked
// before any pointer is formed) and a vector not wholly inside the array moves element by element.
template <int N, int W, bool CHECK, typename Put>
__device__ __forceinline__ void load_pair_slot(const u16* __restrict__ s, i64 rows, i64 cols, i64 a, i64 c0,
                                               int k, u16 pad, Put put) {
  const i64 f = a * cols + c0, aligned = floor_to(f, N);
  const int first = k * N - (int)(f - aligned);  // segment column of the slot's element 0
  if (first >= W) return;                        // the spare slot of an aligned segment
  const i64 base = aligned + (i64)k * N;         // row a's slot; row a + 1's columns start at base + cols
  const i64 next = floor_to(base + cols, N);
  const int shift = (int)(base + cols - next);
  Halves<N> va, vb;
  const bool ok_a = !CHECK || in_range(a, rows), ok_b = !CHECK || in_range(a + 1, rows);
  const bool whole_a = !CHECK || (ok_a && base >= 0 && base + N <= rows * cols);
  const bool whole_b = !CHECK || (ok_b && next >= 0 && next + (shift ? 2 * N : N) <= rows * cols);
  if (whole_a) va = load_halves<N>(s + base);
  if (whole_b) {
    vb = load_halves<N>(s + next);
    if (shift) vb = funnel<N>(vb, load_halves<N>(s + next + N), shift);
  }
  if (CHECK) {
#pragma unroll
    for (int e = 0; e < N; ++e) {
      const bool col_ok = in_range(c0 + first + e, cols);
      va.e[e] = ok_a && col_ok ? (whole_a ? va.e[e] : s[base + e]) : pad;
      vb.e[e] = ok_b && col_ok ? (whole_b ? vb.e[e] : s[base + cols + e]) : pad;
    }
  }
#pragma unroll
  for (int m = 0; m < N / 2; ++m) {
    u32 lo, hi;
    interleave(va.w[m], vb.w[m], lo, hi);
    if ((unsigned)(first + 2 * m) < (unsigned)W) put(first + 2 * m, lo);
    if ((unsigned)(first + 2 * m + 1) < (unsigned)W) put(first + 2 * m + 1, hi);
  }
}

// Stores slot k of the segment [c0, c0 + W) of row r (c0 >= 0; store_slot's slots) from word(q), the
// pair word of the segment's elements 2q and 2q + 1: N / 2 words, one more when the slot starts at an
// odd column. CHECK=false promises a valid row and a segment inside the row; otherwise the row is
// checked and the segment clipped at the row's end.
template <int N, int W, bool CHECK, typename Word>
__device__ __forceinline__ void store_pair_slot(u16* __restrict__ d, i64 rows, i64 cols, i64 r, i64 c0, int k,
                                                Word word) {
  if (CHECK && !in_range(r, rows)) return;
  const i64 f = r * cols + c0, aligned = floor_to(f, N);
  const int first = k * N - (int)(f - aligned);
  const int width = segment_width<W, CHECK>(cols, c0);
  if (first >= width) return;
  const i64 base = aligned + (i64)k * N;
  const int odd = first & 1, q0 = (first - odd) / 2;
  u32 t[N / 2 + 1];
#pragma unroll
  for (int m = 0; m <= N / 2; ++m) {
    const int q = q0 + m;
    t[m] = (m < N / 2 || odd) && (unsigned)q < (unsigned)(W / 2) ? word(q) : 0u;
  }
  Halves<N> v;
#pragma unroll
  for (int m = 0; m < N / 2; ++m) v.w[m] = __byte_perm(t[m], t[m + 1], odd ? 0x5432 : 0x3210);
  store_slot_elements<N>(d, base, first, width, v);
}

}  // namespace tb
