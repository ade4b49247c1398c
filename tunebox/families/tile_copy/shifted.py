"""Template ``shifted``: a copy (not a transpose) whose destination rows move in aligned vectors, the
source shifted into place in registers (``kernels/tile_copy/tile_copy_shifted.cu``,
``tile_copy_shifted``).

Each row segment of a destination tile is covered by aligned-window slots; a slot's elements come from
the two aligned source vectors that hold them, funnel-shifted by the row's offset between source and
destination. Loads and stores are whole aligned vectors whatever the alignment of the rows and the
origin (crops, pads of odd widths, flat views from any offset); tiles that read padding move element by
element. No shared memory, no bounds mode: each tile's path is chosen at run time."""

from __future__ import annotations

from dataclasses import dataclass

from ...rules import Rules
from ..base import Arg, Instantiation, instantiate
from .operation import TileCopyProblem
from .staged import MAX_SLOTS
from .tiles import TILE_RULES, TileConfig, TileTemplate, copy_args, tile_members, vector_elements

WORD = 4  # bytes: the funnel shifts whole words, then bytes


@dataclass(frozen=True)
class ShiftedConfig(TileConfig):
    """The tile parameters only."""


class ShiftedTemplate(TileTemplate[ShiftedConfig]):
    name = "shifted"
    config_type = ShiftedConfig
    kernel = "tile_copy/tile_copy_shifted.cu"
    kernel_name = "tile_copy_shifted"
    rule_names = (
        *(rule for rule in TILE_RULES if rule != "shared_memory_fits"),  # no shared memory
        "shifted_copies_only",
        "shifted_whole_words",
        "shifted_slots_fit",
    )

    def view(self, problem: TileCopyProblem) -> TileCopyProblem:
        """The problem's ``kernel_view`` (as the other templates' kernels take it): degenerate shapes
        copy flat."""
        return problem.kernel_view

    def default(self, problem: TileCopyProblem) -> None:
        return None

    def own_rules(self, rules: Rules, problem: TileCopyProblem, config: ShiftedConfig) -> None:
        rules.require(
            "shifted_copies_only",
            not problem.transpose,
            "template 'shifted' moves rows as they are: a transpose needs vector, cp_async, tma or paired",
        )
        rules.require(
            "shifted_whole_words",
            config.vec_bytes % WORD == 0,
            f"the shift moves whole {WORD}-byte words: vec_bytes={config.vec_bytes} is too small",
        )
        slots = -(-config.BM * (config.BN // vector_elements(problem, config) + 1) // config.threads)
        rules.require(
            "shifted_slots_fit", slots <= MAX_SLOTS, f"{slots} aligned-window slots per thread exceed {MAX_SLOTS}"
        )

    def shared_bytes(self, problem: TileCopyProblem, config: ShiftedConfig) -> int:
        return 0

    def render(self, problem: TileCopyProblem, config: ShiftedConfig) -> Instantiation:
        members = {**tile_members(self.view(problem), config), "TPB": config.tiles_per_block}
        return instantiate(self.kernel, self.kernel_name, members)

    def args(self, problem: TileCopyProblem, config: ShiftedConfig) -> tuple[Arg, ...]:
        """The members of the kernel's argument struct ``Cfg::Args`` (``copy_args``)."""
        return copy_args(self.view(problem), config)
