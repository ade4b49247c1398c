"""Family ``gather``: rows (or columns) of ``A`` picked by index, padding for invalid entries.

The Warp ``tile_load_indexed`` / cuTile sparse-view form, 0-based, on a row-major ``A`` of N x D
(``rows`` x ``cols``) elements of ``dtype`` and K (``count``) indices ``idx``. Along ``axis`` the
source index of entry k is ``idx[k] + offset``; along the other (dense) axis the source index of
output position j is ``dense_offset + j`` for ``j < window``:

  axis 0: ``out[k, j] = A[idx[k] + offset, dense_offset + j]``, ``out`` is (K, window)
  axis 1: ``out[j, k] = A[dense_offset + j, idx[k] + offset]``, ``out`` is (window, K)

An element whose entry is invalid (see ``tunebox.families.indexed``: the mask, and the index out of
``[0, N)`` for axis 0 or ``[0, D)`` for axis 1) or whose dense index lies outside ``[0, D)`` (axis 0)
or ``[0, N)`` (axis 1) reads the padding bits instead: out of range on any side, so -1 is a sentinel.
Every element of ``out`` is written; ``A`` is read only at valid, in-range elements. Repeated indices
are fine. The default ``axis = 0``, ``window = D``, ``dense_offset = 0`` is the whole-row gather
``out[k, :] = A[idx[k] + offset, :]`` (its own, fastest kernel).

Problem keys: ``dtype``, ``rows`` (N), ``cols`` (D), ``count`` (K), ``index_dtype`` ("int32" or
"int64", default "int32"), ``offset`` (0), ``axis`` (0 or 1, default 0), ``window`` (the dense
extent; default the whole other dimension: D for axis 0, N for axis 1), ``dense_offset`` (0; may be
negative or run past the end), ``mask`` (false), ``mask_rate`` (0.0, with a mask only),
``sentinel_rate`` (fraction of index -1 entries, 0.0), ``oob_rate`` (fraction of indices >= the
indexed extent, 0.0), ``padding`` ("zero", or any mode of ``tunebox.dtypes.PADDING_MODES``) and
``pad_value`` (with ``padding = "value"`` only). The rates lie in [0, 1] and add up to at most 1.

Buffers: inputs ``A`` (N, D), ``idx`` (K,) of the index type and, with a mask, ``mask`` (K,) uint8;
output ``out`` ((K, window) for axis 0, (window, K) for axis 1).
"""

from ..contract import Family
from ..indexed_rows import RowsConfig
from .operation import GatherOperation
from .problem import GatherProblem
from .rows import GatherRows

FAMILY = Family(GatherOperation(), (GatherRows(),))

__all__ = ["FAMILY", "GatherOperation", "GatherProblem", "GatherRows", "RowsConfig"]
