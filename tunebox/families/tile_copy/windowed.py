"""Template ``windowed``: a transpose of 2-byte elements for rows of any alignment
(``kernels/tile_copy/tile_copy_windowed.cu``, ``tile_copy_windowed``).

Destination tiles are sector-aligned: along each destination row a tile starts up to ``SECTOR - 1``
columns before its nominal column, where the row's flat offset is a multiple of 32 bytes, so each
sector of dst is written whole by one block (on odd rows a sector written in two parts by two blocks
costs the memory a read). Each source row the tile needs is staged as it lies in memory, its
sector-aligned window of ``BM + SECTOR`` elements in aligned vectors (windows starting mid-sector
cost L2 1.4 times the read sectors: results/README.md, thirtieth session); each destination vector
then reads its elements from the stage, one 2-byte shared load each at the row's own offset into its
window, and is stored in one aligned access. Where ``paired`` shifts every misaligned vector into
place in registers (dozens of instructions an element on odd rows), this reads each element where it
lies. Tiles that read padding stage element by element; no bounds mode. ``staging``: the staged
row's pitch, ``plain`` (the window) or ``padded`` (one word more: an odd number of words, so a
warp's two vectors of a destination row read other banks). ``stages``: a block's tiles go through a
ring of that many stages, the windows of the next ``stages - 1`` tiles in flight by cp.async while
one is stored (plain pitch: cp.async moves aligned 16-byte vectors)."""

from __future__ import annotations

from dataclasses import dataclass

from ...rules import Rules
from ..base import Arg, Instantiation, instantiate
from ..contract import choice
from .operation import TileCopyProblem
from .staged import MAX_SLOTS
from .tiles import (
    TILE_RULES,
    TileConfig,
    TileTemplate,
    copy_args,
    pipeline_rule,
    round_up,
    tile_members,
    vector_elements,
)

ELEMENT = 2  # bytes
WORD = 4  # bytes: the smallest vector
SECTOR = 16  # elements (32 bytes): the kernel's SECTOR
MAX_ELEMENT_LOADS = 8 * MAX_SLOTS  # element loads per thread of an edge tile's staging (unrolled code size)


@dataclass(frozen=True)
class WindowedConfig(TileConfig):
    """The tile parameters and the staged row's pitch."""

    staging: str = choice("plain", "padded", doc="the staged row's pitch: the window, or one word more")
    stages: int = choice(1, 2, 3, doc="stages in the ring: tiles staged ahead of the stores, plus one")


def pitch_bytes(problem: TileCopyProblem, config: WindowedConfig) -> int:
    """Bytes per staged row: the sector-aligned window of BM + SECTOR elements (whole sectors), one
    word more when padded."""
    return ELEMENT * (config.BM + SECTOR) + (WORD if config.staging == "padded" else 0)


def stage_bytes(problem: TileCopyProblem, config: WindowedConfig) -> int:
    """Bytes of one stage: the BN + SECTOR - 1 source rows a tile reads, of ``pitch_bytes``, rounded
    up to 16 (the next stage's vectors stay aligned)."""
    return round_up((config.BN + SECTOR - 1) * pitch_bytes(problem, config), 16)


class WindowedTemplate(TileTemplate[WindowedConfig]):
    name = "windowed"
    config_type = WindowedConfig
    reach = SECTOR - 1
    kernel = "tile_copy/tile_copy_windowed.cu"
    kernel_name = "tile_copy_windowed"
    rule_names = (
        *TILE_RULES,
        "windowed_two_byte_elements",
        "windowed_needs_transpose",
        "windowed_whole_words",
        "windowed_whole_sectors",
        "windowed_slots_fit",
        "stages_within_tiles",
        "windowed_async_needs_plain",
    )

    def view(self, problem: TileCopyProblem) -> TileCopyProblem:
        """The problem's ``kernel_view``: a transpose with a unit dimension is a copy (not this
        template's)."""
        return problem.kernel_view

    def default(self, problem: TileCopyProblem) -> None:
        return None

    def own_rules(self, rules: Rules, problem: TileCopyProblem, config: WindowedConfig) -> None:
        rules.require(
            "windowed_two_byte_elements",
            problem.itemsize == ELEMENT,
            f"template 'windowed' reads 2-byte elements from its stage, not {problem.itemsize}-byte ones",
        )
        rules.require(
            "windowed_needs_transpose",
            problem.transpose,
            "template 'windowed' transposes: a copy of misaligned rows is template 'shifted''s",
        )
        rules.require(
            "windowed_whole_words",
            config.vec_bytes >= WORD,
            f"a staged window moves in vectors of whole words: vec_bytes={config.vec_bytes} is too small",
        )
        rules.require(
            "windowed_whole_sectors",
            config.BN % SECTOR == 0,
            f"a tile's destination rows are whole {2 * SECTOR}-byte sectors: BN={config.BN} is not a "
            f"multiple of {SECTOR}",
        )
        vec = vector_elements(problem, config)
        rows = config.BN + SECTOR - 1  # the source rows a tile stages
        loads = -(-rows * ((config.BM + SECTOR) // vec) // config.threads)
        stores = -(-config.BM * config.BN // vec // config.threads)
        elements = -(-rows * config.BM // config.threads)
        pipeline_rule(rules, config.stages, config.tiles_per_block)
        rules.require(
            "windowed_async_needs_plain",
            config.stages == 1 or config.staging == "plain",
            f"stages={config.stages} stages windows by cp.async, which needs the plain pitch (aligned vectors)",
        )
        rules.require(
            "windowed_slots_fit",
            max(loads, stores) <= MAX_SLOTS and elements <= MAX_ELEMENT_LOADS,
            f"{max(loads, stores)} aligned-window slots per thread (at most {MAX_SLOTS}) or {elements} "
            f"element loads per thread of an edge tile (at most {MAX_ELEMENT_LOADS}): a smaller tile or "
            "more threads",
        )

    def shared_bytes(self, problem: TileCopyProblem, config: WindowedConfig) -> int:
        """The ring: ``stages`` stages of ``stage_bytes``."""
        return config.stages * stage_bytes(problem, config)

    def render(self, problem: TileCopyProblem, config: WindowedConfig) -> Instantiation:
        view = self.view(problem)
        members = {
            **tile_members(view, config),
            "TPB": config.tiles_per_block,
            "PITCH": pitch_bytes(view, config),
            "STAGES": config.stages,
            "STAGE_BYTES": stage_bytes(view, config),
        }
        return instantiate(self.kernel, self.kernel_name, members)

    def args(self, problem: TileCopyProblem, config: WindowedConfig) -> tuple[Arg, ...]:
        """The members of the kernel's argument struct ``Cfg::Args`` (``copy_args``)."""
        return copy_args(self.view(problem), config, self.reach)
