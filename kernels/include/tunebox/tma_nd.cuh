// Bulk tensor copies of rank 3, 4 and 5 (tma.cuh has rank 2 and everything else: the tensor-map type,
// mbarriers, bulk groups, the swizzle period). Kept out of tma.cuh so the families whose results hash
// that file keep them.
//
// Coordinates are element indices, innermost first, one per dimension of the tensor map (RANK of
// them), signed 32-bit; they may lie outside the tensor: a load fills those elements of the box (zero)
// and still counts their bytes towards the mbarrier's transaction, a store does not write them. The
// innermost coordinate must be a multiple of 16 bytes (see tma.cuh). Shared memory is laid out as the
// box, densely, innermost dimension fastest, swizzled by the map's swizzle mode; its address must be
// aligned to the swizzle period (tb::swizzle_period).
#pragma once

#include "tunebox/tma.cuh"

namespace tb {

// Bulk tensor load of the box at coordinates `c` into shared `dst`, completing on `bar`.
template <int RANK>
__device__ __forceinline__ void tma_load_nd(void* dst, const TensorMap* map, const int (&c)[RANK], u64* bar) {
  static_assert(RANK >= 3 && RANK <= 5, "tma_load_nd copies boxes of rank 3, 4 or 5 (tma_load_2d: rank 2)");
  const u32 d = shared_address(dst), b = shared_address(bar);
  const u64 m = reinterpret_cast<u64>(map);
  if constexpr (RANK == 3) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
        "[%5];" ::"r"(d),
        "l"(m), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(b)
        : "memory");
  } else if constexpr (RANK == 4) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, "
        "%5}], [%6];" ::"r"(d),
        "l"(m), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(b)
        : "memory");
  } else {
    asm volatile(
        "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, "
        "%5, %6}], [%7];" ::"r"(d),
        "l"(m), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4]), "r"(b)
        : "memory");
  }
}

// Bulk tensor store of the box at coordinates `c` from shared `src`, into the issuing thread's open bulk
// group (close it with bulk_commit_group); elements of the box outside the tensor are not written.
template <int RANK>
__device__ __forceinline__ void tma_store_nd(const TensorMap* map, const int (&c)[RANK], const void* src) {
  static_assert(RANK >= 3 && RANK <= 5, "tma_store_nd copies boxes of rank 3, 4 or 5 (tma_store_2d: rank 2)");
  const u32 s = shared_address(src);
  const u64 m = reinterpret_cast<u64>(map);
  if constexpr (RANK == 3) {
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%1, %2, %3}], [%4];" ::"l"(m),
                 "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(s)
                 : "memory");
  } else if constexpr (RANK == 4) {
    asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%0, {%1, %2, %3, %4}], [%5];" ::"l"(m),
                 "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(s)
                 : "memory");
  } else {
    asm volatile(
        "cp.async.bulk.tensor.5d.global.shared::cta.tile.bulk_group [%0, {%1, %2, %3, %4, %5}], [%6];" ::"l"(m),
        "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4]), "r"(s)
        : "memory");
  }
}

}  // namespace tb
