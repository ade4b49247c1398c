// Hopper bulk copies in the tile library: contiguous global -> shared copies by the TMA unit, without a
// tensor map (cp.async.bulk), completing on an mbarrier of tma.cuh, and bulk prefetches into L2. Kept out
// of tma.cuh so that the families using only tensor maps keep their hashes.
//
// A copy moves a multiple of 16 bytes between 16-byte aligned addresses. Its bytes count towards the
// barrier's transaction: the thread that arms the barrier (`mbarrier_expect_tx`) names the total of its
// phase's copies, which any thread may issue, before or after the arming.
#pragma once

#include "tunebox/tma.cuh"

namespace tb {

// Copy `bytes` (a multiple of 16) from global `src` to shared `dst` (both 16-byte aligned), completing
// on `bar`.
__device__ __forceinline__ void bulk_load(void* dst, const void* src, u32 bytes, u64* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   shared_address(dst)),
               "l"(src), "r"(bytes), "r"(shared_address(bar))
               : "memory");
}

// Start fetching `bytes` (a multiple of 16) of global memory from `src` (16-byte aligned) into L2, with no
// destination and no completion: later loads of those bytes hit L2.
__device__ __forceinline__ void bulk_prefetch_l2(const void* src, u32 bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src), "r"(bytes) : "memory");
}

}  // namespace tb
