// tunebox pad_rows: copies of operands whose rows are not 16-byte aligned into workspace rows that are
// (family gemm, templates padded and padded_persistent: their TMA loads need 16-byte row pitches). The
// helper kernel `pad_rows<Cfg>` of the module that includes this header (a prologue launch before the
// product), with Cfg::PAD_THREADS, Cfg::PAD_UNROLL, Cfg::PAD_A, Cfg::PAD_B and `Cfg::pad_rows_args`.
#pragma once

// Copies the rows x cols matrix `src` (leading dimension ld_src) into `dst` with rows of ld_dst
// elements (a multiple of 8, >= cols); dst's columns cols .. ld_dst - 1 get zeros. Two such copies
// (A's and B's) share one launch: blockIdx.y picks the copy (gridDim.y = 1 runs only the first). dst is
// rows x ld_dst / 8 chunks of 16 bytes in row-major order; the grid's threads (blockIdx.x, threadIdx.x)
// take chunks thread, thread + stride, ... (stride: the grid's threads along x; a chunk a thread where
// the copy fills no more blocks than the SMs hold), Cfg::PAD_UNROLL of them at a time with their loads
// in flight together, so that narrow rows keep every thread busy. A chunk's source elements start at
// any 2-byte boundary (src itself 4-byte aligned): the thread reads the 4-byte words holding them, five
// from the word before the chunk's first element where that starts mid-word (the previous row's last
// element then: row r > 0) and shifts them down by 2 bytes, four where it starts a word. A chunk
// reaching past the row's last element reads its elements one by one, zeros past cols. Chunk indices
// are 32-bit (the templates' rule pad_chunks_32bit).
struct PadCopy {
  const unsigned short* src;
  unsigned short* dst;
  long long rows, cols, ld_src, ld_dst;
};

// Elements c .. c + 7 of `row` (element 0 mid-word where `mid`) as one chunk, zeros past cols.
__device__ __forceinline__ uint4 pad_chunk(const unsigned short* __restrict__ row, bool mid, long long c,
                                           long long cols) {
  if (c + 8 + mid <= cols) {  // its words inside the row (and the previous one's last element)
    const unsigned* words = reinterpret_cast<const unsigned*>(row + c - mid);
    const unsigned w0 = __ldg(words), w1 = __ldg(words + 1), w2 = __ldg(words + 2), w3 = __ldg(words + 3);
    if (!mid) return make_uint4(w0, w1, w2, w3);
    const unsigned w4 = __ldg(words + 4);
    return make_uint4(__funnelshift_r(w0, w1, 16), __funnelshift_r(w1, w2, 16), __funnelshift_r(w2, w3, 16),
                      __funnelshift_r(w3, w4, 16));
  }
  unsigned short e[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) e[i] = c + i < cols ? __ldg(row + c + i) : 0;
  return make_uint4(e[0] | (unsigned)e[1] << 16, e[2] | (unsigned)e[3] << 16, e[4] | (unsigned)e[5] << 16,
                    e[6] | (unsigned)e[7] << 16);
}

template <class Cfg>
__device__ __forceinline__ void pad_rows_body(const unsigned short* __restrict__ src0,
                                              unsigned short* __restrict__ dst0, long long rows0, long long cols0,
                                              long long ld_src0, long long ld_dst0,
                                              const unsigned short* __restrict__ src1,
                                              unsigned short* __restrict__ dst1, long long rows1, long long cols1,
                                              long long ld_src1, long long ld_dst1) {
  constexpr int UNROLL = Cfg::PAD_UNROLL;
  const PadCopy copy = blockIdx.y == 0 ? PadCopy{src0, dst0, rows0, cols0, ld_src0, ld_dst0}
                                       : PadCopy{src1, dst1, rows1, cols1, ld_src1, ld_dst1};
  const unsigned chunks = (unsigned)(copy.ld_dst / 8), total = (unsigned)copy.rows * chunks;
  const unsigned stride = gridDim.x * blockDim.x;
  for (unsigned first = blockIdx.x * blockDim.x + threadIdx.x; first < total; first += UNROLL * stride) {
    uint4 chunk[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const unsigned at = first + u * stride;
      if (at >= total) continue;
      const unsigned r = at / chunks, c = 8 * (at - r * chunks);
      const unsigned short* row = copy.src + r * copy.ld_src;
      chunk[u] = pad_chunk(row, (reinterpret_cast<unsigned long long>(row) & 2) != 0, c, copy.cols);
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const unsigned at = first + u * stride;
      if (at < total) *reinterpret_cast<uint4*>(copy.dst + 8ull * at) = chunk[u];  // rows of ld_dst: contiguous
    }
  }
}

// The argument struct names each copy's buffers after them: A and A_padded when A is copied
// (Cfg::PAD_A), B and B_padded when B is (Cfg::PAD_B); a copy's sizes carry its index (rows0 ...
// ld_dst0 for the first, rows1 ... ld_dst1 for the second). One copy is passed as both (gridDim.y = 1:
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
