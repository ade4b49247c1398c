// Family quant_gemm (0-based, row-major):
//
//   D[m, n] = sum_k A[m, k] * W[n, k]   for m < M, n < N, k < K
//
// A (M x K) and D (M x N) are bfloat16 bits; W (N x K) is stored as the quant family stores it along
// K: `values` (N x kb bytes, kb = ceil(K / 2), element 2c in the low nibble of byte c), `scales` (N x nb
// codes, one per block of Cfg::BLOCK elements: e8m0 for mxfp4, e4m3 for nvfp4) and, for nvfp4
// (Cfg::NVFP4), the float32 `tensor_scale`. The sums are float32 on tensor cores (mma.sync m16n8k16,
// bfloat16 operands: the weights decoded exactly in registers by tunebox/fp4.cuh, so the products are
// exact), D rounded to nearest even (NaN as 0x7FC0). Elements past K take part as zeros (both
// operands), rows past N and tokens past M are read clamped and never stored.
//
// `quant_gemm_decode` (template decode, small M): the weight rows are the mma's A operand (16 rows of W
// a tile), the tokens its B operand (8 a tile). K runs in spans of 128: in a span, thread t = lane % 4
// of a warp owns elements 32t .. 32t + 31 of each of its rows (16 contiguous bytes: one load a row,
// one e8m0 or two e4m3 scales) and of each of its tokens (64 contiguous bytes), which fp4.cuh's pair
// order feeds to the mma's slots; a word of codes (8 elements) is two k16 steps. A warp owns Cfg::ROWS
// rows and every token of the block's Cfg::TOKENS; WARPS_N warps of a block take consecutive rows,
// WARPS_K warps of a block take every WARPS_K-th span of the block's K range, keeping Cfg::UNROLL spans
// of codes in flight in registers. The grid splits K into Cfg::SPLITS ranges of whole spans (grid.y),
// the last one also taking the partial span at K's end (loaded element by element, zeros past K).
// The block's warps add their float32 sums in shared memory in warp order; the SPLITS blocks of a
// column form a thread-block cluster whose blocks then each add one slice of the outputs over the
// cluster's blocks in rank order, reading their shared memory (distributed shared memory): the
// reduction's order is fixed, so the result is deterministic, with no workspace and one launch.
//
// `quant_gemm_stream` (template stream, small M, K a multiple of 512 for mxfp4 or 256 for nvfp4):
// the decode template's arithmetic (a thread's share of a span of 128, the same mma operands), with the
// weights streamed into shared memory by the TMA unit instead of loaded by each thread. A block holds
// Cfg::WARPS consumer warps and one producer warp. The producer copies, row by row (cp.async.bulk),
// chunks of Cfg::CHUNK bytes of codes with their scales into a ring of Cfg::STAGES stages, each
// completing on its own mbarrier, and refills a stage once every consumer warp has released it (a
// second mbarrier). Blocks are persistent: block b takes units b, b + gridDim.x, ... of (group of
// rows, tile of Cfg::TOKENS tokens), token tiles of a group adjacent, each over all of K. Consumer
// warps split a group's rows (WARPS / WARPS_K warps of ROWS rows) and the spans of each chunk (WARPS_K
// warps, every WARPS_K-th span); the WARPS_K partial sums of a row add in shared memory in warp order
// (deterministic), or, WARPS_K = 1, go out from the accumulators.
//
// `quant_gemm_tiled` (template tiled, M from 64): block (x, y) computes the BM x BN tile of D at tokens
// y * BM, columns x * BN with WARPS_M x WARPS_N warps, over K in steps of BK through STAGES
// shared-memory buffers of A (BM x BK bfloat16, the 16-byte chunks of odd rows swapped by halves of a
// 128-byte line: a warp's 16-byte reads of two rows hit disjoint banks), codes (BN rows of BK / 2
// bytes, padded by 16) and scales (BN rows of BK / BLOCK codes), filled by cp.async (zero-filled past
// M, N and K; narrower copies where rows are not aligned, byte by byte below 4). Here the tokens are
// the mma's A operand and the weight rows its B operand: per 32 elements of K a thread reads one word
// of codes a weight row (two k16 steps, decoded in registers by fp4.cuh) and 16 bytes a token row.
#include "tunebox/fp4.cuh"
#include "tunebox/async_copy.cuh"
#include "tunebox/barriers.cuh"
#include "tunebox/bulk.cuh"
#include "tunebox/mma.cuh"
#include "tunebox/split_sums.cuh"

namespace {

using namespace tb;

// 16 bytes at p (B-byte aligned, B = 16, 8, 4, 2 or 1) as four words.
template <int B>
__device__ __forceinline__ void load16(const void* p, u32 (&w)[4]) {
  if constexpr (B == 16) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
    w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
  } else if constexpr (B == 8) {
    const uint2 lo = __ldg(reinterpret_cast<const uint2*>(p)), hi = __ldg(reinterpret_cast<const uint2*>(p) + 1);
    w[0] = lo.x, w[1] = lo.y, w[2] = hi.x, w[3] = hi.y;
  } else if constexpr (B == 4) {
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = __ldg(reinterpret_cast<const u32*>(p) + i);
  } else if constexpr (B == 2) {
    const u16* h = reinterpret_cast<const u16*>(p);
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = (u32)__ldg(h + 2 * i) | (u32)__ldg(h + 2 * i + 1) << 16;
  } else {
    const u8* b = reinterpret_cast<const u8*>(p);
#pragma unroll
    for (int i = 0; i < 4; ++i)
      w[i] = (u32)__ldg(b + 4 * i) | (u32)__ldg(b + 4 * i + 1) << 8 | (u32)__ldg(b + 4 * i + 2) << 16 |
             (u32)__ldg(b + 4 * i + 3) << 24;
  }
}

// The codes of nibbles [0, count) of a word (count may be <= 0 or >= 8).
__device__ __forceinline__ u32 keep_nibbles(u32 w, int count) {
  return count >= 8 ? w : count <= 0 ? 0u : w & ((1u << (4 * count)) - 1u);
}

// The first and second factor of a block of scale code c (fp4.cuh).
template <bool NV>
__device__ __forceinline__ void block_factors(u32 c, u32& first, u32& second) {
  if constexpr (NV) {
    first = fp4::e4m3_factor(c), second = fp4::dup(0x3F80u);
  } else {
    first = fp4::e8m0_factor(c), second = fp4::e8m0_second(c);
  }
}

// Copy a ROWS x BYTES tile at byte (r0, c0) of a global matrix of R rows x C bytes (ld bytes apart) to
// shared memory (PITCH bytes a row) in chunks of W bytes, zero past R and C. SWAP: the chunks of odd rows
// trade halves of each 128-byte line.
template <int ROWS, int BYTES, int PITCH, int W, int THREADS, bool SWAP>
__device__ __forceinline__ void copy_tile(u8* s, const u8* __restrict__ g, i64 R, i64 C, i64 ld, i64 r0, i64 c0) {
  constexpr int CHUNKS = BYTES / W;
  for (int i = threadIdx.x; i < ROWS * CHUNKS; i += THREADS) {
    const int r = i / CHUNKS, c = i % CHUNKS;
    const int at = SWAP ? (c * W ^ (r & 1) * 64) : c * W;
    const i64 gr = r0 + r, gc = c0 + (i64)c * W;
    const int valid = gr < R ? (int)max((i64)0, min((i64)W, C - gc)) : 0;
    cp_async_zfill<W>(s + r * PITCH + at, valid ? g + gr * ld + gc : g, valid);
  }
}

// A thread's share of one span: for each 16-row tile t and half r (rows g, g + 8), 16 bytes of codes
// and the scale codes (mxfp4: one; nvfp4: two, the second in bits 8..15).
template <int MT>
struct Span {
  u32 codes[MT][2][4];
  u32 scale[MT][2];
};

// Eight activations of a token row at element k (AV-byte loads; element by element with zeros past K
// on the tail).
template <int AV>
__device__ __forceinline__ void token_words(const u16* __restrict__ token, i64 k, i64 K, bool tail, u32 (&r)[4]) {
  if (!tail) {
    load16<AV>(token + k, r);
    return;
  }
#pragma unroll
  for (int e = 0; e < 4; ++e)
    r[e] = (k + 2 * e < K ? (u32)__ldg(token + k + 2 * e) : 0u) |
           (k + 2 * e + 1 < K ? (u32)__ldg(token + k + 2 * e + 1) : 0u) << 16;
}

// Which words of a span take the second factor: none, all (a block of the warp takes it: mxfp4 scales
// from 2^2), or all when `big`, as multiplies under a predicate (they issue even when it is off).
enum SecondFactor { SECOND_NONE = 0, SECOND_ALL = 1, SECOND_WHEN_BIG = 2 };

// The products of a thread's share of one span (see span_products), its blocks' factors given.
template <class Cfg, int MT, int NT, int SECOND>
__device__ __forceinline__ void span_words(float (&acc)[MT][NT][4], const Span<MT>& s, const u32 (&f1)[MT][2][2],
                                           const u32 (&f2)[MT][2][2], const u16* const (&tokens)[NT], i64 k, i64 K,
                                           bool big, bool tail) {
  constexpr bool NV = Cfg::NVFP4;
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    u32 wt[MT][2][4];
    const int b = NV ? w / 2 : 0;
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        fp4::decode_word(s.codes[i][r][w], f1[i][r][b], wt[i][r]);
        if constexpr (SECOND == SECOND_ALL) fp4::rescale_word(wt[i][r], f2[i][r][b]);
      }
    if constexpr (SECOND == SECOND_WHEN_BIG) {
      if (big) {
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
          for (int r = 0; r < 2; ++r) fp4::rescale_word(wt[i][r], f2[i][r][b]);
      }
    }
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      u32 raw[4], act[4];
      token_words<Cfg::AV>(tokens[j], k + w * 8, K, tail, raw);
      fp4::pair_with_fours(raw, act);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const u32 bfrag[2] = {act[2 * h], act[2 * h + 1]};
#pragma unroll
        for (int i = 0; i < MT; ++i) {
          const u32 afrag[4] = {wt[i][0][2 * h], wt[i][1][2 * h], wt[i][0][2 * h + 1], wt[i][1][2 * h + 1]};
          mma_bf16(acc[i][j], afrag, bfrag);
        }
      }
    }
  }
}

// Adds a thread's share of one span to the warp's sums: the codes and scales of its rows in s (weight
// rows as the mma's A operand, MT tiles of 16), the activations of the NT token tiles from `tokens`
// (row g of each tile) at elements k .. k + 31 of K (the thread's share: k = 128 span + 32 t). mxfp4
// spans whose blocks all scale by at most 2 (codes up to 128: every block of the warp, one vote) take
// each first factor in one multiply-add of the code; the others (a second factor, or NaN) take
// block_factors and the second factor, as a warp-uniform branch between two copies of the loop body,
// or with Cfg::SECOND_PREDICATED multiplies under a predicate in one (fewer registers and instructions
// to fetch; the multiplies issue even when off): each is faster at some shapes (results/README).
template <class Cfg, int MT, int NT>
__device__ __forceinline__ void span_products(float (&acc)[MT][NT][4], const Span<MT>& s,
                                              const u16* const (&tokens)[NT], i64 k, i64 K, bool tail) {
  constexpr bool NV = Cfg::NVFP4;
  u32 f1[MT][2][2], f2[MT][2][2];
  auto general_factors = [&] {
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int b = 0; b < (NV ? 2 : 1); ++b)
          block_factors<NV>(s.scale[i][r] >> (8 * b) & 0xFFu, f1[i][r][b], f2[i][r][b]);
  };
  if constexpr (NV) {
    general_factors();
    span_words<Cfg, MT, NT, SECOND_NONE>(acc, s, f1, f2, tokens, k, K, false, tail);
    return;
  }
  bool wide = false;
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int r = 0; r < 2; ++r) wide |= s.scale[i][r] > fp4::MX_ONE_FACTOR;
  wide = __any_sync(0xFFFFFFFFu, wide);
  auto small_factors = [&] {
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int r = 0; r < 2; ++r) f1[i][r][0] = fp4::e8m0_small_factor(s.scale[i][r]);
  };
  if constexpr (Cfg::SECOND_PREDICATED) {
    general_factors();
    span_words<Cfg, MT, NT, SECOND_WHEN_BIG>(acc, s, f1, f2, tokens, k, K, wide, tail);
  } else if (wide) {
    general_factors();
    span_words<Cfg, MT, NT, SECOND_ALL>(acc, s, f1, f2, tokens, k, K, wide, tail);
  } else {
    small_factors();
    span_words<Cfg, MT, NT, SECOND_NONE>(acc, s, f1, f2, tokens, k, K, wide, tail);
  }
}

// One output of the small-M templates: D[m, n] = total (nvfp4: times 2^7 and the tensor scale),
// rounded to bfloat16, only inside M x N.
template <bool NV>
__device__ __forceinline__ void store_output(u16* __restrict__ D, i64 M, i64 N, i64 m, i64 n, float total,
                                             float tscale) {
  if constexpr (NV) total = total * fp4::NV_UNDO * tscale;
  if (m < M && n < N) D[m * N + n] = (u16)fp4::bf16_out(total);
}

}  // namespace

// The dynamic shared memory holds WARPS_K x TOKENS x (ROWS_CTA + 4) float32 sums (Cfg::SHARED_BYTES).
template <class Cfg>
__device__ __forceinline__ void decode_body(const u16* __restrict__ A, const u8* __restrict__ V,
                                            const u8* __restrict__ S, float tscale, u16* __restrict__ D, i64 M,
                                            i64 N, i64 K, i64 kb, i64 nb) {
  constexpr int RW = Cfg::ROWS, MT = RW / 16, WN = Cfg::WARPS_N, WK = Cfg::WARPS_K, TOK = Cfg::TOKENS;
  constexpr int NT = TOK / 8, UNROLL = Cfg::UNROLL, SPLITS = Cfg::SPLITS, THREADS = WN * WK * 32;
  constexpr int ROWS_CTA = RW * WN, PITCH = ROWS_CTA + 4, SUMS = TOK * PITCH;
  constexpr bool NV = Cfg::NVFP4;
  static_assert(WK * SUMS * 4 <= Cfg::SHARED_BYTES, "the sums fit in the dynamic shared memory");
  extern __shared__ __align__(16) float sums[];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int wn = warp % WN, kw = warp / WN;
  const i64 n0 = (i64)blockIdx.x * ROWS_CTA, m0 = (i64)blockIdx.z * TOK;
  const i64 full = K / 128, per = (full + SPLITS - 1) / SPLITS;
  const i64 begin = min(full, (i64)blockIdx.y * per), end = min(full, begin + per);
  const i64 first = begin + kw;
  const int count = first < end ? (int)((end - first + WK - 1) / WK) : 0;
  const bool tail_owner = K % 128 && blockIdx.y == SPLITS - 1 && kw == WK - 1;

  // The codes and scales of the thread's rows (clamped to N - 1: rows past N are computed, never stored).
  const u8* codes_row[MT][2];
  const u8* scales_row[MT][2];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const i64 row = min(N - 1, n0 + wn * RW + i * 16 + g + 8 * r);
      codes_row[i][r] = V + row * kb, scales_row[i][r] = S + row * nb;
    }
  const u16* tokens[NT];
#pragma unroll
  for (int j = 0; j < NT; ++j) tokens[j] = A + min(M - 1, m0 + j * 8 + g) * K;

  float acc[MT][NT][4];
  zero_fragments(acc);

  auto load_span = [&](Span<MT>& s, i64 span) {
    const i64 byte = span * 64 + t * 16, block = NV ? span * 8 + 2 * t : span * 4 + t;
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        load16<Cfg::VB>(codes_row[i][r] + byte, s.codes[i][r]);
        const u8* sc = scales_row[i][r] + block;
        s.scale[i][r] = NV ? (u32)__ldg(sc) | (u32)__ldg(sc + 1) << 8 : (u32)__ldg(sc);
      }
  };
  // The partial span at K's end: bytes inside the row, nibbles before K, scales of blocks inside the
  // row (code 0 elsewhere, multiplying zeros).
  auto load_tail = [&](Span<MT>& s, i64 span) {
    const i64 k0 = span * 128 + t * 32, byte = k0 / 2;
    const int valid = (int)max((i64)0, min((i64)32, K - k0));
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const u8* p = codes_row[i][r];
#pragma unroll
        for (int w = 0; w < 4; ++w) {
          u32 word = 0;
#pragma unroll
          for (int b = 0; b < 4; ++b) {
            const i64 at = byte + 4 * w + b;
            word |= (at < kb ? (u32)__ldg(p + at) : 0u) << (8 * b);
          }
          s.codes[i][r][w] = keep_nibbles(word, valid - 8 * w);
        }
        const u8* sc = scales_row[i][r] + (NV ? k0 / 16 : k0 / 32);
        s.scale[i][r] = NV ? (valid > 0 ? (u32)__ldg(sc) : 0u) | (valid > 16 ? (u32)__ldg(sc + 1) : 0u) << 8
                           : (valid > 0 ? (u32)__ldg(sc) : 0u);
      }
  };
  Span<MT> ring[UNROLL];
#pragma unroll
  for (int u = 0; u < UNROLL; ++u)
    if (u < count) load_span(ring[u], first + u * WK);
  for (int i = 0; i < count; i += UNROLL) {
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      if (i + u < count) {
        span_products<Cfg>(acc, ring[u], tokens, (first + (i + u) * (i64)WK) * 128 + t * 32, K, false);
        if (i + u + UNROLL < count) load_span(ring[u], first + (i + u + UNROLL) * (i64)WK);
      }
    }
  }
  if (tail_owner) {
    load_tail(ring[0], full);
    span_products<Cfg>(acc, ring[0], tokens, full * 128 + t * 32, K, true);
  }

  // The warps' sums (sums[kw][token][row]) added in warp order, then over the cluster in rank order.
  store_fragment_sums<MT, NT, PITCH>(sums + kw * SUMS, acc, wn * RW);
  add_split_sums<WK, TOK, ROWS_CTA, PITCH, SPLITS, THREADS, 1>(sums, [&](int token, int r, const float (&v)[1]) {
    store_output<NV>(D, M, N, m0 + token, n0 + r, v[0], tscale);
  });
}

template <class Cfg>
__global__ void __cluster_dims__(1, Cfg::SPLITS, 1) __launch_bounds__(Cfg::WARPS_N * Cfg::WARPS_K * 32)
    quant_gemm_decode(const __grid_constant__ typename Cfg::Args a) {
  float tscale = 1.f;
  if constexpr (Cfg::NVFP4) tscale = *a.tensor_scale;
  decode_body<Cfg>(a.a, a.values, a.scales, tscale, a.d, a.M, a.N, a.K, a.kb, a.nb);
}

// The dynamic shared memory holds STAGES stages of the block's ROWS_CTA rows (each CHUNK + 64 bytes of
// codes, then CHUNK * 2 / BLOCK + 16 bytes of scales: rows padded so that two rows' 64-byte reads of a
// span take disjoint banks), then, WARPS_K > 1, two buffers of the consumer warps' float32 sums
// (WARPS_K x TOKENS x (ROWS_CTA + 4) each), then the 2 x STAGES mbarriers (Cfg::SHARED_BYTES).
template <class Cfg>
__device__ __forceinline__ void stream_body(const u16* __restrict__ A, const u8* __restrict__ V,
                                            const u8* __restrict__ S, float tscale, u16* __restrict__ D, i64 M,
                                            i64 N, i64 K, i64 kb, i64 nb) {
  constexpr int RW = Cfg::ROWS, MT = RW / 16, CW = Cfg::WARPS, WK = Cfg::WARPS_K, WN = CW / WK;
  constexpr int TOK = Cfg::TOKENS, NT = TOK / 8, STAGES = Cfg::STAGES, CHUNK = Cfg::CHUNK;
  constexpr int SCALES = CHUNK * 2 / Cfg::BLOCK, ROWS_CTA = RW * WN, CONSUMERS = CW * 32;
  constexpr int CODE_PITCH = CHUNK + 64, SCALE_PITCH = SCALES + 16, STAGE = ROWS_CTA * (CODE_PITCH + SCALE_PITCH);
  constexpr int PITCH = ROWS_CTA + 4, SUMS = TOK * PITCH, SUMS_BYTES = WK > 1 ? 2 * WK * SUMS * 4 : 0;
  constexpr bool NV = Cfg::NVFP4;
  static_assert(CW % WK == 0 && CHUNK % 256 == 0 && SCALES % 16 == 0, "whole warps along N, spans, scale copies");
  static_assert(STAGES * STAGE + SUMS_BYTES + 2 * STAGES * 8 <= Cfg::SHARED_BYTES, "it fits the shared memory");
  extern __shared__ __align__(16) u8 smem[];
  float* sums = reinterpret_cast<float*>(smem + STAGES * STAGE);
  u64* full = reinterpret_cast<u64*>(smem + STAGES * STAGE + SUMS_BYTES);  // stage s loaded
  u64* empty = full + STAGES;                                              // stage s released by the consumers

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const i64 chunks = (kb + CHUNK - 1) / CHUNK, tiles = (M + TOK - 1) / TOK;
  const i64 units = (N + ROWS_CTA - 1) / ROWS_CTA * tiles;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) mbarrier_init(&full[s], 1), mbarrier_init(&empty[s], CW);
  }
  __syncthreads();

  if (warp == CW) {  // the producer: chunk c of every unit, in order, through the ring
    i64 i = 0;
    for (i64 unit = blockIdx.x; unit < units; unit += gridDim.x) {
      const i64 n0 = unit / tiles * ROWS_CTA;
      for (i64 c = 0; c < chunks; ++c, ++i) {
        const int s = (int)(i % STAGES);
        if (i >= STAGES) mbarrier_wait(&empty[s], (u32)(i / STAGES - 1) & 1u);
        const i64 at = c * CHUNK;
        const u32 bytes = (u32)min((i64)CHUNK, kb - at), scales = bytes * 2 / Cfg::BLOCK;
        if (lane == 0) mbarrier_expect_tx(&full[s], ROWS_CTA * (bytes + scales));
        __syncwarp();
        u8* stage = smem + s * STAGE;
        for (int r = lane; r < ROWS_CTA; r += 32) {
          const i64 row = min(N - 1, n0 + r);  // rows past N: copies of the last, never stored
          bulk_load(stage + r * CODE_PITCH, V + row * kb + at, bytes, &full[s]);
          bulk_load(stage + ROWS_CTA * CODE_PITCH + r * SCALE_PITCH, S + row * nb + at * 2 / Cfg::BLOCK, scales,
                    &full[s]);
        }
      }
    }
    return;
  }

  // Consumer warp (wn, kw): rows wn * RW .. of the block's group, spans kw, kw + WK, ... of each chunk.
  const int wn = warp % WN, kw = warp / WN;
  i64 i = 0;
  int done = 0;  // units finished: their parity picks the sums buffer
  for (i64 unit = blockIdx.x; unit < units; unit += gridDim.x, ++done) {
    const i64 n0 = unit / tiles * ROWS_CTA, m0 = unit % tiles * TOK;
    const u16* tokens[NT];
#pragma unroll
    for (int j = 0; j < NT; ++j) tokens[j] = A + min(M - 1, m0 + j * 8 + g) * K;
    float acc[MT][NT][4];
    zero_fragments(acc);
    for (i64 c = 0; c < chunks; ++c, ++i) {
      const int s = (int)(i % STAGES);
      mbarrier_wait(&full[s], (u32)(i / STAGES) & 1u);
      const u8* codes = smem + s * STAGE + wn * RW * CODE_PITCH;
      const u8* scales = smem + s * STAGE + ROWS_CTA * CODE_PITCH + wn * RW * SCALE_PITCH;
      const int spans = (int)(min((i64)CHUNK, kb - c * CHUNK) / 64);
      for (int sp = kw; sp < spans; sp += WK) {
        Span<MT> span;
#pragma unroll
        for (int m = 0; m < MT; ++m)
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int row = m * 16 + g + 8 * r;
            const uint4 v = *reinterpret_cast<const uint4*>(codes + row * CODE_PITCH + sp * 64 + t * 16);
            span.codes[m][r][0] = v.x, span.codes[m][r][1] = v.y, span.codes[m][r][2] = v.z, span.codes[m][r][3] = v.w;
            const u8* sc = scales + row * SCALE_PITCH + (NV ? sp * 8 + 2 * t : sp * 4 + t);
            span.scale[m][r] = NV ? (u32)sc[0] | (u32)sc[1] << 8 : (u32)sc[0];
          }
        span_products<Cfg>(acc, span, tokens, c * CHUNK * 2 + sp * 128 + t * 32, K, false);
      }
      __syncwarp();
      if (lane == 0) mbarrier_arrive(&empty[s]);
    }
    if constexpr (WK == 1) {  // the warp's sums are the totals: rows g, g + 8 of a tile, tokens 2t, 2t + 1
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            store_output<NV>(D, M, N, m0 + j * 8 + 2 * t + e % 2, n0 + wn * RW + m * 16 + g + 8 * (e / 2),
                             acc[m][j][e], tscale);
    } else {  // the WK warps of each row group add their sums in kw order (buffers alternate by unit)
      float* buffer = sums + (done & 1) * WK * SUMS;
      store_fragment_sums<MT, NT, PITCH>(buffer + kw * SUMS, acc, wn * RW);
      barrier_sync(1, CONSUMERS);
      for (int e = threadIdx.x; e < TOK * ROWS_CTA; e += CONSUMERS) {
        const int at = e / ROWS_CTA * PITCH + e % ROWS_CTA;
        float total = buffer[at];
#pragma unroll
        for (int w = 1; w < WK; ++w) total += buffer[w * SUMS + at];
        store_output<NV>(D, M, N, m0 + e / ROWS_CTA, n0 + e % ROWS_CTA, total, tscale);
      }
    }
  }
}

template <class Cfg>
__global__ void __launch_bounds__((Cfg::WARPS + 1) * 32, Cfg::PER_SM)
    quant_gemm_stream(const __grid_constant__ typename Cfg::Args a) {
  float tscale = 1.f;
  if constexpr (Cfg::NVFP4) tscale = *a.tensor_scale;
  stream_body<Cfg>(a.a, a.values, a.scales, tscale, a.d, a.M, a.N, a.K, a.kb, a.nb);
}

// The dynamic shared memory holds STAGES stages of the A, codes and scales tiles (Cfg::SHARED_BYTES).
template <class Cfg>
__device__ __forceinline__ void tiled_body(const u16* __restrict__ A, const u8* __restrict__ V,
                                           const u8* __restrict__ S, float tscale, u16* __restrict__ D, i64 M,
                                           i64 N, i64 K, i64 kb, i64 nb) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, WM = Cfg::WARPS_M, WN = Cfg::WARPS_N;
  constexpr int STAGES = Cfg::STAGES, THREADS = WM * WN * 32, BLOCK = Cfg::BLOCK;
  constexpr bool NV = Cfg::NVFP4;
  constexpr int WTM = BM / WM, WTN = BN / WN, MT = WTM / 16, NT = WTN / 8;
  constexpr int A_PITCH = BK * 2, V_PITCH = BK / 2 + 16, S_BYTES = BK / BLOCK, S_PITCH = S_BYTES < 4 ? 4 : S_BYTES;
  constexpr int A_TILE = BM * A_PITCH, V_TILE = BN * V_PITCH, STAGE = A_TILE + V_TILE + BN * S_PITCH;
  static_assert(WTM % 16 == 0 && WTN % 8 == 0 && BK % 64 == 0, "warp tiles of whole MMA tiles, K in 64s");
  static_assert(STAGES * STAGE <= Cfg::SHARED_BYTES, "the stages fit in the dynamic shared memory");
  static_assert(Cfg::SB <= S_BYTES, "a scale copy stays in its row");
  extern __shared__ __align__(16) u8 smem[];

  const i64 m0 = (i64)blockIdx.y * BM, n0 = (i64)blockIdx.x * BN;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int wm = warp / WN, wn = warp % WN;
  const i64 tiles = (K + BK - 1) / BK;

  float acc[MT][NT][4];
  zero_fragments(acc);

  auto load_stage = [&](i64 kt, int stage) {
    u8* s = smem + stage * STAGE;
    copy_tile<BM, BK * 2, A_PITCH, Cfg::AV, THREADS, true>(s, reinterpret_cast<const u8*>(A), M, K * 2, K * 2, m0,
                                                           kt * BK * 2);
    copy_tile<BN, BK / 2, V_PITCH, Cfg::VB, THREADS, false>(s + A_TILE, V, N, kb, kb, n0, kt * (BK / 2));
    copy_tile<BN, S_BYTES, S_PITCH, Cfg::SB, THREADS, false>(s + A_TILE + V_TILE, S, N, nb, nb, n0, kt * S_BYTES);
  };

  cp_async_ring<STAGES>(tiles, load_stage, [&](i64 kt, int buffer) {
    const u8* sa = smem + buffer * STAGE;
    const u8* sv = sa + A_TILE;
    const u8* ss = sv + V_TILE;
#pragma unroll
    for (int kc = 0; kc < BK / 32; ++kc) {
      // codes: one word a weight row (elements 32 kc + 8 t ..), nibbles past K dropped
      const int valid = (int)min((i64)8, K - (kt * BK + 32 * kc + 8 * t));
      u32 wt[NT][4], f2[NT];
      bool big = false;
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const int r = wn * WTN + j * 8 + g;
        const u32 word = keep_nibbles(*reinterpret_cast<const u32*>(sv + r * V_PITCH + 16 * kc + 4 * t), valid);
        const u32 code = ss[r * S_PITCH + (NV ? (32 * kc + 8 * t) / 16 : kc)];
        u32 f1;
        block_factors<NV>(code, f1, f2[j]);
        if constexpr (!NV) big |= fp4::e8m0_big(code);
        fp4::decode_word(word, f1, wt[j]);
      }
      if (!NV && __any_sync(0xFFFFFFFFu, big)) {
#pragma unroll
        for (int j = 0; j < NT; ++j) fp4::rescale_word(wt[j], f2[j]);
      }
      // activations: 16 bytes a token row (its chunk 4 kc + t, odd rows' halves swapped)
      u32 act[MT][2][4];
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int row = wm * WTM + i * 16 + g + 8 * r;
          const uint4 v = *reinterpret_cast<const uint4*>(sa + row * A_PITCH + ((64 * kc + 16 * t) ^ (row & 1) * 64));
          const u32 raw[4] = {v.x, v.y, v.z, v.w};
          fp4::pair_with_fours(raw, act[i][r]);
        }
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int i = 0; i < MT; ++i) {
          const u32 afrag[4] = {act[i][0][2 * h], act[i][1][2 * h], act[i][0][2 * h + 1], act[i][1][2 * h + 1]};
#pragma unroll
          for (int j = 0; j < NT; ++j) {
            const u32 bfrag[2] = {wt[j][2 * h], wt[j][2 * h + 1]};
            mma_bf16(acc[i][j], afrag, bfrag);
          }
        }
    }
  });

  const bool paired = N % 2 == 0;
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const i64 m = m0 + wm * WTM + i * 16 + g + 8 * h, n = n0 + wn * WTN + j * 8 + 2 * t;
        if (m >= M) continue;
        float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
        if constexpr (NV) v0 = v0 * fp4::NV_UNDO * tscale, v1 = v1 * fp4::NV_UNDO * tscale;
        u16* out = D + m * N + n;
        if (paired && n + 1 < N) {
          *reinterpret_cast<u32*>(out) = fp4::bf16_out(v0) | fp4::bf16_out(v1) << 16;
        } else {
          if (n < N) out[0] = (u16)fp4::bf16_out(v0);
          if (n + 1 < N) out[1] = (u16)fp4::bf16_out(v1);
        }
      }
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::WARPS_M * Cfg::WARPS_N * 32)
    quant_gemm_tiled(const __grid_constant__ typename Cfg::Args a) {
  float tscale = 1.f;
  if constexpr (Cfg::NVFP4) tscale = *a.tensor_scale;
  tiled_body<Cfg>(a.a, a.values, a.scales, tscale, a.d, a.M, a.N, a.K, a.kb, a.nb);
}
