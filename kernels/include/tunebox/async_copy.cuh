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

__device__ __forceinline__ void cp_async_commit_group() { asm volatile("cp.async.commit_group;" ::: "memory"); }

template <int N>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

}  // namespace tb
