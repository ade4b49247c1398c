"""Template ``wgmma``: the Hopper kernel on the operands themselves (their rows must be 16-byte aligned)."""

from __future__ import annotations

from .operation import GemmProblem
from .tma_wgmma import TmaWgmmaTemplate


class WgmmaTemplate(TmaWgmmaTemplate):
    name = "wgmma"

    def alignment_violations(self, problem: GemmProblem) -> list[str]:
        if problem.unaligned():
            return [
                f"TMA needs 16-byte rows of A and B (lda, ldb multiples of 8; {problem.lda}, {problem.ldb}): "
                "use path 'padded'"
            ]
        return []

    def operand_source(self, name: str, cols: int, ld: int) -> tuple[str, int]:
        return name, ld
