// Hopper TMA in the tile library: the tensor-map parameter type, mbarriers and bulk tensor loads.
//
// A tensor map is encoded on the host (tunebox/tma.py: cuTensorMapEncodeTiled after a validator
// that mirrors the driver's rules) and passed by value as a `const __grid_constant__ tb::TensorMap`
// kernel parameter (NVRTC's headers only forward-declare CUtensorMap: this is a complete 128-byte,
// 64-byte aligned type of the same layout). Coordinates are element indices, innermost first, and
// may be negative or run past the end: the hardware fills those elements (zero, or NaN with the
// NAN_REQUEST_ZERO_FMA fill) and still counts their bytes towards the mbarrier's transaction. The
// innermost coordinate must be a multiple of 16 bytes: on the H200 (driver 580.159.04) a box at an
// innermost coordinate of -3 or 190 float32 elements running past an edge of the tensor raised
// CUDA_ERROR_ILLEGAL_INSTRUCTION, while 16-byte multiples (past either end too) loaded correctly.
//
// A load completes on an mbarrier: one thread arms it with the box's byte count (`expect_tx`) and
// issues the copy; every thread waits on the barrier's phase parity (0 for the first use, flipping
// with each reuse). Shared destinations must be aligned to the swizzle period (128 B without
// swizzle, 256 / 512 / 1024 B for 32B / 64B / 128B swizzle).
#pragma once

#include "tunebox/tile.cuh"

namespace tb {

struct __align__(64) TensorMap {
  unsigned long long opaque[16];
};

__device__ __forceinline__ u32 shared_address(const void* p) { return (u32)__cvta_generic_to_shared(p); }

// Initialise a barrier expecting `arrivals` arrivals per phase, visible to the async (TMA) proxy.
__device__ __forceinline__ void mbarrier_init(u64* bar, u32 arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(bar)), "r"(arrivals) : "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Arrive on the barrier and add `bytes` to the transaction count its phase waits for.
__device__ __forceinline__ void mbarrier_expect_tx(u64* bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(bar)), "r"(bytes)
               : "memory");
}

// Arrive on the barrier (no transaction bytes).
__device__ __forceinline__ void mbarrier_arrive(u64* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(shared_address(bar)) : "memory");
}

__device__ __forceinline__ bool mbarrier_try_wait(u64* bar, u32 parity) {
  u32 done;
  asm volatile(
      "{\n"
      " .reg .pred p;\n"
      " mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      " selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(shared_address(bar)), "r"(parity)
      : "memory");
  return done != 0;
}

// Block until the barrier's phase of the given parity completed.
__device__ __forceinline__ void mbarrier_wait(u64* bar, u32 parity) {
  while (!mbarrier_try_wait(bar, parity)) {
  }
}

// Bulk tensor load of the box at (x, y) (innermost first) into shared `dst`, completing on `bar`.
__device__ __forceinline__ void tma_load_2d(void* dst, const TensorMap* map, int x, int y, u64* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::
          "r"(shared_address(dst)),
      "l"(reinterpret_cast<u64>(map)), "r"(x), "r"(y), "r"(shared_address(bar))
      : "memory");
}

}  // namespace tb
