// cp.async (sm_80+) in the tile library: asynchronous global -> shared copies of 4, 8 or 16 bytes.
//
// The copies a thread issued form a group at its next commit; cp_async_wait_group<N> returns once at
// most N of its groups are pending, after which a __syncthreads() makes the data visible to the other
// threads of the block. Completion is per thread, not a barrier.
#pragma once

#include "tunebox/tile.cuh"

namespace tb {

// Copy B = 4, 8 or 16 bytes from global `src` to shared `dst`, both B-byte aligned (.cg, bypassing
// L1, for 16 bytes; .ca otherwise).
template <int B>
__device__ __forceinline__ void cp_async_copy(void* dst, const void* src) {
  static_assert(B == 4 || B == 8 || B == 16, "cp.async moves 4, 8 or 16 bytes");
  const u32 to = (u32)__cvta_generic_to_shared(dst);
  if constexpr (B == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(to), "l"(src) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(to), "l"(src), "n"(B) : "memory");
}

// Copy B bytes (1, 2, 4, 8 or 16; dst and src B-aligned) from global `src` to shared `dst`, the first `valid`
// of them read and the rest zero (src is not read when valid is 0): cp.async with its source size for
// 4, 8 or 16 bytes, byte by byte (synchronous) below 4.
template <int B>
__device__ __forceinline__ void cp_async_zfill(void* dst, const void* src, int valid) {
  if constexpr (B >= 4) {
    const u32 to = (u32)__cvta_generic_to_shared(dst);
    if constexpr (B == 16)
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(to), "l"(src), "r"(valid) : "memory");
    else
      asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" ::"r"(to), "l"(src), "n"(B), "r"(valid)
                   : "memory");
  } else {
#pragma unroll
    for (int i = 0; i < B; ++i)
      reinterpret_cast<u8*>(dst)[i] = i < valid ? __ldg(reinterpret_cast<const u8*>(src) + i) : (u8)0;
  }
}

// Copies elements first .. first + VEC - 1 of global `src` to shared memory: one cp.async of the whole
// vector into at(0) when `whole` (every element inside its matrix and the vector aligned to its size),
// else element by element, at(e) = src[first + e] where inside(e) and `pad` elsewhere (read only where
// inside). `at(e)` is element e's place in the shared tile; the whole vector's places are contiguous.
template <int VEC, typename E, class At, class Inside>
__device__ __forceinline__ void cp_async_or_elements(bool whole, const E* __restrict__ src, i64 first, At&& at,
                                                     Inside&& inside, E pad) {
  if (whole) {
    cp_async_copy<VEC * sizeof(E)>(&at(0), src + first);
  } else {
#pragma unroll
    for (int e = 0; e < VEC; ++e) at(e) = inside(e) ? src[first + e] : pad;
  }
}

__device__ __forceinline__ void cp_async_commit_group() { asm volatile("cp.async.commit_group;" ::: "memory"); }

template <int N>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// A STAGES-deep cp.async pipeline over steps 0 .. count - 1 run by every thread of the block:
// load(step, buffer) issues the copies of a step into one of STAGES buffers, STAGES - 1 steps ahead;
// compute(step, buffer) reads the step's buffer between two block barriers (the second lets the
// buffer be refilled). Returns with no copy pending.
template <int STAGES, class Load, class Compute>
__device__ __forceinline__ void cp_async_ring(i64 count, Load load, Compute compute) {
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < count) load((i64)s, s);
    cp_async_commit_group();
  }
  for (i64 step = 0; step < count; ++step) {
    const i64 next = step + STAGES - 1;
    if (next < count) load(next, (int)(next % STAGES));
    cp_async_commit_group();
    cp_async_wait_group<STAGES - 1>();
    __syncthreads();
    compute(step, (int)(step % STAGES));
    __syncthreads();
  }
  cp_async_wait_group<0>();
}

}  // namespace tb
