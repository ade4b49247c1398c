"""Family ``gemm``: bounded bfloat16 GEMM on tensor cores (Tylo's boundary-tile GEMM; issue 5).

``D[:M, :N] = epilogue(alpha * A[:M, :K] @ B[:K, :N])`` with A and B bfloat16, float32 accumulation,
D bfloat16 or float32 and epilogue the identity or ReLU. A, B and D are row-major with leading
dimensions ``lda >= K``, ``ldb >= N``, ``ldd >= N`` (any value: rows need not be 16-byte aligned);
D's elements between N and ``ldd`` are never written (the reference keeps them poison), A's past K
and B's past N never reach D (the seeded inputs fill them with data, so a use would show; ``pad_rows``
may load the element before a row's first, another row's, and drops it).

Seven templates (the paths), three in ``kernels/gemm/gemm.cu``:

- ``mma``: mma.sync m16n8k16 fed by a cp.async pipeline of 1-4 stages, 16-byte chunks where a
  chunk is inside and aligned and zero-filled element copies otherwise (the seed's mixed path);
  ``bounds = "false"`` promises full tiles and aligned rows. ``swizzle`` picks the shared tiles'
  layout: "none" pads every row by 16 bytes, "32B" / "64B" / "128B" keep rows unpadded and permute
  their 16-byte chunks with that TMA swizzle pattern. No Hopper-only instruction (cp.async and
  mma.sync are sm_80 features), though only the H200 has run it.
- ``wgmma``: Hopper (sm_90a): TMA loads with the 128-byte swizzle (the layout its wgmma descriptors
  read) into a 2-4 stage mbarrier ring, a producer warpgroup and 1-2 consumer warpgroups issuing
  wgmma m64nBNk16 (K steps of 64). The tensor maps zero-fill past M, N and K, so any shape works;
  rows must be 16-byte aligned (``lda``, ``ldb`` multiples of 8). A block computes
  ``tiles_per_block`` tiles in turn, so one tile's epilogue overlaps the next one's loads (the grid
  shrinks by that factor).
- ``padded``: for unaligned rows, one ``pad_rows`` launch first copies A and/or B into workspace with
  rows of ``ceil(cols / 8) * 8`` elements, then the wgmma kernel runs on the copies; the copies are
  timed with the product (the seed's compact-versus-padded comparison).
- ``persistent``: Hopper (sm_90a; kernels/gemm/gemm_persistent.cu): at most one block per SM walks
  the tiles in a static order with a tunable raster and group width; a producer warpgroup streams A
  and B through a TMA ring whose mbarrier phases run on across tiles, two consumer warpgroups issue
  wgmma (``schedule`` "cooperative": both on each tile; "pingpong": alternate tiles, one's epilogue
  beside the other's mainloop), registers move to the consumers with setmaxnreg, and the epilogue
  stores D with TMA through shared memory (D's rows 16-byte aligned), directly, or staged through a
  shared buffer per warp and stored row by row (``epilogue`` "staged"). A's and B's rows
  must be 16-byte aligned. ``splits`` > 1 (split-K, for shapes with fewer tiles than SMs: decode,
  narrow N, long K; TMA epilogue only) cuts each tile's K steps over that many work units; each stores
  its float32 partial sums in workspace, and the last to arrive sums them in split order (the same D
  whichever unit is last) and runs the epilogue.
- ``padded_persistent``: the persistent kernel for unaligned rows: ``pad_rows`` first copies A and/or B
  into workspace as for ``padded`` (timed with the product), the persistent kernel reads the copies; D
  is stored as it is (the direct or staged epilogue where its rows are not whole 16-byte chunks); no
  split-K.
- ``decode``: few tokens (M up to a few hundred), where reading B is the time: mma.sync with the
  operands' roles swapped, a cp.async or TMA ring, split-K over a thread-block cluster added in a
  fixed order (kernels/gemm/gemm_decode.cu).
- ``cluster``: the persistent kernel on thread-block clusters of 2 x 1, 1 x 2 or 2 x 2 tiles, whose
  blocks share A's or B's boxes by TMA multicast (kernels/gemm/gemm_persistent.cu,
  ``gemm_persistent_cluster``); no split-K.

Verification is within a tolerance (``GemmOperation.tolerance``): the float64 reference, rounded to
D's type, may differ by ``atol + rtol * |want|`` with ``rtol = 1e-2`` and ``atol = 1e-2 * sqrt(K / 64)
* mean|A| * mean|B|`` (the semantics' bf16 tolerance for unit-scale inputs, scaled to these inputs);
NaN never passes.

Problem keys: ``M``, ``N``, ``K`` (positive), ``lda`` (K), ``ldb`` (N), ``ldd`` (N), ``out_dtype``
("bfloat16" or "float32", default "bfloat16"), ``alpha`` (1.0), ``relu`` (false). Buffers: inputs
``A`` (M, lda) and ``B`` (K, ldb) bfloat16; output ``D`` (M, ldd); workspace ``A_padded`` /
``B_padded`` when ``lda`` / ``ldb`` is not a multiple of 8, and split-K's ``partials`` (float32, up to
8 x M x N within 32 MiB) and ``counters`` (zeroed, one per 64 x 64 tile half) where rows are aligned
and two partial sums fit.
"""

from ..contract import Family
from .cluster import ClusterConfig, ClusterTemplate
from .decode import DecodeConfig, DecodeTemplate
from .mma import MmaConfig, MmaTemplate
from .operation import GemmOperation, GemmProblem
from .padded import PaddedTemplate
from .padded_persistent import PaddedPersistentTemplate
from .persistent import PersistentConfig, PersistentTemplate
from .tma_wgmma import WgmmaConfig
from .wgmma import WgmmaTemplate

FAMILY = Family(
    GemmOperation(),
    (
        MmaTemplate(),
        WgmmaTemplate(),
        PaddedTemplate(),
        PersistentTemplate(),
        PaddedPersistentTemplate(),
        DecodeTemplate(),
        ClusterTemplate(),
    ),
)

__all__ = [
    "ClusterConfig",
    "ClusterTemplate",
    "FAMILY",
    "DecodeConfig",
    "DecodeTemplate",
    "GemmOperation",
    "GemmProblem",
    "MmaConfig",
    "MmaTemplate",
    "PaddedPersistentTemplate",
    "PaddedTemplate",
    "PersistentConfig",
    "PersistentTemplate",
    "WgmmaConfig",
    "WgmmaTemplate",
]
