"""gather's one template, ``rows`` (``kernels/gather/gather.cu``): the shared row rules of
``indexed_rows`` on whole rows and on axis 0 windows (on the row's segment), and the column form.

The tunable space on the sparse-view forms: axis 0 windows reuse the row rules on the segment; axis 1
gives each thread vec_bytes of consecutive entries (one output vector a row) and each block
rows_per_block output rows.
"""

from __future__ import annotations

import math
from typing import Literal

from ...dtypes import element_type
from ...limits import MAX_GRID_X
from ...rules import Rules
from ..base import Arg, LaunchGeometry, ScalarArg
from ..indexed import _warps
from ..indexed_rows import RowsConfig, RowsTemplate, row_buffers
from .problem import GatherProblem


class GatherRows(RowsTemplate[GatherProblem]):
    rule_names = (*RowsTemplate.rule_names, "threads_busy", "rows_per_block_within_window")  # the column form's

    def kernel_name(self, p: GatherProblem) -> str:
        base = "gather_rows" if p.whole_rows else "gather_window" if p.axis == 0 else "gather_cols"
        return base + ("_masked" if p.mask else "")

    def row_vectors(self, p: GatherProblem, vec_bytes: int) -> int:
        """Vectors per output row (axis 0) at the widest width of at most vec_bytes dividing D, the
        window and dense_offset: what the kernel uses on aligned buffers."""
        width = vec_bytes // element_type(p.element).itemsize
        while p.cols % width or p.span % width or p.dense_offset % width:
            width //= 2
        return p.span // width

    def column_blocks(self, p: GatherProblem, config: RowsConfig) -> int:
        """Axis 1: blocks of threads x (vec_bytes / element) entries and strips of rows_per_block output
        rows, one strip a block unless the grid limit makes blocks walk several (the kernel strides)."""
        tile = config.threads * (config.vec_bytes // element_type(p.element).itemsize)
        tiles, strips = math.ceil(p.count / tile), math.ceil(p.span / config.rows_per_block)
        return tiles * min(strips, MAX_GRID_X // tiles)

    def default(self, problem: GatherProblem) -> RowsConfig:
        p = problem
        if p.axis == 0:
            return super().default(p)
        entries = math.ceil(p.count / (16 // element_type(p.element).itemsize))
        threads = next(t for t in (256, 128, 64) if t <= max(64, _warps(entries)))
        tiles = math.ceil(entries / threads)  # the most rows per block that still leaves 1024 blocks
        per_row = next((r for r in (16, 8, 4, 2) if r <= p.span and tiles * math.ceil(p.span / r) >= 1024), 1)
        return RowsConfig(rows_per_block=per_row, threads=threads, vec_bytes=16, check_bounds="true")

    def team_rules(self, rules: Rules, problem: GatherProblem, config: RowsConfig) -> None:
        p = problem
        if p.axis == 0:
            super().team_rules(rules, p, config)
            return
        vectors = math.ceil(p.count / (config.vec_bytes // element_type(p.element).itemsize))
        rules.require(
            "threads_busy",
            config.threads <= max(64, _warps(vectors)),
            f"{config.threads} threads exceed the {vectors} vectors of entries rounded up to whole "
            "warps: threads would idle",
        )
        rules.require(
            "rows_per_block_within_window",
            config.rows_per_block <= p.span,
            f"rows_per_block={config.rows_per_block} exceeds the window of {p.span} rows",
        )

    def geometry(self, problem: GatherProblem, config: RowsConfig) -> LaunchGeometry:
        if problem.axis == 0:
            return super().geometry(problem, config)
        return LaunchGeometry((self.column_blocks(problem, config), 1, 1), (config.threads, 1, 1), 0)

    def args(self, problem: GatherProblem, config: RowsConfig) -> tuple[Arg, ...]:
        """The members of the kernel's ``Cfg::Args``: A, idx, mask (masked only), out, N, D, K, offset,
        then start and window (the sparse-view forms: dense_offset and the window), then pad (the
        padding's bits, typed as ``Cfg::E``)."""
        p = problem
        pad_type: Literal["u32", "u16"] = "u32" if element_type(p.element).itemsize == 4 else "u16"
        dense = () if p.whole_rows else (("start", p.dense_offset), ("window", p.span))
        scalars = (("N", p.rows), ("D", p.cols), ("K", p.count), ("offset", p.offset), *dense)
        return (
            *row_buffers(p, "A", "out"),
            *(ScalarArg("i64", v, name) for name, v in scalars),
            ScalarArg(pad_type, p.pad_bits, "pad"),
        )
