"""Template ``padded_persistent``: the persistent kernel (``persistent.py``) on problems whose rows of A
or B are not 16-byte aligned: one ``pad_rows`` launch first copies those operands into workspace rows
that are (``padding.py``), then the persistent kernel reads the copies through its tensor maps; the
copies are timed with the product. D's rows are written as they are: with D's rows or N not whole
16-byte chunks, the direct or staged epilogue applies, not TMA stores (``tma_epilogue_chunks``); no
split-K (its workspace is kept for aligned problems)."""

from __future__ import annotations

from typing import ClassVar

from .operation import GemmProblem
from .padding import PAD_RULES, PaddedOperands
from .persistent import PersistentConfig, PersistentTemplate


class PaddedPersistentTemplate(PaddedOperands, PersistentTemplate):
    name = "padded_persistent"
    aligned_path = "persistent"
    rule_names: ClassVar[tuple[str, ...]] = (
        *(rule for rule in PersistentTemplate.rule_names if rule != "rows_aligned"),
        *PAD_RULES,
    )

    def default(self, problem: GemmProblem) -> PersistentConfig | None:
        return None  # a searched template
