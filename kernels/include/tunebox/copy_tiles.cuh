// What tile_copy's kernels share beyond tile.cuh: the walk of a block over its destination tiles, and
// the whole-word step of a funnel of two aligned vectors (pairs.cuh's, tile_copy_shifted.cu's).
#pragma once

#include "tunebox/tile.cuh"

namespace tb {

// The 2 * WORDS words in t (a vector lo, then the next one hi) moved down by `words` whole words
// (0 <= words < WORDS) in log2(WORDS) conditional steps: t[q] becomes word q + words for q <= WORDS,
// what a funnel of the two vectors needs before its last, sub-word step.
template <int WORDS>
__device__ __forceinline__ void shift_words(u32 (&t)[2 * WORDS], int words) {
#pragma unroll
  for (int step = 1; step < WORDS; step <<= 1)
    if (words & step) {
#pragma unroll
      for (int q = 0; q + step < 2 * WORDS; ++q) t[q] = t[q + step];
    }
}

// Calls f(i0, j0), the first row and column, for each of this block's TPB consecutive BM x BN
// destination tiles (tiles numbered row-major, tiles_n a row), stopping at n_tiles.
template <int BM, int BN, int TPB, class F>
__device__ __forceinline__ void for_block_tiles(i64 tiles_n, i64 n_tiles, F&& f) {
#pragma unroll 1
  for (int t = 0; t < TPB; ++t) {
    const i64 tile = (i64)blockIdx.x * TPB + t;
    if (tile >= n_tiles) return;
    f((tile / tiles_n) * BM, (tile % tiles_n) * BN);
  }
}

}  // namespace tb
