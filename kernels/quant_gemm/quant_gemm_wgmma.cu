// Family quant_gemm, template wgmma (sm_90a): D = A @ Wdq^T as in quant_gemm.cu (A M x K and D M x N
// bfloat16 bits, W's codes, scales and NVFP4's tensor scale as the quant family stores an N x K matrix), by
// the persistent, warp-specialized kernel of tunebox/persistent_gemm.cuh with tensor cores on bfloat16
// operands. B is W's decoded rows (Fp4Weights): per K step of 64 the producer's first thread loads BN rows
// x 32 bytes of codes by TMA (zero-filled past N and K) into the ring beside A's box, and they are decoded
// in registers (fp4.cuh, exact) into one of Cfg::OPERANDS buffers of the wgmma's B operand, BN rows of 64
// bfloat16 (K-major, the 128-byte swizzle: 16-byte chunk c of row n at chunk c ^ (n % 8)), by warps 1-3 of
// the producer warpgroup (96 threads), with Cfg::CONSUMERS_CONVERT by the two consumer warpgroups (256
// threads) while their wgmma of the step before runs, or with Cfg::DECODERS_CONVERT by a warpgroup of their
// own (128 threads; the block's Cfg::THREADS 512, else 384). A decoder thread takes half rows (32 elements,
// 16 bytes of codes: one e8m0 or two e4m3 scales), half row q = thread + THREADS i of the step, and reads
// their scale codes from global memory Cfg::SCALES_AHEAD K steps ahead. The loader also prefetches the
// tile's rows of codes into L2 in runs of 512 bytes, so that DRAM serves whole runs of a row rather than a
// step's 32 bytes. K is a multiple of 32 (rows of codes 16-byte aligned for TMA), so a half row lies inside
// K or wholly past it (the last step when K % 64 = 32), where its codes are TMA's zeros and its scale codes
// 0: zeros. D is alpha * sums (alpha 1, or NVFP4's 2^7 times the tensor scale: fp4.cuh's factors carry
// 2^119 for 2^126), rounded to bfloat16, NaN as 0x7FC0.
#include "tunebox/bulk.cuh"
#include "tunebox/fp4.cuh"
#include "tunebox/persistent_gemm.cuh"

namespace {

using namespace tb;

template <class Cfg>
struct Fp4Weights {
  static constexpr int BN = Cfg::BN;
  static constexpr bool NV = Cfg::NVFP4;
  static constexpr int LOADED_BYTES = BN * 32;    // BN rows of 64 codes
  static constexpr int OPERAND_BYTES = BN * 128;  // BN rows of 64 bfloat16: whole swizzle periods
  static constexpr int OPERANDS = Cfg::OPERANDS;
  static constexpr persistent::Conversion CONVERSION = Cfg::CONSUMERS_CONVERT ? persistent::Conversion::BY_CONSUMERS
                                                       : Cfg::DECODERS_CONVERT ? persistent::Conversion::BY_DECODERS
                                                                               : persistent::Conversion::BY_PRODUCER;
  static constexpr bool EXACT_NAN = true;
  static constexpr int TRANS_B = 0;
  static constexpr int AHEAD = Cfg::SCALES_AHEAD;  // K steps whose scale codes are in flight
  static constexpr int RUN = 512;  // bytes of a row's codes prefetched into L2 at a time: 16 K steps
  static constexpr int HALVES = 2 * BN;  // half rows of a K step, shared by THREADS converting threads

  struct Params {  // sizes below 2^31 (TMA's coordinates), the scales' offsets below 2^32
    const TensorMap* codes_map;
    const u8* __restrict__ codes;  // the tensor map's matrix: N rows of kb bytes
    const u8* __restrict__ scales;
    int N, K, nb, kb;
  };
  // A thread's scale codes of one K step: a half row's e8m0 code, or its two e4m3 codes (bits 0-7, 8-15).
  template <int THREADS>
  struct Scales {
    static constexpr int PER_THREAD = (HALVES + THREADS - 1) / THREADS;
    u32 code[PER_THREAD];
  };

  // The step's codes by TMA; every RUN / 32 steps, the tile's rows' codes of this run and the next
  // prefetched into L2 (the step's own 32 bytes a row alone would leave each DRAM page after 32 bytes).
  __device__ __forceinline__ static void load(unsigned char* b, const Params& w, int tile_n, int kt, u64* full,
                                              int) {
    tma_load_2d(b, w.codes_map, kt * 32, tile_n * BN, full);
    const int from = kt * 32;
    if (from % RUN == 0) {
      const u32 bytes = (u32)min(2 * RUN, w.kb - from);
      const int rows = min(BN, w.N - tile_n * BN);
      for (int r = 0; r < rows; ++r) bulk_prefetch_l2(w.codes + (size_t)(tile_n * BN + r) * w.kb + from, bytes);
    }
  }

  template <int THREADS>
  __device__ __forceinline__ static Scales<THREADS> fetch(const Params& w, int tile_n, int kt, int thread) {
    Scales<THREADS> s;
#pragma unroll
    for (int i = 0; i < Scales<THREADS>::PER_THREAD; ++i) {
      const int q = thread + i * THREADS;
      const int row = min(w.N - 1, tile_n * BN + q / 2);  // rows past N: computed, never stored
      const int k0 = kt * 64 + 32 * (q % 2);
      const u8* at = w.scales + ((u32)row * (u32)w.nb + (u32)(NV ? k0 / 16 : k0 / 32));
      const bool inside = q < HALVES && k0 < w.K;
      s.code[i] = !inside ? 0u : NV ? (u32)__ldg(at) | (u32)__ldg(at + 1) << 8 : (u32)__ldg(at);
    }
    return s;
  }

  template <int THREADS>
  __device__ __forceinline__ static void convert(const unsigned char* codes, unsigned char* b,
                                                 const Scales<THREADS>& s, int thread) {
#pragma unroll
    for (int i = 0; i < Scales<THREADS>::PER_THREAD; ++i) {
      const int q = thread + i * THREADS;
      if (q >= HALVES) break;
      const int n = q / 2, h = q % 2;
      const uint4 v = *reinterpret_cast<const uint4*>(codes + n * 32 + h * 16);
      const u32 words[4] = {v.x, v.y, v.z, v.w};
      u32 first[2], second = fp4::dup(0x3F80u);
      bool big = false;
      if constexpr (NV) {
        first[0] = fp4::e4m3_factor(s.code[i] & 0xFFu), first[1] = fp4::e4m3_factor(s.code[i] >> 8);
      } else {
        first[0] = first[1] = fp4::e8m0_factor(s.code[i]);
        big = fp4::e8m0_big(s.code[i]);
        second = fp4::e8m0_second(s.code[i]);
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        u32 out[4];
        fp4::decode_word_in_order(words[j], first[j / 2], out);
        if (big) fp4::rescale_word(out, second);
        const int chunk = (4 * h + j) ^ (n & 7);
        *reinterpret_cast<uint4*>(b + n * 128 + chunk * 16) = make_uint4(out[0], out[1], out[2], out[3]);
      }
    }
  }

  // B's k16 slice kk: BN rows of 32 bytes from byte kk * 32 of each 128-byte row, 8-row groups 1024 apart.
  __device__ __forceinline__ static u64 descriptor(const unsigned char* b, int kk) {
    return wgmma_descriptor(b + kk * 32, 16, 1024);
  }
};

}  // namespace

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, 1) quant_gemm_wgmma(const __grid_constant__ typename Cfg::Args a) {
  const typename Fp4Weights<Cfg>::Params w{&a.codes_map, a.values, a.scales, (int)a.N, (int)a.K, (int)a.nb, (int)a.kb};
  tb::persistent_gemm<Cfg, Fp4Weights<Cfg>>(a.a_map, w, tb::d_map_of<Cfg>(a), a.d, tb::partials_of<Cfg>(a),
                                            tb::counters_of<Cfg>(a), a.M, a.N, a.K, a.N, tb::fp4::output_scale<Cfg>(a));
}
