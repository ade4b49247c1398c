// Family faults (test-only): a copy of n 32-bit words, repeated PASSES times, whose variants
// misbehave on purpose so that the harness's isolation, verification and bookkeeping can be tested
// against real GPU faults. FAULT selects the misbehaviour (see tunebox/families/faults/). The last two
// produce correct outputs that verification accepts; only compute-sanitizer sees them.
enum Fault {
  NONE = 0, OOB_WRITE = 1, HANG = 2, WRONG_VALUE = 3, SKIP_ELEMENT = 4, MODIFY_INPUT = 5,
  TOO_MUCH_SHARED = 6, OVER_LAUNCH_BOUNDS = 7, COMPILE_ERROR = 8, SMEM_RACE = 9, OOB_READ = 10
};

template <class Cfg>
__device__ __forceinline__ void faulty_copy_body(const unsigned* __restrict__ src, unsigned* dst, long long n) {
  constexpr int BLOCK = Cfg::BLOCK, PASSES = Cfg::PASSES, FAULT = Cfg::FAULT;
  static_assert(FAULT != COMPILE_ERROR, "planted compile error");
  const long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
  if (FAULT == HANG) {
    while (*(volatile const unsigned*)src != 0x5eed5eedu) {  // random input never holds this word
    }
  }
  if (FAULT == SMEM_RACE) {  // thread 0 writes a shared word every thread reads, with no barrier between:
    __shared__ unsigned word;  // a read-after-write race across warps (racecheck); the value is unused
    if (threadIdx.x == 0) *(volatile unsigned*)&word = (unsigned)blockIdx.x;
    (void)*(volatile unsigned*)&word;
  }
  if (i >= n) return;
  if (FAULT == OOB_READ && i == n - 1) (void)*(volatile const unsigned*)(src + n);  // one past the end, unused
  if (FAULT == SKIP_ELEMENT && i == n - 1) return;
  for (int pass = 0; pass < PASSES; ++pass) {  // volatile: every pass really moves the word
    unsigned v = *(volatile const unsigned*)(src + i);
    if (FAULT == WRONG_VALUE && i == n / 2) v ^= 1u;
    *(volatile unsigned*)(dst + i) = v;
  }
  if (FAULT == MODIFY_INPUT && i == 0) const_cast<unsigned*>(src)[0] ^= 1u;
  if (FAULT == OOB_WRITE && i == 0) reinterpret_cast<unsigned*>(16)[0] = 1u;  // a wild pointer
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::BLOCK) faulty_copy(const __grid_constant__ typename Cfg::Args a) {
  faulty_copy_body<Cfg>(a.src, a.dst, a.n);
}
