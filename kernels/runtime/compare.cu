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

// The same count for float outputs compared with a tolerance: position i matches when the bits are
// equal, or |a - b| <= atol + rtol * |b| with b the reference (a NaN or infinity that is not
// bit-identical never matches). BF16: W holds bfloat16 bits, else float32 bits.
template <typename W, bool BF16>
__global__ void mismatches_within(const W* __restrict__ a, const W* __restrict__ b, long long n, float rtol,
                                  float atol, unsigned long long* count, unsigned long long* first) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  unsigned long long local = 0, lowest = ~0ull;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    if (a[i] == b[i]) continue;
    const float x = BF16 ? __uint_as_float((unsigned int)a[i] << 16) : __uint_as_float((unsigned int)a[i]);
    const float y = BF16 ? __uint_as_float((unsigned int)b[i] << 16) : __uint_as_float((unsigned int)b[i]);
    if (!(fabsf(x - y) <= atol + rtol * fabsf(y))) {
      ++local;
      if ((unsigned long long)i < lowest) lowest = (unsigned long long)i;
    }
  }
  if (local) {
    atomicAdd(count, local);
    atomicMin(first, lowest);
  }
}
