// Families gather and scatter: rows moved by index (0-based, row-major).
//
//   gather:  out[k, :] = valid(k) ? A[idx[k] + offset, :] : pad        for k < K; A is (N, D), out (K, D)
//   scatter: A[idx[k] + offset, :] = V[k, :]                         for each k < K with valid(k)
// valid(k) = mask[k] != 0 (masked kernels only) and 0 <= idx[k] + offset < N: negative rows are out
// of range (no wrap-around), so -1 is a padding sentinel that never touches memory. An invalid gather
// row writes the padding bits without reading A; an invalid scatter row writes nothing. CHECK=false
// promises that every index is valid (the mask, if any, is still honoured).
//
// Template parameters: E element bits type; I index type (int or long long); RPB rows (indices) per
// block; THREADS per block, split into RPB teams of THREADS / RPB threads, one team per row, whose
// threads stride over the row's vectors; VEC elements per vector access; CHECK bounds test.
// A row moves in VEC-element vectors when the row pitch D and both base addresses allow it, else in
// the widest narrower vector that fits (element by element at worst): the width is chosen once per
// launch, so every D works. Row offsets use 64-bit arithmetic: N beyond 2^31 rows and offsets beyond
// 2^31 work with either index type.
#include "tunebox/tile.cuh"

namespace {

using namespace tb;

// The row entry k refers to, or -1 when it is invalid. The sum wraps in unsigned arithmetic instead
// of overflowing; with |offset| < 2^62 (enforced on the host) a wrapped sum is never below N.
template <typename I, bool CHECK, bool MASK>
__device__ __forceinline__ i64 target_row(const I* __restrict__ idx, const u8* __restrict__ mask, i64 k, i64 N,
                                          i64 offset) {
  if (MASK && __ldg(mask + k) == 0) return -1;
  const u64 r = (u64)(i64)__ldg(idx + k) + (u64)offset;
  if (!CHECK) return (i64)r;
  return r < (u64)N ? (i64)r : -1;
}

// Threads 0 .. RPB-1 read the block's indices (and mask bytes) once, into shared memory.
template <typename I, int RPB, bool CHECK, bool MASK>
__device__ __forceinline__ void stage_rows(const I* __restrict__ idx, const u8* __restrict__ mask, i64 N, i64 K,
                                           i64 offset, i64* rows) {
  if (threadIdx.x < RPB) {
    const i64 k = (i64)blockIdx.x * RPB + threadIdx.x;
    rows[threadIdx.x] = k < K ? target_row<I, CHECK, MASK>(idx, mask, k, N, offset) : -1;
  }
  __syncthreads();
}

// True when rows of D elements starting at a and b move in W-element vectors.
template <typename E, int W>
__device__ __forceinline__ bool vector_fits(i64 D, const void* a, const void* b) {
  constexpr u64 BYTES = W * sizeof(E);
  return (D % W) == 0 && ((u64)a % BYTES) == 0 && ((u64)b % BYTES) == 0;
}

// Copies the D-element row src to dst (team lane `lane` of TEAM), or fills dst with `pad` when src
// is null, in W-element vectors.
template <typename E, int W, int TEAM>
__device__ __forceinline__ void move_row(const E* __restrict__ src, E* __restrict__ dst, i64 D, int lane, E pad) {
  typedef typename Raw<W * sizeof(E)>::type R;
  const i64 n = D / W;
  R* d = reinterpret_cast<R*>(dst);
  if (src != nullptr) {
    const R* s = reinterpret_cast<const R*>(src);
#pragma unroll 4
    for (i64 v = lane; v < n; v += TEAM) d[v] = __ldg(s + v);
  } else {
    Vec<E, W> p;
#pragma unroll
    for (int e = 0; e < W; ++e) p.e[e] = pad;
#pragma unroll 4
    for (i64 v = lane; v < n; v += TEAM) d[v] = p.raw;
  }
}

template <typename E, int RPB, int THREADS, int W>
__device__ __forceinline__ void gather_block(const E* __restrict__ A, E* __restrict__ out, i64 D, i64 K, E pad,
                                             const i64* rows) {
  constexpr int TEAM = THREADS / RPB;
  const int t = threadIdx.x / TEAM;
  const i64 k = (i64)blockIdx.x * RPB + t;
  if (k >= K) return;
  const i64 r = rows[t];
  move_row<E, W, TEAM>(r >= 0 ? A + r * D : nullptr, out + k * D, D, threadIdx.x % TEAM, pad);
}

template <typename E, int RPB, int THREADS, int W>
__device__ __forceinline__ void scatter_block(const E* __restrict__ V, E* __restrict__ A, i64 D, i64 K,
                                              const i64* rows) {
  constexpr int TEAM = THREADS / RPB;
  const int t = threadIdx.x / TEAM;
  const i64 k = (i64)blockIdx.x * RPB + t;
  if (k >= K) return;
  const i64 r = rows[t];
  if (r < 0) return;  // an invalid entry writes nothing
  move_row<E, W, TEAM>(V + k * D, A + r * D, D, threadIdx.x % TEAM, E(0));
}

// The block's rows at the widest vector of at most W elements that fits the problem.
template <typename E, int RPB, int THREADS, int W>
__device__ __forceinline__ void gather_at_width(const E* __restrict__ A, E* __restrict__ out, i64 D, i64 K, E pad,
                                                const i64* rows) {
  if constexpr (W > 1) {
    if (!vector_fits<E, W>(D, A, out)) return gather_at_width<E, RPB, THREADS, W / 2>(A, out, D, K, pad, rows);
  }
  gather_block<E, RPB, THREADS, W>(A, out, D, K, pad, rows);
}

template <typename E, int RPB, int THREADS, int W>
__device__ __forceinline__ void scatter_at_width(const E* __restrict__ V, E* __restrict__ A, i64 D, i64 K,
                                                 const i64* rows) {
  if constexpr (W > 1) {
    if (!vector_fits<E, W>(D, V, A)) return scatter_at_width<E, RPB, THREADS, W / 2>(V, A, D, K, rows);
  }
  scatter_block<E, RPB, THREADS, W>(V, A, D, K, rows);
}

template <typename E, typename I, int RPB, int THREADS, int VEC, bool CHECK, bool MASK>
__device__ __forceinline__ void gather(const E* __restrict__ A, const I* __restrict__ idx, const u8* __restrict__ mask,
                                       E* __restrict__ out, i64 N, i64 D, i64 K, i64 offset, E pad) {
  static_assert(THREADS % RPB == 0, "every row gets a whole team of threads");
  __shared__ i64 rows[RPB];
  stage_rows<I, RPB, CHECK, MASK>(idx, mask, N, K, offset, rows);
  gather_at_width<E, RPB, THREADS, VEC>(A, out, D, K, pad, rows);
}

template <typename E, typename I, int RPB, int THREADS, int VEC, bool CHECK, bool MASK>
__device__ __forceinline__ void scatter(const E* __restrict__ V, const I* __restrict__ idx,
                                        const u8* __restrict__ mask, E* __restrict__ A, i64 N, i64 D, i64 K,
                                        i64 offset) {
  static_assert(THREADS % RPB == 0, "every row gets a whole team of threads");
  __shared__ i64 rows[RPB];
  stage_rows<I, RPB, CHECK, MASK>(idx, mask, N, K, offset, rows);
  scatter_at_width<E, RPB, THREADS, VEC>(V, A, D, K, rows);
}

}  // namespace

template <typename E, typename I, int RPB, int THREADS, int VEC, bool CHECK>
__global__ void __launch_bounds__(THREADS)
    gather_rows(const E* __restrict__ A, const I* __restrict__ idx, E* __restrict__ out, long long N, long long D,
                long long K, long long offset, E pad) {
  gather<E, I, RPB, THREADS, VEC, CHECK, false>(A, idx, nullptr, out, N, D, K, offset, pad);
}

template <typename E, typename I, int RPB, int THREADS, int VEC, bool CHECK>
__global__ void __launch_bounds__(THREADS)
    gather_rows_masked(const E* __restrict__ A, const I* __restrict__ idx, const unsigned char* __restrict__ mask,
                       E* __restrict__ out, long long N, long long D, long long K, long long offset, E pad) {
  gather<E, I, RPB, THREADS, VEC, CHECK, true>(A, idx, mask, out, N, D, K, offset, pad);
}

template <typename E, typename I, int RPB, int THREADS, int VEC, bool CHECK>
__global__ void __launch_bounds__(THREADS)
    scatter_rows(const E* __restrict__ V, const I* __restrict__ idx, E* __restrict__ A, long long N, long long D,
                 long long K, long long offset) {
  scatter<E, I, RPB, THREADS, VEC, CHECK, false>(V, idx, nullptr, A, N, D, K, offset);
}

template <typename E, typename I, int RPB, int THREADS, int VEC, bool CHECK>
__global__ void __launch_bounds__(THREADS)
    scatter_rows_masked(const E* __restrict__ V, const I* __restrict__ idx, const unsigned char* __restrict__ mask,
                        E* __restrict__ A, long long N, long long D, long long K, long long offset) {
  scatter<E, I, RPB, THREADS, VEC, CHECK, true>(V, idx, mask, A, N, D, K, offset);
}
