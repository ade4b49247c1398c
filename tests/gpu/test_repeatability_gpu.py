"""Two sweeps of the same problem on the same GPU choose winners whose medians differ by less than
their measured noise (finalists re-timed interleaved, noise stored with each record)."""

from __future__ import annotations

import pytest

from tunebox.api import tune

pytestmark = pytest.mark.gpu
SWEEP = """
name = "repeat"
family = "tile_copy"
[search]
strategy = "exhaustive"
finalists = 3
[space]
template = ["vector"]
BM = [4, 8, 16]
BN = [128, 256, 512]
threads = [128, 256]
vec_bytes = [16]
bounds = ["split"]
staging = ["none"]
tiles_per_block = [1]
[[problems]]
name = "pad"
dtype = "bfloat16"
src = [8191, 8189]
dst = [8192, 8192]
"""


def test_two_sweeps_agree_within_noise(tmp_path):
    sweep = tmp_path / "repeat.toml"
    sweep.write_text(SWEEP)
    winners = [tune(sweep, backend="gpu", results=tmp_path / f"run{k}").problems[0].winner for k in (1, 2)]
    assert all(w is not None and w.timing is not None for w in winners)
    (m1, n1), (m2, n2) = ((w.timing.median_ms, w.timing.noise) for w in winners)
    assert n1 > 0 and n2 > 0
    assert abs(m1 - m2) <= m1 * n1 + m2 * n2, (winners[0].config, m1, n1, winners[1].config, m2, n2)
