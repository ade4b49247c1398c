// Family ragged3d, template "vector": pack a padded [B, Lmax, H, D] tensor into ragged [total, H, D]
// storage, or unpack it back (0-based, row-major). Sequence b holds rows offsets[b] ..
// offsets[b + 1] - 1 of the ragged storage (offsets: the B + 1 exclusive prefix sums of the lengths).
//
//   pack:   out[offsets[b] + l, :, :] = x[b, l, :, :]                        for l < len_b
//   unpack: out[b, l, :, :] = l < len_b ? ragged[offsets[b] + l, :, :] : 0    for l < Lmax
//
// A row is ROW = H * D contiguous elements in both layouts, so a tile of rows of one sequence is one
// contiguous run in each. Block (b, t) moves rows t * BM .. t * BM + BM - 1 of sequence b (B x
// ceil(Lmax / BM) blocks): pack skips rows past the length (a block past it exits at once); unpack
// writes zeros there (every row of the padded output is written). The THREADS threads stride over
// the tile in VEC-element vectors when the row and both bases allow it, else in the widest narrower
// vector that does (element by element at worst): every H * D works.
#include "tunebox/tile.cuh"

namespace {

using namespace tb;

// dst[0 .. n) = src[0 .. n), then dst[n .. n + zeros) = 0, in W-element vectors.
template <typename E, int W, int THREADS>
__device__ __forceinline__ void move_run(const E* __restrict__ src, E* __restrict__ dst, i64 n, i64 zeros) {
  typedef typename Raw<W * sizeof(E)>::type R;
  const R* s = reinterpret_cast<const R*>(src);
  R* d = reinterpret_cast<R*>(dst);
  const i64 vn = n / W, vz = zeros / W;
#pragma unroll 4
  for (i64 v = threadIdx.x; v < vn; v += THREADS) d[v] = __ldg(s + v);
  Vec<E, W> zero;
#pragma unroll
  for (int e = 0; e < W; ++e) zero.e[e] = E(0);
#pragma unroll 4
  for (i64 v = threadIdx.x; v < vz; v += THREADS) d[vn + v] = zero.raw;
}

template <typename E, int THREADS, int W>
__device__ __forceinline__ void move_at_width(const E* __restrict__ src, E* __restrict__ dst, i64 row, i64 n,
                                              i64 zeros) {
  if constexpr (W > 1) {
    if (!vector_fits<E, W>(row, src, dst)) return move_at_width<E, THREADS, W / 2>(src, dst, row, n, zeros);
  }
  move_run<E, W, THREADS>(src, dst, n, zeros);
}

}  // namespace

// Cfg (tunebox/families/ragged3d/vector.py): E the element's bit type, BM rows per block, THREADS, VEC
// elements per vector, PACK (else unpack); Args the kernel's arguments (VectorTemplate.args).
template <class Cfg>
__device__ __forceinline__ void ragged3d_body(const typename Cfg::E* __restrict__ src,
                                              typename Cfg::E* __restrict__ dst, const long long* __restrict__ offsets,
                                              long long Lmax, long long row) {
  using E = typename Cfg::E;
  constexpr int BM = Cfg::BM, THREADS = Cfg::THREADS, VEC = Cfg::VEC;
  constexpr bool PACK = Cfg::PACK;
  const i64 tiles = (Lmax + BM - 1) / BM;
  const i64 b = (i64)blockIdx.x / tiles;
  const i64 l0 = ((i64)blockIdx.x % tiles) * BM;
  const i64 start = __ldg(offsets + b), len = __ldg(offsets + b + 1) - start;
  const i64 filled = l0 < len ? (len - l0 < BM ? len - l0 : BM) : 0;  // rows of the tile with data
  const i64 rows = PACK ? filled : (Lmax - l0 < BM ? Lmax - l0 : BM);  // rows of the tile written
  if (rows == 0) return;
  const i64 padded = (b * Lmax + l0) * row, ragged = (start + l0) * row;
  const E* s = src + (PACK ? padded : ragged);
  E* d = dst + (PACK ? ragged : padded);
  move_at_width<E, THREADS, VEC>(s, d, row, filled * row, (rows - filled) * row);
}

// The argument struct names the source by its buffer: x (pack) or ragged (unpack); the branch not
// taken is never instantiated.
template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS) ragged3d(const __grid_constant__ typename Cfg::Args a) {
  if constexpr (Cfg::PACK)
    ragged3d_body<Cfg>(a.x, a.out, a.offsets, a.Lmax, a.row);
  else
    ragged3d_body<Cfg>(a.ragged, a.out, a.offsets, a.Lmax, a.row);
}
