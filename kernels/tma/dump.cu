// Test kernel of the TMA layer: one bulk tensor load of the 2-D box at (x, y) (innermost first)
// into shared memory aligned to 1024 bytes, then the box's `bytes` shared-memory bytes copied out
// as they lie, so the host can check them against the swizzle address map (tunebox/tma.py).
// Dynamic shared memory: bytes + 1024.
#include "tunebox/tma.cuh"

extern "C" __global__ void tma_dump_2d(const __grid_constant__ tb::TensorMap map, unsigned char* out, int x, int y,
                                       unsigned int bytes) {
  extern __shared__ unsigned char raw[];
  __shared__ tb::u64 bar;
  unsigned char* box = raw + ((1024 - (tb::shared_address(raw) & 1023)) & 1023);
  if (threadIdx.x == 0) tb::mbarrier_init(&bar, 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    tb::mbarrier_expect_tx(&bar, bytes);
    tb::tma_load_2d(box, &map, x, y, &bar);
  }
  tb::mbarrier_wait(&bar, 0);
  for (unsigned int i = threadIdx.x; i < bytes; i += blockDim.x) out[i] = box[i];
}
