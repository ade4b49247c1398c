"""Template ``tma`` (sm_90+; the kernel refuses to compile for older devices): bulk tensor loads into a
ring of ``stages`` mbarrier-completed buffers with the ``swizzle`` layout, and bulk tensor stores that
clip at dst's edges (``kernels/tile_copy/tile_copy_tma.cu``). The hardware clips and fills (every tile
is bounds-checked), and the boxes have their own layout: no ``bounds``, no ``staging``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ...rules import Rules
from ...tma import MAX_BOX_EXTENT, MAX_COORDINATE, MBARRIER_BYTES, SWIZZLE_BYTES, TensorMapRequest, swizzle_period
from ...tma import violations as tensor_map_violations
from ..base import Arg, Instantiation, ScalarArg, TensorMapArg, instantiate
from ..contract import choice
from .operation import TileCopyProblem
from .tiles import (
    TILE_RULES,
    TileConfig,
    TileTemplate,
    element_ctype,
    pipeline_rule,
    round_up,
    tile_counts,
    vector_elements,
)


@dataclass(frozen=True)
class TmaConfig(TileConfig):
    """The tile parameters, the swizzle of the boxes and the depth of the ring."""

    swizzle: str = choice(*SWIZZLE_BYTES, doc="shared-memory swizzle of the TMA boxes")
    stages: int = choice(1, 2, 3, 4, doc="source blocks in flight per block: shared buffers of cp_async and tma")


@dataclass(frozen=True)
class _TmaLayout:
    """How the tma template moves a tile (kernels/tile_copy/tile_copy_tma.cu): boxes of the source
    block's rows x ``box`` elements and of the tile's BM rows x ``out_box``, each box's shared memory
    aligned to the swizzle period."""

    span: int  # swizzle span in bytes, 0 for none
    box: int  # inner extent of a source box (elements)
    out_box: int  # inner extent of a destination box (elements)
    direct: bool  # not transposed, zero padding: the loaded boxes are stored as they are
    shared_bytes: int  # alignment slack, the stages' input buffers, the output buffers, the mbarriers


def _tma_layout(p: TileCopyProblem, config: TmaConfig) -> _TmaLayout:
    size = p.itemsize
    bm, bn = config.BM, config.BN
    height, width = (bn, bm) if p.transpose else (bm, bn)
    span = SWIZZLE_BYTES[config.swizzle]
    box, out_box = (span // size,) * 2 if span else (min(width, MAX_BOX_EXTENT), min(bn, MAX_BOX_EXTENT))
    direct = not p.transpose and p.pad_bits == 0
    period = swizzle_period(span)
    in_bytes = width // box * round_up(height * box * size, period)
    out_bytes = bn // out_box * round_up(bm * out_box * size, period)
    out_buffers = 0 if direct else min(2, config.tiles_per_block)
    shared = period + config.stages * in_bytes + out_buffers * out_bytes + config.stages * MBARRIER_BYTES
    return _TmaLayout(span, box, out_box, direct, shared)


def _tensor_maps(p: TileCopyProblem, config: TmaConfig) -> tuple[TensorMapArg, TensorMapArg]:
    """Tensor maps of src (boxes of the source block's rows x box) and dst (BM x out_box), the
    address filled in at launch."""
    size = p.itemsize
    layout = _tma_layout(p, config)
    height = config.BN if p.transpose else config.BM
    src = TensorMapRequest(p.element, p.src, (p.src[1] * size, size), (height, layout.box), 0, config.swizzle)
    dst = TensorMapRequest(p.element, p.dst, (p.dst[1] * size, size), (config.BM, layout.out_box), 0, config.swizzle)
    return TensorMapArg("src", src, name="src_map"), TensorMapArg("dst", dst, name="dst_map")


def _last_tma_coordinates(p: TileCopyProblem, config: TmaConfig, layout: _TmaLayout) -> tuple[int, int]:
    """The largest (column, row) coordinate at which a source box starts (destination boxes start
    inside dst, whose extents are below 2^31)."""
    bm, bn = config.BM, config.BN
    tiles_m, tiles_n = tile_counts(p, config)
    (rows, height), (cols, width) = ((tiles_n, bn), (tiles_m, bm)) if p.transpose else ((tiles_m, bm), (tiles_n, bn))
    return p.origin[1] + cols * width - layout.box, p.origin[0] + (rows - 1) * height


class TmaTemplate(TileTemplate[TmaConfig]):
    name = "tma"
    config_type = TmaConfig
    kernel = "tile_copy/tile_copy_tma.cu"
    rule_names = (*TILE_RULES, "stages_within_tiles", "whole_boxes", "origin_16_bytes", "coordinates_32bit")

    def default(self, problem: TileCopyProblem) -> None:
        return None

    def own_rules(self, rules: Rules, problem: TileCopyProblem, config: TmaConfig) -> None:
        """The pipeline's rule; whole boxes, 16-byte coordinates, 32-bit coordinates and, when those
        hold, the driver's rules of both tensor maps (``tma.violations``, each message after the map's
        buffer)."""
        pipeline_rule(rules, config.stages, config.tiles_per_block)
        layout = _tma_layout(problem, config)
        width = config.BM if problem.transpose else config.BN
        boxes = rules.require(
            "whole_boxes",
            width % layout.box == 0 and config.BN % layout.out_box == 0,
            f"swizzle {config.swizzle} moves boxes {layout.box} elements wide: the source block's "
            f"{width} and the tile's {config.BN} columns must be whole boxes",
        )
        origin = rules.require(
            "origin_16_bytes",
            problem.origin[1] * problem.itemsize % 16 == 0,
            f"TMA boxes start at 16-byte multiples of a row: origin column {problem.origin[1]} x "
            f"{problem.itemsize} bytes is not one",
        )
        last = max(_last_tma_coordinates(problem, config, layout))
        coordinates = rules.require(
            "coordinates_32bit",
            last <= MAX_COORDINATE,
            f"TMA coordinates are 32-bit: a box would start at {last} (at most {MAX_COORDINATE})",
        )
        if boxes and origin and coordinates:
            for arg in _tensor_maps(problem, config):
                rules.broken += [
                    f"tensor map of {arg.buffer}: {b}"
                    for b in tensor_map_violations(dataclasses.replace(arg.request, address=256))
                ]

    def shared_bytes(self, problem: TileCopyProblem, config: TmaConfig) -> int:
        """Alignment slack, the stages' input buffers, the output buffers and the mbarriers."""
        return _tma_layout(problem, config).shared_bytes

    def render(self, problem: TileCopyProblem, config: TmaConfig) -> Instantiation:
        layout = _tma_layout(problem, config)
        return instantiate(
            self.kernel,
            "tile_copy_tma",
            {
                "T": element_ctype(problem),
                "BM": config.BM,
                "BN": config.BN,
                "THREADS": config.threads,
                "VEC": vector_elements(problem, config),
                "TPB": config.tiles_per_block,
                "STAGES": config.stages,
                "SPAN": layout.span,
                "BOX": layout.box,
                "OUT_BOX": layout.out_box,
                "DIRECT": layout.direct,
                "TRANSPOSE": problem.transpose,
                "SHARED_BYTES": layout.shared_bytes,
            },
        )

    def args(self, problem: TileCopyProblem, config: TmaConfig) -> tuple[Arg, ...]:
        """The members of the kernel's argument struct ``Cfg::Args``, in order: the tensor maps src_map
        and dst_map, Ms, Ns, oy, ox, then pad, tiles_n, n_tiles (``tail_args``)."""
        names = ("Ms", "Ns", "oy", "ox")
        scalars = (*problem.src, *problem.origin)
        return (
            *_tensor_maps(problem, config),
            *(ScalarArg("i64", v, name) for name, v in zip(names, scalars, strict=True)),
            *self.tail_args(problem, config),
        )
