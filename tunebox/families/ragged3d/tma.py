"""How ragged3d's template ``tma`` moves a problem (``kernels/ragged3d/ragged3d_tma.cu``): the launch,
the arguments and the rules that keep the layout and the maps of ``tma_layout.py`` valid.
"""

from __future__ import annotations

import dataclasses
import math

from ...dtypes import element_type
from ...limits import MAX_GRID_X
from ...rules import Rules, shared_memory_fits
from ...tma import MAX_COORDINATE, SWIZZLE_BYTES
from ...tma import violations as tensor_map_violations
from ..base import Arg, BufferArg, CType, Instantiation, LaunchGeometry, ScalarArg, instantiate
from ..contract import KernelTemplate
from .operation import RaggedProblem, bm_rule
from .tma_layout import TmaConfig, blocks, largest_coordinates, layout, tensor_maps

THREADS = 32  # one warp; its lane 0 issues every copy
STAND_IN_ADDRESS = 1 << 40  # a 256-byte aligned device address standing in for a buffer's in the rules


SHAPE_RULES = (
    "group_divides_heads",
    "head_stride_16_bytes",
    "batched_without_swizzle",
    "bn_whole_chunks",
    "bn_below_depth",
    "blocks_per_op_within_chunks",
)


def shape_rules(rules: Rules, p: RaggedProblem, config: TmaConfig) -> None:
    """The rules the layout itself needs (``SHAPE_RULES``): whole head groups, 16-byte head strides,
    chunks that tile the column block, and batched copies only without swizzle."""
    size = p.itemsize
    group, bn, bpo = config.group, config.BN, config.tma_blocks_per_op
    span = SWIZZLE_BYTES[config.swizzle]
    g = (span or 16) // size
    rules.require(
        "group_divides_heads", p.heads % group == 0, f"group={group} heads per block must divide the H={p.heads} heads"
    )
    rules.require(
        "head_stride_16_bytes",
        p.depth * size % 16 == 0,
        f"TMA strides are 16-byte multiples: a head of D={p.depth} elements is {p.depth * size} "
        "bytes; use template 'vector'",
    )
    rules.require(
        "batched_without_swizzle",
        not (bpo and span),
        f"tma_blocks_per_op={bpo} batches 16-byte chunks through an extra dimension, which only "
        f"swizzle='none' allows: set tma_blocks_per_op=0 or swizzle='none'",
    )
    if rules.require(
        "bn_whole_chunks",
        bn % g == 0,
        f"BN={bn} must be a multiple of the chunk of G={g} elements (swizzle {config.swizzle}: "
        f"{span or 16} bytes of {p.element})",
    ) and rules.require(
        "bn_below_depth", bn < p.depth, f"BN={bn} covers all of D={p.depth} in one column block: set BN=0"
    ):
        chunks = bn // g if bn else math.ceil(p.depth / g)
        rules.require(
            "blocks_per_op_within_chunks",
            bpo <= chunks,
            f"tma_blocks_per_op={bpo} exceeds the {chunks} chunks of G={g} elements in a column block",
        )


class TmaTemplate(KernelTemplate[RaggedProblem, TmaConfig]):
    """sm_90+ (the kernel refuses to compile for older devices): one warp per block moves a tile with
    bulk tensor loads into shared memory and bulk tensor stores out of it."""

    name = "tma"
    config_type = TmaConfig
    kernel = "ragged3d/ragged3d_tma.cu"
    rule_names = (*SHAPE_RULES, "shared_memory_fits", "coordinates_32bit", "grid_fits", "bm_within_max_len")

    def default(self, problem: RaggedProblem) -> TmaConfig | None:
        return None  # the default is the vector template's, which every device runs

    def violations(self, problem: RaggedProblem, config: TmaConfig) -> list[str]:
        """The shape's rules first (the others need its layout); the tensor maps' (``tma.violations``,
        each message after the map's buffer) only where no other broke; the tile's height last."""
        p = problem
        rules = Rules(self.name)
        shape_rules(rules, p, config)
        if rules.broken:
            bm_rule(rules, p, config.BM)
            return rules.broken
        lay = layout(p, config)
        shared_memory_fits(rules, lay.shared_bytes, ": use a smaller BM, group or BN")
        for what, value in largest_coordinates(p, config).items():
            rules.require(
                "coordinates_32bit",
                value <= MAX_COORDINATE,
                f"TMA coordinates are signed 32-bit: {what} reaches {value} (at most "
                f"{MAX_COORDINATE}): the problem is too large for template 'tma'",
            )
        n = blocks(p, config)
        rules.require(
            "grid_fits", n <= MAX_GRID_X, f"{n} blocks exceed the grid limit {MAX_GRID_X}: use a larger BM, group or BN"
        )
        if not rules.broken:
            for arg in tensor_maps(p, config):
                stand_in = dataclasses.replace(arg.request, address=STAND_IN_ADDRESS + arg.offset_bytes)
                rules.broken += [f"tensor map of {arg.buffer}: {b}" for b in tensor_map_violations(stand_in)]
        bm_rule(rules, p, config.BM)
        return rules.broken

    def render(self, problem: RaggedProblem, config: TmaConfig) -> Instantiation:
        lay = layout(problem, config)
        return instantiate(
            self.kernel,
            "ragged3d_tma",
            {
                "E": CType(element_type(problem.element).ctype),
                "BM": config.BM,
                "GROUP": config.group,
                "SPAN": lay.span,
                "G": lay.chunk,
                "CHUNKS": lay.chunks,
                "PER_OP": lay.per_op,
                "BATCHED": lay.batched,
                "PACK": problem.pack,
                "SHARED_BYTES": lay.shared_bytes,
            },
        )

    def geometry(self, problem: RaggedProblem, config: TmaConfig) -> LaunchGeometry:
        """B x ceil(Lmax / BM) x (H / group) x column blocks of one warp, with the tile's shared memory."""
        return LaunchGeometry((blocks(problem, config), 1, 1), (THREADS, 1, 1), layout(problem, config).shared_bytes)

    def args(self, problem: RaggedProblem, config: TmaConfig) -> tuple[Arg, ...]:
        """The argument struct: the source's and the destination's tensor maps (``src_map``, ``dst_map``),
        then ``offsets``, ``Lmax``, ``depth`` (D), ``M`` (H / group), ``tiles`` (per sequence),
        ``column_blocks``."""
        p = problem
        lay = layout(p, config)
        scalars = {
            "Lmax": p.max_len,
            "depth": p.depth,
            "M": p.heads // config.group,
            "tiles": math.ceil(p.max_len / config.BM),
            "column_blocks": lay.column_blocks,
        }
        return (
            *tensor_maps(p, config),
            BufferArg("offsets", "const long long"),
            *(ScalarArg("i64", v, name) for name, v in scalars.items()),
        )
