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

// Bulk tensor stores (shared -> global) and the shared-memory layout of boxes.
//
// A store writes the box at (x, y) (innermost first) from shared memory laid out as a load of the
// same tensor map leaves it; elements of the box outside the tensor are not written (the store clips
// at the edges). Threads that wrote the box with ordinary stores first make their writes visible to
// the async proxy (`fence_proxy_async_shared`, then __syncthreads()). The issuing thread commits
// its stores as a bulk group and, before the box's shared memory is written again (or the block
// exits), waits until the group has read it (`bulk_wait_group_read`) or completed (`bulk_wait_group`).

// v, or `pad` when (r, c) lies outside a (rows, cols) array: padding applied by a select in registers
// to an element loaded without a bounds test (a TMA box, whose hardware fill is zero).
template <typename E>
__device__ __forceinline__ E pad_outside(E v, i64 r, i64 c, i64 rows, i64 cols, E pad) {
  return in_range(r, rows) && in_range(c, cols) ? v : pad;
}

// Bytes after which a swizzle of `span` bytes (0: none, else 32, 64 or 128) repeats: a box's shared
// memory is aligned to it (128 bytes without swizzle).
__host__ __device__ constexpr int swizzle_period(int span) { return span ? 8 * span : 128; }

// Byte offset, in shared memory, of byte `offset` of a box stored with a swizzle of `SPAN` bytes (0:
// none), from a base aligned to the swizzle period: the 16-byte chunk index within each 128-byte line
// is XORed with the line index modulo SPAN / 16 (tunebox/tma.py swizzled_offset; self-inverse).
template <int SPAN>
__device__ __forceinline__ u32 swizzled_offset(u32 offset) {
  static_assert(SPAN == 0 || SPAN == 32 || SPAN == 64 || SPAN == 128, "swizzle spans 32, 64 or 128 bytes");
  constexpr u32 LINES = SPAN ? SPAN / 16 - 1 : 0;
  return offset ^ (((offset >> 7) & LINES) << 4);
}

// The first address at or after `p` aligned to ALIGN bytes (a power of two) in the shared window.
template <int ALIGN>
__device__ __forceinline__ unsigned char* align_shared(unsigned char* p) {
  return p + ((ALIGN - (shared_address(p) & (ALIGN - 1))) & (ALIGN - 1));
}

// Make this thread's ordinary writes to shared memory visible to later bulk (async proxy) copies.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Bulk tensor store of the box at (x, y) (innermost first) from shared `src`; clips at the tensor's edges.
__device__ __forceinline__ void tma_store_2d(const TensorMap* map, int x, int y, const void* src) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];" ::"l"(
                   reinterpret_cast<u64>(map)),
               "r"(x), "r"(y), "r"(shared_address(src))
               : "memory");
}

// Close the bulk stores this thread issued since its last commit into one group.
__device__ __forceinline__ void bulk_commit_group() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }

// Wait until at most N of this thread's bulk groups still read their shared memory.
template <int N>
__device__ __forceinline__ void bulk_wait_group_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

// Wait until at most N of this thread's bulk groups are incomplete (their global writes included).
template <int N>
__device__ __forceinline__ void bulk_wait_group() {
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}

}  // namespace tb
