"""Family ``tile_copy``: bounded 2-D copy, crop, pad and transpose with padding modes.

``dst (Md, Nd) <- src (Ms, Ns)`` read at origin ``(oy, ox)`` (may be negative):
``dst[i, j] = src[oy + i, ox + j]`` or, transposed, ``src[oy + j, ox + i]``; destination elements
whose source lies outside ``src`` take the padding value. Every destination element is written.

Seven transports, one template each (``template``), so the search picks per problem:

- ``vector``: ld/st vectors in registers, or staged through shared memory (``staging``), one tile
  at a time (``kernels/tile_copy/tile_copy.cu``, ``tile_copy``).
- ``cp_async``: each block's source blocks stream into a ring of ``stages`` shared buffers by
  cp.async (vectors inside src and aligned; element loads with the padding elsewhere), ``stages - 1``
  tiles ahead of the staged stores (``tile_copy_cp_async``).
- ``tma`` (sm_90+; the kernel refuses to compile for older devices): bulk tensor loads into a ring of
  ``stages`` mbarrier-completed buffers with the ``swizzle`` layout, and bulk tensor stores that clip
  at dst's edges (``kernels/tile_copy/tile_copy_tma.cu``). The hardware fills zero outside src; a
  transposed copy or any other padding goes through an output buffer, the padding selected in
  registers. Boxes are as wide as the swizzle span (the layout ``test_tma_gpu`` checked on the H200),
  or without swizzle the whole block row up to 256 elements; the rows of src and dst and the origin's
  column must be 16-byte multiples.
- ``paired``: a transpose of 2-byte elements (bfloat16, float16) staged as 32-bit words, each packing
  one column of two consecutive source rows, so the shared-memory transpose moves words as a 4-byte
  one does (``kernels/tile_copy/tile_copy_paired.cu``, ``tile_copy_paired``).
- ``shifted``: a copy (not a transpose) whose destination rows move in aligned vectors, each the
  funnel shift of the two aligned source vectors holding its elements, whatever the alignment of the
  rows and the origin (``kernels/tile_copy/tile_copy_shifted.cu``, ``tile_copy_shifted``).
- ``windowed``: a transpose of 2-byte elements for rows of any alignment: each source row staged as
  its aligned window, each destination vector read from the stage element by element at its row's
  offset (``kernels/tile_copy/tile_copy_windowed.cu``, ``tile_copy_windowed``).
- ``narrow``: copies and transposes whose destination rows hold a few elements (``[4000000, 3]``),
  dst moved as one flat array of aligned vectors, each element read where it lies in src
  (``kernels/tile_copy/tile_copy_narrow.cu``, ``tile_copy_narrow``).

The operation is in ``operation.py``; the rules every template shares in ``tiles.py``, those of the
templates of ``tile_copy.cu`` (vector, cp_async) and of ``tile_copy_paired.cu`` in ``staged.py``. Those
three, shifted, windowed and narrow take the problem's ``kernel_view``: a transpose with a unit dimension is a plain
copy, and a copy of whole rows narrower than the narrowest tile is one flat row.
"""

from ...limits import MAX_SHARED_BYTES
from ..contract import Family
from .cp_async import CpAsyncConfig, CpAsyncTemplate
from .narrow import NarrowConfig, NarrowTemplate
from .operation import TileCopyOperation, TileCopyProblem
from .paired import PairedConfig, PairedTemplate
from .shifted import ShiftedConfig, ShiftedTemplate
from .staged import BOUNDS, MAX_SLOTS, STAGING, StagedConfig
from .tiles import TileConfig
from .tma import TmaConfig, TmaTemplate
from .vector import MAX_REGISTER_BYTES, VectorConfig, VectorTemplate
from .windowed import WindowedConfig, WindowedTemplate

FAMILY = Family(
    TileCopyOperation(),
    (
        VectorTemplate(),
        CpAsyncTemplate(),
        TmaTemplate(),
        PairedTemplate(),
        ShiftedTemplate(),
        WindowedTemplate(),
        NarrowTemplate(),
    ),
)

__all__ = [
    "BOUNDS",
    "FAMILY",
    "MAX_REGISTER_BYTES",
    "MAX_SHARED_BYTES",
    "MAX_SLOTS",
    "NarrowConfig",
    "STAGING",
    "CpAsyncConfig",
    "PairedConfig",
    "ShiftedConfig",
    "StagedConfig",
    "TileConfig",
    "TileCopyProblem",
    "TmaConfig",
    "VectorConfig",
    "WindowedConfig",
]
