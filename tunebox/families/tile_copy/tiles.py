"""What every tile_copy template shares: the tile parameters, the rules of vectors, threads, shared
memory and the grid, the launch geometry (one block per ``tiles_per_block`` destination tiles) and
the members every kernel's argument struct ends with."""

from __future__ import annotations

import abc
import math
from dataclasses import dataclass
from typing import ClassVar, TypeVar

from ...dtypes import element_type
from ...limits import MAX_GRID_X
from ...rules import Rules, shared_memory_fits, whole_elements
from ..base import Arg, BufferArg, CType, LaunchGeometry, ScalarArg
from ..contract import KernelTemplate, TemplateConfig, choice
from .operation import TileCopyProblem


@dataclass(frozen=True)
class TileConfig(TemplateConfig):
    """The parameters of every template: the destination tile, the block and its vectors."""

    BM: int = choice(1, 2, 4, 8, 16, 32, 64, 128, doc="destination tile rows")
    BN: int = choice(8, 16, 32, 64, 128, 256, 512, 1024, doc="destination tile columns")
    threads: int = choice(64, 128, 256, 512, 1024, doc="threads per block")
    vec_bytes: int = choice(2, 4, 8, 16, doc="bytes per vector access")
    tiles_per_block: int = choice(1, 2, 4, 8, 16, doc="consecutive tiles each block processes")


C = TypeVar("C", bound=TileConfig)
# the rules of every template (``TileTemplate.violations``)
TILE_RULES = (
    "vec_bytes_whole_elements",
    "vector_divides_tile",
    "vectors_split_over_threads",
    "shared_memory_fits",
    "grid_fits",
)


def vector_elements(problem: TileCopyProblem, config: TileConfig) -> int:
    """Elements per vector access (vec_bytes is a multiple of the element: the first rule)."""
    return config.vec_bytes // problem.itemsize


def element_ctype(problem: TileCopyProblem) -> CType:
    """The element's bits type in the kernel (``using T = unsigned short;``)."""
    return CType(element_type(problem.element).ctype)


def tile_members(problem: TileCopyProblem, config: TileConfig) -> dict[str, int | bool | CType]:
    """The members every configuration struct of tile_copy.cu, tile_copy_paired.cu and
    tile_copy_shifted.cu begins with: T, BM, BN, THREADS, VEC (a template adds its own)."""
    return {
        "T": element_ctype(problem),
        "BM": config.BM,
        "BN": config.BN,
        "THREADS": config.threads,
        "VEC": vector_elements(problem, config),
    }


def copy_args(problem: TileCopyProblem, config: TileConfig, reach: int = 0) -> tuple[Arg, ...]:
    """The members of the argument struct ``Cfg::Args`` of the kernels of tile_copy.cu,
    tile_copy_paired.cu, tile_copy_shifted.cu and tile_copy_windowed.cu, in order: ``operand_args``,
    then pad, tiles_n, n_tiles (``TileTemplate.tail_args``; ``reach`` as ``tile_counts``')."""
    return (*operand_args(problem), *TileTemplate.tail_args(problem, config, reach))


def operand_args(problem: TileCopyProblem) -> tuple[Arg, ...]:
    """The members every tile_copy kernel's argument struct begins with: src, dst (of the element's bits
    type ``T``), Ms, Ns, Md, Nd, oy, ox."""
    t = element_ctype(problem).name
    names = ("Ms", "Ns", "Md", "Nd", "oy", "ox")
    scalars = (*problem.src, *problem.dst, *problem.origin)
    return (
        BufferArg("src", f"const {t}"),
        BufferArg("dst", t),
        *(ScalarArg("i64", v, name) for name, v in zip(names, scalars, strict=True)),
    )


def pad_arg(problem: TileCopyProblem) -> ScalarArg:
    """The padding bits, of the element's bits type (member ``pad``)."""
    return ScalarArg("u32" if problem.itemsize == 4 else "u16", problem.pad_bits, "pad")


def tile_counts(problem: TileCopyProblem, config: TileConfig, reach: int = 0) -> tuple[int, int]:
    """Destination tiles down and across dst; ``reach``: how many columns before its nominal start a
    template's tile may start (the tiles across then reach that far past dst's last column)."""
    return math.ceil(problem.dst[0] / config.BM), math.ceil((problem.dst[1] + reach) / config.BN)


def pipeline_rule(rules: Rules, stages: int, tiles_per_block: int) -> None:
    """The rule of the templates that keep ``stages`` source blocks in flight (cp_async, tma)."""
    rules.require(
        "stages_within_tiles",
        stages <= tiles_per_block,
        f"stages={stages} exceeds tiles_per_block={tiles_per_block}: a block never has more source "
        "blocks in flight than it copies",
    )


def round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


class TileTemplate(KernelTemplate[TileCopyProblem, C]):
    """A tile_copy template: its own rules and shared-memory layout on top of the shared ones.
    ``reach``: columns before its nominal start a destination tile of this template may start
    (``tile_counts``)."""

    reach: ClassVar[int] = 0

    @abc.abstractmethod
    def own_rules(self, rules: Rules, problem: TileCopyProblem, config: C) -> None:
        """The rules of this template's own parameters and transport (``rule_names`` adds them to
        ``TILE_RULES``)."""

    @abc.abstractmethod
    def shared_bytes(self, problem: TileCopyProblem, config: C) -> int:
        """Dynamic shared memory per block."""

    def view(self, problem: TileCopyProblem) -> TileCopyProblem:
        """The problem this template's kernel computes (``problem`` itself unless a template's kernel
        takes ``TileCopyProblem.kernel_view``)."""
        return problem

    def violations(self, problem: TileCopyProblem, config: C) -> list[str]:
        problem = self.view(problem)
        size = problem.itemsize
        rules = Rules(self.name)
        if not whole_elements(rules, config.vec_bytes, size):
            return rules.broken
        vec = vector_elements(problem, config)
        rules.require(
            "vector_divides_tile",
            not (config.BN % vec or (problem.transpose and config.BM % vec)),
            f"a vector of {vec} elements must divide BN (and BM when transposed)",
        )
        vectors = config.BM * config.BN // vec
        rules.require(
            "vectors_split_over_threads",
            vectors >= config.threads and vectors % config.threads == 0,
            f"the tile's {vectors} vectors must split evenly over {config.threads} threads",
        )
        self.own_rules(rules, problem, config)
        shared = self.shared_bytes(problem, config)
        if shared:  # a template without shared memory has nothing to fit
            shared_memory_fits(rules, shared)
        blocks = self.geometry(problem, config).grid[0]
        rules.require(
            "grid_fits", blocks <= MAX_GRID_X, f"{blocks} blocks exceed the grid limit {MAX_GRID_X}: use larger tiles"
        )
        return rules.broken

    def geometry(self, problem: TileCopyProblem, config: C) -> LaunchGeometry:
        problem = self.view(problem)
        tiles_m, tiles_n = tile_counts(problem, config, self.reach)
        return LaunchGeometry(
            (math.ceil(tiles_m * tiles_n / config.tiles_per_block), 1, 1),
            (config.threads, 1, 1),
            self.shared_bytes(problem, config),
        )

    @staticmethod
    def tail_args(
        problem: TileCopyProblem, config: TileConfig, reach: int = 0
    ) -> tuple[ScalarArg, ScalarArg, ScalarArg]:
        """The members every kernel's argument struct ends with: pad (the padding bits, of the element's
        bits type), tiles_n (destination tiles per row), n_tiles (``reach`` as ``tile_counts``')."""
        tiles_m, tiles_n = tile_counts(problem, config, reach)
        return pad_arg(problem), ScalarArg("i64", tiles_n, "tiles_n"), ScalarArg("i64", tiles_m * tiles_n, "n_tiles")
