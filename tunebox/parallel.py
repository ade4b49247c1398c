"""Host-side parallelism for gigabyte numpy work (inputs and references of big problems).

numpy releases the GIL inside its loops and bit generators, so threads over disjoint slices scale
with the cores (the GPU host has 16). A chunked result never depends on the number of threads.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numpy.typing import DTypeLike

FILL_CHUNK_BYTES = 64 << 20  # bytes per thread task of `filled`


def for_each_chunk(count: int, chunk: int, work: Callable[[int, int], None]) -> None:
    """Call ``work(start, stop)`` for consecutive slices of ``range(count)`` of ``chunk`` items (the
    last one shorter), on up to one thread per core. ``work`` must touch only its own slice."""
    starts = range(0, count, chunk)
    if len(starts) <= 1:
        for start in starts:
            work(start, min(start + chunk, count))
        return
    with ThreadPoolExecutor(max_workers=min(len(starts), os.cpu_count() or 1)) as pool:
        list(pool.map(lambda start: work(start, min(start + chunk, count)), starts))


def filled(shape: tuple[int, ...], value: object, dtype: DTypeLike) -> np.ndarray:
    """``np.full(shape, value, dtype)`` written in slices on all cores: the first touch of a
    gigabyte array's pages dominates a one-thread fill."""
    out = np.empty(shape, dtype=dtype)
    flat = out.reshape(-1)

    def fill(start: int, stop: int) -> None:
        flat[start:stop] = value

    for_each_chunk(flat.size, max(1, FILL_CHUNK_BYTES // out.itemsize), fill)
    return out
