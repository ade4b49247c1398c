"""Template ``paired``: a transpose of 2-byte elements whose shared-memory transpose moves 32-bit words
(``kernels/tile_copy/tile_copy_paired.cu``, ``tile_copy_paired``).

A thread loads the same columns of two consecutive source rows and packs each column's two elements
into one word (``__byte_perm``): the two neighbouring elements of one destination row. The staged tile
of words (``BN / 2`` rows of ``BM`` words, in the ``staging`` layout of 4-byte words) is transposed and
stored like a 4-byte one, in vectors along destination rows. Rows of any alignment move in aligned
vectors (the second row's shifted into place in registers); bounds modes as the vector template's."""

from __future__ import annotations

from dataclasses import dataclass

from ...rules import Rules
from ..contract import choice
from .operation import TileCopyProblem
from .staged import STAGED_RULES, STAGING, StagedConfig, StagedTemplate

WORD = 4  # bytes of a staged pair


@dataclass(frozen=True)
class PairedConfig(StagedConfig):
    """The staged-path parameters; the tile is always staged (as words)."""

    staging: str = choice(*list(STAGING)[1:], doc="the shared-memory layout of the staged words")


class PairedTemplate(StagedTemplate[PairedConfig]):
    name = "paired"
    config_type = PairedConfig
    kernel = "tile_copy/tile_copy_paired.cu"
    kernel_name = "tile_copy_paired"
    rule_names = (*STAGED_RULES, "paired_two_byte_elements", "paired_needs_transpose", "paired_whole_words")

    def default(self, problem: TileCopyProblem) -> None:
        return None

    def transport_rules(self, rules: Rules, problem: TileCopyProblem, config: PairedConfig) -> None:
        rules.require(
            "paired_two_byte_elements",
            problem.itemsize == 2,
            f"template 'paired' pairs 2-byte elements into words, not {problem.itemsize}-byte ones",
        )
        rules.require(
            "paired_needs_transpose",
            problem.transpose,
            "template 'paired' pairs source rows of a transpose: a copy has none to pair",
        )
        rules.require(
            "paired_whole_words",
            config.vec_bytes >= WORD,
            f"a pair of rows moves vectors of whole words: vec_bytes={config.vec_bytes} is too small",
        )

    def shared_bytes(self, problem: TileCopyProblem, config: PairedConfig) -> int:
        """The staged word tile: BN / 2 rows (source row pairs) of BM words, one word more per row when
        padded."""
        return config.BN // 2 * (config.BM + (config.staging == "padded")) * WORD
