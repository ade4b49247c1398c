"""Family ``windows``: cuTile's ``eachtile`` windows with a step over a 2-D array, unfolded or reduced.

For a row-major R x C array ``A``, window shape (TH, TW) and step (SR, SC) (0-based): window (i, j),
``i < NR = ceil(R / SR)``, ``j < NC = ceil(C / SC)``, has its origin at (i * SR, j * SC) and covers
TH x TW elements. ``step < window`` overlaps windows, ``step > window`` leaves gaps; the last windows
along an axis may reach past the array, and what lies outside reads as padding. ``op``:

- ``unfold``: ``W[i, j, a, b] = A[i * SR + a, j * SC + b]``, or the padding outside A (modes as in
  ``tile_copy``: zero, neg_zero, nan, pos_inf, neg_inf, value with ``pad_value``); W is
  (NR, NC, TH, TW) of A's dtype, moved bit for bit.
- ``sum``, ``max``, ``min``: ``Y[i, j]`` is the window's reduction in float32 with the padding equal to
  the operation's neutral element (0, -inf, +inf): the reduction over the window's part inside A, as
  cuTile's reductions choose their padding. Y is (NR, NC) float32; ``max`` and ``min`` are exact,
  ``sum`` is checked within a tolerance of its float64 reference (float32 accumulation in any order).

Problem keys: ``dtype``, ``rows``, ``cols``, ``window`` [TH, TW] (each 1..64), ``step`` [SR, SC]
(each 1..1024), ``op``, and for ``unfold`` ``padding`` (default "zero") and ``pad_value``.
Buffers: input ``A`` (R, C); output ``out`` (W or Y).

Templates (both ``kernels/windows/windows.cu``; a block owns BI x BJ windows): ``direct`` unfolds
(``vector`` elements per store of a window row) or walks each window of a reduction, with ``staging``
'shared' copying the windows' union of A into shared memory first, so overlapping windows read A
once; ``separable`` reduces each staged row over TW columns, then over TH rows (TH + TW steps per
window instead of TH x TW).
"""

from ..contract import Family
from .baselines import _ceil_mode_fits
from .direct import DirectConfig, DirectTemplate
from .operation import OPS, WindowsOperation, WindowsProblem
from .separable import SeparableConfig, SeparableTemplate

FAMILY = Family(WindowsOperation(), (DirectTemplate(), SeparableTemplate()))

__all__ = ["FAMILY", "OPS", "DirectConfig", "SeparableConfig", "WindowsProblem", "_ceil_mode_fits"]
