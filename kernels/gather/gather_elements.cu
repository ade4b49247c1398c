// Family gather_elements: cuTile's gather with a tuple of index tiles, element by element (0-based,
// row-major A of N x D elements, output of R x C):
//
//   out[i, j] = valid(i, j) ? A[r(i, j), c(i, j)] : pad
//   r(i, j) = RI[i],  c(i, j) = CI[j]                 with BCAST (1-D tiles of R and C, broadcast)
//   r(i, j) = RI[i*C + j],  c(i, j) = CI[i*C + j]     otherwise (2-D tiles of R x C)
//   valid(i, j) = mask[i*C + j] != 0 (masked kernel only) and 0 <= r < N and 0 <= c < D
//
// Negative indices are out of bounds (no wrap-around); A is read only where valid. CHECK=false
// promises every index in bounds (the mask, if any, is still honoured).
//
// Each kernel takes the named configuration struct Cfg (rendered by
// tunebox/families/gather_elements/elements.py): E element bits type; I index type (int or long
// long); THREADS per block; EPT output elements per thread; CHECK (test the bounds); BCAST (1-D
// tiles broadcast); Args the kernel's one parameter, the argument struct of the template's args
// (members A, ri, ci, [mask,] out, N, D, R, C, pad), unpacked into gather_elements_block's
// restrict-qualified parameters. Block b covers THREADS * EPT consecutive elements of output row
// b / T (T blocks a row); thread t takes elements t, t + THREADS, ... (coalesced index loads and
// stores). Every index load of a thread is issued before its loads of A.
#include "tunebox/tile.cuh"

namespace {

using namespace tb;

template <class Cfg, bool MASK>
__device__ __forceinline__ void gather_elements_block(const typename Cfg::E* __restrict__ A,
                                                      const typename Cfg::I* __restrict__ ri,
                                                      const typename Cfg::I* __restrict__ ci,
                                                      const u8* __restrict__ mask, typename Cfg::E* __restrict__ out,
                                                      i64 N, i64 D, i64 R, i64 C, typename Cfg::E pad) {
  using E = typename Cfg::E;
  constexpr int THREADS = Cfg::THREADS, EPT = Cfg::EPT;
  constexpr bool CHECK = Cfg::CHECK, BCAST = Cfg::BCAST;
  constexpr i64 SPAN = (i64)THREADS * EPT;
  const i64 tiles = (C + SPAN - 1) / SPAN;
  const i64 i = (i64)blockIdx.x / tiles;
  const i64 j0 = ((i64)blockIdx.x % tiles) * SPAN + threadIdx.x;
  if (i >= R) return;
  const i64 row_of_i = BCAST ? (i64)__ldg(ri + i) : 0;
  i64 r[EPT], c[EPT];
  bool ok[EPT];
#pragma unroll
  for (int k = 0; k < EPT; ++k) {
    const i64 j = j0 + (i64)k * THREADS;
    const i64 e = i * C + j;
    ok[k] = j < C;
    if (ok[k]) {
      r[k] = BCAST ? row_of_i : (i64)__ldg(ri + e);
      c[k] = (i64)__ldg(ci + (BCAST ? j : e));
      if (MASK) ok[k] = __ldg(mask + e) != 0;
    }
  }
  E v[EPT];
#pragma unroll
  for (int k = 0; k < EPT; ++k) {
    const bool inside = !CHECK || ((u64)r[k] < (u64)N && (u64)c[k] < (u64)D);
    v[k] = ok[k] && inside ? __ldg(A + r[k] * D + c[k]) : pad;
  }
#pragma unroll
  for (int k = 0; k < EPT; ++k) {
    const i64 j = j0 + (i64)k * THREADS;
    if (j < C) out[i * C + j] = v[k];
  }
}

}  // namespace

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS) gather_elements(const __grid_constant__ typename Cfg::Args a) {
  gather_elements_block<Cfg, false>(a.A, a.ri, a.ci, nullptr, a.out, a.N, a.D, a.R, a.C, a.pad);
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS) gather_elements_masked(const __grid_constant__ typename Cfg::Args a) {
  gather_elements_block<Cfg, true>(a.A, a.ri, a.ci, a.mask, a.out, a.N, a.D, a.R, a.C, a.pad);
}
