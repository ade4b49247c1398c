"""Template ``padded``: for unaligned rows, one ``pad_rows`` launch first copies A and/or B into
workspace with rows of ``ceil(cols / 8) * 8`` elements (``padding.py``), then the wgmma kernel runs on
the copies; the copies are timed with the product."""

from __future__ import annotations

from .padding import PAD_RULES, PaddedOperands
from .tma_wgmma import WGMMA_RULES, TmaWgmmaTemplate


class PaddedTemplate(PaddedOperands, TmaWgmmaTemplate):
    name = "padded"
    aligned_path = "wgmma"
    rule_names = (*WGMMA_RULES, *PAD_RULES)
