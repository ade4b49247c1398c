"""``tunebox ceilings`` on the device: both ceilings verified, and their rates physically possible
(under the H200's 4.8 TB/s HBM3e and its 989 TFLOP/s dense bf16 peak) yet near what the hardware gives."""

from __future__ import annotations

import pytest

from tunebox.ceilings import measure

pytestmark = pytest.mark.gpu

HBM_PEAK_GBPS = 4800.0  # H200 datasheet: bytes read + written cannot move faster
BF16_PEAK_TFLOPS = 989.0


def test_both_ceilings_are_verified_and_physically_possible():
    pytest.importorskip("torch")
    ceilings = measure(copy_bytes=256 << 20, matmul_size=4096)
    assert ceilings.copy.verified == "bit for bit"
    assert ceilings.matmul.verified.startswith("relative error")
    assert 0.5 * HBM_PEAK_GBPS < ceilings.copy.rate < HBM_PEAK_GBPS, ceilings.copy
    assert 0.3 * BF16_PEAK_TFLOPS < ceilings.matmul.rate < BF16_PEAK_TFLOPS, ceilings.matmul
    assert len(ceilings.copy.timing.samples_ms) >= 20 and len(ceilings.matmul.timing.samples_ms) >= 20
