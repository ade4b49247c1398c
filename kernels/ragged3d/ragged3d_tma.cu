// Family ragged3d, template "tma" (sm_90+): the pack and unpack of ragged3d.cu, moved by the Tensor Memory
// Accelerator, global -> shared -> global (Mojo's RaggedTMA3DTile); threads only write unpack's zeros.
//
//   pack:   out[offsets[b] + l, :, :] = x[b, l, :, :]                        for l < len_b
//   unpack: out[b, l, :, :] = l < len_b ? ragged[offsets[b] + l, :, :] : 0    for l < Lmax
//
// A block moves one tile: sequence b, rows l0 = t * BM .. l0 + BM - 1, the GROUP heads m * GROUP ..
// m * GROUP + GROUP - 1 (head group m of M = H / GROUP) and the CHUNKS * G columns of depth of column block
// j. Block index (fastest first): j, m, t, b. A chunk is G columns, one swizzle span of bytes (16 bytes
// without swizzle); chunks at or past D are not copied, columns past D inside a chunk are clipped.
//
// Shared tile (tunebox/families/ragged3d/tma.py TmaLayout mirrors it): OPS = CHUNKS / PER_OP slots, one per
// copy, each aligned to the swizzle period; a slot holds PER_OP chunks, a chunk being the box (G, GROUP, BM)
// innermost first: T[chunk][row * GROUP + g][c], swizzled within the box. Loads and stores use boxes of the
// same shape and swizzle at the same shared address, so the tile is stored back as it was loaded.
// PER_OP = 1 with BATCHED = false (tma_blocks_per_op = 0): one copy per chunk; BATCHED: a copy moves PER_OP
// chunks through an extra dimension n_blocks = D / G of stride G elements (swizzle none only: G x size =
// 16 bytes, and D x size is a multiple of 16, so n_blocks is exact); chunks past n_blocks are clipped.
//
// Clipping map (RaggedTMA3DTile's trick), for stores into the ragged storage. Over a buffer whose rows
// (H x D elements, ROW = H * D * size bytes) are addressed by a row index q (q = offsets[b] + l), a map
// with base address A - BM * ROW (A: the buffer) and dimensions, innermost first,
//   d: D (or G when BATCHED), stride size;  [g: GROUP, stride D * size, only when GROUP > 1];
//   r: BM, stride ROW;  [n: n_blocks, stride G * size, only when BATCHED];
//   merged: M * (rows + 1), stride GROUP * D * size (one head group),
// copies the tile's rows first .. first + dyn - 1 (first = the tile's row index q of l0, dyn = the tile's
// rows inside the sequence, 1..BM) at coordinates (col, [0], BM - dyn, [chunk], (first + dyn) * M + m).
// Box element (c, g, r) (row r of the tile) lies at coordinate BM - dyn + r of the r dimension, inside
// [0, BM) exactly when r < dyn: rows r >= dyn are out of bounds, so the store does not write them. Its
// address, as M * GROUP * D * size = ROW:
//     A - BM * ROW + (col + c) * size + g * D * size + (BM - dyn + r) * ROW + ((first + dyn) * M + m) * GROUP * D * size
//   = A - BM * ROW + (col + c) * size + g * D * size + (BM - dyn + r) * ROW + (first + dyn) * ROW + m * GROUP * D * size
//   = A + (first + r) * ROW + (m * GROUP + g) * D * size + (col + c) * size,
// element [first + r, m * GROUP + g, col + c] of the buffer (BATCHED adds (chunk + k) * G to the column of
// chunk k of the box). The merged coordinate stays inside [0, M * (rows + 1)): first + dyn <= rows. Every
// element written is thus one of the tile's rows inside the sequence, never another sequence's, another
// head group's, or anything outside the buffer; only the map's origin lies in front of the buffer.
//
// Memory in front of the buffer (the seed asks the caller to allocate BM * ROW bytes there). Measured on
// the H200 (driver 580.159.04; tests/gpu/test_ragged3d_gpu.py and ragged_probe.py, buffers placed right
// after unmapped memory): stores through a clipping map whose origin lies in unmapped memory wrote
// exactly the right elements, and so did loads of boxes with at least one row inside, but the load of a
// box wholly out of bounds (a tile past its sequence's end) failed with CUDA_ERROR_ILLEGAL_ADDRESS. So
// only stores clip this way; every load goes through a plain map (below), and no buffer needs memory
// in front of it.
//
// Plain maps over a row-major (batches, rows, H, D) buffer: dimensions (D, H, rows, batches), or (G, H,
// rows, n_blocks, batches) when BATCHED, box (G, GROUP, BM, [PER_OP,] 1) at (col, m * GROUP, row, [chunk,]
// batch). Rows past `rows` are clipped by a store and zero-filled by a load.
//
// pack:   load the tile's rows l0 .. l0 + BM - 1 of x (the plain map of (B, Lmax, H, D)): rows past len_b
//         (still inside x) are read but never stored; store through the clipping map of out (first =
//         offsets[b] + l0): rows past len_b, other sequences and other heads are not written. A tile with
//         dyn = 0 exits at once. Only lane 0 works.
// unpack: load rows offsets[b] + l0 .. + BM - 1 of ragged (the plain map of (1, total, H, D)): rows past
//         len_b belong to the next sequences (or lie past total: zero); the warp overwrites them with zeros
//         in shared memory (a row of a box is whole swizzle spans, which the swizzle permutes only within
//         themselves, so a tile's rows keep their bytes), fences them for the async proxy, then lane 0
//         stores through the plain map of out (B, Lmax, H, D), which clips rows past Lmax. A tile with
//         dyn = 0 loads nothing and stores zeros.
//
// Completion: lane 0 initialises the mbarrier, arms it with the full bytes of every box it loads
// (out-of-bounds elements count), issues the loads; the phase is waited for by the lanes that go on to
// read or overwrite the tile; lane 0 issues the stores as one bulk group and waits until they have read
// shared memory before the block exits. Tiles in flight per SM come from resident blocks (up to 32 per
// SM), as many as the shared tile allows.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "template tma needs sm_90 or newer (TMA); pick template 'vector' on this device"
#endif
#include "tunebox/tma_nd.cuh"

namespace {

using namespace tb;

template <int RANK>
struct Coords {
  int c[RANK];
};

// Coordinates of a store through a clipping map: chunk `chunk` (column col = chunk * G), the tile's rows
// first .. first + dyn - 1 of head group m of M.
template <int BM, int GROUP, bool BATCHED>
__device__ __forceinline__ Coords<3 + (GROUP > 1) + BATCHED> clip_coords(int col, int chunk, int dyn, i64 first,
                                                                         i64 M, int m) {
  Coords<3 + (GROUP > 1) + BATCHED> k;
  int d = 0;
  k.c[d++] = BATCHED ? 0 : col;
  if constexpr (GROUP > 1) k.c[d++] = 0;
  k.c[d++] = BM - dyn;
  if constexpr (BATCHED) k.c[d++] = chunk;
  k.c[d++] = (int)((first + dyn) * M + m);
  return k;
}

// Coordinates of a copy through a plain map (D, H, rows, batches), or (G, H, rows, n_blocks, batches)
// when BATCHED, innermost first: rows row .. row + BM - 1 of batch b, head group m.
template <int GROUP, bool BATCHED>
__device__ __forceinline__ Coords<4 + BATCHED> plain_coords(int col, int chunk, int m, i64 row, i64 b) {
  Coords<4 + BATCHED> k;
  int d = 0;
  k.c[d++] = BATCHED ? 0 : col;
  k.c[d++] = m * GROUP;
  k.c[d++] = (int)row;
  if constexpr (BATCHED) k.c[d++] = chunk;
  k.c[d++] = (int)b;
  return k;
}

template <int RANK>
__device__ __forceinline__ void load_box(void* dst, const TensorMap* map, const Coords<RANK>& k, u64* bar) {
  tma_load_nd<RANK>(dst, map, k.c, bar);
}

template <int RANK>
__device__ __forceinline__ void store_box(const TensorMap* map, const Coords<RANK>& k, const void* src) {
  tma_store_nd<RANK>(map, k.c, src);
}

}  // namespace

// Cfg (tunebox/families/ragged3d/tma.py): E the element's bit type, BM, GROUP, SPAN (swizzle bytes, 0:
// none), G, CHUNKS, PER_OP, BATCHED, PACK (else unpack), and SHARED_BYTES, the dynamic shared memory the
// launch gives (TmaLayout.shared_bytes), which the layout below must fit; Args the kernel's arguments
// (TmaTemplate.args). The tensor maps are references into the __grid_constant__ parameter: the copies
// take their parameter-space address, never a copy's.
template <class Cfg>
__device__ __forceinline__ void ragged3d_tma_body(const tb::TensorMap& src_map, const tb::TensorMap& dst_map,
                                                  const long long* __restrict__ offsets, long long Lmax,
                                                  long long depth, long long M, long long tiles,
                                                  long long column_blocks) {
  using E = typename Cfg::E;
  constexpr int BM = Cfg::BM, GROUP = Cfg::GROUP, SPAN = Cfg::SPAN, G = Cfg::G, CHUNKS = Cfg::CHUNKS;
  constexpr int PER_OP = Cfg::PER_OP;
  constexpr bool BATCHED = Cfg::BATCHED, PACK = Cfg::PACK;
  constexpr int PERIOD = swizzle_period(SPAN);
  constexpr int BOX_BYTES = PER_OP * G * GROUP * BM * (int)sizeof(E);  // one copy's box
  constexpr int SLOT = (BOX_BYTES + PERIOD - 1) / PERIOD * PERIOD;
  constexpr int OPS = CHUNKS / PER_OP;
  // alignment slack of the tile (up to PERIOD - 1 bytes), the slots, the mbarrier
  static_assert(PERIOD + OPS * SLOT + (int)sizeof(u64) <= Cfg::SHARED_BYTES,
                "the shared tile does not fit the dynamic shared memory the launch gives");
  static_assert(G * (int)sizeof(E) == (SPAN ? SPAN : 16), "a chunk is one swizzle span (16 bytes without)");
  static_assert(CHUNKS % PER_OP == 0 && (PER_OP == 1 || BATCHED), "copies of PER_OP chunks tile the block");
  static_assert(!BATCHED || SPAN == 0, "batched copies need swizzle none");
  extern __shared__ __align__(128) unsigned char smem_raw[];
  if (PACK && threadIdx.x != 0) return;  // pack: lane 0 issues every copy; unpack: the warp writes zeros
  const int lane = threadIdx.x;

  i64 id = blockIdx.x;
  const int j = (int)(id % column_blocks);
  id /= column_blocks;
  const int m = (int)(id % M);
  id /= M;
  const i64 l0 = (id % tiles) * BM, b = id / tiles;
  const i64 start = __ldg(offsets + b), len = __ldg(offsets + b + 1) - start;
  const int dyn = l0 < len ? (int)(len - l0 < BM ? len - l0 : BM) : 0;  // the tile's rows inside the sequence
  if (PACK && dyn == 0) return;
  const int first_chunk = j * CHUNKS;
  const i64 left = (depth - (i64)first_chunk * G + G - 1) / G;  // chunks of D from this block's first on
  const int ops = ((int)(left < CHUNKS ? left : CHUNKS) + PER_OP - 1) / PER_OP;

  unsigned char* tile = align_shared<PERIOD>(smem_raw);
  u64* bar = reinterpret_cast<u64*>(tile + OPS * SLOT);
  if (dyn > 0) {
    if (lane == 0) {
      mbarrier_init(bar, 1);
      mbarrier_expect_tx(bar, (u32)(ops * BOX_BYTES));
#pragma unroll 1
      for (int k = 0; k < ops; ++k) {
        const int chunk = first_chunk + k * PER_OP;
        const auto at = PACK ? plain_coords<GROUP, BATCHED>(chunk * G, chunk, m, l0, b)
                             : plain_coords<GROUP, BATCHED>(chunk * G, chunk, m, start + l0, 0);
        load_box(tile + k * SLOT, &src_map, at, bar);
      }
    }
    if constexpr (!PACK) __syncwarp();  // the barrier is initialised before the other lanes wait on it
    mbarrier_wait(bar, 0);
  }
  if constexpr (!PACK) {
    if (dyn < BM) {  // rows dyn .. BM - 1 of every chunk's box become zeros
      constexpr int CHUNK_BYTES = G * GROUP * BM * (int)sizeof(E), ROW_BYTES = G * GROUP * (int)sizeof(E);
      const int vectors = (BM - dyn) * ROW_BYTES / 16;
      for (int k = 0; k < ops * PER_OP; ++k) {
        uint4* zeros = reinterpret_cast<uint4*>(tile + k / PER_OP * SLOT + k % PER_OP * CHUNK_BYTES + dyn * ROW_BYTES);
        for (int v = lane; v < vectors; v += 32) zeros[v] = make_uint4(0, 0, 0, 0);
      }
      fence_proxy_async_shared();
    }
    __syncwarp();
    if (lane != 0) return;
  }
#pragma unroll 1
  for (int k = 0; k < ops; ++k) {
    const int chunk = first_chunk + k * PER_OP;
    if constexpr (PACK)
      store_box(&dst_map, clip_coords<BM, GROUP, BATCHED>(chunk * G, chunk, dyn, start + l0, M, m), tile + k * SLOT);
    else
      store_box(&dst_map, plain_coords<GROUP, BATCHED>(chunk * G, chunk, m, l0, b), tile + k * SLOT);
  }
  bulk_commit_group();
  bulk_wait_group_read<0>();  // the stores have read the tile before the block's shared memory goes
}

template <class Cfg>
__global__ void __launch_bounds__(32) ragged3d_tma(const __grid_constant__ typename Cfg::Args a) {
  ragged3d_tma_body<Cfg>(a.src_map, a.dst_map, a.offsets, a.Lmax, a.depth, a.M, a.tiles, a.column_blocks);
}
