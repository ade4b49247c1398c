"""Family ``ragged3d``: pack a padded [B, Lmax, H, D] tensor into ragged [total, H, D] storage, or
unpack it back (Mojo's RaggedTMA3DTile layout).

With per-sequence lengths ``len_b`` (0 <= len_b <= Lmax) and ``offsets`` their B + 1 exclusive
prefix sums (int64; ``total = offsets[B]``), 0-based:

  pack:   ``out[offsets[b] + l, :, :] = x[b, l, :, :]`` for ``l < len_b``; ``out`` is (total, H, D)
  unpack: ``out[b, l, :, :] = ragged[offsets[b] + l, :, :]`` for ``l < len_b``, zero for
          ``len_b <= l < Lmax``; ``out`` is (B, Lmax, H, D)

Every element of ``out`` is written exactly once. Template ``vector`` never reads positions past a
sequence's length; template ``tma`` loads whole tiles, so it may read up to BM - 1 rows past a
sequence's end (rows of x's padding, or of the next sequences in ``ragged``; never outside a buffer).
Problem keys: ``dtype``, ``batch`` (B), ``max_len`` (Lmax), ``heads`` (H), ``depth`` (D),
``direction`` ("pack" or "unpack"), ``lengths``: a list of B lengths, or "uniform" (drawn uniformly
in [1, Lmax] from ``lengths_seed``, default 0, so the problem alone fixes them and the work).
Buffers: pack: inputs ``x`` (B, Lmax, H, D), ``offsets`` (B + 1,) int64; output ``out``.
unpack: inputs ``ragged`` (total, H, D), ``offsets``; output ``out``.

Two templates, so the search picks per problem:

- ``vector`` (``kernels/ragged3d/ragged3d.cu``, ``vector.py``): a block of ``threads`` threads moves
  BM rows of one sequence (H x D contiguous elements each) in vectors of ``vec_bytes`` through
  registers.
- ``tma`` (sm_90+; the kernel refuses to compile for older devices;
  ``kernels/ragged3d/ragged3d_tma.cu``, layout and rules in ``tma.py``): one warp per block moves a
  tile of BM rows x ``group`` heads x ``BN`` columns of depth (0: all of D) with bulk tensor loads
  into shared memory and bulk tensor stores out of it, in chunks one ``swizzle`` span wide (16 bytes
  without swizzle), ``tma_blocks_per_op`` chunks per copy (0: one copy per chunk). pack stores
  through RaggedTMA3DTile's clipping tensor map (base address BM rows in front of out), so rows past
  a sequence's end are not written; unpack zeroes them in shared memory before its store. Needs
  16-byte heads (D x size).

Each template holds only its own parameters (vector: BM, threads, vec_bytes; tma: BM, group, BN,
swizzle, tma_blocks_per_op), so the search never times a variant twice. The default configuration
is always the vector template's.
"""

from ..contract import Family
from .operation import RaggedOperation, RaggedProblem
from .tma import TmaTemplate
from .tma_layout import TmaConfig, TmaLayout
from .vector import VectorConfig, VectorTemplate

FAMILY = Family(RaggedOperation(), (VectorTemplate(), TmaTemplate()))

__all__ = [
    "FAMILY",
    "RaggedOperation",
    "RaggedProblem",
    "TmaConfig",
    "TmaLayout",
    "TmaTemplate",
    "VectorConfig",
    "VectorTemplate",
]
