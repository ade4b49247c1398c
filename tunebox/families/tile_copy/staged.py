"""What the vector and cp_async templates (``kernels/tile_copy/tile_copy.cu``) and the paired template
share: the kernel view of the problem, the bounds modes and shared-memory staging layouts, their rules,
the staged source block's size, the configuration struct and the kernel arguments."""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import ClassVar, TypeVar

from ...rules import Rules
from ..base import Arg, CType, Instantiation, instantiate
from ..contract import choice
from .operation import TileCopyProblem
from .tiles import TILE_RULES, TileConfig, TileTemplate, copy_args, tile_members, vector_elements

BOUNDS = {"checked": 0, "split": 1, "unchecked": 2}  # tb::Bounds
STAGING = {"none": 0, "plain": 1, "padded": 2, "swizzled": 3}  # 0: registers only; else tb::Staging
MAX_SLOTS = 16  # aligned-window slots per thread and phase of the staged path (unrolled code size)
STAGED_RULES = (*TILE_RULES, "staged_slots_fit", "unchecked_needs_full_tiles")  # a template adds its transport's


@dataclass(frozen=True)
class StagedConfig(TileConfig):
    """The tile parameters, how tiles are bounds-checked and how they are staged in shared memory."""

    bounds: str = choice(*BOUNDS, doc="checked: every tile; split: edge tiles only; unchecked")
    staging: str = choice(*STAGING, doc="none: registers only; else the shared-memory layout")

    @property
    def staged(self) -> bool:
        return self.staging != "none"


S = TypeVar("S", bound=StagedConfig)


def staged_block_bytes(problem: TileCopyProblem, config: StagedConfig) -> int:
    """Bytes of one staged source block (BN x BM when transposed, else BM x BN) with the row pitch of
    staged_pitch (tile_copy.cu); 0 without staging."""
    if not config.staged:
        return 0
    itemsize = problem.itemsize
    rows, width = (config.BN, config.BM) if problem.transpose else (config.BM, config.BN)
    pad = (1 if itemsize >= 4 else 4 // itemsize) if config.staging == "padded" else 0
    return rows * (width + pad) * itemsize


def every_tile_full(problem: TileCopyProblem, config: StagedConfig) -> bool:
    """Whether every tile lies inside src, full and aligned (what bounds='unchecked' promises)."""
    vec = vector_elements(problem, config)
    r0, c0, h, w = problem.source_window()
    inside = r0 >= 0 and c0 >= 0 and r0 + h <= problem.src[0] and c0 + w <= problem.src[1]
    aligned = problem.src[1] % vec == 0 and c0 % vec == 0 and problem.dst[1] % vec == 0
    return inside and aligned and problem.dst[0] % config.BM == 0 and problem.dst[1] % config.BN == 0


class StagedTemplate(TileTemplate[S]):
    """A template of tile_copy.cu: its transport's rules and kernel on top of the staged-path rules."""

    kernel = "tile_copy/tile_copy.cu"
    kernel_name: ClassVar[str]  # the kernel template of tile_copy.cu

    def view(self, problem: TileCopyProblem) -> TileCopyProblem:
        """The kernels of tile_copy.cu take the problem's ``kernel_view``: degenerate shapes copy flat."""
        return problem.kernel_view

    @abc.abstractmethod
    def transport_rules(self, rules: Rules, problem: TileCopyProblem, config: S) -> None:
        """The rules of this template's transport."""

    def own_rules(self, rules: Rules, problem: TileCopyProblem, config: S) -> None:
        self.transport_rules(rules, problem, config)
        if config.staged:
            vec = vector_elements(problem, config)
            rows, width = (config.BN, config.BM) if problem.transpose else (config.BM, config.BN)
            slots = -(-rows * (width // vec + 1) // config.threads)
            rules.require(
                "staged_slots_fit", slots <= MAX_SLOTS, f"{slots} aligned-window slots per thread exceed {MAX_SLOTS}"
            )
        if config.bounds == "unchecked":
            rules.require(
                "unchecked_needs_full_tiles",
                every_tile_full(problem, config),
                "bounds='unchecked' needs every tile full, inside src and aligned",
            )

    def members(self, problem: TileCopyProblem, config: S) -> dict[str, int | bool | CType]:
        """The kernel's configuration struct (a template adds its own members)."""
        return {
            **tile_members(problem, config),
            "BOUNDS": BOUNDS[config.bounds],
            "STAGING": STAGING[config.staging],
            "TPB": config.tiles_per_block,
            "TRANSPOSE": problem.transpose,
            "SHARED_BYTES": self.shared_bytes(problem, config),
        }

    def render(self, problem: TileCopyProblem, config: S) -> Instantiation:
        return instantiate(self.kernel, self.kernel_name, self.members(self.view(problem), config))

    def args(self, problem: TileCopyProblem, config: S) -> tuple[Arg, ...]:
        """The members of the kernel's argument struct ``Cfg::Args`` (``copy_args``)."""
        return copy_args(self.view(problem), config)
