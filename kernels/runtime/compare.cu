// Verification kernels used by the GPU worker: count the positions i < n where a[i] does not match
// b[i] (b the reference), and the lowest such position. `count` and `first` must be preset to 0 and
// ~0ull. Where a and b are both 16-byte aligned (the worker's buffers are) they are read 16 bytes at
// a time: a chunk whose bits are equal, the common case, costs one comparison of four words, and a
// chunk that differs is compared element by element. The elements past the last whole chunk, and
// every element when a pointer is not aligned, are compared one at a time.

// Whether a and b differ bit for bit.
template <typename W>
struct Bitwise {
  __device__ bool operator()(W a, W b) const { return a != b; }
};

// For float outputs compared with a tolerance: position i matches when the bits are equal, or
// |a - b| <= atol + rtol * |b| with b the reference (a NaN or infinity that is not bit-identical
// never matches). BF16: W holds bfloat16 bits, else float32 bits.
template <typename W, bool BF16>
struct BeyondTolerance {
  float rtol, atol;
  __device__ bool operator()(W a, W b) const {
    if (a == b) return false;
    const float x = BF16 ? __uint_as_float((unsigned int)a << 16) : __uint_as_float((unsigned int)a);
    const float y = BF16 ? __uint_as_float((unsigned int)b << 16) : __uint_as_float((unsigned int)b);
    return !(fabsf(x - y) <= atol + rtol * fabsf(y));
  }
};

template <typename W, typename Differs>
__device__ void count_mismatches(const W* __restrict__ a, const W* __restrict__ b, long long n, Differs differs,
                                 unsigned long long* count, unsigned long long* first) {
  constexpr int per_chunk = 16 / sizeof(W);
  const long long stride = (long long)gridDim.x * blockDim.x;
  const long long start = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const bool aligned = ((reinterpret_cast<unsigned long long>(a) | reinterpret_cast<unsigned long long>(b)) & 15) == 0;
  const long long chunks = aligned ? n / per_chunk : 0;
  const uint4* __restrict__ chunk_a = reinterpret_cast<const uint4*>(a);
  const uint4* __restrict__ chunk_b = reinterpret_cast<const uint4*>(b);
  unsigned long long local = 0, lowest = ~0ull;
  for (long long c = start; c < chunks; c += stride) {
    const uint4 x = chunk_a[c], y = chunk_b[c];
    if (x.x == y.x && x.y == y.y && x.z == y.z && x.w == y.w) continue;
    for (long long i = c * per_chunk; i < (c + 1) * per_chunk; ++i) {
      if (differs(a[i], b[i])) {
        ++local;
        lowest = min(lowest, (unsigned long long)i);
      }
    }
  }
  for (long long i = chunks * per_chunk + start; i < n; i += stride) {
    if (differs(a[i], b[i])) {
      ++local;
      lowest = min(lowest, (unsigned long long)i);
    }
  }
  if (local) {
    atomicAdd(count, local);
    atomicMin(first, lowest);
  }
}

template <typename W>
__global__ void mismatches(const W* __restrict__ a, const W* __restrict__ b, long long n,
                           unsigned long long* count, unsigned long long* first) {
  count_mismatches(a, b, n, Bitwise<W>{}, count, first);
}

template <typename W, bool BF16>
__global__ void mismatches_within(const W* __restrict__ a, const W* __restrict__ b, long long n, float rtol,
                                  float atol, unsigned long long* count, unsigned long long* first) {
  count_mismatches(a, b, n, BeyondTolerance<W, BF16>{rtol, atol}, count, first);
}
