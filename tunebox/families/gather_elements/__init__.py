"""Family ``gather_elements``: cuTile's gather with a tuple of index tiles, element by element.

The element form of the indexed gather (the row and sparse-view forms are family ``gather``). On a
row-major ``A`` of N x D (``rows`` x ``cols``) elements of ``dtype``, a row-index tile ``ri`` and a
column-index tile ``ci`` pick the R x C (``tile``) output elements, 0-based:

  ``out[i, j] = A[r, c] if valid else padding``, ``valid = mask[i, j] and 0 <= r < N and 0 <= c < D``

with ``(r, c) = (ri[i, j], ci[i, j])`` for 2-D index tiles of R x C, or ``(ri[i], ci[j])`` for
1-D tiles of R and C broadcast against each other (``broadcast = true``: cuTile's
``gather(A, (rows[:, None], cols[None, :]))``). Negative indices are out of bounds (no
wrap-around), so -1 is a padding sentinel; A is read only where valid; repeated indices are fine.
``check_bounds = "false"`` promises every index in bounds (rules accept it only for inputs with no
sentinels, no out-of-range indices and no mask).

Problem keys: ``dtype``, ``rows`` (N), ``cols`` (D), ``tile`` ([R, C]), ``index_dtype`` ("int32"
or "int64", default "int32"), ``broadcast`` (false), ``mask`` (false; 2-D tiles only: a uint8 tile
of R x C), ``mask_rate``, ``sentinel_rate``, ``oob_rate`` (fractions of the entries; with
``broadcast`` of each 1-D tile), ``padding`` and ``pad_value`` as in ``gather``.

Seeded inputs place sentinels, out-of-range and masked-out entries at disjoint positions counted by
cumulative rounding (see ``tunebox.families.indexed``). With 2-D tiles an invalid entry alternates
between its row index and its column index (a sentinel stores -1 there, an out-of-range entry an
index in [N, 2N) or [D, 2D)), so both bounds tests are exercised; with ``broadcast`` each tile's
invalid entries are its own.

Buffers: inputs ``A`` (N, D), ``ri`` and ``ci`` ((R, C), or (R,) and (C,) with ``broadcast``),
``mask`` (R, C) with a mask; output ``out`` (R, C).
"""

from ..contract import Family
from .elements import ElementsConfig, ElementsTemplate, blocks
from .operation import ElementGatherProblem, GatherElementsOperation, InvalidCounts

FAMILY = Family(GatherElementsOperation(), (ElementsTemplate(),))

__all__ = [
    "FAMILY",
    "ElementGatherProblem",
    "ElementsConfig",
    "ElementsTemplate",
    "GatherElementsOperation",
    "InvalidCounts",
    "blocks",
]
