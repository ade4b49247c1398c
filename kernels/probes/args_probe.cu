// A probe of the kernel-argument struct (tests/gpu/test_kernel_args_gpu.py): thread 0 writes every
// scalar member back as raw bits to `out`, and loads one TMA box through the struct's tensor map
// into `box_out`, so the test sees that what the host packed is what the kernel read.
#include <tunebox/tma.cuh>

template <class Cfg>
__global__ void args_probe(const __grid_constant__ typename Cfg::Args a) {
  using tb::u64;
  __shared__ alignas(128) float box[Cfg::BOX_ROWS * Cfg::BOX_COLS];
  __shared__ u64 bar;
  if (threadIdx.x != 0) return;
  a.out[0] = (unsigned long long)a.i32;
  a.out[1] = (unsigned long long)a.i64;
  a.out[2] = (unsigned long long)a.u16;
  a.out[3] = (unsigned long long)a.u32;
  a.out[4] = (unsigned long long)__float_as_uint(a.f32);
  a.out[5] = (unsigned long long)a.src[0];
  tb::mbarrier_init(&bar, 1);
  tb::mbarrier_expect_tx(&bar, sizeof(box));
  tb::tma_load_2d(box, &a.map, a.x, a.y, &bar);
  tb::mbarrier_wait(&bar, 0);
  for (int i = 0; i < Cfg::BOX_ROWS * Cfg::BOX_COLS; ++i) a.box_out[i] = box[i];
}
