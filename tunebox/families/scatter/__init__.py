"""Family ``scatter``: rows of ``V`` written to ``A`` at indexed rows; every other row untouched.

``A[idx[k] + offset, :] = V[k, :]`` for each ``k < K`` whose entry is valid (see
``tunebox.families.indexed``: the mask, and ``0 <= idx[k] + offset < N``); ``V`` is (K, D) and ``A``
(N, D) of ``dtype``. An invalid entry writes nothing, and no row outside the valid targets is
written. Targets must be unique: with duplicate targets the result is undefined (the seeded inputs
draw K distinct rows, a random K-subset of range(N) in random order, so ``count <= rows``).

Verification contract ("untouched" means "still poison"): ``A`` is this family's output buffer, and
the GPU worker fills every output with the element type's poison bits
(``tunebox.dtypes.ElementType.poison``) before each launch. ``reference()`` therefore returns poison
for every row that no valid entry targets and ``V[k]`` for each valid target, so the bit-exact
comparison proves both that every valid row was written and that nothing else was. The kernel keeps
the real semantics: it never reads ``A`` and writes only the targeted rows.

Problem keys: ``dtype``, ``rows`` (N), ``cols`` (D), ``count`` (K <= N), ``index_dtype`` ("int32"
or "int64", default "int32"), ``offset`` (0), ``mask`` (false) and ``mask_rate`` (0.0, with a mask
only). Buffers: inputs ``V`` (K, D), ``idx`` (K,) and, with a mask, ``mask`` (K,) uint8; output
``A`` (N, D).
"""

from ..contract import Family
from ..indexed_rows import RowsConfig
from .operation import ScatterOperation, ScatterProblem
from .rows import ScatterRows

FAMILY = Family(ScatterOperation(), (ScatterRows(),))

__all__ = ["FAMILY", "RowsConfig", "ScatterOperation", "ScatterProblem", "ScatterRows"]
