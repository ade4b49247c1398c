// Family quant: block-scaled quantize and dequantize of a row-major (rows, cols) array x of bfloat16 or
// float32 (bits E) to and from OCP MX (mxfp4, mxfp8_e4m3, mxfp8_e5m2) and NVFP4. The rules are stated in
// tunebox/families/quant/reference.py (the numpy reference); the arithmetic is in tunebox/quant.cuh.
//
// Scale blocks run along rows: block kb of row r holds columns [kb*B, kb*B + B), padded with zeros
// past cols. values: element codes row by row, rb bytes a row (fp4: element 2c in the low nibble of
// byte c, 2c+1 in the high one, cuTile's reinterpret order; an odd row ends with a zero high nibble);
// scales: one code a block, row-major (rows x nb) or in the 128 x 4 swizzled layout (scale_offset);
// NVFP4 adds the float32 tensor scale.
//
// Threads: LANES = B / EPT consecutive threads share a block, each holding EPT consecutive elements
// (moved VEC elements at a time; LP_VEC bytes at a time on the values side); a CTA's THREADS / LANES
// groups take consecutive blocks, BPT times, every load issued before any block is computed. Block q
// of the grid's blocks (row-major, gc a row) is row q / gc, block q % gc; quantize with SWIZZLED walks
// the layout's padded rows and blocks too, writing their scales as 0. One warp-shuffle max per block.
//
// Cfg (tunebox/families/quant/blocks.py): E, BF16, FORMAT (tb::quant::Format), B, EPT, VEC, LP_VEC,
// BPT, THREADS, SWIZZLED, AMAX_THREADS (NVFP4 quantize's prologue); Args: x, values, scales,
// [tensor_scale,] rows, cols, nb, rb, gc, sc (the scale layout's blocks a row), total (the grid's
// blocks). NVFP4 quantize's prologue: quant_amax_partial (finite |x| maxima of grid-strided slices,
// into the workspace amax) and quant_amax_final (their maximum G; the tensor scale T = G / 2688,
// which the main kernel reads back); their argument structs are Cfg's <kernel>_args.
#include "tunebox/fp4.cuh"
#include "tunebox/quant_pairs.cuh"
#include "tunebox/tile.cuh"

namespace {

using namespace tb::quant;
typedef long long i64;

template <bool SWIZZLED>
__device__ __forceinline__ i64 scale_offset(i64 r, i64 kb, i64 sc) {
  if (!SWIZZLED) return r * sc + kb;
  // 512-byte tiles of 128 rows x 4 blocks, row-tile major; inside: (r % 32) * 16 + (r % 128 / 32) * 4 + kb % 4
  return ((r >> 7) * (sc >> 2) + (kb >> 2)) * 512 + (r & 31) * 16 + ((r >> 5) & 3) * 4 + (kb & 3);
}

// Block q of the grid: row q / gc, block q % gc of it; in 32 bits when the grid's blocks fit them (64-bit
// division is a long subroutine). A q past the grid's blocks is never used.
__device__ __forceinline__ void block_of(i64 q, i64 gc, bool narrow, i64& row, i64& kb) {
  if (narrow) {
    const u32 r = (u32)q / (u32)gc;
    row = r;
    kb = (u32)q - r * (u32)gc;
  } else {
    row = q / gc;
    kb = q % gc;
  }
}

// The BPT blocks of a CTA's group: q[k] = (cta * BPT + k) * GROUPS + group, each at (row[k], kb[k]). Where a
// row holds at least GROUPS blocks, each after the first steps on from the one before (no division).
template <int BPT, int GROUPS>
__device__ __forceinline__ void group_blocks(i64 cta, int group, i64 gc, i64 total, i64 (&q)[BPT], i64 (&row)[BPT],
                                             i64 (&kb)[BPT]) {
  const bool narrow = total <= 0xFFFFFFFFll;
#pragma unroll
  for (int k = 0; k < BPT; ++k) {
    q[k] = (cta * BPT + k) * GROUPS + group;
    if (k > 0 && gc >= GROUPS) {
      row[k] = row[k - 1];
      kb[k] = kb[k - 1] + GROUPS;
      if (kb[k] >= gc) {
        kb[k] -= gc;
        ++row[k];
      }
    } else {
      block_of(q[k], gc, narrow, row[k], kb[k]);
    }
  }
}

template <int N, int W>
union Bytes {  // N bytes, moved W at a time
  typename tb::Raw<W>::type w[N / W];
  u8 b[N];
};

__device__ __forceinline__ u32 max_u32(u32 a, u32 b) { return a > b ? a : b; }

template <int LANES>
__device__ __forceinline__ u32 group_max(u32 m) {
#pragma unroll
  for (int o = LANES / 2; o > 0; o /= 2) m = max_u32(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
  return m;
}

template <int THREADS>
__device__ __forceinline__ u32 cta_max(u32 m) {
  __shared__ u32 part[THREADS / 32];
  m = group_max<32>(m);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = m;
  __syncthreads();
  m = 0;
#pragma unroll
  for (int w = 0; w < THREADS / 32; ++w) m = max_u32(m, part[w]);
  return m;
}

// A thread's EPT consecutive elements as they lie in memory: e[i] is element i, w[j] bytes 4j .. 4j + 3
// of them (bfloat16: elements 2j and 2j + 1, the first in the low half).
template <class Cfg>
union Share {
  typename Cfg::E e[Cfg::EPT];
  u32 w[Cfg::EPT * sizeof(typename Cfg::E) / 4];
};

// Element i of a share as float32 bits (bfloat16 bits shifted up 16, exact; from the word holding it).
template <class Cfg>
__device__ __forceinline__ u32 element_bits(const Share<Cfg>& s, int i) {
  if constexpr (Cfg::BF16) return i % 2 ? s.w[i / 2] & 0xFFFF0000u : s.w[i / 2] << 16;
  else return s.e[i];
}

// The thread's EPT elements of row r from column c0 (zeros past cols or if !real).
template <class Cfg>
__device__ __forceinline__ void load_share(const typename Cfg::E* __restrict__ x, bool real, i64 r, i64 c0, i64 cols,
                                           Share<Cfg>& s) {
  using E = typename Cfg::E;
  constexpr int VEC = Cfg::VEC;
  typedef typename tb::Raw<VEC * sizeof(E)>::type R;
#pragma unroll
  for (int v = 0; v < Cfg::EPT / VEC; ++v) {
    const i64 c = c0 + v * VEC;  // VEC divides cols: a vector is wholly inside the row or past it
    tb::Vec<E, VEC> in;
    in.raw = real && c < cols ? __ldg(reinterpret_cast<const R*>(x + r * cols + c)) : R{};
#pragma unroll
    for (int e = 0; e < VEC; ++e) s.e[v * VEC + e] = in.e[e];
  }
}

// Vector v of a share (its elements v * VEC ..), from whole words where it holds some.
template <class Cfg>
__device__ __forceinline__ typename tb::Raw<Cfg::VEC * sizeof(typename Cfg::E)>::type vector_of(const Share<Cfg>& s,
                                                                                               int v) {
  constexpr int BYTES = Cfg::VEC * sizeof(typename Cfg::E);
  typedef typename tb::Raw<BYTES>::type R;
  if constexpr (BYTES >= 4) {
    const u32* w = s.w + v * (BYTES / 4);
    if constexpr (BYTES == 16) return R{w[0], w[1], w[2], w[3]};
    else if constexpr (BYTES == 8) return R{w[0], w[1]};
    else return w[0];
  } else {
    return s.e[v];  // one element
  }
}

// *p = v, one access (NVVM split a 16-byte store of four computed words into four stores).
template <typename R>
__device__ __forceinline__ void store_vector(void* p, R v) {
#ifdef __CUDA_ARCH__
  if constexpr (sizeof(R) == 16) {
    asm("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w));
    return;
  }
#endif
  *static_cast<R*>(p) = v;
}

// Whether a dequantize's fp4 elements go to bfloat16 two a word (quant_dequantize): for MXFP4 always,
// for NVFP4 when T * 2^7 is finite (T's product with v * s * 2^-7 is then v * s * T's, rounded once).
template <class Cfg>
__device__ __forceinline__ bool pairs_in_packed(float T) {
  if constexpr (!Cfg::BF16 || (Cfg::FORMAT != MXFP4 && Cfg::FORMAT != NVFP4)) return false;
  else return Cfg::FORMAT == MXFP4 || (as_bits(T) & ABS_MASK) < 0x7B800000u;  // |T| < 2^120, not NaN
}

// The largest |element| of a share as float32 bits (a NaN's bits are above every number's).
template <class Cfg>
__device__ __forceinline__ u32 share_amax(const Share<Cfg>& s) {
  u32 m = 0;
  if constexpr (Cfg::BF16) {  // both halves of each word at once
#pragma unroll
    for (int j = 0; j < Cfg::EPT / 2; ++j) m = tb::bf16x2::max_u16(m, s.w[j] & 0x7FFF7FFFu);
    m = max_u32(m & 0xFFFFu, m >> 16) << 16;
  } else {
#pragma unroll
    for (int i = 0; i < Cfg::EPT; ++i) m = max_u32(m, element_bits(s, i) & ABS_MASK);
  }
  return m;
}

}  // namespace

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS) quant_quantize(const __grid_constant__ typename Cfg::Args a) {
  constexpr int FMT = Cfg::FORMAT, B = Cfg::B, EPT = Cfg::EPT, BPT = Cfg::BPT, LANES = B / EPT;
  constexpr int GROUPS = Cfg::THREADS / LANES, W = Cfg::LP_VEC;
  constexpr bool FP4 = FMT == MXFP4 || FMT == NVFP4;
  constexpr int LPB = FP4 ? EPT / 2 : EPT;  // values bytes of a thread's elements
  constexpr int EMAX = FMT == MXFP4 ? 2 : FMT == MXFP8_E4M3 ? 8 : 15;
  static_assert(B % EPT == 0 && EPT % Cfg::VEC == 0 && LPB % W == 0 && 32 % LANES == 0, "Cfg's shapes");
  const int lane = threadIdx.x % LANES, group = threadIdx.x / LANES;
  float T = 0.0f;
  if constexpr (FMT == NVFP4) T = __ldg(a.tensor_scale);  // written by quant_amax_final
  // NVFP4 reads x twice: the prologue's slices end at x's end, whose lines L2 still holds; the CTAs start
  // there (CTAs are dispatched in index order)
  const i64 cta = FMT == NVFP4 ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  Share<Cfg> in[BPT];
  i64 q[BPT], row[BPT], kb[BPT];
  bool live[BPT], real[BPT];
  group_blocks<BPT, GROUPS>(cta, group, a.gc, a.total, q, row, kb);
#pragma unroll
  for (int k = 0; k < BPT; ++k) {
    live[k] = q[k] < a.total;
    real[k] = live[k] && row[k] < a.rows && kb[k] < a.nb;
    load_share<Cfg>(a.x, real[k], row[k], kb[k] * B + lane * EPT, a.cols, in[k]);
  }
#pragma unroll
  for (int k = 0; k < BPT; ++k) {
    const u32 m = group_max<LANES>(share_amax(in[k]));
    const bool bad = m >= INF_BITS;  // a NaN or an infinity: the scale is NaN
    u32 scale;
    float mul, mul2 = 1.0f;  // q = x * mul * mul2
    if constexpr (FMT == NVFP4) {
      scale = bad ? 0x7Fu : nvfp4_scale(as_float(m), 6.0f * T);
      mul = 1.0f / (T * e4m3_value(scale));
      // R is infinite when T * value(S) is 0: a zero x stays a signed zero, any other saturates, as x * 2^254
      // (two factors) gives them
      if (as_bits(mul) == INF_BITS) mul = mul2 = 0x1p127f;
    } else {
      scale = e8m0_of_amax<EMAX>(m);
      mul = e8m0_inverse(scale);
    }
    // codes are computed for every block (no branch around them) and replaced in a bad one: fp4 by 0, fp8
    // by NaN codes
    const u32 keep = bad ? 0u : 0xFFFFu, fill = FP4 || !bad ? 0u : 0x7F7Fu;
    Bytes<LPB, W> out;
#pragma unroll
    for (int i = 0; i < EPT / 2; ++i) {
      u32 codes;  // fp4: one byte; fp8: two
      if constexpr (FMT == MXFP4 && Cfg::BF16) {
        codes = e2m1_pair_byte(in[k].w[i], tb::fp4::dup(as_bits(mul) >> 16));
      } else {
        float lo = as_float(element_bits(in[k], 2 * i)), hi = as_float(element_bits(in[k], 2 * i + 1));
        if (FMT == NVFP4) {
          lo = lo * mul * mul2;
          hi = hi * mul * mul2;
        } else {
          lo *= mul;
          hi *= mul;
        }
        codes = FP4 ? e2m1_encode(lo) | e2m1_encode(hi) << 4 : fp8_encode2<FMT>(lo, hi);
      }
      codes = (codes & keep) | fill;
      if constexpr (FP4) {
        out.b[i] = (u8)codes;
      } else {
        out.b[2 * i] = (u8)codes;
        out.b[2 * i + 1] = (u8)(codes >> 8);
      }
    }
    const i64 at = (kb[k] * B + lane * EPT) / (FP4 ? 2 : 1);  // in the row's values bytes
    if (real[k]) {
#pragma unroll
      for (int w = 0; w < LPB / W; ++w)  // W divides rb: a chunk is wholly inside the row or past it
        if (at + w * W < a.rb)
          *reinterpret_cast<typename tb::Raw<W>::type*>(a.values + row[k] * a.rb + at + w * W) = out.w[w];
    }
    if (live[k] && lane == 0) a.scales[scale_offset<Cfg::SWIZZLED>(row[k], kb[k], a.sc)] = real[k] ? (u8)scale : 0;
  }
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS) quant_dequantize(const __grid_constant__ typename Cfg::Args a) {
  using E = typename Cfg::E;
  constexpr int FMT = Cfg::FORMAT, B = Cfg::B, EPT = Cfg::EPT, VEC = Cfg::VEC, BPT = Cfg::BPT, LANES = B / EPT;
  constexpr int GROUPS = Cfg::THREADS / LANES, W = Cfg::LP_VEC;
  constexpr bool FP4 = FMT == MXFP4 || FMT == NVFP4;
  constexpr int LPB = FP4 ? EPT / 2 : EPT;
  typedef typename tb::Raw<W>::type R;
  static_assert(B % EPT == 0 && EPT % VEC == 0 && LPB % W == 0, "Cfg's shapes");
  const int lane = threadIdx.x % LANES, group = threadIdx.x / LANES;
  float T = 0.0f;
  if constexpr (FMT == NVFP4) T = __ldg(a.tensor_scale);
  Bytes<LPB, W> in[BPT];
  u32 sc[BPT];
  i64 q[BPT], row[BPT], kb[BPT];
  bool real[BPT];
  group_blocks<BPT, GROUPS>(blockIdx.x, group, a.gc, a.total, q, row, kb);
#pragma unroll
  for (int k = 0; k < BPT; ++k) {
    real[k] = q[k] < a.total;
    const i64 at = (kb[k] * B + lane * EPT) / (FP4 ? 2 : 1);
#pragma unroll
    for (int w = 0; w < LPB / W; ++w)
      in[k].w[w] = real[k] && at + w * W < a.rb
                       ? __ldg(reinterpret_cast<const R*>(a.values + row[k] * a.rb + at + w * W))
                       : R{};
    sc[k] = real[k] ? __ldg(a.scales + scale_offset<Cfg::SWIZZLED>(row[k], kb[k], a.sc)) : 0u;
  }
#pragma unroll
  for (int k = 0; k < BPT; ++k) {
    const bool scale_nan = FMT == NVFP4 ? (sc[k] & 0x7Fu) == 0x7Fu : sc[k] == 0xFFu;
    Share<Cfg> out;
    if (pairs_in_packed<Cfg>(T)) {  // fp4 to bfloat16: fp4.cuh's exact products, two elements a word
      if constexpr (FP4 && Cfg::BF16) {
        namespace f = tb::fp4;
        const u32 first = FMT == NVFP4 ? f::e4m3_factor(sc[k]) : f::e8m0_factor(sc[k]);
        const u32 second = f::e8m0_second(sc[k]);
        const bool big = FMT == MXFP4 && f::e8m0_big(sc[k]);
        const float t = T * f::NV_UNDO;  // NVFP4: the products are v * s * 2^-7
#pragma unroll
        for (int i = 0; i < EPT / 2; ++i) {
          const u32 b = in[k].b[i];  // elements 2i and 2i + 1 as e2m1_pair's nibbles 0 and 4
          u32 pair = f::bf16x2_mul(f::e2m1_pair<0>((b & 0xFu) | (b & 0xF0u) << 12), first);
          if (big) pair = f::bf16x2_mul(pair, second);
          if constexpr (FMT == NVFP4)
            pair = tb::bf16x2::from_floats(as_float(pair << 16) * t, as_float(pair & 0xFFFF0000u) * t);
          out.w[i] = scale_nan ? f::dup(NAN_F32 >> 16) : pair;
        }
      }
    } else {
      const float s = FMT == NVFP4 ? e4m3_value(sc[k]) : e8m0_value(sc[k]);
#pragma unroll
      for (int e = 0; e < EPT; ++e) {
        const u32 c = FP4 ? (in[k].b[e / 2] >> (4 * (e & 1))) & 15u : in[k].b[e];
        float v = 0.0f;
        bool nan = scale_nan;
        if (FP4) {
          v = e2m1_value(c);
        } else if (FMT == MXFP8_E4M3) {
          v = e4m3_value(c);
          nan = nan || (c & 0x7Fu) == 0x7Fu;
        } else {
          v = (c & 0x7Fu) == 0x7Cu ? as_float((c & 0x80u) << 24 | INF_BITS) : e5m2_value(c);
          nan = nan || (c & 0x7Fu) > 0x7Cu;
        }
        float r = v * s;
        if (FMT == NVFP4) r = r * T;
        nan = nan || r != r;
        out.e[e] = (E)(Cfg::BF16 ? (nan ? NAN_F32 >> 16 : bf16_rne(as_bits(r))) : (nan ? NAN_F32 : as_bits(r)));
      }
    }
    const i64 c0 = kb[k] * B + lane * EPT;
#pragma unroll
    for (int v = 0; v < EPT / VEC; ++v) {
      const i64 c = c0 + v * VEC;
      if (real[k] && c < a.cols) store_vector(a.x + row[k] * a.cols + c, vector_of(out, v));
    }
  }
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::AMAX_THREADS)
    quant_amax_partial(const __grid_constant__ typename Cfg::quant_amax_partial_args a) {
  using E = typename Cfg::E;
  typedef typename tb::Raw<16>::type R;
  constexpr int V = 16 / sizeof(E), THREADS = Cfg::AMAX_THREADS, UNROLL = 4;  // UNROLL loads in flight
  const i64 stride = (i64)gridDim.x * THREADS, first = (i64)blockIdx.x * THREADS + threadIdx.x;
  const i64 vectors = a.n / V;
  u32 m = KEY_ZERO<Cfg::BF16>;
  for (i64 i = first; i < vectors; i += UNROLL * stride) {
    R v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u)
      v[u] = i + u * stride < vectors ? __ldg(reinterpret_cast<const R*>(a.x) + i + u * stride) : R{};
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      m = key_max<Cfg::BF16>(m, v[u].x);
      m = key_max<Cfg::BF16>(m, v[u].y);
      m = key_max<Cfg::BF16>(m, v[u].z);
      m = key_max<Cfg::BF16>(m, v[u].w);
    }
  }
  for (i64 i = vectors * V + first; i < a.n; i += stride) m = key_max<Cfg::BF16>(m, (u32)a.x[i]);
  m = cta_max<THREADS>(key_amax<Cfg::BF16>(m));
  if (threadIdx.x == 0) a.amax[blockIdx.x] = m;
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::AMAX_THREADS)
    quant_amax_final(const __grid_constant__ typename Cfg::quant_amax_final_args a) {
  u32 m = 0;
  for (int i = threadIdx.x; i < a.parts; i += Cfg::AMAX_THREADS) m = max_u32(m, a.amax[i]);
  m = cta_max<Cfg::AMAX_THREADS>(m);
  if (threadIdx.x == 0) *a.tensor_scale = as_float(m) / 2688.0f;  // G / (6 * 448)
}
