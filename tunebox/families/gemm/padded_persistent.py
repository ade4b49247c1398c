"""Template ``padded_persistent``: the persistent kernel (``persistent.py``) on problems whose rows of A
or B are not 16-byte aligned: one ``pad_rows`` launch first copies those operands into workspace rows
that are (``padding.py``), then the persistent kernel reads the copies through its tensor maps; the
copies are timed with the product. D's rows are written as they are: with D's rows or N not whole
16-byte chunks, only the direct epilogue applies (``tma_epilogue_chunks``); no split-K (its workspace is
kept for aligned problems)."""

from __future__ import annotations

from typing import ClassVar

from ...rules import Rules
from ..base import CType, KernelLaunch
from .operation import GemmProblem
from .padding import HELPERS, PAD_RULES, pad_members, pad_prologue, pad_rules, padded_source
from .persistent import PersistentConfig, PersistentTemplate


class PaddedPersistentTemplate(PersistentTemplate):
    name = "padded_persistent"
    helpers: ClassVar[tuple[str, ...]] = HELPERS
    rule_names: ClassVar[tuple[str, ...]] = (
        *(rule for rule in PersistentTemplate.rule_names if rule != "rows_aligned"),
        *PAD_RULES,
    )

    def default(self, problem: GemmProblem) -> PersistentConfig | None:
        return None  # a searched template

    def alignment_rule(self, rules: Rules, problem: GemmProblem) -> None:
        pad_rules(rules, problem, "persistent")

    def operand_source(self, name: str, cols: int, ld: int) -> tuple[str, int]:
        return padded_source(name, cols, ld)

    def helper_members(self, problem: GemmProblem) -> dict[str, int | bool | CType]:
        return pad_members(problem)

    def prologue(self, problem: GemmProblem, config: PersistentConfig) -> tuple[KernelLaunch, ...]:
        return pad_prologue(problem)
