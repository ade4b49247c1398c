// Thread-block clusters (sm_90): the cluster barrier, a block's rank, other blocks' shared memory
// (distributed shared memory), mbarrier arrivals across the cluster and TMA loads multicast to
// several blocks of it.
#pragma once

#include "tunebox/tma.cuh"

namespace tb {

// Every thread of every block of the cluster arrives and waits (release / acquire at cluster scope).
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

__device__ __forceinline__ u32 cluster_rank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

// The shared::cluster address of the same shared-memory offset as `p` in block `rank` of the cluster.
__device__ __forceinline__ u32 cluster_address(const void* p, u32 rank) {
  u32 remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(shared_address(p)), "r"(rank));
  return remote;
}

// Make this block's mbarrier initialisations visible to the other blocks of the cluster (before the
// cluster barrier that precedes their first remote arrival or multicast).
__device__ __forceinline__ void fence_mbarrier_init_cluster() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// Arrive on the mbarrier at `bar`'s offset in block `rank` of the cluster (release at the block's
// scope, which orders this block's accesses before the arrival: a cluster-scope release costs a
// cluster-wide fence, per arrival).
__device__ __forceinline__ void mbarrier_arrive_cluster(u64* bar, u32 rank) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(cluster_address(bar, rank)) : "memory");
}

// Bulk tensor load of the box at (x, y) into shared `dst` of every block of the cluster whose bit is
// set in `mask`, at the same offset in each, completing on the mbarrier at `bar`'s offset in each.
__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const TensorMap* map, int x, int y, u64* bar,
                                                      unsigned short mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(shared_address(dst)),
      "l"(reinterpret_cast<u64>(map)), "r"(x), "r"(y), "r"(shared_address(bar)), "h"(mask)
      : "memory");
}

}  // namespace tb
