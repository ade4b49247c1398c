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
// One arrival on a device-wide counter, with acquire-release semantics at GPU scope: returns the
// count before it. Called by one thread after a barrier (bar.sync, or a named barrier of some of the
// block's warps), it publishes every write the threads meeting there made before it (the release is
// cumulative); in the thread that sees the last count, it acquires every earlier arrival's published
// writes for the threads that meet it at the next barrier. No __threadfence on either side.
__device__ __forceinline__ u32 counter_arrive(u32* counter) {
  u32 before;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(before) : "l"(counter) : "memory");
  return before;
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
