"""The timing gate (tunebox/runner/gate.py) keeps a host stall out of the samples: with a thread beside
the timing loop that holds the interpreter lock for milliseconds at a time, samples of a 64 MB memset
taken behind the gate stay at its quiet time, while the same rounds taken without the gate (the check
that the stall is real) count the stall."""

from __future__ import annotations

import contextlib
import statistics
import sys
import threading
from collections.abc import Iterator

import pytest

from tunebox.cuda_api import checked
from tunebox.runner.gpu_session import GpuSession
from tunebox.runner.timing import BenchConfig

pytestmark = pytest.mark.gpu
ROUNDS = BenchConfig(min_samples=10, max_samples=30, max_noise=0.0, warmup=1)
WORDS = 16 << 20  # 64 MB


class _Open:
    """A gate that never holds the stream (the loop as it was before the gate)."""

    @contextlib.contextmanager
    def holding(self, hold: bool = True) -> Iterator[None]:
        yield


@pytest.fixture(scope="module")
def session() -> GpuSession:
    return GpuSession()


@contextlib.contextmanager
def hog() -> Iterator[None]:
    """A thread that keeps the interpreter lock busy (pure Python work) in 5 ms turns."""
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            sum(range(100_000))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.005)
    thread = threading.Thread(target=spin, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(interval)


def memset_samples(session: GpuSession) -> list[float]:
    buffer = session.device.allocate(WORDS * 4, stream=session.stream)

    def launch() -> None:
        checked(session.driver.cuMemsetD32Async(int(buffer.handle), 7, WORDS, session.stream.handle))

    return list(session.time_interleaved([launch], ROUNDS)[0])


def test_a_stalled_host_stays_out_of_the_samples(session, monkeypatch):
    quiet = statistics.median(memset_samples(session))
    with hog():
        gated = memset_samples(session)
        monkeypatch.setattr(session, "gate", _Open())
        ungated = memset_samples(session)
    assert max(ungated) > 3 * quiet, f"the hog stalled nothing (ungated max {max(ungated):.4f} ms): no test"
    assert max(gated) < 1.5 * quiet, (quiet, sorted(gated)[-3:])
