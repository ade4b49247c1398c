"""Template ``padded``: for unaligned rows, one ``pad_rows`` launch first copies A and/or B into
workspace with rows of ``ceil(cols / 8) * 8`` elements (``padding.py``), then the wgmma kernel runs on
the copies; the copies are timed with the product."""

from __future__ import annotations

from ...rules import Rules
from ..base import CType, KernelLaunch
from .operation import GemmProblem
from .padding import HELPERS, PAD_RULES, pad_members, pad_prologue, pad_rules, padded_source
from .tma_wgmma import WGMMA_RULES, TmaWgmmaTemplate, WgmmaConfig


class PaddedTemplate(TmaWgmmaTemplate):
    name = "padded"
    helpers = HELPERS
    rule_names = (*WGMMA_RULES, *PAD_RULES)

    def alignment_rule(self, rules: Rules, problem: GemmProblem) -> None:
        pad_rules(rules, problem, "wgmma")

    def operand_source(self, name: str, cols: int, ld: int) -> tuple[str, int]:
        return padded_source(name, cols, ld)

    def helper_members(self, problem: GemmProblem) -> dict[str, int | bool | CType]:
        return pad_members(problem)

    def prologue(self, problem: GemmProblem, config: WgmmaConfig) -> tuple[KernelLaunch, ...]:
        return pad_prologue(problem)
