"""Template ``separable`` (the old ``scheme = "separable"``, which took ``staging = "shared"`` and
``vector = 1``): a reduction over the block's region staged in shared memory, each region row over TW
columns for every window column first, then those partial results over TH rows."""

from __future__ import annotations

from dataclasses import dataclass

from ...rules import Rules
from .layout import BLOCK_RULES, BlockConfig, Variant, WindowsTemplate
from .operation import WindowsProblem


@dataclass(frozen=True)
class SeparableConfig(BlockConfig):
    """A block's windows and threads: staging and the vector width are fixed (shared, 1)."""


class SeparableTemplate(WindowsTemplate[SeparableConfig]):
    name = "separable"
    config_type = SeparableConfig
    rule_names = ("needs_reduction", *BLOCK_RULES)

    def variant(self, config: SeparableConfig) -> Variant:
        return Variant(config.BI, config.BJ, config.threads, 1, True, True)

    def default(self, problem: WindowsProblem) -> None:
        """None: the untuned default walks each window (template ``direct``)."""
        return None

    def own_rules(self, rules: Rules, problem: WindowsProblem, config: SeparableConfig) -> None:
        rules.require(
            "needs_reduction",
            problem.reduces,
            "template 'separable' reduces the staged region: it needs a reduction (op sum, max or min), not unfold",
        )
