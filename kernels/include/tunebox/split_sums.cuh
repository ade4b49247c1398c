// Deterministic sums of split-K partial products inside a block and across a thread-block cluster
// (sm_90: distributed shared memory), with no workspace: the kernels whose warps and blocks split K
// (quant_gemm's and gemm's decode templates) add their float32 partial tiles here in a fixed order.
//
// A partial tile is TOK x ROWS floats (token-major, PITCH floats a token, PITCH >= ROWS), one per
// group of warps splitting K inside the block (the block's shared `sums` holds WK of them, SUMS =
// TOK x PITCH floats apart); the SPLITS blocks of a cluster (cluster dimension SPLITS) each hold one
// for their range of K.
#pragma once

#include "tunebox/cluster.cuh"

namespace tb {

// The float at the same shared-memory offset as p in block `rank` of the cluster.
__device__ __forceinline__ float load_cluster(const float* p, u32 rank) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(cluster_address(p, rank)) : "memory");
  return v;
}

// Writes a warp's mma accumulators (MT m16 tiles of rows from `row0`, NT n8 tiles of tokens: the
// m16n8k16 fragment, rows g and g + 8, tokens 2t and 2t + 1) into its partial tile `mine`.
template <int MT, int NT, int PITCH>
__device__ __forceinline__ void store_fragment_sums(float* mine, const float (&acc)[MT][NT][4], int row0) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) mine[(j * 8 + 2 * t + e % 2) * PITCH + row0 + i * 16 + g + 8 * (e / 2)] = acc[i][j][e];
}

// After every warp stored its partial tile: adds the WK tiles of the block in group order (into the
// first), then, SPLITS > 1, the first tiles of the cluster's blocks in rank order, each block taking
// one slice of the elements; calls out(token, row, v) for the block's slice, v the W totals of rows
// row .. row + W - 1 (W divides ROWS). Every thread of the block (THREADS) calls it; no block of the
// cluster leaves before the others read its sums.
template <int WK, int TOK, int ROWS, int PITCH, int SPLITS, int THREADS, int W, class Out>
__device__ __forceinline__ void add_split_sums(float* sums, Out out) {
  constexpr int SUMS = TOK * PITCH, GROUPS = ROWS / W;
  static_assert(ROWS % W == 0 && TOK * GROUPS % SPLITS == 0, "the slices cover whole groups of W rows");
  __syncthreads();
  for (int e = threadIdx.x; e < TOK * ROWS; e += THREADS) {
    const int at = e / ROWS * PITCH + e % ROWS;
    float total = sums[at];
#pragma unroll
    for (int w = 1; w < WK; ++w) total += sums[w * SUMS + at];
    sums[at] = total;
  }
  constexpr int SLICE = TOK * GROUPS / SPLITS;
  const int rank = SPLITS > 1 ? (int)cluster_rank() : 0;
  if constexpr (SPLITS > 1)
    cluster_sync();
  else
    __syncthreads();
  for (int e = rank * SLICE + threadIdx.x; e < (rank + 1) * SLICE; e += THREADS) {
    const int token = e / GROUPS, row = e % GROUPS * W, at = token * PITCH + row;
    float v[W];
#pragma unroll
    for (int i = 0; i < W; ++i) {
      v[i] = sums[at + i];
      if constexpr (SPLITS > 1) {
        v[i] = load_cluster(sums + at + i, 0);
#pragma unroll
        for (int c = 1; c < SPLITS; ++c) v[i] += load_cluster(sums + at + i, c);
      }
    }
    out(token, row, v);
  }
  if constexpr (SPLITS > 1) cluster_sync();  // no block leaves while the cluster reads its sums
}

}  // namespace tb
