"""Template ``narrow``: copies and transposes whose destination rows hold at most ``NARROW_ROWS``
elements, moved as one flat destination (``kernels/tile_copy/tile_copy_narrow.cu``,
``tile_copy_narrow``).

A tile template gives each destination row a tile of at least 8 columns, so at ``[4000000, 3]`` most of
its threads and vectors fall outside dst and each row's three elements are stored apart. Here the
destination is ``Md * Nd`` consecutive elements cut into chunks of ``threads * vectors`` aligned
vectors; each element of a vector is read where it lies in src by a load of its own (a warp's loads
walk the few source rows contiguously and share their sectors in L1), and each vector is stored in one
access. No shared memory, no bounds mode: a chunk reading only inside src skips the checks.

Its grid always fits: dst holds at most ``(2^31 - 1) * NARROW_ROWS`` elements (< 2^36) and a chunk at
least 64, so at most 2^30 blocks."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...limits import MAX_GRID_X
from ...rules import Rules, whole_elements
from ..base import Arg, CType, Instantiation, LaunchGeometry, ScalarArg, instantiate
from ..contract import KernelTemplate, TemplateConfig, choice
from .operation import TileCopyProblem
from .tiles import element_ctype, operand_args, pad_arg

NARROW_ROWS = 32  # elements: the widest destination row this template takes


@dataclass(frozen=True)
class NarrowConfig(TemplateConfig):
    """The block, its vectors and how many chunks each block moves."""

    threads: int = choice(64, 128, 256, 512, 1024, doc="threads per block")
    vec_bytes: int = choice(2, 4, 8, 16, doc="bytes per vector store")
    vectors: int = choice(1, 2, 4, 8, doc="vectors each thread stores per chunk")
    chunks_per_block: int = choice(1, 2, 4, 8, 16, doc="consecutive chunks each block moves")


def chunk_elements(problem: TileCopyProblem, config: NarrowConfig) -> int:
    """Destination elements per chunk: ``threads * vectors`` vectors."""
    return config.threads * config.vectors * (config.vec_bytes // problem.itemsize)


class NarrowTemplate(KernelTemplate[TileCopyProblem, NarrowConfig]):
    name = "narrow"
    config_type = NarrowConfig
    kernel = "tile_copy/tile_copy_narrow.cu"
    kernel_name = "tile_copy_narrow"
    rule_names = ("vec_bytes_whole_elements", "narrow_rows")

    @staticmethod
    def view(problem: TileCopyProblem) -> TileCopyProblem:
        """The problem's ``kernel_view``, as the tile templates' kernels take it."""
        return problem.kernel_view

    def default(self, problem: TileCopyProblem) -> None:
        return None

    def violations(self, problem: TileCopyProblem, config: NarrowConfig) -> list[str]:
        view = self.view(problem)
        rules = Rules(self.name)
        whole_elements(rules, config.vec_bytes, view.itemsize)
        rules.require(
            "narrow_rows",
            view.dst[1] <= NARROW_ROWS,
            f"template 'narrow' moves destination rows of at most {NARROW_ROWS} elements, not {view.dst[1]}: "
            "a tile template moves wider ones",
        )
        return rules.broken

    def geometry(self, problem: TileCopyProblem, config: NarrowConfig) -> LaunchGeometry:
        chunks = self._chunks(problem, config)
        blocks = math.ceil(chunks / config.chunks_per_block)
        assert blocks <= MAX_GRID_X, "at most 2^30 blocks (the module doc)"
        return LaunchGeometry((blocks, 1, 1), (config.threads, 1, 1), 0)

    def render(self, problem: TileCopyProblem, config: NarrowConfig) -> Instantiation:
        view = self.view(problem)
        members: dict[str, int | bool | CType] = {
            "T": element_ctype(view),
            "THREADS": config.threads,
            "VEC": config.vec_bytes // view.itemsize,
            "ITEMS": config.vectors,
            "TPB": config.chunks_per_block,
            "TRANSPOSE": view.transpose,
        }
        return instantiate(self.kernel, self.kernel_name, members)

    def args(self, problem: TileCopyProblem, config: NarrowConfig) -> tuple[Arg, ...]:
        """The members of the kernel's argument struct ``Cfg::Args``: src, dst, Ms, Ns, Md, Nd, oy, ox,
        pad, n_chunks."""
        view = self.view(problem)
        return (*operand_args(view), pad_arg(view), ScalarArg("i64", self._chunks(problem, config), "n_chunks"))

    def _chunks(self, problem: TileCopyProblem, config: NarrowConfig) -> int:
        view = self.view(problem)
        return math.ceil(view.dst[0] * view.dst[1] / chunk_elements(view, config))
