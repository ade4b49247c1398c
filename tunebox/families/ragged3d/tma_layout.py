"""The tile layout and the two tensor maps of ragged3d's template ``tma``
(``kernels/ragged3d/ragged3d_tma.cu``), which ``tma.py``'s rules keep valid.

A block moves one tile: BM rows of one sequence, ``group`` consecutive heads (head group m of
M = H / group) and one column block of depth. A chunk is G = span / size columns (the swizzle span,
16 bytes without swizzle); a column block is BN / G chunks, or with BN = 0 all of D's chunks, so
D needs no particular multiple (chunks past D are not copied, columns past D inside one are clipped).
BN = 0 is the natural choice for the head dims of attention (64 to 256): one block covers whole rows,
and the tile grows through BM and group instead; BN > 0 splits rows whose tile would not fit.

The maps (innermost dimension first here; ``TensorMapRequest`` takes them outermost first):

- clipping map, for stores into the ragged storage (pack's ``out``, ``total`` rows): base address the
  buffer's minus BM x row bytes (``TensorMapArg.offset_bytes``), dimensions (D or G, [group], BM,
  [n_blocks], merged), merged = M x (total + 1) of stride one head group. A tile's rows past its
  sequence's end are out of bounds, so the store skips them (the kernel's comment works the address
  arithmetic out).
- plain maps over a (batches, rows, H, D) buffer: (D, H, rows, batches), batched (G, H, rows, n_blocks,
  batches): pack's ``x`` (B, Lmax), unpack's ``ragged`` (1, total) and ``out`` (B, Lmax).

Loads never go through a clipping map: on the H200, with the map's base address in unmapped memory, a
load of a box wholly out of bounds faulted, while stores and loads with a row inside did not
(``tests/gpu/test_ragged3d_gpu.py``); plain maps keep every load independent of memory outside the
buffers, and a caller's array (``tunebox.launch``) need not have memory in front of it. So pack loads
whole tiles of x (rows past a sequence's end, inside x, are read and dropped) and stores through the
clipping map of out; unpack loads whole tiles of ragged, overwrites rows past the sequence's end with
zeros in shared memory, and stores through the plain map of out (clipped at Lmax).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...tma import MBARRIER_BYTES, SWIZZLE_BYTES, TensorMapRequest, swizzle_period
from ..base import TensorMapArg
from ..contract import TemplateConfig, choice
from .operation import BM_CHOICES, BM_DOC, RaggedProblem


@dataclass(frozen=True)
class TmaConfig(TemplateConfig):
    BM: int = choice(*BM_CHOICES, doc=BM_DOC)
    group: int = choice(1, 2, 4, 8, doc="consecutive heads per block")
    BN: int = choice(0, 16, 32, 64, 128, 256, doc="columns of depth per block, 0: all of D")
    swizzle: str = choice(*SWIZZLE_BYTES, doc="shared-memory swizzle of the TMA boxes, one span per chunk")
    tma_blocks_per_op: int = choice(
        0,
        1,
        2,
        4,
        8,
        doc="chunks per TMA copy through an extra dimension, 0: one copy per chunk without it (swizzle none only)",
    )


@dataclass(frozen=True)
class TmaLayout:
    """One block's work and shared memory (the kernel's configuration and its dynamic shared memory):
    the swizzle period (alignment slack), ``ops`` slots of ``slot_bytes`` (one box each, aligned to the
    period), the mbarrier."""

    span: int  # swizzle span in bytes, 0 without swizzle
    chunk: int  # G: columns per chunk, span (16 bytes without swizzle) / element size
    per_op: int  # chunks per copy: tma_blocks_per_op, or 1
    batched: bool  # copies go through the extra n_blocks dimension (tma_blocks_per_op > 0)
    chunks: int  # chunk slots per block: BN / G, or with BN = 0 all of D's rounded up to whole copies
    column_blocks: int  # blocks across D
    box_bytes: int  # one copy's box
    slot_bytes: int  # box_bytes rounded up to the swizzle period
    shared_bytes: int

    @property
    def ops(self) -> int:
        return self.chunks // self.per_op


def layout(p: RaggedProblem, config: TmaConfig) -> TmaLayout:
    """The layout of a config that passes ``shape_rules``."""
    size = p.itemsize
    span = SWIZZLE_BYTES[config.swizzle]
    g = (span or 16) // size
    bpo, bn = config.tma_blocks_per_op, config.BN
    per_op = max(bpo, 1)
    chunks = bn // g if bn else -(-math.ceil(p.depth / g) // per_op) * per_op
    box = per_op * g * config.group * config.BM * size
    period = swizzle_period(span)
    slot = -(-box // period) * period
    shared = period + chunks // per_op * slot + MBARRIER_BYTES
    return TmaLayout(span, g, per_op, bpo > 0, chunks, math.ceil(p.depth / (chunks * g)), box, slot, shared)


def blocks(p: RaggedProblem, config: TmaConfig) -> int:
    """B x ceil(Lmax / BM) x (H / group) x column blocks, one flat grid.x."""
    tiles = math.ceil(p.max_len / config.BM)
    return p.batch * tiles * (p.heads // config.group) * layout(p, config).column_blocks


def tensor_maps(p: RaggedProblem, config: TmaConfig) -> tuple[TensorMapArg, TensorMapArg]:
    """(source map, destination map): the members ``src_map`` and ``dst_map`` of the kernel's argument
    struct, the addresses filled in at launch."""
    if p.pack:
        return _plain_map(p, config, "x", p.max_len, p.batch, "src_map"), _clipping_map(p, config)
    return (
        _plain_map(p, config, "ragged", p.total, 1, "src_map"),
        _plain_map(p, config, "out", p.max_len, p.batch, "dst_map"),
    )


def _clipping_map(p: RaggedProblem, config: TmaConfig) -> TensorMapArg:
    """pack's store map over out: the tile's rows past its sequence's end lie out of bounds."""
    size = p.itemsize
    lay = layout(p, config)
    bm, group = config.BM, config.group
    row_bytes, head = p.row * size, p.depth * size
    merged = ((p.heads // group) * (p.total + 1), group * head)  # (extent, stride)
    # innermost first: (extent, stride, box)
    dims = [(lay.chunk, size, lay.chunk) if lay.batched else (p.depth, size, lay.chunk)]
    if group > 1:
        dims.append((group, head, group))
    dims.append((bm, row_bytes, bm))
    if lay.batched:
        dims.append((p.depth // lay.chunk, lay.chunk * size, lay.per_op))
    dims.append((*merged, 1))
    return TensorMapArg("out", _request(p, config, dims), -bm * row_bytes, "dst_map")


def _plain_map(p: RaggedProblem, config: TmaConfig, buffer: str, rows: int, batches: int, name: str) -> TensorMapArg:
    """The map ``name`` over ``buffer`` seen as (batches, rows, H, D); an empty buffer's map keeps one
    row (the kernel copies nothing through it), and a single batch's dimension takes the stride of a
    row (any valid stride does for an extent of 1; the batch's bytes may exceed the driver's 2^40)."""
    size = p.itemsize
    lay = layout(p, config)
    row_bytes, head, rows = p.row * size, p.depth * size, max(rows, 1)
    dims = [
        (lay.chunk, size, lay.chunk) if lay.batched else (p.depth, size, lay.chunk),
        (p.heads, head, config.group),
        (rows, row_bytes, config.BM),
    ]
    if lay.batched:
        dims.append((p.depth // lay.chunk, lay.chunk * size, lay.per_op))
    dims.append((batches, rows * row_bytes if batches > 1 else row_bytes, 1))
    return TensorMapArg(buffer, _request(p, config, dims), 0, name)


def _request(p: RaggedProblem, config: TmaConfig, dims: list[tuple[int, int, int]]) -> TensorMapRequest:
    shape, strides, box = (tuple(d[i] for d in reversed(dims)) for i in range(3))
    return TensorMapRequest(p.element, shape, strides, box, 0, config.swizzle)


def largest_coordinates(p: RaggedProblem, config: TmaConfig) -> dict[str, int]:
    """The largest coordinate the kernel gives each dimension that can grow past 2^31 - 1 (the merged
    dimension of pack's clipping map reaches (total + 1) x M - 1: a tile's ``first + dyn`` reaches the
    last row, plus the last head group)."""
    largest = {
        "the columns": p.depth - 1,
        "the heads": p.heads - 1,
        "the rows of the padded map": p.max_len - 1,
        "the sequences of the padded map": p.batch - 1,
    }
    if p.pack:
        largest["the merged dimension of out's map"] = (p.total + 1) * (p.heads // config.group) - 1
    else:
        largest["the rows of ragged's map"] = p.total
    return largest
