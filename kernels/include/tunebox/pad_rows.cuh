// tunebox pad_rows: copies of operands whose rows are not 16-byte aligned into workspace rows that are
// (family gemm, templates padded and padded_persistent: their TMA loads need 16-byte row pitches). The
// helper kernel `pad_rows<Cfg>` of the module that includes this header (a prologue launch before the
// product), with Cfg::PAD_THREADS, Cfg::PAD_SPAN, Cfg::PAD_A, Cfg::PAD_B and `Cfg::pad_rows_args`.
#pragma once

// Copies the rows x cols matrix `src` (leading dimension ld_src) into `dst` with rows of ld_dst
// elements (a multiple of 8, >= cols); dst's columns cols .. ld_dst - 1 get zeros. Two such copies
// (A's and B's) share one launch: blockIdx.z picks the copy (gridDim.z = 1 runs only the first). A
// thread writes one 16-byte chunk of a dst row (elements c .. c + 7, consecutive threads consecutive
// chunks; Cfg::PAD_SPAN = 8 x Cfg::PAD_THREADS elements a block step). src's rows start at any 2-byte
// boundary (src itself 4-byte aligned): the thread reads the 4-byte words holding its elements, five
// from the word before element c where that starts mid-word (the previous row's last element then:
// row r > 0) and shifts them down by 2 bytes, four where it starts a word. A chunk reaching past the
// row's last element reads its elements one by one, zeros past cols.
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
  const PadCopy copy = blockIdx.z == 0 ? PadCopy{src0, dst0, rows0, cols0, ld_src0, ld_dst0}
                                       : PadCopy{src1, dst1, rows1, cols1, ld_src1, ld_dst1};
  for (long long r = blockIdx.y; r < copy.rows; r += gridDim.y) {
    const unsigned short* row = copy.src + r * copy.ld_src;
    const bool mid = (reinterpret_cast<unsigned long long>(row) & 2) != 0;  // element 0 starts mid-word
    for (long long c = (long long)blockIdx.x * SPAN + 8 * threadIdx.x; c < copy.ld_dst; c += (long long)gridDim.x * SPAN) {
      uint4 chunk;
      if (c + 8 + mid <= copy.cols) {  // its words inside the row (and the previous one's last element)
        const unsigned* words = reinterpret_cast<const unsigned*>(row + c - mid);
        const unsigned w0 = __ldg(words), w1 = __ldg(words + 1), w2 = __ldg(words + 2), w3 = __ldg(words + 3);
        if (mid) {
          const unsigned w4 = __ldg(words + 4);
          chunk = make_uint4(__funnelshift_r(w0, w1, 16), __funnelshift_r(w1, w2, 16), __funnelshift_r(w2, w3, 16),
                             __funnelshift_r(w3, w4, 16));
        } else {
          chunk = make_uint4(w0, w1, w2, w3);
        }
      } else {
        unsigned short e[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) e[i] = c + i < copy.cols ? __ldg(row + c + i) : 0;
        chunk = make_uint4(e[0] | (unsigned)e[1] << 16, e[2] | (unsigned)e[3] << 16, e[4] | (unsigned)e[5] << 16,
                           e[6] | (unsigned)e[7] << 16);
      }
      *reinterpret_cast<uint4*>(copy.dst + r * copy.ld_dst + c) = chunk;
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
