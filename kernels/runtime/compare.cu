// Verification helper used by the GPU worker: counts positions where a and b differ bit for bit,
// and the lowest such position. `count` and `first` must be preset to 0 and ~0ull.
template <typename W>
__global__ void mismatches(const W* __restrict__ a, const W* __restrict__ b, long long n,
                           unsigned long long* count, unsigned long long* first) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  unsigned long long local = 0, lowest = ~0ull;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    if (a[i] != b[i]) {
      ++local;
      if ((unsigned long long)i < lowest) lowest = (unsigned long long)i;
    }
  }
  if (local) {
    atomicAdd(count, local);
    atomicMin(first, lowest);
  }
}
