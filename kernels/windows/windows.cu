// Family windows: cuTile's eachtile(a, (TH, TW); step = (SR, SC)) over a row-major R x C array A
// (0-based). Window (i, j), i < NR = ceil(R / SR), j < NC = ceil(C / SC), has its origin at
// (i * SR, j * SC) and covers TH x TW elements; the part outside A reads as padding. OP picks what
// is written:
//
//   UNFOLD (0): W[i, j, a, b] = A[i * SR + a, j * SC + b], else `pad`      W: NR x NC x TH x TW, E bits
//   SUM (1), MAX (2), MIN (3): Y[i, j] = the window's reduction in float32, the padding being the
//     operation's neutral element (0, -inf, +inf), i.e. over the window's part inside A   Y: NR x NC
//
// Block (bi, bj) owns the BI x BJ windows at (bi * BI, bj * BJ) of the NR x NC grid; windows past NR
// or NC are skipped. Their union is a REGION_ROWS x REGION_COLS region of A. STAGED: the block first
// copies the region (padding included) into shared memory, so overlapping windows read A once;
// otherwise every read goes to A through the read-only cache. UNFOLD writes each window row as TW / VEC
// vectors of VEC elements. A reduction either walks each window (one thread per window), or, with
// SEPARABLE (STAGED only), reduces each region row over TW columns for every window column first and
// then the partial results over TH rows: TH + TW steps per window instead of TH x TW. KIND tells the
// reductions how to read E: 0 float32, 1 float16, 2 bfloat16.
#include "tunebox/tile.cuh"

namespace {

using namespace tb;

enum Op { UNFOLD = 0, SUM = 1, MAX = 2, MIN = 3 };

// Staged<OP, E>::type: what the region holds in shared memory: the bits of A (UNFOLD), or float values.
template <int OP, typename E> struct Staged { typedef float type; };
template <typename E> struct Staged<UNFOLD, E> { typedef E type; };

template <int KIND>
__device__ __forceinline__ float to_float(u32 bits) {
  if constexpr (KIND == 0) {
    return __uint_as_float(bits);
  } else if constexpr (KIND == 1) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((u16)bits));
    return f;
  } else {
    return __uint_as_float(bits << 16);
  }
}

template <int OP>
__device__ __forceinline__ float neutral() {
  return OP == SUM ? 0.f : (OP == MAX ? -__int_as_float(0x7f800000) : __int_as_float(0x7f800000));
}

template <int OP>
__device__ __forceinline__ float combine(float acc, float v) {
  return OP == SUM ? acc + v : (OP == MAX ? fmaxf(acc, v) : fminf(acc, v));
}

// Element (r, c) of A, or `otherwise` outside it.
template <typename E>
__device__ __forceinline__ E element(const E* __restrict__ a, i64 rows, i64 cols, i64 r, i64 c, E otherwise) {
  return (in_range(r, rows) && in_range(c, cols)) ? __ldg(a + r * cols + c) : otherwise;
}

}  // namespace

// Cfg (named members, rendered by tunebox/families/windows/layout.py): E (A's bit type), KIND, OP,
// TH, TW, SR, SC, BI, BJ, THREADS, VEC, STAGED, SEPARABLE, and SHARED_BYTES, the dynamic shared memory
// the launch gives a block (the layout below must fit in it); Args, the kernel's argument struct.
template <class Cfg>
__device__ __forceinline__ void windows_body(const typename Cfg::E* __restrict__ A, void* __restrict__ out, long long R,
                                             long long C, long long NR, long long NC, typename Cfg::E pad) {
  using E = typename Cfg::E;
  constexpr int KIND = Cfg::KIND, OP = Cfg::OP, TH = Cfg::TH, TW = Cfg::TW, SR = Cfg::SR, SC = Cfg::SC;
  constexpr int BI = Cfg::BI, BJ = Cfg::BJ, THREADS = Cfg::THREADS, VEC = Cfg::VEC;
  constexpr bool STAGED = Cfg::STAGED, SEPARABLE = Cfg::SEPARABLE;
  constexpr int REGION_ROWS = (BI - 1) * SR + TH, REGION_COLS = (BJ - 1) * SC + TW;
  static_assert(OP == UNFOLD || VEC == 1, "reductions write one float per window");
  static_assert(!SEPARABLE || (STAGED && OP != UNFOLD), "a separable reduction works on the staged region");
  typedef typename Staged<OP, E>::type S;
  // shared memory: the staged region, then (SEPARABLE) REGION_ROWS x BJ partial results
  constexpr long long SHARED = STAGED ? (long long)REGION_ROWS * REGION_COLS * sizeof(S) +
                                            (SEPARABLE ? (long long)REGION_ROWS * BJ * sizeof(float) : 0)
                                      : 0;
  static_assert(SHARED <= Cfg::SHARED_BYTES, "the block's shared-memory layout exceeds the launch's SHARED_BYTES");
  extern __shared__ __align__(16) unsigned char smem_bytes[];
  S* region = reinterpret_cast<S*>(smem_bytes);

  const i64 i0 = (i64)blockIdx.y * BI, j0 = (i64)blockIdx.x * BJ;
  const i64 r0 = i0 * SR, c0 = j0 * SC;
  auto at = [&](i64 r, i64 c) -> S {  // element (r, c) of A as the block handles it; padding outside A
    if constexpr (OP == UNFOLD) {
      return element(A, R, C, r, c, pad);
    } else {
      return (in_range(r, R) && in_range(c, C)) ? to_float<KIND>(__ldg(A + r * C + c)) : neutral<OP>();
    }
  };
  auto read = [&](int rr, int cc) -> S {  // element (rr, cc) of the block's region
    if constexpr (STAGED) {
      return region[rr * REGION_COLS + cc];
    } else {
      return at(r0 + rr, c0 + cc);
    }
  };

  if constexpr (STAGED) {
    for (int k = threadIdx.x; k < REGION_ROWS * REGION_COLS; k += THREADS)
      region[k] = at(r0 + k / REGION_COLS, c0 + k % REGION_COLS);
    __syncthreads();
  }

  if constexpr (OP == UNFOLD) {
    E* W = reinterpret_cast<E*>(out);
    constexpr int VECTORS = TW / VEC;  // per window row
    const bool aligned = (u64)W % (VEC * sizeof(E)) == 0;  // else (caller memory) element by element
    for (int k = threadIdx.x; k < BI * BJ * TH * VECTORS; k += THREADS) {
      const int v = k % VECTORS, a = (k / VECTORS) % TH, jj = (k / (VECTORS * TH)) % BJ, ii = k / (VECTORS * TH * BJ);
      const i64 i = i0 + ii, j = j0 + jj;
      if (i >= NR || j >= NC) continue;
      Vec<E, VEC> x;
#pragma unroll
      for (int e = 0; e < VEC; ++e) x.e[e] = read(ii * SR + a, jj * SC + v * VEC + e);
      E* to = W + ((i * NC + j) * TH + a) * TW + v * VEC;
      if (aligned) {
        *reinterpret_cast<typename Raw<VEC * sizeof(E)>::type*>(to) = x.raw;
      } else {
#pragma unroll
        for (int e = 0; e < VEC; ++e) to[e] = x.e[e];
      }
    }
  } else {
    float* partial = region + REGION_ROWS * REGION_COLS;  // SEPARABLE: REGION_ROWS x BJ, each row over TW columns
    if constexpr (SEPARABLE) {
      for (int k = threadIdx.x; k < REGION_ROWS * BJ; k += THREADS) {
        const int rr = k / BJ, jj = k % BJ;
        float acc = neutral<OP>();
#pragma unroll
        for (int b = 0; b < TW; ++b) acc = combine<OP>(acc, region[rr * REGION_COLS + jj * SC + b]);
        partial[k] = acc;
      }
      __syncthreads();
    }
    float* Y = reinterpret_cast<float*>(out);
    for (int k = threadIdx.x; k < BI * BJ; k += THREADS) {
      const int ii = k / BJ, jj = k % BJ;
      const i64 i = i0 + ii, j = j0 + jj;
      if (i >= NR || j >= NC) continue;
      float acc = neutral<OP>();
      if constexpr (SEPARABLE) {
#pragma unroll
        for (int a = 0; a < TH; ++a) acc = combine<OP>(acc, partial[(ii * SR + a) * BJ + jj]);
      } else {
        for (int a = 0; a < TH; ++a) {
#pragma unroll
          for (int b = 0; b < TW; ++b) acc = combine<OP>(acc, read(ii * SR + a, jj * SC + b));
        }
      }
      Y[i * NC + j] = acc;
    }
  }
}

// The kernel: its arguments are one struct (Cfg::Args: A, out, R, C, NR, NC, pad, laid out by
// tunebox/families/windows/layout.py's args), unpacked into the body's restrict-qualified parameters.
template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS) windows(const __grid_constant__ typename Cfg::Args a) {
  windows_body<Cfg>(a.A, a.out, a.R, a.C, a.NR, a.NC, a.pad);
}
