// The timing gate (tunebox/runner/gate.py): one thread that holds its stream until the host writes a
// nonzero word at `open` (host memory the device maps), so that everything the host queued behind it
// meanwhile runs back to back. It reads the word every microsecond or so and gives up by itself after
// `limit_ns` nanoseconds: a host that never opens it cannot hang the stream.
extern "C" __global__ void timing_gate(const volatile unsigned int* open, unsigned long long limit_ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    if (*open) return;
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < limit_ns);
}
