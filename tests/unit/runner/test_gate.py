"""The timing gate's host side (tunebox/runner/gate.py) without a GPU: ``holding()`` closes the gate (the
word 0) and queues the gate kernel on the session's stream before the block runs, opens it (the word 1)
when the block is left, an exception included, and does nothing at all when told not to hold. The kernel
itself compiles in test_runtime_kernels.py and holds a stream on the GPU in tests/gpu/test_timing_gate_gpu.py."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import pytest

from tunebox.runner.gate import LIMIT_NS, TimingGate


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> tuple[TimingGate, list[tuple[Any, ...]]]:
    launches: list[tuple[Any, ...]] = []
    word = ctypes.c_uint32(7)

    def launch(stream: Any, config: Any, kernel: Any, *args: Any) -> None:
        launches.append((stream, config.grid, config.block, kernel, word.value, *args))

    monkeypatch.setattr("cuda.core.launch", launch)
    g = TimingGate.__new__(TimingGate)  # the driver's mapped word and the NVRTC build need a GPU
    g._stream, g._kernel, g._device, g._word = "stream", "kernel", np.uint64(0xABC), word
    return g, launches


def test_the_gate_holds_the_block_and_opens_after_it(gate) -> None:
    g, launches = gate
    with g.holding():
        assert g._word.value == 0 and len(launches) == 1
    assert g._word.value == 1
    stream, grid, block, kernel, word_at_launch, device, limit = launches[0]
    assert (stream, grid, block, kernel, word_at_launch) == ("stream", (1, 1, 1), (1, 1, 1), "kernel", 0)
    assert (device, limit) == (0xABC, LIMIT_NS)


def test_the_gate_opens_when_the_block_raises(gate) -> None:
    g, _ = gate
    with pytest.raises(RuntimeError, match="launch failed"), g.holding():
        raise RuntimeError("launch failed")
    assert g._word.value == 1


def test_a_round_not_held_queues_no_gate(gate) -> None:
    g, launches = gate
    with g.holding(False):
        pass
    assert launches == [] and g._word.value == 7
