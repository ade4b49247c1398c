"""tunebox.launch on torch tensors: the tuned variant runs on the caller's arrays and stream."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunebox.runtime.launch import Launcher

pytestmark = pytest.mark.gpu
WINNERS = Path(__file__).resolve().parents[2] / "results" / "winners.sqlite"


@pytest.fixture(scope="module")
def torch():
    import torch  # on the GPU host only: the gpu marker's probe gates these tests

    return torch


@pytest.fixture(scope="module")
def launcher(tmp_path_factory):
    return Launcher(WINNERS, cache_dir=tmp_path_factory.mktemp("cubins"))


def test_exact_winner_copies(launcher, torch):
    a = torch.randn(16384, 16384, device="cuda")
    b = torch.full_like(a, float("nan"))
    answer = launcher("tile_copy", {"src": a, "dst": b})
    torch.cuda.synchronize()
    assert answer.source == "exact"
    assert torch.equal(a, b)


def test_unseen_shape_transposes_with_padding(launcher, torch):
    a = torch.randn(1001, 777, device="cuda", dtype=torch.bfloat16)
    b = torch.empty(780, 1003, device="cuda", dtype=torch.bfloat16)
    answer = launcher("tile_copy", {"src": a, "dst": b}, transpose=True, padding="neg_inf")
    torch.cuda.synchronize()
    assert answer.source in ("nearest", "default")
    expected = torch.full((780, 1003), float("-inf"), device="cuda", dtype=torch.bfloat16)
    expected[:777, :1001] = a.t()
    assert torch.equal(b, expected)


def test_shape_mismatch_is_refused(launcher, torch):
    a = torch.randn(64, 64, device="cuda")
    with pytest.raises(Exception, match="dst"):
        launcher("tile_copy", {"src": a, "dst": torch.empty(64, 64, device="cuda", dtype=torch.float16)})
