// tunebox pad_rows: copies of operands whose rows are not 16-byte aligned into workspace rows that are
// (family gemm, templates padded and padded_persistent: their TMA loads need 16-byte row pitches). The
// helper kernel `pad_rows<Cfg>` of the module that includes this header (a prologue launch before the
// product), with Cfg::PAD_THREADS, Cfg::PAD_SPAN, Cfg::PAD_A, Cfg::PAD_B and `Cfg::pad_rows_args`.
#pragma once

// Copies the rows x cols matrix `src` (leading dimension ld_src) into `dst` with rows of ld_dst
// elements (a multiple of 8, >= cols); dst's columns cols .. ld_dst - 1 get zeros. Two such copies
// (A's and B's) share one launch: blockIdx.z picks the copy (gridDim.z = 1 runs only the first). A
// block of Cfg::PAD_THREADS (256) threads moves Cfg::PAD_SPAN = 8 x PAD_THREADS (2048) elements of a
// row per step: coalesced 2-byte loads (rows of src need not be aligned) into shared memory, then one
// 16-byte store per thread.
struct PadCopy {
  const unsigned short* src;
  unsigned short* dst;
  long long rows, cols, ld_src, ld_dst;
};

template <class Cfg>
__device__ __forceinline__ void pad_rows_body(const unsigned short* __restrict__ src0,
                                              unsigned short* __restrict__ dst0, long long rows0, long long cols0,
                                              long long ld_src0, long long ld_dst0,
                                              const unsigned short* __restrict__ src1,
                                              unsigned short* __restrict__ dst1, long long rows1, long long cols1,
                                              long long ld_src1, long long ld_dst1) {
  constexpr int THREADS = Cfg::PAD_THREADS, SPAN = 8 * THREADS;
  static_assert(SPAN == Cfg::PAD_SPAN, "one 16-byte store per thread covers the span");
  __shared__ __align__(16) unsigned short row[SPAN];
  const PadCopy copy = blockIdx.z == 0 ? PadCopy{src0, dst0, rows0, cols0, ld_src0, ld_dst0}
                                       : PadCopy{src1, dst1, rows1, cols1, ld_src1, ld_dst1};
  for (long long r = blockIdx.y; r < copy.rows; r += gridDim.y) {
    for (long long c0 = (long long)blockIdx.x * SPAN; c0 < copy.ld_dst; c0 += (long long)gridDim.x * SPAN) {
#pragma unroll
      for (int e = threadIdx.x; e < SPAN; e += THREADS)
        row[e] = c0 + e < copy.cols ? __ldg(copy.src + r * copy.ld_src + c0 + e) : 0;  // read-only path, as before
      __syncthreads();
      const long long c = c0 + 8 * threadIdx.x;
      if (c < copy.ld_dst)
        *reinterpret_cast<uint4*>(copy.dst + r * copy.ld_dst + c) =
            *reinterpret_cast<const uint4*>(row + 8 * threadIdx.x);
      __syncthreads();
    }
  }
}

// The argument struct names each copy's buffers after them: A and A_padded when A is copied
// (Cfg::PAD_A), B and B_padded when B is (Cfg::PAD_B); a copy's sizes carry its index (rows0 ...
// ld_dst0 for the first, rows1 ... ld_dst1 for the second). One copy is passed as both (gridDim.z = 1:
// the second is never read).
template <class Cfg>
__global__ void __launch_bounds__(Cfg::PAD_THREADS) pad_rows(const __grid_constant__ typename Cfg::pad_rows_args a) {
  static_assert(Cfg::PAD_A || Cfg::PAD_B, "pad_rows copies A, B or both");
  if constexpr (Cfg::PAD_A && Cfg::PAD_B) {
    pad_rows_body<Cfg>(a.A, a.A_padded, a.rows0, a.cols0, a.ld_src0, a.ld_dst0, a.B, a.B_padded, a.rows1, a.cols1,
                       a.ld_src1, a.ld_dst1);
  } else if constexpr (Cfg::PAD_A) {
    pad_rows_body<Cfg>(a.A, a.A_padded, a.rows0, a.cols0, a.ld_src0, a.ld_dst0, a.A, a.A_padded, a.rows0, a.cols0,
                       a.ld_src0, a.ld_dst0);
  } else {
    pad_rows_body<Cfg>(a.B, a.B_padded, a.rows0, a.cols0, a.ld_src0, a.ld_dst0, a.B, a.B_padded, a.rows0, a.cols0,
                       a.ld_src0, a.ld_dst0);
  }
}
