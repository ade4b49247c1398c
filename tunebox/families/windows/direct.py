"""Template ``direct`` (the old ``scheme = "direct"``): unfold, or a reduction that walks each
window, reading A directly or its block region staged in shared memory."""

from __future__ import annotations

from dataclasses import dataclass

from ...dtypes import element_type
from ...rules import Rules
from ..contract import choice
from ..indexed import _warps, ceil_pow2
from .layout import BLOCK_RULES, BlockConfig, Variant, WindowsTemplate, items
from .operation import WindowsProblem


@dataclass(frozen=True)
class DirectConfig(BlockConfig):
    vector: int = choice(
        1, 2, 4, 8, doc="elements per store of a window row, at most 16 bytes (unfold; reductions take 1)"
    )
    staging: str = choice("none", "shared", doc="read A directly, or its block region once into shared memory")


class DirectTemplate(WindowsTemplate[DirectConfig]):
    name = "direct"
    config_type = DirectConfig
    rule_names = ("reduction_vector_1", "vector_fits_window", *BLOCK_RULES)

    def variant(self, config: DirectConfig) -> Variant:
        return Variant(config.BI, config.BJ, config.threads, config.vector, config.staging == "shared", False)

    def default(self, problem: WindowsProblem) -> DirectConfig:
        """The largest vector the window width takes (1 for reductions), 1 x 8 windows per block (unfold)
        or 8 x 32 (reductions) within the window grid, no staging, and the fewest threads of 64 .. 256
        that the block's work items keep busy."""
        p = problem
        size = element_type(p.element).itemsize
        vector = 1 if p.reduces else max(v for v in (1, 2, 4, 8) if p.window[1] % v == 0 and v * size <= 16)
        bi = min(8 if p.reduces else 1, ceil_pow2(p.grid[0]))
        bj = min(32 if p.reduces else 8, ceil_pow2(p.grid[1]))
        work = items(p, Variant(bi, bj, 64, vector, False, False))
        threads = max((t for t in (64, 128, 256) if t <= max(64, _warps(work))), default=64)
        return DirectConfig(BI=bi, BJ=bj, threads=threads, vector=vector, staging="none")

    def own_rules(self, rules: Rules, problem: WindowsProblem, config: DirectConfig) -> None:
        p, vector = problem, config.vector
        size = element_type(p.element).itemsize
        if p.reduces:
            rules.require(
                "reduction_vector_1",
                vector == 1,
                f"vector={vector}: a reduction writes one float per window and takes vector=1",
            )
        else:
            rules.require(
                "vector_fits_window",
                p.window[1] % vector == 0 and vector * size <= 16,
                f"vector={vector} must divide the window width {p.window[1]} and span at most 16 bytes "
                f"({size}-byte elements)",
            )
