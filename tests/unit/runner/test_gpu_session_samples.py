"""How GpuSession queues its timed samples, without a GPU (a session whose stream, gate, flush and
poisoning only log what they are asked): every sample, a verification launch included, is the L2 flush,
an event, the launch and an event, in that order; a verification launch poisons the outputs first, all
of it behind a closed gate, with the clocks read before it and before the stream is waited on. The same
order runs on the H200 in tests/gpu/test_screening_gpu.py and test_timing_gate_gpu.py."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from tunebox.runner.gpu_session import GpuSession
from tunebox.runner.timing import BenchConfig


class _Event:
    def __init__(self, at: float) -> None:
        self.at = at

    def __sub__(self, other: _Event) -> float:
        return self.at - other.at


def logging_session() -> tuple[GpuSession, list[str]]:
    log: list[str] = []
    clock = iter(range(1000))

    def record(options: Any) -> _Event:
        log.append("event")
        return _Event(2.5 * next(clock))  # each sample: 2.5 ms between its events

    @contextlib.contextmanager
    def holding(hold: bool = True) -> Iterator[None]:
        log.append("gate closed" if hold else "gate open")
        yield
        if hold:
            log.append("gate opened")

    session = GpuSession.__new__(GpuSession)  # its device, stream and kernels need a GPU
    session.stream = SimpleNamespace(record=record, sync=lambda: log.append("sync"))
    session.gate = SimpleNamespace(holding=holding)
    session.flush_l2 = lambda: log.append("flush")  # type: ignore[method-assign]
    session.poison_outputs = lambda st: log.append("poison")  # type: ignore[method-assign]
    return session, log


def test_a_verification_launch_is_a_sample_behind_the_gate_after_the_poison() -> None:
    session, log = logging_session()
    ms = session.verification_launch(None, lambda: log.append("launch"), lambda: log.append("clocks"))
    assert ms == 2.5
    assert log == [
        "clocks",
        "gate closed",
        "poison",
        "flush",
        "event",
        "launch",
        "event",
        "gate opened",
        "clocks",
        "sync",
    ]


def test_a_round_queues_each_sample_as_flush_event_launch_event() -> None:
    session, log = logging_session()
    rounds = BenchConfig(min_samples=3, max_samples=3, warmup=0)
    (samples,) = session.time_interleaved([lambda: log.append("launch")], rounds)
    assert samples == (2.5, 2.5, 2.5)
    sample = ["flush", "event", "launch", "event"]
    assert log == ["gate closed", *sample * 3, "gate opened", "sync"]
