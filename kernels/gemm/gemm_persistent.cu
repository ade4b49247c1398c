// Family gemm, template persistent (sm_90a): D[m, n] = epilogue(alpha * sum_k A[m, k] * B[k, n]) as in
// gemm.cu (A, B bfloat16 bits with 16-byte aligned rows; D bfloat16 or float32 bits), by the
// persistent, warp-specialized kernel of tunebox/persistent_gemm.cuh, B loaded by TMA as BN / 64 boxes
// of 64 (K) x 64 (N) per K step, 128-byte swizzle, N-major for the wgmma (BfloatWeights); with
// clusters (gemm_persistent_cluster) each block loads its CLUSTER_M-th of a box's K rows and
// multicasts it to the blocks of its tile column.
#include "tunebox/persistent_gemm.cuh"
#include "tunebox/pad_rows.cuh"

namespace {

using namespace tb;

// B (K x N bfloat16) through TMA boxes of 64 x 64 (128-byte swizzle, 8-row groups 1024 bytes apart).
template <class Cfg>
struct BfloatWeights {
  static constexpr int BK = persistent::BK, BN = Cfg::BN, CM = Cfg::CLUSTER_M;
  static constexpr int B_BOX = BK * 64 * 2;  // one 64 x 64 box of B
  static constexpr int LOADED_BYTES = (BN / 64) * B_BOX, OPERANDS = 0, OPERAND_BYTES = 0;  // B read in place
  static constexpr persistent::Conversion CONVERSION = persistent::Conversion::NONE;
  static constexpr bool EXACT_NAN = false;
  static constexpr int TRANS_B = 1;
  struct Params {
    const TensorMap* b_map;
  };

  __device__ __forceinline__ static void load(unsigned char* b, const Params& w, int tile_n, int kt, u64* full,
                                              int rank) {
#pragma unroll
    for (int j = 0; j < BN / 64; ++j) {
      unsigned char* box = b + j * B_BOX;
      if constexpr (CM == 1) {
        tma_load_2d(box, w.b_map, tile_n * BN + 64 * j, kt * BK, full);
      } else {  // the B box's (rank % CM)-th part of BK / CM rows, to the blocks of this tile column
        constexpr int PART = BK / CM;
        const int part = rank % CM;
        tma_load_2d_multicast(box + part * PART * 128, w.b_map, tile_n * BN + 64 * j, kt * BK + part * PART, full,
                              (unsigned short)(((1u << CM) - 1) << (rank / CM * CM)));
      }
    }
  }
  // 16 rows of every 64-column box (boxes B_BOX apart, 8-row groups 1024 bytes apart).
  __device__ __forceinline__ static u64 descriptor(const unsigned char* b, int kk) {
    return wgmma_descriptor(b + kk * 16 * 128, B_BOX, 1024);
  }
};

}  // namespace

template <class Cfg>
__global__ void __launch_bounds__(384, 1) gemm_persistent(const __grid_constant__ typename Cfg::Args a) {
  tb::persistent_gemm<Cfg, BfloatWeights<Cfg>>(a.a_map, {&a.b_map}, tb::d_map_of<Cfg>(a), a.D,
                                               tb::partials_of<Cfg>(a), tb::counters_of<Cfg>(a), a.M, a.N, a.K,
                                               a.ldd, a.alpha);
}

template <class Cfg>
__global__ void __cluster_dims__(Cfg::CLUSTER_M * Cfg::CLUSTER_N, 1, 1) __launch_bounds__(384, 1)
    gemm_persistent_cluster(const __grid_constant__ typename Cfg::Args a) {
  tb::persistent_gemm<Cfg, BfloatWeights<Cfg>>(a.a_map, {&a.b_map}, tb::d_map_of<Cfg>(a), a.D,
                                               tb::partials_of<Cfg>(a), tb::counters_of<Cfg>(a), a.M, a.N, a.K,
                                               a.ldd, a.alpha);
}
