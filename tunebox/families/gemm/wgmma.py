"""Template ``wgmma``: the Hopper kernel on the operands themselves (their rows must be 16-byte aligned)."""

from __future__ import annotations

from ...rules import Rules
from .operation import GemmProblem
from .tma_wgmma import WGMMA_RULES, TmaWgmmaTemplate


class WgmmaTemplate(TmaWgmmaTemplate):
    name = "wgmma"
    rule_names = (*WGMMA_RULES, "rows_aligned")

    def alignment_rule(self, rules: Rules, problem: GemmProblem) -> None:
        rules.require(
            "rows_aligned",
            not problem.unaligned(),
            f"TMA needs 16-byte rows of A and B (lda, ldb multiples of 8; {problem.lda}, {problem.ldb}): "
            "use path 'padded'",
        )

    def operand_source(self, name: str, cols: int, ld: int) -> tuple[str, int]:
        return name, ld
