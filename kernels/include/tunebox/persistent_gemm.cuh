// The persistent, warp-specialized Hopper GEMM (sm_90a) of templates gemm/persistent and
// quant_gemm/wgmma: tb::persistent_gemm<Cfg, W> computes D[m, n] = epilogue(alpha * sum_k A[m, k] *
// B[k, n]) with A bfloat16 bits (M x K, 16-byte aligned rows), D bfloat16 or float32 bits (O = Cfg::O;
// epilogue the identity or ReLU, Cfg::RELU), and B supplied by a weights policy W (a class over Cfg):
//
//   W::Params                 what W reads (tensor maps, pointers, sizes), built by the kernel's entry
//   W::LOADED_BYTES           bytes of a ring buffer the TMA loads for B (after A's box)
//   W::CONVERSION             who writes B's operand from the loaded bytes (persistent::Conversion):
//                             NONE: the wgmma reads the ring buffer's bytes as they are;
//                             BY_PRODUCER: warps 1-3 of the producer warpgroup (CONVERTERS threads),
//                             into a second ring of W::OPERANDS buffers of W::OPERAND_BYTES, with
//                             W::convert<CONVERTERS>(loaded, operand, scales, thread) once the ring
//                             buffer is full and the operand buffer drained (its consumers' arrivals
//                             after their wgmma of its last use), then an arrival on the operand's
//                             ready mbarrier (CONVERTERS arrivals), which the consumers wait for beside
//                             the full one; so the TMA loads run STAGES steps ahead, the decoded
//                             operands OPERANDS;
//                             BY_DECODERS: the same, by a fourth warpgroup of its own (DECODERS
//                             threads, Cfg::DECODER_REGISTERS each; the block has 512 threads), so
//                             that decoding neither waits on the consumers' wgmma issue nor holds
//                             the loader's few registers;
//                             BY_CONSUMERS (cooperative, OPERANDS >= 4, STAGES >= 3): the consumers'
//                             256 threads themselves, step k + 1's operand right after issuing their
//                             wgmma of step k (so two wgmmas, k - 1's and k's, run while they decode),
//                             then a named barrier of the 256 (CONVERT_BARRIER) instead of the ready
//                             and drained mbarriers. The barrier of step k - 1 orders every write of
//                             step k + 1's buffer after both consumers' wgmma of step k - 3, its last
//                             use when OPERANDS >= 4; the ring buffer of step k + 1 was released by
//                             their wait for step k + 1 - STAGES, done before step k when STAGES >= 3;
//                             scales = W::fetch<THREADS>(params, tile column, K step, thread) (a
//                             W::Scales<THREADS>), called W::AHEAD K steps ahead so that its global
//                             loads overlap conversions
//   W::load(buffer, params, tile column, K step, full mbarrier, cluster rank)
//                             the TMA loads of B into a buffer (the producer's first thread)
//   W::descriptor(b, kk)      the wgmma descriptor of B's k16 slice kk (b: the ring buffer's B part, or
//                             the operand buffer), read with Wgmma<BN, W::TRANS_B>
//   W::EXACT_NAN              bfloat16 outputs write NaN as 0x7FC0 (else the conversion's NaN)
//
// Warpgroups: 0 the producer, 1 and 2 the consumers, 3 the decoders (Conversion::BY_DECODERS only).
//
// Persistent: gridDim.x blocks (the host launches min(tiles, SMs)) walk the BM x BN tiles of D,
// block b taking the tiles b, b + gridDim.x, ... of a static order (`tile_coordinates`: strips of
// Cfg::GROUP tile rows walked column by column when Cfg::RASTER_M, else strips of GROUP tile columns
// walked row by row; the same arithmetic as tunebox/families/gemm/persistent.py tile_coordinates).
//
// Warp-specialized: warpgroup 0 is the producer (its first thread issues the TMA loads, the 128-byte
// swizzle, of A as one BM x 64 box and W's loads of B per K step of 64 into a ring of STAGES buffers;
// the tensor maps zero-fill past M, N and K); warpgroups 1 and 2 are consumers issuing
// wgmma m64nBNk16. Cfg::COOPERATIVE: both consumers work on every tile, each on BM / 2 rows;
// otherwise (pingpong) consumer c takes the block's tiles c, c + 2, ... whole, and an ordering barrier
// lets only one consumer run its mainloop at a time, so one's epilogue overlaps the other's mainloop.
// Each ring buffer has a full mbarrier (one arrival: the producer's expect_tx, completed by the TMA
// bytes) and an empty one (one arrival per consumer reading it); ring positions (buffer, phase) run on
// across tiles. Registers move from the producer (setmaxnreg.dec to PRODUCER_REGISTERS) to the
// consumers (setmaxnreg.inc to CONSUMER_REGISTERS) within the 168 per thread of the launch bounds.
//
// Split-K (Cfg::SPLITS > 1, for problems with fewer tiles than SMs; with the TMA epilogue): the work
// units are (tile, split) pairs, unit u = tile * SPLITS + split, each over the K steps
// [split * k_steps / SPLITS, (split + 1) * k_steps / SPLITS). A unit stores its float32 partial sums
// (rows < M, columns < N) in slot `split` of `partials` (SPLITS x M x N, row-major), then counts its
// arrival on its tile's counter (one per tile and consumer part; zero before the launch, and left
// zero: the last unit resets it) with one acquire-release atomic after the part's barrier
// (tb::counter_arrive), which publishes the slot and, for the last unit, acquires the others'.
// The unit that arrives last sums the SPLITS slots in split order, so D is the same whichever unit
// is last, and runs the epilogue; the others skip it.
//
// Clusters (gemm_persistent_cluster, Cfg::CLUSTER_M x Cfg::CLUSTER_N blocks, rank r = blockIdx.x %
// their product at cluster position (r % CLUSTER_M, r / CLUSTER_M); no split-K): a work unit is a
// CLUSTER_M x CLUSTER_N group of tiles, the static order walks these groups, and each block of the
// cluster takes its tile of every unit of its cluster (a tile past D's edge, when the tile counts are
// not multiples of the cluster's, computes on the maps' zero fill and stores nothing). Blocks of one
// tile row share its A boxes, blocks of one tile column its B boxes: each loads its CLUSTER_N-th of
// the A box (rows) and (W's loads) its CLUSTER_M-th of every B box (K rows) and multicasts it to the
// blocks sharing it, so every block's full barrier still receives one whole stage. A buffer is written by
// other blocks' loads, so its empty barrier counts the consumers of every block of the cluster
// (remote arrivals), and no block leaves before the cluster's last arrival on it (a cluster barrier).
//
// Epilogue (alpha, ReLU, conversion to O): Cfg::TMA_EPILOGUE (D's rows 16-byte aligned) writes 64-row
// x 128-byte chunks of a consumer's tile into one of its two shared buffers (128-byte swizzle, no bank
// conflicts) and stores each with one TMA store, which clips at D's edges; Cfg::STAGED_EPILOGUE passes
// each warp's 16 rows x 64 columns through its own shared buffer and stores them row by row
// (store_staged: D's rows at any alignment); otherwise bounded direct stores from registers. The dynamic
// shared memory holds the ring, the epilogue buffers (TMA or staged) and the barriers, from a 1024-byte
// aligned base (Cfg::SHARED_BYTES covers them plus the alignment).
#pragma once

#include "tunebox/barriers.cuh"
#include "tunebox/cluster.cuh"
#include "tunebox/mma.cuh"
#include "tunebox/tma.cuh"

namespace tb {
namespace persistent {

constexpr int BK = 64;             // K per ring buffer: one 128-byte swizzle row of bfloat16
constexpr int EPI_ROWS = 64;        // rows of an epilogue chunk: one m64 wgmma tile
constexpr int EPI_BYTES = EPI_ROWS * 128;  // an epilogue chunk: 64 rows of one 128-byte swizzle span
constexpr int EPI_BUFFERS = 2;      // epilogue chunk buffers per consumer
constexpr int EPI_BARRIER = 1;      // named barrier of consumer c's epilogue: EPI_BARRIER + c
constexpr int ORDER_BARRIER = 3;    // pingpong: consumer c waits for its mainloop turn on ORDER_BARRIER + c
constexpr int STAGED_ROWS = 16, STAGED_COLS = 64;  // a warp's chunk of the staged epilogue
constexpr int STAGED_PITCH = 36;  // element pairs a staged row (36 words = 4 mod 32 banks: no conflicts)
constexpr int CONSUMER_WARPS = 8;  // two consumer warpgroups
constexpr int CONVERTERS = 96;     // threads of the producer warpgroup's warps 1-3 (Conversion::BY_PRODUCER)
constexpr int DECODERS = 128;      // threads of the decoder warpgroup, warpgroup 3 (Conversion::BY_DECODERS)
constexpr int DECODER_WARPGROUP = 3;
constexpr int CONSUMER_THREADS = 256;  // both consumer warpgroups (Conversion::BY_CONSUMERS)
constexpr int CONVERT_BARRIER = 5;     // named barrier of the consumers' conversions (BY_CONSUMERS)

// Who writes B's wgmma operand from a ring buffer's loaded bytes (W::CONVERSION, above).
enum class Conversion { NONE, BY_PRODUCER, BY_CONSUMERS, BY_DECODERS };

// The K steps of work unit `unit`'s split: [first, first + count) of `k_steps`.
template <int SPLITS>
__device__ __forceinline__ int2 split_steps(int unit, int k_steps) {
  const int split = unit % SPLITS;
  const int first = split * k_steps / SPLITS;
  return make_int2(first, (split + 1) * k_steps / SPLITS - first);
}

// A position in the ring: the buffer and the parity of its current use (flips with each lap).
template <int STAGES>
struct Ring {
  int stage = 0;
  u32 phase = 0;
  __device__ __forceinline__ void advance() {
    if (++stage == STAGES) {
      stage = 0;
      phase ^= 1;
    }
  }
  __device__ __forceinline__ void skip(int steps) {
    stage += steps % STAGES;
    phase ^= (u32)(steps / STAGES) & 1;
    if (stage >= STAGES) {
      stage -= STAGES;
      phase ^= 1;
    }
  }
};

// Marks a ring buffer's use as done: for the local producer, and with clusters (CS blocks) for every
// block's producer, whose loads multicast into this buffer.
template <int CS>
__device__ __forceinline__ void release_buffer(u64* empty) {
  if constexpr (CS == 1) {
    mbarrier_arrive(empty);
  } else {
#pragma unroll
    for (int rank = 0; rank < CS; ++rank) mbarrier_arrive_cluster(empty, rank);
  }
}

// Tile (m, n) of the `index`-th tile of the static order (persistent.py tile_coordinates).
template <bool RASTER_M, int GROUP>
__device__ __forceinline__ int2 tile_coordinates(int index, int tiles_m, int tiles_n) {
  const int major = RASTER_M ? tiles_m : tiles_n, minor = RASTER_M ? tiles_n : tiles_m;
  const int per_strip = GROUP * minor;
  const int strip = index / per_strip, first = strip * GROUP;
  const int width = min(major - first, GROUP);
  const int rest = index - strip * per_strip;
  const int along = first + rest % width, across = rest / width;
  return RASTER_M ? make_int2(along, across) : make_int2(across, along);
}

// This block's cluster of CS blocks, and the grid's clusters (each block its own without clusters).
template <int CS>
__device__ __forceinline__ int cluster_index() {
  return (int)blockIdx.x / CS;
}
template <int CS>
__device__ __forceinline__ int cluster_count() {
  return (int)gridDim.x / CS;
}

// Block `rank`'s tile of the `index`-th group of CLUSTER_M x CLUSTER_N tiles (one tile without
// clusters) of the order: the block at cluster position (rank % CLUSTER_M, rank / CLUSTER_M).
template <class Cfg>
__device__ __forceinline__ int2 block_tile(int index, int groups_m, int groups_n, int rank) {
  constexpr int CM = Cfg::CLUSTER_M, CN = Cfg::CLUSTER_N;
  const int2 g = tile_coordinates<Cfg::RASTER_M, Cfg::GROUP>(index, groups_m, groups_n);
  return make_int2(g.x * CM + rank % CM, g.y * CN + rank / CM);
}

// A block's K steps in its loader's order: its units (cluster_index, + cluster_count, ...), each over
// its split's K steps; tile_n is the unit's tile column.
template <class Cfg>
struct StepWalk {
  static constexpr int CS = Cfg::CLUSTER_M * Cfg::CLUSTER_N, SPLITS = Cfg::SPLITS;
  int units, k_steps, groups_m, groups_n, rank;
  int unit = cluster_index<CS>(), kt = 0, end = 0, tile_n = 0;
  __device__ __forceinline__ StepWalk(int units_, int k_steps_, int groups_m_, int groups_n_, int rank_)
      : units(units_), k_steps(k_steps_), groups_m(groups_m_), groups_n(groups_n_), rank(rank_) {
    enter();
  }
  __device__ __forceinline__ bool valid() const { return unit < units; }
  __device__ __forceinline__ void next() {
    if (valid() && ++kt == end) {
      unit += cluster_count<CS>();
      enter();
    }
  }

 private:
  __device__ __forceinline__ void enter() {
    if (!valid()) return;
    const int2 steps = split_steps<SPLITS>(unit, k_steps);
    kt = steps.x, end = steps.x + steps.y;
    tile_n = block_tile<Cfg>(unit / SPLITS, groups_m, groups_n, rank).y;
  }
};

// Conversion::BY_CONSUMERS: the consumer thread `thread` (of CONSUMER_THREADS) decodes its share of
// each K step of the block's walk in turn into the next operand buffer (`next`, once a K step), its
// scale codes read W::AHEAD steps ahead and shifted through registers. STAGE and A_BYTES: the ring
// buffers' layout (persistent_gemm's).
template <class Cfg, class W, int STAGE, int A_BYTES>
struct ConsumerConversion {
  using Scales = typename W::template Scales<CONSUMER_THREADS>;
  StepWalk<Cfg> converting, fetching;
  Ring<Cfg::STAGES> ring;
  Ring<W::OPERANDS> operand;
  Scales ahead[W::AHEAD];
  int thread;
  __device__ __forceinline__ ConsumerConversion(const typename W::Params& w, int units, int k_steps, int groups_m,
                                                int groups_n, int thread_)
      : converting(units, k_steps, groups_m, groups_n, 0), fetching(converting), thread(thread_) {
#pragma unroll
    for (int d = 0; d < W::AHEAD; ++d, fetching.next())
      if (fetching.valid()) ahead[d] = W::template fetch<CONSUMER_THREADS>(w, fetching.tile_n, fetching.kt, thread);
  }
  // The walk's next K step into its operand buffer, once its ring buffer is full; then the consumers'
  // barrier (every consumer calls this as often: they walk the same steps).
  __device__ __forceinline__ void next(const typename W::Params& w, unsigned char* smem, unsigned char* operands,
                                       u64* full) {
    if (!converting.valid()) return;
    const Scales scales = ahead[0];
#pragma unroll
    for (int d = 0; d + 1 < W::AHEAD; ++d) ahead[d] = ahead[d + 1];
    if (fetching.valid())
      ahead[W::AHEAD - 1] = W::template fetch<CONSUMER_THREADS>(w, fetching.tile_n, fetching.kt, thread);
    fetching.next();
    mbarrier_wait(&full[ring.stage], ring.phase);
    W::template convert<CONSUMER_THREADS>(smem + ring.stage * STAGE + A_BYTES,
                                          operands + operand.stage * W::OPERAND_BYTES, scales, thread);
    fence_proxy_async_shared();  // these writes, then the wgmma's reads (async proxy)
    barrier_sync(CONVERT_BARRIER, CONSUMER_THREADS);
    ring.advance();
    operand.advance();
    converting.next();
  }
};

// Conversion::BY_PRODUCER and BY_DECODERS: converter `thread` (of THREADS) writes its share of B's
// operand of every K step in the loader's order, from the ring's loaded bytes into the next operand
// buffer once its previous use is drained, then arrives on the buffer's ready mbarrier; each step's
// scales (W::fetch) are read W::AHEAD steps before it is converted, into a ring in registers. STAGE and
// A_BYTES: the ring buffers' layout (persistent_gemm's).
template <class Cfg, class W, int THREADS, int STAGE, int A_BYTES>
__device__ __forceinline__ void convert_steps(const typename W::Params& w, unsigned char* smem, unsigned char* operands,
                                              u64* full, u64* ready, u64* drained, int units, int k_steps,
                                              int groups_m, int groups_n, int rank, int thread) {
  StepWalk<Cfg> converting(units, k_steps, groups_m, groups_n, rank), fetching = converting;
  Ring<Cfg::STAGES> ring;
  Ring<W::OPERANDS> operand;
  int written = 0;  // operand buffers used so far, up to OPERANDS: the first lap waits for none
  typename W::template Scales<THREADS> ahead[W::AHEAD];
#pragma unroll
  for (int d = 0; d < W::AHEAD; ++d, fetching.next())
    if (fetching.valid()) ahead[d] = W::template fetch<THREADS>(w, fetching.tile_n, fetching.kt, thread);
  while (converting.valid()) {
#pragma unroll
    for (int d = 0; d < W::AHEAD; ++d) {
      if (!converting.valid()) break;
      const typename W::template Scales<THREADS> scales = ahead[d];
      if (fetching.valid()) ahead[d] = W::template fetch<THREADS>(w, fetching.tile_n, fetching.kt, thread);
      fetching.next();
      mbarrier_wait(&full[ring.stage], ring.phase);
      if (written < W::OPERANDS) {
        ++written;
      } else {
        mbarrier_wait(&drained[operand.stage], operand.phase ^ 1);
      }
      W::template convert<THREADS>(smem + ring.stage * STAGE + A_BYTES, operands + operand.stage * W::OPERAND_BYTES,
                                   scales, thread);
      fence_proxy_async_shared();  // these writes, then the consumers' wgmma reads (async proxy)
      mbarrier_arrive(&ready[operand.stage]);
      ring.advance();
      operand.advance();
      converting.next();
    }
  }
}

// Conversion::NONE, BY_PRODUCER and BY_DECODERS: the consumers convert nothing.
struct NoConsumerConversion {
  template <class... T>
  __device__ __forceinline__ NoConsumerConversion(const T&...) {}
  template <class... T>
  __device__ __forceinline__ void next(const T&...) {}
};

template <bool B, class T, class F>
struct Pick {
  using type = T;
};
template <class T, class F>
struct Pick<false, T, F> {
  using type = F;
};

__device__ __forceinline__ float epilogue_value(float v, float alpha, bool relu) {
  v *= alpha;
  return relu && !(v > 0.f) ? 0.f : v;
}

// Two adjacent elements of D as O bits: bfloat16 packed in a u32 (round to nearest even, v0 in the
// low half; with EXACT_NAN a NaN as 0x7FC0), float32 in a uint2.
template <typename O, bool EXACT_NAN>
struct Pair {
  typename Raw<2 * sizeof(O)>::type bits;
  __device__ __forceinline__ Pair(float v0, float v1) {
    if constexpr (sizeof(O) == 2) {
      asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(bits) : "f"(v1), "f"(v0));
      if constexpr (EXACT_NAN) {
        if (v0 != v0) bits = (bits & 0xFFFF0000u) | 0x7FC0u;
        if (v1 != v1) bits = (bits & 0xFFFFu) | 0x7FC00000u;
      }
    } else {
      bits = make_uint2(__float_as_uint(v0), __float_as_uint(v1));
    }
  }
  __device__ __forceinline__ O first() const {
    if constexpr (sizeof(O) == 2) return (O)(bits & 0xffffu);
    else return bits.x;
  }
  __device__ __forceinline__ O second() const {
    if constexpr (sizeof(O) == 2) return (O)(bits >> 16);
    else return bits.y;
  }
};

// Calls f(v0, v1, r, c, inside, both) for each pair of adjacent accumulators of a consumer thread:
// v0 and v1 hold elements (r, c) and (r, c + 1) of D, `inside` when r < M and c < N, `both` when
// c + 1 < N too. The wgmma m64nBN layout: thread (warp, g, t4) holds rows warp * 16 + g and + 8 of
// each m64 tile, columns 8 j + 2 t4 and + 1; m0 and n0 are the consumer's first row and column of D.
template <int MT, int BN, class F>
__device__ __forceinline__ void for_each_pair(float (&acc)[MT][BN / 2], int warp, int g, int t4, i64 m0, i64 n0,
                                              i64 M, i64 N, F&& f) {
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < BN / 8; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const i64 r = m0 + i * 64 + warp * 16 + g + 8 * h, c = n0 + j * 8 + 2 * t4;
        const bool inside = r < M && c < N;
        f(acc[i][4 * j + 2 * h], acc[i][4 * j + 2 * h + 1], r, c, inside, inside && c + 1 < N);
      }
}

// Bytes of one consumer warp's staged-epilogue buffer for elements of type O.
template <class O>
constexpr int staged_warp_bytes() {
  return STAGED_ROWS * STAGED_PITCH * 2 * (int)sizeof(O);
}

// The staged epilogue of the rows row0 .. row0 + 15 of D that a warp holds of one m64 tile (acc: its
// accumulators in the wgmma m64nBN layout, columns from n0): for each 64-column chunk, every lane writes
// its pairs into the warp's `buffer` (rows of STAGED_PITCH pairs), then the warp stores the chunk row by
// row, lane l the l-th pair-aligned word of the row's chunk (where the row starts mid-word, the chunk's
// first element alone, and its last one alone too), so each row's chunk goes out as one contiguous run
// instead of the layout's 4-lane pieces of 8 rows. Rows past M and columns past N are not written.
template <class O, bool EXACT_NAN, int BN>
__device__ __forceinline__ void store_staged(const float (&acc)[BN / 2], unsigned char* buffer, int lane, i64 row0,
                                             i64 n0, i64 M, i64 N, i64 ldd, float alpha, bool relu,
                                             O* __restrict__ D) {
  using Bits = decltype(Pair<O, EXACT_NAN>(0.f, 0.f).bits);
  Bits* pairs = reinterpret_cast<Bits*>(buffer);
  const O* elements = reinterpret_cast<const O*>(buffer);
  const int g = lane / 4, t4 = lane % 4;
#pragma unroll
  for (int q = 0; q < BN / STAGED_COLS; ++q) {
    const i64 c0 = n0 + q * STAGED_COLS;
#pragma unroll
    for (int j = 0; j < STAGED_COLS / 8; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int e = 4 * (q * STAGED_COLS / 8 + j) + 2 * h;
        pairs[(g + 8 * h) * STAGED_PITCH + 4 * j + t4] =
            Pair<O, EXACT_NAN>(epilogue_value(acc[e], alpha, relu), epilogue_value(acc[e + 1], alpha, relu)).bits;
      }
    __syncwarp();
    if (c0 < N) {
      for (int rr = 0; rr < STAGED_ROWS && row0 + rr < M; ++rr) {
        O* row = D + (row0 + rr) * ldd + c0;
        const O* staged = elements + rr * STAGED_PITCH * 2;
        const int lead = (int)(reinterpret_cast<u64>(row) / sizeof(O) % 2);  // the row starts mid-word
        const int e0 = 2 * lane - lead;                                        // this lane's word: e0, e0 + 1
        const bool in0 = e0 >= 0 && c0 + e0 < N, in1 = c0 + e0 + 1 < N;
        if (in0 && in1) {  // the word's elements, read one by one (staged + e0 need not be word-aligned)
          const O first = staged[e0], second = staged[e0 + 1];
          Bits word;
          if constexpr (sizeof(O) == 2) word = (u32)first | (u32)second << 16;
          else word = make_uint2(first, second);
          *reinterpret_cast<Bits*>(row + e0) = word;
        } else {
          if (in0) row[e0] = staged[e0];
          if (in1 && e0 + 1 < STAGED_COLS) row[e0 + 1] = staged[e0 + 1];
        }
        if (lead && lane == 31 && c0 + STAGED_COLS - 1 < N) row[STAGED_COLS - 1] = staged[STAGED_COLS - 1];
      }
    }
    __syncwarp();  // the chunk is stored before the next one overwrites the buffer
  }
}

}  // namespace persistent


template <class Cfg, class W>
__device__ __forceinline__ void persistent_gemm(const TensorMap& a_map, const typename W::Params& w,
                                                const TensorMap* d_map, typename Cfg::O* __restrict__ D,
                                                float* __restrict__ partials, u32* __restrict__ counters, long long M,
                                                long long N, long long K, long long ldd, float alpha) {
  using namespace persistent;
  using O = typename Cfg::O;
  constexpr int BM = Cfg::BM, BN = Cfg::BN, STAGES = Cfg::STAGES, SPLITS = Cfg::SPLITS;
  constexpr bool COOPERATIVE = Cfg::COOPERATIVE, TMA_EPILOGUE = Cfg::TMA_EPILOGUE, STAGED = Cfg::STAGED_EPILOGUE;
  constexpr int CM = Cfg::CLUSTER_M, CN = Cfg::CLUSTER_N, CS = CM * CN;  // cluster shape, in tiles
  constexpr u32 A_MASK = CN == 2 ? 1u | 1u << CM : 1u;  // the ranks of the blocks of tile row 0
  constexpr int ROWS = COOPERATIVE ? BM / 2 : BM;  // rows of a tile one consumer multiplies
  constexpr int MT = ROWS / 64;                    // its m64 wgmma tiles
  constexpr int A_BYTES = BM * BK * 2;
  constexpr int STAGE = A_BYTES + W::LOADED_BYTES;  // multiple of 1024: buffers stay swizzle-aligned
  constexpr bool BY_PRODUCER = W::CONVERSION == Conversion::BY_PRODUCER;
  constexpr bool BY_CONSUMERS = W::CONVERSION == Conversion::BY_CONSUMERS;
  constexpr bool BY_DECODERS = W::CONVERSION == Conversion::BY_DECODERS;
  constexpr bool SIGNALS = BY_PRODUCER || BY_DECODERS;  // operands signalled through ready and drained mbarriers
  constexpr bool CONVERTS = SIGNALS || BY_CONSUMERS;  // the wgmma reads B from operand buffers
  constexpr int OPERANDS = W::OPERANDS;              // CONVERTS: buffers of B's operand, after the ring
  constexpr int EPI_COLS = 128 / sizeof(O);           // columns of an epilogue chunk
  constexpr int RING_BYTES = STAGES * STAGE, OPERAND_BYTES = OPERANDS * W::OPERAND_BYTES;
  constexpr int EPI_TOTAL =
      TMA_EPILOGUE ? 2 * EPI_BUFFERS * EPI_BYTES : STAGED ? CONSUMER_WARPS * staged_warp_bytes<O>() : 0;
  static_assert(!(TMA_EPILOGUE && STAGED), "one epilogue");
  static_assert(!STAGED || BN % STAGED_COLS == 0, "the staged epilogue's whole 64-column chunks");
  static_assert(SPLITS == 1 || CS == 1, "split-K runs without clusters");
  static_assert(CM <= 2 && CN <= 2, "clusters of 1 or 2 tiles along M and N");
  static_assert(ROWS % 64 == 0 && MT >= 1 && MT <= 2 && BN % 64 == 0 && BN <= 256, "whole wgmma tiles");
  static_assert(STAGE % 1024 == 0, "every stage starts on the swizzle period");
  static_assert(!CONVERTS || (CS == 1 && OPERANDS >= 2), "converted operands: no clusters, two buffers or more");
  static_assert(!BY_CONSUMERS || (COOPERATIVE && OPERANDS >= 4 && STAGES >= 3),
                "consumers convert: cooperative, four operand buffers, three ring buffers or more");
  static_assert(W::OPERAND_BYTES % 1024 == 0, "operand buffers start on the swizzle period");
  static_assert(RING_BYTES + OPERAND_BYTES + EPI_TOTAL + 2 * (STAGES + OPERANDS) * 8 + 1024 <= Cfg::SHARED_BYTES,
                "the ring, the operands, the epilogue buffers, the barriers and their alignment fit in shared memory");
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* smem = align_shared<1024>(smem_raw);  // the 128-byte swizzle's period
  unsigned char* operands = smem + RING_BYTES;
  unsigned char* epi = operands + OPERAND_BYTES;
  u64* full = reinterpret_cast<u64*>(epi + EPI_TOTAL);
  u64* empty = full + STAGES;
  u64* ready = empty + STAGES;     // SIGNALS: an operand buffer is written (its converters' arrivals)
  u64* drained = ready + OPERANDS;  // SIGNALS: an operand buffer is read (its consumers' arrivals)

  const int warpgroup = threadIdx.x / 128, tid = threadIdx.x % 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbarrier_init(&full[s], 1);
      // every consumer that reads the buffer, in every block of the cluster, releases it
      mbarrier_init(&empty[s], (COOPERATIVE ? 2 : 1) * CS);
    }
    for (int o = 0; o < OPERANDS; ++o) {
      mbarrier_init(&ready[o], BY_DECODERS ? DECODERS : CONVERTERS);
      mbarrier_init(&drained[o], COOPERATIVE ? 2 : 1);
    }
    if constexpr (CS > 1) fence_mbarrier_init_cluster();
  }
  // The last block-wide barrier: the producer's idle threads leave below (with clusters, at the end).
  if constexpr (CS > 1)
    cluster_sync();
  else
    __syncthreads();

  const int k_steps = (int)((K + BK - 1) / BK);
  const int tiles_m = (int)((M + BM - 1) / BM), tiles_n = (int)((N + BN - 1) / BN);
  const int groups_m = (tiles_m + CM - 1) / CM, groups_n = (tiles_n + CN - 1) / CN;  // of a cluster's tiles
  const int units = groups_m * groups_n * SPLITS;
  const int rank = (int)blockIdx.x % CS;  // this block's cluster position: (rank % CM, rank / CM)

  if (warpgroup == 0) {  // producer
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(Cfg::PRODUCER_REGISTERS));
    if (tid == 0) {
      Ring<STAGES> ring;
      int filled = 0;  // buffers used so far, up to STAGES: the first lap waits for no release
      for (int unit = cluster_index<CS>(); unit < units; unit += cluster_count<CS>()) {
        const int2 t = block_tile<Cfg>(unit / SPLITS, groups_m, groups_n, rank);
        const int2 steps = split_steps<SPLITS>(unit, k_steps);
        for (int kt = steps.x; kt < steps.x + steps.y; ++kt, ring.advance()) {
          if (filled < STAGES) {
            ++filled;
          } else {
            mbarrier_wait(&empty[ring.stage], ring.phase ^ 1);  // the previous lap's use was released
          }
          unsigned char* stage = smem + ring.stage * STAGE;
          mbarrier_expect_tx(&full[ring.stage], A_BYTES + W::LOADED_BYTES);  // zero fill past M, N, K counts too
          if constexpr (CN == 1) {
            tma_load_2d(stage, &a_map, kt * BK, t.x * BM, &full[ring.stage]);
          } else {  // the A box's (rank / CM)-th part of BM / CN rows, to the blocks of this tile row
            constexpr int PART = BM / CN;
            const int part = rank / CM;
            tma_load_2d_multicast(stage + part * PART * 128, &a_map, kt * BK, t.x * BM + part * PART,
                                  &full[ring.stage], (unsigned short)(A_MASK << rank % CM));
          }
          W::load(stage + A_BYTES, w, t.y, kt, &full[ring.stage], rank);
        }
      }
    }
    if constexpr (BY_PRODUCER) {  // warps 1-3 convert
      if (tid < 32) return;
      convert_steps<Cfg, W, CONVERTERS, STAGE, A_BYTES>(w, smem, operands, full, ready, drained, units, k_steps,
                                                        groups_m, groups_n, rank, tid - 32);
    }
    if constexpr (CS > 1) cluster_sync();  // with the consumers' below: nothing arrives here after
    return;
  }

  if constexpr (BY_DECODERS) {
    if (warpgroup == DECODER_WARPGROUP) {
      asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(Cfg::DECODER_REGISTERS));
      convert_steps<Cfg, W, DECODERS, STAGE, A_BYTES>(w, smem, operands, full, ready, drained, units, k_steps,
                                                      groups_m, groups_n, rank, tid);
      return;
    }
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(Cfg::CONSUMER_REGISTERS));
  const int consumer = warpgroup - 1;
  const int warp = tid / 32, g = (tid % 32) / 4, t4 = tid % 4;
  const int a_row = COOPERATIVE ? consumer * MT : 0;  // this consumer's first m64 tile in the A box
  unsigned char* my_epi = epi + consumer * EPI_BUFFERS * EPI_BYTES;
  unsigned char* my_staged = epi + (consumer * 4 + warp) * staged_warp_bytes<O>();
  const bool paired = ldd % 2 == 0 && (u64)D % (2 * sizeof(O)) == 0;  // direct stores of two elements
  Ring<STAGES> ring;
  Ring<OPERANDS ? OPERANDS : 1> operand;  // CONVERTS: B's operand buffer, one a K step as the ring
  // BY_CONSUMERS: this thread's share of each K step's operand, one step ahead of the wgmma (the first here)
  typename Pick<BY_CONSUMERS, ConsumerConversion<Cfg, W, STAGE, A_BYTES>, NoConsumerConversion>::type conversion(
      w, units, k_steps, groups_m, groups_n, consumer * 128 + tid);
  conversion.next(w, smem, operands, full);
  u32 chunk = 0;  // epilogue chunks this consumer stored: chunk % EPI_BUFFERS is the next buffer
  float acc[MT][BN / 2];

  // Pingpong: consumer c takes every other unit of the block, starting with its c-th; its ring
  // position skips the K steps of the other's units.
  const int clusters = cluster_count<CS>();
  const int first = cluster_index<CS>() + (COOPERATIVE ? 0 : consumer * clusters);
  const int stride = (COOPERATIVE ? 1 : 2) * clusters;
  if (!COOPERATIVE && consumer == 1) {
    ring.skip(split_steps<SPLITS>(cluster_index<CS>(), k_steps).y);
    if constexpr (CONVERTS) operand.skip(split_steps<SPLITS>(cluster_index<CS>(), k_steps).y);
  }
  for (int unit = first; unit < units; unit += stride) {
    const int tile = unit / SPLITS;
    const int2 t = block_tile<Cfg>(tile, groups_m, groups_n, rank);
    const int k_count = split_steps<SPLITS>(unit, k_steps).y;
    // Pingpong: wait for the other consumer to have waited on every full barrier of its tile, so
    // every earlier use of a buffer completed before this one waits on that buffer's parity (the
    // other consumer's arrival comes after its mainloop; the block's first tile waits for nobody).
    if (!COOPERATIVE && unit != cluster_index<CS>()) barrier_sync(ORDER_BARRIER + consumer, 256);
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int e = 0; e < BN / 2; ++e) acc[i][e] = 0.f;

    int previous = 0;  // the buffer of the previous K step, released once its products are done
    int previous_operand = 0;  // SIGNALS: its operand buffer
    for (int kt = 0; kt < k_count; ++kt, ring.advance()) {
      mbarrier_wait(&full[ring.stage], ring.phase);
      if constexpr (SIGNALS) mbarrier_wait(&ready[operand.stage], operand.phase);
      const unsigned char* stage = smem + ring.stage * STAGE;
      const unsigned char* b = CONVERTS ? operands + operand.stage * W::OPERAND_BYTES : stage + A_BYTES;
#pragma unroll
      for (int i = 0; i < MT; ++i) pin_registers<BN / 2>(acc[i]);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BK / 16; ++kk) {
        const u64 b_desc = W::descriptor(b, kk);
#pragma unroll
        for (int i = 0; i < MT; ++i) {
          // A: 64 rows of 128 bytes (8-row groups 1024 bytes apart), 16 elements in from column kk * 16.
          const u64 a = wgmma_descriptor(stage + (a_row + i) * 64 * 128 + kk * 32, 16, 1024);
          Wgmma<BN, W::TRANS_B>::run(acc[i], a, b_desc);
        }
      }
      wgmma_commit();
      conversion.next(w, smem, operands, full);  // the next K step's operand, while this step's wgmma runs
      wgmma_wait<1>();  // this step's products may still run; the previous step's are done
      if (tid == 0 && kt > 0) {
        release_buffer<CS>(&empty[previous]);
        if constexpr (SIGNALS) mbarrier_arrive(&drained[previous_operand]);
      }
      previous = ring.stage;
      if constexpr (CONVERTS) {
        previous_operand = operand.stage;
        operand.advance();
      }
    }
    if (!COOPERATIVE && unit + clusters < units) {
      // The other consumer's next unit (this block's next) may start its mainloop.
      barrier_arrive(ORDER_BARRIER + (1 - consumer), 256);
      ring.skip(split_steps<SPLITS>(unit + clusters, k_steps).y);
      if constexpr (CONVERTS) operand.skip(split_steps<SPLITS>(unit + clusters, k_steps).y);
    }
    wgmma_wait<0>();
    if (tid == 0) {  // the unit's last buffer
      release_buffer<CS>(&empty[previous]);
      if constexpr (SIGNALS) mbarrier_arrive(&drained[previous_operand]);
    }
#pragma unroll
    for (int i = 0; i < MT; ++i) pin_registers<BN / 2>(acc[i]);

    const i64 m0 = (i64)t.x * BM + (COOPERATIVE ? consumer * ROWS : 0), n0 = (i64)t.y * BN;
    if constexpr (SPLITS > 1) {
      // This unit's partial sums into its slot; the arrival counted (released) once every thread of
      // the part has stored; the last unit of the tile (part) sums the slots in split order. Split-K
      // takes the TMA epilogue (a rule), so N is even: every pair is whole and 8-byte aligned. A slot
      // holds at most 2^23 floats: 32-bit offsets, which keep registers free.
      const int n32 = (int)N, slot_pairs = (int)(M * N / 2);
      float2* slots = reinterpret_cast<float2*>(partials);
      float2* slot = slots + (unit % SPLITS) * slot_pairs;
      for_each_pair<MT, BN>(acc, warp, g, t4, m0, n0, M, N, [&](float& v0, float& v1, i64 r, i64 c, bool inside,
                                                                bool) {
        if (inside) slot[((int)r * n32 + (int)c) / 2] = make_float2(v0, v1);
      });
      barrier_sync(EPI_BARRIER + consumer, 128);
      u32 last = 0;
      if (tid == 0) {
        u32* counter = counters + 2 * tile + (COOPERATIVE ? consumer : 0);
        last = counter_arrive(counter) == SPLITS - 1;
        if (last) atomicExch(counter, 0u);  // zero again for the next launch
      }
      if (!barrier_any(EPI_BARRIER + consumer, 128, last)) continue;
      // The sums in split order. Where every slot's pairs fit in registers beside the accumulators
      // (two registers a load; ptxas spills past about 192 in all), one slot at a time over all of this
      // thread's pairs: the loads are independent, so all are in flight at once (one L2 round trip
      // rather than one a pair; the thread's own slot is read back too, which keeps the order of the
      // additions). Otherwise a pair at a time, its SPLITS loads in flight together. A pair outside D
      // reads the slots' first pair and is left.
      if constexpr (MT * BN / 2 + 2 * SPLITS * (MT * BN / 4) <= 192) {
#pragma unroll
        for (int s = 0; s < SPLITS; ++s)
          for_each_pair<MT, BN>(acc, warp, g, t4, m0, n0, M, N, [&](float& v0, float& v1, i64 r, i64 c, bool inside,
                                                                    bool) {
            const float2 part = __ldcg(slots + s * slot_pairs + (inside ? ((int)r * n32 + (int)c) / 2 : 0));
            v0 = inside ? (s == 0 ? part.x : v0 + part.x) : v0;
            v1 = inside ? (s == 0 ? part.y : v1 + part.y) : v1;
          });
      } else {
        for_each_pair<MT, BN>(acc, warp, g, t4, m0, n0, M, N, [&](float& v0, float& v1, i64 r, i64 c, bool inside,
                                                                  bool) {
          const float2* in = slots + (inside ? ((int)r * n32 + (int)c) / 2 : 0);
          float2 sum = __ldcg(in);
#pragma unroll
          for (int s = 1; s < SPLITS; ++s) {
            const float2 part = __ldcg(in + s * slot_pairs);
            sum.x += part.x;
            sum.y += part.y;
          }
          v0 = inside ? sum.x : v0;
          v1 = inside ? sum.y : v1;
        });
      }
    }
    if constexpr (TMA_EPILOGUE) {
#pragma unroll
      for (int i = 0; i < MT; ++i) {
#pragma unroll
        for (int c = 0; c < BN / EPI_COLS; ++c) {
          const i64 y = m0 + i * EPI_ROWS, x = n0 + c * EPI_COLS;
          if (y >= M || x >= N) continue;  // the store would clip the whole box (uniform per consumer)
          unsigned char* buffer = my_epi + (chunk++ % EPI_BUFFERS) * EPI_BYTES;
#pragma unroll
          for (int j = 0; j < EPI_COLS / 8; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int e = 4 * (c * EPI_COLS / 8 + j) + 2 * h;
              const Pair<O, W::EXACT_NAN> pair(epilogue_value(acc[i][e], alpha, Cfg::RELU),
                                 epilogue_value(acc[i][e + 1], alpha, Cfg::RELU));
              const u32 byte = (u32)(warp * 16 + g + 8 * h) * 128 + (j * 8 + 2 * t4) * sizeof(O);
              *reinterpret_cast<decltype(pair.bits)*>(buffer + swizzled_offset<128>(byte)) = pair.bits;
            }
          fence_proxy_async_shared();  // these writes, then the TMA store's reads (async proxy)
          // Before the barrier the storing thread waits until the previous chunk's store has read its
          // buffer, the one the next chunk writes; after it, this chunk is complete in shared memory.
          if (tid == 0) bulk_wait_group_read<0>();
          barrier_sync(EPI_BARRIER + consumer, 128);
          if (tid == 0) {
            tma_store_2d(d_map, (int)x, (int)y, buffer);
            bulk_commit_group();
          }
        }
      }
    } else if constexpr (STAGED) {
#pragma unroll
      for (int i = 0; i < MT; ++i)
        store_staged<O, W::EXACT_NAN, BN>(acc[i], my_staged, tid % 32, m0 + i * 64 + warp * 16, n0, M, N, ldd, alpha,
                                          Cfg::RELU, D);
    } else {
      for_each_pair<MT, BN>(acc, warp, g, t4, m0, n0, M, N, [&](float& v0, float& v1, i64 r, i64 c, bool inside,
                                                                bool both) {
        if (!inside) return;
        const Pair<O, W::EXACT_NAN> pair(epilogue_value(v0, alpha, Cfg::RELU), epilogue_value(v1, alpha, Cfg::RELU));
        O* out = D + r * ldd + c;
        if (both && paired) {
          *reinterpret_cast<decltype(pair.bits)*>(out) = pair.bits;
        } else {
          out[0] = pair.first();
          if (both) out[1] = pair.second();
        }
      });
    }
  }
  if (TMA_EPILOGUE && tid == 0) bulk_wait_group<0>();  // shared memory stays until the stores read it
  if constexpr (CS > 1) cluster_sync();  // the cluster's blocks stop arriving on this block's barriers
}

// The members a configuration's argument struct has only with the TMA epilogue (d_map) or split-K
// (partials, counters), or null.
template <class Cfg>
__device__ __forceinline__ const TensorMap* d_map_of(const typename Cfg::Args& a) {
  if constexpr (Cfg::TMA_EPILOGUE) return &a.d_map;
  else return nullptr;
}
template <class Cfg>
__device__ __forceinline__ float* partials_of(const typename Cfg::Args& a) {
  if constexpr (Cfg::SPLITS > 1) return a.partials;
  else return nullptr;
}
template <class Cfg>
__device__ __forceinline__ u32* counters_of(const typename Cfg::Args& a) {
  if constexpr (Cfg::SPLITS > 1) return a.counters;
  else return nullptr;
}

}  // namespace tb
