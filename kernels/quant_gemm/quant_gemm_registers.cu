// Family quant_gemm, template registers (sm_90a): D = A @ Wdq^T as in quant_gemm.cu (A M x K and D M x N
// bfloat16 bits, W's codes, scales and NVFP4's tensor scale as the quant family stores an N x K matrix),
// computed as its transpose D^T = Wdq A^T by wgmma m64 x NT x k16 with W's decoded rows as the register
// operand (A) and the activations as the shared-memory one (B: the TMA's box of BT tokens x 64 of K,
// K-major, 128-byte swizzle), so that no decoded operand passes through shared memory.
//
// Persistent blocks of 384 threads walk the tiles of Cfg::BW rows of W (columns of D) x Cfg::BT tokens
// (rows of D), block b taking units b, b + gridDim.x, ...; a unit is a tile and one of its Cfg::SPLITS
// ranges of K steps (unit u = tile * SPLITS + split; tile t = (rows t / tiles_t, tokens t % tiles_t)).
// Warpgroup 0 is the producer: its first thread loads each K step of 64 into a ring of Cfg::STAGES
// buffers, the tile's BT x 64 bfloat16 of A by TMA, then BW rows x 32 bytes of codes, by TMA too or, with
// Cfg::COPIES, by the warpgroup's 128 threads in 16-byte cp.async copies; both zero-filled past M, N and K.
// At a unit's first step and every RUN bytes the loaders prefetch the tile's next 2 RUN bytes of each row
// of codes into L2. Warpgroups 1 and 2 consume: with BW = 128 or 256 consumer c takes rows ROWS c .. ROWS c
// + ROWS - 1 (ROWS = BW / 2: one or two m64 tiles, MT) and all BT tokens; with BW = 64 both take the 64 rows
// and consumer c tokens c BT / 2 ..; its wgmmas are m64 x NT (NT = BT or BT / 2). Both release every buffer.
//
// Consumer thread (warp w, lane 4 g + t) holds the A fragments (tb::WgmmaRs) of its rows 16 w + g and + 8
// of each of its m64 tiles: of k16 slice s, elements 16 s + 2 t, + 1 and 16 s + 2 t + 8, + 9, the two codes
// of byte t of the row's 32-bit words 2 s and 2 s + 1 of the step. Per K step and m64 tile it reads its
// rows' 32 bytes from the ring, decodes them (fp4.cuh: e2m1 bits placed as bfloat16, times the block's
// factor; MXFP4 scales from 2^2 and NaN codes take a second factor, a warp-uniform branch to the decode
// that applies it when a code of the warp's rows needs one) into one of two register sets while the group of
// wgmmas before (reading the other) runs, and issues the tile's four wgmmas as one commit group. The unit's
// first wgmma overwrites the sums (scale-d), so that nothing else writes them while wgmmas run (ptxas would
// serialize them). Scale codes (two a row and step for MXFP4, four for NVFP4) are read from global memory
// Cfg::SCALES_AHEAD steps ahead. K is a multiple of 32 (rows of codes 16-byte aligned for TMA): a last step
// half past K reads TMA's zero codes and scale codes 0, which decode to zeros.
//
// Split-K (SPLITS > 1) as persistent_gemm.cuh's: a unit stores its float32 sums of D in slot `split` of
// `partials`, counts its arrival on its (tile, consumer) counter, and the last to arrive sums the slots of
// the consumer's part in split order. D's elements are stored as alpha * sums (alpha 1, or NVFP4's 2^7
// times the tensor scale, fp4.cuh) rounded to bfloat16, NaN as 0x7FC0.
#include "tunebox/async_copy.cuh"
#include "tunebox/bf16x2.cuh"
#include "tunebox/bulk.cuh"
#include "tunebox/fp4.cuh"
#include "tunebox/persistent_gemm.cuh"

namespace {

using namespace tb;

constexpr int BK = 64;                   // K a step: one 128-byte swizzle row of A, 32 bytes of codes a row
constexpr int RUN = 512;                 // bytes of a row's codes prefetched into L2 at a time
constexpr int PRODUCER_REGISTERS = 56;   // the loaders
constexpr int CONSUMER_REGISTERS = 224;  // 56 + 2 x 224 = 3 x 168, the launch's
constexpr int EPI_BARRIER = 1;           // named barrier of consumer c's split-K epilogue: EPI_BARRIER + c

template <class Cfg>
struct Tile {
  static constexpr int BW = Cfg::BW, BT = Cfg::BT;
  static constexpr int ROWS = BW == 64 ? 64 : BW / 2;  // rows of W a consumer multiplies
  static constexpr int MT = ROWS / 64;                 // its m64 wgmma tiles
  static constexpr int NT = BW == 64 ? BT / 2 : BT;    // tokens of its wgmmas
  static constexpr int A_BYTES = BT * BK * 2;
  static constexpr int STAGE = A_BYTES + BW * BK / 2;
  static constexpr int SCALES = Cfg::NVFP4 ? 4 : 2;  // scale codes of a row in a K step
  static constexpr int SCALE_LOADS = SCALES / Cfg::SCALE_LOAD;  // their loads
};

template <int I>
struct Index {
  static constexpr int value = I;
};
template <bool B>
struct Flag {
  static constexpr bool value = B;
};

// The scale codes of K step kt of a row of W whose codes start at byte `row_at` of `scales` (0 past the
// row's nb) in loads of Cfg::SCALE_LOAD bytes (a width dividing nb, so that every row's codes start at a
// multiple of it): into[j] holds the step's codes j SCALE_LOAD .. j SCALE_LOAD + SCALE_LOAD - 1, the first
// lowest. Nothing reads them before the step's decode (a word combined from narrower loads would wait for
// them where they are issued, ahead of the wgmmas).
template <class Cfg>
__device__ __forceinline__ void scale_codes(const u8* __restrict__ scales, u32 row_at, int nb, int kt,
                                            u32 (&into)[Tile<Cfg>::SCALE_LOADS]) {
  constexpr int SCALES = Tile<Cfg>::SCALES, L = Cfg::SCALE_LOAD;
  const u8* at = scales + (row_at + (u32)(kt * SCALES));
#pragma unroll
  for (int j = 0; j < SCALES / L; ++j) {
    u32 codes = 0;
    if (kt * SCALES + j * L < nb) {
      if constexpr (L == 4) codes = __ldg(reinterpret_cast<const u32*>(at) + j);
      else if constexpr (L == 2) codes = __ldg(reinterpret_cast<const unsigned short*>(at) + j);
      else codes = __ldg(at + j);
    }
    into[j] = codes;
  }
}

// Row h (0: the thread's first, 1: + 8) of its A fragments of one K step: the two codes of byte t of the
// row's 32-bit word i (elements 8 i + 2 t and + 1, the first low) times their block's scale, into
// a[i / 2][h + 2 (i % 2)], the fragment of k16 slice i / 2 (tb::WgmmaRs); sel = t | (4 + t) << 8. ONE: no
// block's code needs more than one factor (see needs_second), each first factor then one multiply-add (MXFP4)
// or NVFP4's finite factor. Else a block whose code does takes a second multiply: MXFP4's scales from 2^2,
// NVFP4's NaN codes (times NaN; a NaN first factor instead has ptxas serialize the wgmmas, C7513).
template <class Cfg, bool ONE>
__device__ __forceinline__ void decode_row(const uint4& lo, const uint4& hi,
                                           const u32 (&codes)[Tile<Cfg>::SCALE_LOADS], u32 sel, int h,
                                           u32 (&a)[BK / 16][4]) {
  constexpr int SCALES = Tile<Cfg>::SCALES, WORDS = 8 / SCALES;  // words of a scale block
  const u32 words[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
  for (int b = 0; b < SCALES; ++b) {
    constexpr int L = Cfg::SCALE_LOAD;
    const u32 c = codes[b / L] >> 8 * (b % L) & 0xFFu;
    u32 factor, second = 0;
    bool twice = false;
    if constexpr (Cfg::NVFP4) {
      factor = fp4::e4m3_finite_factor(c);
      if constexpr (!ONE) twice = fp4::e4m3_nan(c), second = fp4::dup(fp4::BF16_NAN);
    } else if constexpr (ONE) {
      factor = fp4::e8m0_small_factor(c);
    } else {
      factor = fp4::e8m0_factor(c), twice = fp4::e8m0_big(c), second = fp4::e8m0_second(c);
    }
#pragma unroll
    for (int i = b * WORDS; i < (b + 1) * WORDS; ++i) {
      const u32 pair = __byte_perm(words[i], words[i] >> 4, sel) & 0x000F000Fu;  // byte t's codes, one a half
      u32 v = fp4::bf16x2_mul(fp4::e2m1_spread<0>(pair), factor);
      if (twice) v = fp4::bf16x2_mul(v, second);
      a[i / 2][h + 2 * (i % 2)] = v;
    }
  }
}

// Whether any of the scale codes (of this thread's rows, one m64 tile and step) needs a second factor:
// MXFP4's past MX_ONE_FACTOR, NVFP4's NaN codes.
template <class Cfg>
__device__ __forceinline__ bool needs_second(const u32 (&codes)[2][Tile<Cfg>::SCALE_LOADS]) {
  bool any = false;
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int j = 0; j < Tile<Cfg>::SCALE_LOADS; ++j)
      any |= Cfg::NVFP4 ? fp4::e4m3_any_nan(codes[h][j]) : fp4::e8m0_any_big(codes[h][j]);
  return any;
}

// lo and hi as D's bfloat16 pair: fp4::bf16_out of each (nearest even, NaN as BF16_NAN where the
// conversion writes its own NaN).
__device__ __forceinline__ u32 d_pair(float lo, float hi) {
  u32 d = bf16x2::from_floats(lo, hi);
  if (lo != lo) d = (d & 0xFFFF0000u) | fp4::BF16_NAN;
  if (hi != hi) d = (d & 0xFFFFu) | fp4::BF16_NAN << 16;
  return d;
}

// Keeps the compiler from moving a fragment's writes past the next (volatile) instruction.
__device__ __forceinline__ void pin_fragments(u32 (&a)[BK / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < BK / 16; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) asm volatile("" : "+r"(a[kk][r]));
}

// An arrival on `bar` once this thread's cp.async copies so far are complete (counted in the barrier's
// expected arrivals).
__device__ __forceinline__ void cp_async_arrive(u64* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(shared_address(bar)) : "memory");
}

}  // namespace

template <class Cfg>
__global__ void __launch_bounds__(384, 1) quant_gemm_registers(const __grid_constant__ typename Cfg::Args a) {
  using T = Tile<Cfg>;
  constexpr int BW = T::BW, BT = T::BT, NT = T::NT, STAGES = Cfg::STAGES, SPLITS = Cfg::SPLITS;
  constexpr int AHEAD = Cfg::SCALES_AHEAD;
  constexpr bool COPIES = Cfg::COPIES;
  constexpr int LOADERS = COPIES ? 128 : 1;  // producer threads that load and prefetch codes
  constexpr int GROUP = AHEAD == 4 ? 4 : 2;  // steps of the unrolled loop: both fragment sets, every slot
  static_assert(AHEAD == 1 || AHEAD == 2 || AHEAD == 4, "the unrolled loop's steps cover the slots");
  constexpr int ROWS = T::ROWS, MT = T::MT;
  static_assert((BW == 64 || BW == 128 || BW == 256) && NT >= 8 && NT <= 256 && NT % 8 == 0, "whole wgmma tiles");
  static_assert(MT * NT <= 256, "the accumulators fit a consumer's registers");
  static_assert(T::STAGE % 1024 == 0 && (NT * 128) % 1024 == 0, "every stage and token half on the swizzle period");
  static_assert(STAGES * T::STAGE + 2 * STAGES * 8 + 1024 <= Cfg::SHARED_BYTES, "the ring and its barriers fit");
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* smem = align_shared<1024>(smem_raw);
  u64* full = reinterpret_cast<u64*>(smem + STAGES * T::STAGE);
  u64* empty = full + STAGES;
  const int warpgroup = threadIdx.x / 128, tid = threadIdx.x % 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbarrier_init(&full[s], 1 + (COPIES ? LOADERS : 0));  // the expect_tx, and each loader's copies
      mbarrier_init(&empty[s], 2);  // both consumers read every buffer
    }
  }
  __syncthreads();

  const int M = (int)a.M, N = (int)a.N, nb = (int)a.nb, kb = (int)a.kb;
  const int k_steps = (int)((a.K + BK - 1) / BK);
  const int tiles_t = (M + BT - 1) / BT, units = tiles_t * ((N + BW - 1) / BW) * SPLITS;

  if (warpgroup == 0) {  // producer
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(PRODUCER_REGISTERS));
    if (!COPIES && tid != 0) return;
    persistent::Ring<STAGES> ring;
    int filled = 0;  // buffers used so far, up to STAGES: the first lap waits for no release
    for (int unit = blockIdx.x; unit < units; unit += gridDim.x) {
      const int tile = unit / SPLITS, row0 = tile / tiles_t * BW, token0 = tile % tiles_t * BT;
      const int2 steps = persistent::split_steps<SPLITS>(unit, k_steps);
      for (int kt = steps.x; kt < steps.x + steps.y; ++kt, ring.advance()) {
        if (filled < STAGES) {
          ++filled;
        } else {
          mbarrier_wait(&empty[ring.stage], ring.phase ^ 1);
        }
        unsigned char* stage = smem + ring.stage * T::STAGE;
        const int from = kt * BK / 2;  // the step's first byte of a row of codes
        if (tid == 0) {
          mbarrier_expect_tx(&full[ring.stage], COPIES ? T::A_BYTES : T::STAGE);  // zero fill counts too
          tma_load_2d(stage, &a.a_map, kt * BK, token0, &full[ring.stage]);
          if constexpr (!COPIES) tma_load_2d(stage + T::A_BYTES, &a.codes_map, from, row0, &full[ring.stage]);
        }
        if constexpr (COPIES) {  // 16-byte halves of the rows, zeros past N and K
          for (int c = tid; c < 2 * BW; c += LOADERS) {
            const int r = row0 + c / 2, at = from + 16 * (c % 2);
            const bool inside = r < N && at < kb;
            const u8* from_codes = a.values + (inside ? (size_t)r * kb + at : 0);
            cp_async_zfill<16>(stage + T::A_BYTES + 16 * c, from_codes, inside ? 16 : 0);
          }
          cp_async_arrive(&full[ring.stage]);
        }
        if (kt == steps.x || from % RUN == 0) {
          const u32 bytes = (u32)min(2 * RUN, kb - from);
          for (int r = row0 + tid; r < min(N, row0 + BW); r += LOADERS)
            bulk_prefetch_l2(a.values + (size_t)r * kb + from, bytes);
        }
      }
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(CONSUMER_REGISTERS));
  const int consumer = warpgroup - 1, warp = tid / 32, g = (tid % 32) / 4, t = tid % 4;
  const u32 sel = (u32)t | (4u + (u32)t) << 8;
  const int part = BW == 64 ? 0 : ROWS * consumer;   // this consumer's first row of W of a tile
  const int tokens = BW == 64 ? consumer * NT : 0;   // and its first token
  const int row = part + 16 * warp + g;              // this thread's rows: row + 64 mt and + 8, mt < MT
  const float alpha = fp4::output_scale<Cfg>(a);

  persistent::Ring<STAGES> ring;
  float acc[MT][NT / 2];
  u32 frag[2][BK / 16][4];  // two sets of an m64 tile's fragments of a step: the wgmmas' A operands
  u32 ahead[AHEAD][MT][2][T::SCALE_LOADS];  // scale codes of the unit's steps i + AHEAD ... in slot i % AHEAD
  int previous = 0;     // the ring buffer of the step before, released once its wgmmas are done

  for (int unit = blockIdx.x; unit < units; unit += gridDim.x) {
    const int tile = unit / SPLITS;
    const int n0 = tile / tiles_t * BW, m0 = tile % tiles_t * BT + tokens;  // the consumer's part of D
    const int2 steps = persistent::split_steps<SPLITS>(unit, k_steps);
    const int count = steps.y;
    u32 row_at[MT][2];  // where the scale codes of the thread's rows start (rows past N: computed, not stored)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) row_at[mt][h] = (u32)min(N - 1, n0 + row + 64 * mt + 8 * h) * (u32)nb;
    const auto fetch = [&](u32(&into)[MT][2][T::SCALE_LOADS], int i) {
      if (i >= count) return;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) scale_codes<Cfg>(a.scales, row_at[mt][h], nb, steps.x + i, into[mt][h]);
    };
#pragma unroll
    for (int d = 0; d < AHEAD; ++d) fetch(ahead[d], d);

    // Step i = group + S of the unit, a group of wgmmas an m64 tile: decode into a fragment set while the
    // group before (reading the other set) runs, the four wgmmas (the unit's first overwrites the sums); the
    // scale codes' slot refilled AHEAD steps on; the step before's buffer released once its groups are done.
    const auto step = [&](auto index, int group) {
      constexpr int S = decltype(index)::value;
      const int i = group + S;
      if (i >= count) return;
      mbarrier_wait(&full[ring.stage], ring.phase);
      const unsigned char* stage = smem + ring.stage * T::STAGE;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        // m64 tile mt's fragments into set P, whose last wgmmas (the step before's with MT = 1, this tile's
        // of the step before with MT = 2) are done: the wait below, a group earlier
        constexpr int P = MT == 1 ? S % 2 : 0;
        u32(&f)[BK / 16][4] = frag[MT == 1 ? P : mt];
        // one factor a block unless a code of the warp's rows needs two (a warp-uniform branch)
        const auto decode = [&](auto one) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const unsigned char* rows = stage + T::A_BYTES + (row + 64 * mt + 8 * h) * (BK / 2);
            const uint4* codes = reinterpret_cast<const uint4*>(rows);
            decode_row<Cfg, decltype(one)::value>(codes[0], codes[1], ahead[S % AHEAD][mt][h], sel, h, f);
          }
        };
        if (__any_sync(0xFFFFFFFFu, needs_second<Cfg>(ahead[S % AHEAD][mt])))
          decode(Flag<false>{});
        else
          decode(Flag<true>{});
        // after the slot's last use, so that its loads may take its registers
        if (mt == MT - 1) fetch(ahead[S % AHEAD], i + AHEAD);
        pin_fragments(f);  // decoded before the fence (else ptxas serializes the wgmmas)
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk)
          WgmmaRs<NT>::run(acc[mt], f[kk], wgmma_descriptor(stage + tokens * 128 + kk * 32, 16, 1024), kk > 0 || i > 0);
        wgmma_commit();
        wgmma_wait<1>();  // this group may still run; every earlier one is done
        if (mt == 0 && tid == 0 && i > 0) mbarrier_arrive(&empty[previous]);  // the step before's last group is done
      }
      previous = ring.stage;
      ring.advance();
    };
    for (int group = 0; group < count; group += GROUP) {
      step(Index<0>{}, group);
      step(Index<1>{}, group);
      if constexpr (GROUP == 4) {
        step(Index<2>{}, group);
        step(Index<3>{}, group);
      }
    }
    wgmma_wait<0>();
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) pin_registers<NT / 2>(acc[mt]);
    if (tid == 0) mbarrier_arrive(&empty[previous]);

    // acc[mt][4 j + e] is D's element (m0 + 8 j + 2 t + e % 2, n0 + row + 64 mt + 8 (e / 2)): into D, or
    // with split-K into this unit's slot (and D by the tile's last unit)
    const auto each = [&](auto&& f) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int j = 0; j < NT / 8; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int m = m0 + 8 * j + 2 * t + e % 2, n = n0 + row + 64 * mt + 8 * (e / 2);
            if (m < M && n < N) f(acc[mt][4 * j + e], m, n);
          }
    };
    if constexpr (SPLITS == 1) {
      each([&](float v, int m, int n) { a.d[(size_t)m * N + n] = (unsigned short)fp4::bf16_out(alpha * v); });
    } else {
      // The arrival counted once every thread of the consumer stored its slot; the last unit of the (tile,
      // consumer) sums the part's slots in split order, along D's rows (coalesced; slots of at most 2^23
      // floats). A whole part (inside D, D's rows 16-byte aligned) takes no bounds and stores by vectors.
      const bool whole = N % 8 == 0 && m0 + NT <= M && n0 + part + ROWS <= N;
      const int slot = M * N;
      float* mine = a.partials + unit % SPLITS * slot;
      if (whole) {  // the thread's rows 2 t and 2 t + 1 of each token block j, from one address
        float* at = mine + (size_t)(m0 + 2 * t) * N + n0 + row;
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int j = 0; j < NT / 8; ++j) {
            float* p = at + (size_t)(8 * j) * N + 64 * mt;
            p[0] = acc[mt][4 * j], p[N] = acc[mt][4 * j + 1], p[8] = acc[mt][4 * j + 2], p[N + 8] = acc[mt][4 * j + 3];
          }
      } else {
        each([&](float v, int m, int n) { mine[m * N + n] = v; });
      }
      barrier_sync(EPI_BARRIER + consumer, 128);
      u32 last = 0;
      if (tid == 0) {
        u32* counter = a.counters + 2 * tile + consumer;
        last = counter_arrive(counter) == SPLITS - 1;
        if (last) atomicExch(counter, 0u);  // zero again for the next launch
      }
      if (!barrier_any(EPI_BARRIER + consumer, 128, last)) continue;
      // Element (or with a whole part, 4 consecutive elements) tid + 128 j of the part, ROWS rows of W a
      // token: BATCH of a thread's at a time with all their slots' loads in flight together (one L2 round
      // trip a batch, not one an element).
      if (whole) {
        constexpr int QUADS = ROWS / 4, PER = ROWS * NT / 512, BATCH = PER < 2 ? PER : 2;
        for (int j0 = 0; j0 < PER; j0 += BATCH) {
          int at[BATCH];
          float4 sum[BATCH];
#pragma unroll
          for (int b = 0; b < BATCH; ++b) {
            const int e = tid + 128 * (j0 + b);
            at[b] = (m0 + e / QUADS) * N + n0 + part + 4 * (e % QUADS);
            sum[b] = __ldcg(reinterpret_cast<const float4*>(a.partials + at[b]));
          }
#pragma unroll
          for (int s = 1; s < SPLITS; ++s)
#pragma unroll
            for (int b = 0; b < BATCH; ++b) {
              const float4 v = __ldcg(reinterpret_cast<const float4*>(a.partials + at[b] + s * slot));
              sum[b].x += v.x, sum[b].y += v.y, sum[b].z += v.z, sum[b].w += v.w;
            }
#pragma unroll
          for (int b = 0; b < BATCH; ++b)
            *reinterpret_cast<uint2*>(a.d + at[b]) =
                make_uint2(d_pair(alpha * sum[b].x, alpha * sum[b].y), d_pair(alpha * sum[b].z, alpha * sum[b].w));
        }
      } else {
        constexpr int PER = ROWS * NT / 128, BATCH = PER < 8 ? PER : 8;
        for (int j0 = 0; j0 < PER; j0 += BATCH) {
          int at[BATCH];
          float sum[BATCH];
#pragma unroll
          for (int b = 0; b < BATCH; ++b) {
            const int e = tid + 128 * (j0 + b), m = m0 + e / ROWS, n = n0 + part + e % ROWS;
            at[b] = m < M && n < N ? m * N + n : -1;
            sum[b] = __ldcg(a.partials + max(at[b], 0));
          }
#pragma unroll
          for (int s = 1; s < SPLITS; ++s)
#pragma unroll
            for (int b = 0; b < BATCH; ++b) sum[b] += __ldcg(a.partials + max(at[b], 0) + s * slot);
#pragma unroll
          for (int b = 0; b < BATCH; ++b)
            if (at[b] >= 0) a.d[at[b]] = (unsigned short)fp4::bf16_out(alpha * sum[b]);
        }
      }
    }
  }
}
