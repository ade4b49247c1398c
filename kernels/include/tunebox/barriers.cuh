// Named barriers in the tile library (bar.sync / bar.arrive): a subset of a block's warps meet on
// barrier `id` (1 .. 15; 0 is __syncthreads') with `threads` arriving in all (a multiple of 32).
#pragma once

#include "tunebox/tile.cuh"

namespace tb {

__device__ __forceinline__ void barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
// A named barrier that also ORs a predicate over its threads: whether any thread passed `value` != 0.
__device__ __forceinline__ bool barrier_any(int id, int threads, u32 value) {
  u32 any;
  asm volatile(
      "{\n .reg .pred p, q;\n setp.ne.u32 p, %1, 0;\n barrier.cta.red.or.pred q, %2, %3, p;\n"
      " selp.u32 %0, 1, 0, q;\n}"
      : "=r"(any)
      : "r"(value), "r"(id), "r"(threads)
      : "memory");
  return any != 0;
}

}  // namespace tb
