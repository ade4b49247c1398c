"""The timing gate: a stream held until the host has queued a whole round of timed samples.

A sample is the time between two events around one launch, the L2 flushed before it; the host queues a
round's flushes, events and launches one after another. If the host stalls meanwhile (another thread
holding the interpreter lock, a garbage collection), the stream runs dry, and a sample whose begin event
ran before the stall counts the stall as kernel time. Seen on the H200: a 30 us quantize variant sampled at
0.56, 3.1 and 2.8 ms while the worker imported torch in a thread beside it, and cut from the search as
slow. The gate (``kernels/runtime/gate.cu``) is queued first, closed; the host opens it once the round is
queued, and the round then runs as one uninterrupted stretch of device work.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..build.nvrtc import NvrtcBuilder
from ..cuda_api import checked, load_kernel
from ..families.base import KernelSource
from ..kernels_dir import kernel_source

LIMIT_NS = 2_000_000_000  # the gate opens itself after this long (a host that died, a missed open)


class TimingGate:
    """``holding()``: the stream waits at the gate while the caller queues work, and runs it once the
    block is left (an exception included). The caller synchronises the stream before holding it again."""

    def __init__(self, driver: Any, stream: Any, arch: str, device_id: int) -> None:
        self._stream = stream
        host = int(checked(driver.cuMemHostAlloc(4, driver.CU_MEMHOSTALLOC_DEVICEMAP)))
        self._word = ctypes.c_uint32.from_address(host)
        self._device = np.uint64(int(checked(driver.cuMemHostGetDevicePointer(host, 0))))
        builder = NvrtcBuilder(arch, cache_dir=None, workers=1)
        built = builder.build_one(KernelSource(kernel_source("runtime/gate.cu"), "timing_gate", ()))
        builder.close()
        self._kernel = load_kernel(built.cubin, built.lowered_name, 0, device_id)

    @contextlib.contextmanager
    def holding(self, hold: bool = True) -> Iterator[None]:
        """Hold the stream at a closed gate for the block (nothing when ``hold`` is false)."""
        if not hold:
            yield
            return
        from cuda.core import LaunchConfig, launch

        self._word.value = 0
        launch(self._stream, LaunchConfig(grid=1, block=1), self._kernel, self._device, np.uint64(LIMIT_NS))
        try:
            yield
        finally:
            self._word.value = 1
