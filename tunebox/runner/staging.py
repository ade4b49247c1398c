"""Large uploads through pinned host buffers: the worker's inputs and references (hundreds of MB to GB).

A copy from pageable memory is staged by the driver through its own small pinned buffers, one thread,
about 6 GB/s on the H200 host (a 1.66 GB problem's two uploads took about 0.55 s of its 1.17 s
prepare). Here the host copies each chunk into one of ``depth`` pinned buffers, split over ``threads``
threads (numpy's contiguous copy runs without the GIL), while the DMA engine moves the chunk before it.
"""

from __future__ import annotations

import ctypes
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ..cuda_api import checked

CHUNK_BYTES = 32 << 20
DEPTH = 2  # pinned buffers in flight: one filled by the host while the other's copy runs
THREADS = 4  # host threads filling a chunk
MIN_BYTES = 16 << 20  # smaller arrays go the driver's way: a chunk of ours would not pay for itself


class PinnedStaging:
    """``DEPTH`` pinned buffers of ``CHUNK_BYTES`` with an event each, allocated on the first large
    upload and kept for the process (the worker's life)."""

    def __init__(self, driver: Any) -> None:
        self._driver = driver
        self._slots: list[tuple[np.ndarray, int, Any]] = []  # (host view, host address, event)
        self._pool: ThreadPoolExecutor | None = None

    def upload(self, host: np.ndarray, address: int, stream: Any) -> None:
        """Copy contiguous ``host`` to device ``address`` in ``stream``'s order; complete on return."""
        data = host.reshape(-1).view(np.uint8)
        if data.nbytes < MIN_BYTES:
            checked(self._driver.cuMemcpyHtoDAsync(address, host.ctypes.data, host.nbytes, stream.handle))
            stream.sync()
            return
        self._allocate()
        assert self._pool is not None
        for index, start in enumerate(range(0, data.nbytes, CHUNK_BYTES)):
            view, pinned, event = self._slots[index % DEPTH]
            if index >= DEPTH:  # the copy that last read this buffer is done before it is refilled
                checked(self._driver.cuEventSynchronize(event))
            part = data[start : start + CHUNK_BYTES]
            target = view[: part.nbytes]
            step = -(-part.nbytes // THREADS)
            starts = range(0, part.nbytes, step)
            list(self._pool.map(np.copyto, [target[i : i + step] for i in starts], [part[i : i + step] for i in starts]))
            checked(self._driver.cuMemcpyHtoDAsync(address + start, pinned, part.nbytes, stream.handle))
            checked(self._driver.cuEventRecord(event, stream.handle))
        stream.sync()

    def _allocate(self) -> None:
        if self._slots:
            return
        flags = self._driver.CUevent_flags.CU_EVENT_DISABLE_TIMING
        for _ in range(DEPTH):
            pinned = int(checked(self._driver.cuMemHostAlloc(CHUNK_BYTES, 0)))
            view = np.ctypeslib.as_array((ctypes.c_uint8 * CHUNK_BYTES).from_address(pinned))
            self._slots.append((view, pinned, checked(self._driver.cuEventCreate(flags))))
        self._pool = ThreadPoolExecutor(THREADS, thread_name_prefix="tunebox-staging")
