// Family tile_copy, template "tma" (sm_90+): the semantics of tile_copy.cu, moved by the Tensor Memory
// Accelerator.
//
// A block copies a run of TPB destination tiles. Thread 0 streams their source blocks (H x W: BN x BM
// when transposed, else BM x BN) into a ring of STAGES shared buffers, STAGES - 1 tiles ahead, each as
// W / BOX boxes of H x BOX elements loaded by one bulk tensor load and completed on the buffer's
// mbarrier. The source tensor map fills elements outside src with zero, and its boxes carry the
// swizzle of SPAN bytes (0: none), each box aligned to the swizzle period.
//
// DIRECT (not transposed, zero padding): the loaded boxes are the destination tile as it must land;
// thread 0 stores them back with bulk tensor stores through the destination map (same box, same
// swizzle), which clip at dst's edges. Otherwise every thread reads vectors of VEC elements of the
// destination tile out of the loaded boxes through the swizzle map, replaces elements whose source
// lies outside src by `pad` (the padding modes TMA cannot fill), and writes them into one of two
// output buffers (BN / OUT_BOX boxes of BM x OUT_BOX, swizzled alike) that thread 0 then stores.
//
// The configuration struct Cfg (tunebox/families/tile_copy/tma.py renders it): T element bits type;
// BM x BN destination tile; THREADS per block; VEC elements per vector access; TPB tiles per block;
// STAGES input buffers; SPAN, BOX, OUT_BOX, DIRECT as above; TRANSPOSE; SHARED_BYTES the dynamic
// shared memory the launch gives. The kernel takes its arguments as the one struct Cfg::Args (tma.py's
// args describe it): src_map, dst_map (the tensor maps, used where they lie in the parameter), Ms, Ns,
// oy, ox, pad, tiles_n (destination tiles per row), n_tiles.
//
// Dynamic shared memory (tunebox/families/tile_copy/tma.py _tma_layout computes SHARED_BYTES; the
// kernel asserts its layout fits): the swizzle period (alignment), STAGES input buffers, the output
// buffers, and one 8-byte mbarrier per stage.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "template tma needs sm_90 or newer (TMA); pick another template on this device"
#endif
#include "tunebox/tma.cuh"

namespace {

using namespace tb;

// Bytes of one buffer of `boxes` boxes of rows x cols elements, each box aligned to `period`.
template <typename E>
constexpr int boxes_bytes(int boxes, int rows, int cols, int period) {
  return boxes * ((rows * cols * (int)sizeof(E) + period - 1) / period * period);
}

// Byte offset of element (r, c) of a block stored as boxes of ROWS x BOX_COLS elements, each box
// BOX_BYTES apart and swizzled with SPAN.
template <typename E, int ROWS, int BOX_COLS, int BOX_BYTES, int SPAN>
__device__ __forceinline__ u32 box_offset(int r, int c) {
  return (c / BOX_COLS) * BOX_BYTES + swizzled_offset<SPAN>((r * BOX_COLS + c % BOX_COLS) * (int)sizeof(E));
}

// Writes destination tile (i0, j0) into the output buffer `out` from the loaded source block `in`
// (whose element (0, 0) is src[r0][c0]), with `pad` for elements whose source lies outside src.
template <typename E, int BM, int BN, int THREADS, int VEC, int SPAN, int BOX, int OUT_BOX, bool TRANSPOSE>
__device__ __forceinline__ void fill_output(const unsigned char* in, unsigned char* out, i64 Ms, i64 Ns, i64 r0,
                                            i64 c0, E pad) {
  constexpr int H = TRANSPOSE ? BN : BM, W = TRANSPOSE ? BM : BN, PERIOD = swizzle_period(SPAN);
  constexpr int IN_BOX = boxes_bytes<E>(1, H, BOX, PERIOD), OUT_BOX_BYTES = boxes_bytes<E>(1, BM, OUT_BOX, PERIOD);
  constexpr int PER_ROW = BN / VEC, ITEMS = BM * PER_ROW / THREADS;
  static_assert(W % BOX == 0 && BN % OUT_BOX == 0 && (BOX * sizeof(E)) % 16 == 0 && VEC * sizeof(E) <= 16,
                "whole boxes of 16-byte chunks, vectors inside one chunk");
  typedef typename Raw<VEC * sizeof(E)>::type R;
#pragma unroll 4  // unrolled fully, every item's shared addresses stay live across tiles and spill
  for (int k = 0; k < ITEMS; ++k) {
    const int idx = threadIdx.x + k * THREADS;
    const int i = idx / PER_ROW, j = (idx % PER_ROW) * VEC;
    Vec<E, VEC> v;
    if (TRANSPOSE) {
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        v.e[e] = pad_outside(*reinterpret_cast<const E*>(in + box_offset<E, H, BOX, IN_BOX, SPAN>(j + e, i)),
                             r0 + j + e, c0 + i, Ms, Ns, pad);
    } else {
      v.raw = *reinterpret_cast<const R*>(in + box_offset<E, H, BOX, IN_BOX, SPAN>(i, j));
#pragma unroll
      for (int e = 0; e < VEC; ++e) v.e[e] = pad_outside(v.e[e], r0 + i, c0 + j + e, Ms, Ns, pad);
    }
    *reinterpret_cast<R*>(out + box_offset<E, BM, OUT_BOX, OUT_BOX_BYTES, SPAN>(i, j)) = v.raw;
  }
}

// Thread 0: bulk tensor stores of the BN / BOX_COLS boxes of `buffer` to destination tile (i0, j0), one group.
template <typename E, int BM, int BN, int BOX_COLS, int SPAN>
__device__ __forceinline__ void store_tile(const TensorMap* dst_map, const unsigned char* buffer, int i0, int j0) {
  constexpr int BOX_BYTES = boxes_bytes<E>(1, BM, BOX_COLS, swizzle_period(SPAN));
#pragma unroll
  for (int b = 0; b < BN / BOX_COLS; ++b) tma_store_2d(dst_map, j0 + b * BOX_COLS, i0, buffer + b * BOX_BYTES);
  bulk_commit_group();
}

}  // namespace

// The maps are references into the kernel's __grid_constant__ parameter: the bulk copies take their
// parameter-space addresses (a copy into a local would need a stack frame).
template <class Cfg>
__device__ __forceinline__ void tile_copy_tma_body(const tb::TensorMap& src_map, const tb::TensorMap& dst_map,
                                                   long long Ms, long long Ns, long long oy, long long ox,
                                                   typename Cfg::T pad, long long tiles_n, long long n_tiles) {
  using E = typename Cfg::T;
  constexpr int BM = Cfg::BM, BN = Cfg::BN, THREADS = Cfg::THREADS, VEC = Cfg::VEC, TPB = Cfg::TPB;
  constexpr int STAGES = Cfg::STAGES, SPAN = Cfg::SPAN, BOX = Cfg::BOX, OUT_BOX = Cfg::OUT_BOX;
  constexpr bool DIRECT = Cfg::DIRECT, TRANSPOSE = Cfg::TRANSPOSE;
  constexpr int H = TRANSPOSE ? BN : BM, W = TRANSPOSE ? BM : BN, PERIOD = swizzle_period(SPAN);
  constexpr int IN_BOX = boxes_bytes<E>(1, H, BOX, PERIOD), IN_BYTES = (W / BOX) * IN_BOX;
  constexpr int OUT_BUFFERS = DIRECT ? 0 : (TPB > 1 ? 2 : 1);
  constexpr int OUT_BYTES = boxes_bytes<E>(BN / OUT_BOX, BM, OUT_BOX, PERIOD);
  static_assert(!DIRECT || (!TRANSPOSE && BOX == OUT_BOX), "a direct copy stores the loaded boxes");
  static_assert(PERIOD + STAGES * IN_BYTES + OUT_BUFFERS * OUT_BYTES + STAGES * (int)sizeof(u64) <= Cfg::SHARED_BYTES,
                "the layout (alignment slack, buffers, mbarriers) fits in the dynamic shared memory of the launch");
  extern __shared__ __align__(128) unsigned char smem_raw[];
  unsigned char* base = align_shared<PERIOD>(smem_raw);
  u64* full = reinterpret_cast<u64*>(base + STAGES * IN_BYTES + OUT_BUFFERS * OUT_BYTES);
  auto in = [&](int t) { return base + (t % STAGES) * IN_BYTES; };

  const i64 first = (i64)blockIdx.x * TPB;
  const int count = (int)(n_tiles - first < TPB ? n_tiles - first : TPB);
  // Tile t's destination origin (i0, j0) and its source block's origin (r0, c0); TMA coordinates are
  // 32-bit (the family's rules keep every box inside that range).
  auto origins = [&](int t, int& i0, int& j0, int& r0, int& c0) {
    const i64 tile = first + t;
    i0 = (int)((tile / tiles_n) * BM);
    j0 = (int)((tile % tiles_n) * BN);
    r0 = (int)(oy + (TRANSPOSE ? j0 : i0));
    c0 = (int)(ox + (TRANSPOSE ? i0 : j0));
  };
  auto load = [&](int t) {  // thread 0: tile t's source block into its buffer
    int i0, j0, r0, c0;
    origins(t, i0, j0, r0, c0);
    u64* bar = &full[t % STAGES];
    mbarrier_expect_tx(bar, H * W * sizeof(E));
#pragma unroll
    for (int b = 0; b < W / BOX; ++b) tma_load_2d(in(t) + b * IN_BOX, &src_map, c0 + b * BOX, r0, bar);
  };

  if (threadIdx.x == 0)
    for (int s = 0; s < STAGES; ++s) mbarrier_init(&full[s], 1);
  __syncthreads();
  if (DIRECT && threadIdx.x != 0) return;  // a direct copy is thread 0's alone
  if (threadIdx.x == 0)
    for (int t = 0; t < STAGES - 1 && t < count; ++t) load(t);

#pragma unroll 1
  for (int t = 0; t < count; ++t) {
    if (threadIdx.x == 0 && t + STAGES - 1 < count) {
      if (DIRECT) bulk_wait_group_read<0>();  // the buffer refilled was stored from by tile t - 1
      load(t + STAGES - 1);
    }
    mbarrier_wait(&full[t % STAGES], (t / STAGES) & 1);
    int i0, j0, r0, c0;
    origins(t, i0, j0, r0, c0);
    if constexpr (DIRECT) {
      store_tile<E, BM, BN, BOX, SPAN>(&dst_map, in(t), i0, j0);
    } else {
      unsigned char* out = base + STAGES * IN_BYTES + (t % OUT_BUFFERS) * OUT_BYTES;
      if (threadIdx.x == 0) bulk_wait_group_read<OUT_BUFFERS - 1>();  // the store that last read `out` is done
      __syncthreads();
      fill_output<E, BM, BN, THREADS, VEC, SPAN, BOX, OUT_BOX, TRANSPOSE>(in(t), out, Ms, Ns, r0, c0, pad);
      fence_proxy_async_shared();
      __syncthreads();  // `out` is written, and every thread is done with in(t) before it is refilled
      if (threadIdx.x == 0) store_tile<E, BM, BN, OUT_BOX, SPAN>(&dst_map, out, i0, j0);
    }
  }
  if (threadIdx.x == 0) bulk_wait_group<0>();  // stores complete before the block's shared memory goes
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS) tile_copy_tma(const __grid_constant__ typename Cfg::Args a) {
  tile_copy_tma_body<Cfg>(a.src_map, a.dst_map, a.Ms, a.Ns, a.oy, a.ox, a.pad, a.tiles_n, a.n_tiles);
}
