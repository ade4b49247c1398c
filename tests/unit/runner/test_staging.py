"""``PinnedStaging`` on a stand-in driver whose copies land at once in host memory: every byte of an
upload reaches its place, across chunk boundaries, and a pinned buffer is refilled only after the copy
that read it is waited for."""

from __future__ import annotations

import ctypes
import types

import numpy as np
import pytest

from tunebox.runner import staging


class _Driver:
    """cuMemHostAlloc, cuMemcpyHtoDAsync, cuEventCreate/Record/Synchronize on host memory; logs calls."""

    CUevent_flags = types.SimpleNamespace(CU_EVENT_DISABLE_TIMING=2)

    def __init__(self) -> None:
        self.keep: list[object] = []
        self.calls: list[tuple] = []

    def cuMemHostAlloc(self, size, flags):
        buffer = ctypes.create_string_buffer(size)
        self.keep.append(buffer)
        return 0, ctypes.addressof(buffer)

    def cuMemcpyHtoDAsync(self, dst, src, size, stream):
        ctypes.memmove(dst, src, size)
        self.calls.append(("copy", src, size))
        return (0,)

    def cuEventCreate(self, flags):
        return 0, len(self.keep)

    def cuEventRecord(self, event, stream):
        self.calls.append(("record", event))
        return (0,)

    def cuEventSynchronize(self, event):
        self.calls.append(("wait", event))
        return (0,)


class _Stream:
    handle = 7

    def sync(self) -> None:
        pass


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(staging, "CHUNK_BYTES", 1000)
    monkeypatch.setattr(staging, "MIN_BYTES", 1500)


@pytest.mark.parametrize("count", [1499, 1500, 2000, 2001, 4096, 7777])  # below the threshold, whole chunks, tails
def test_every_byte_lands_in_its_place(small_chunks, count):
    driver = _Driver()
    host = np.random.default_rng(count).integers(0, 2**16, count, dtype=np.uint16)
    device = np.zeros(count, dtype=np.uint16)
    staging.PinnedStaging(driver).upload(host, device.ctypes.data, _Stream())
    np.testing.assert_array_equal(device, host)
    copies = [c for c in driver.calls if c[0] == "copy"]
    assert sum(size for _, _, size in copies) == host.nbytes
    chunked = host.nbytes >= staging.MIN_BYTES
    assert len(copies) == (-(-host.nbytes // 1000) if chunked else 1)
    assert all(src != host.ctypes.data for _, src, _ in copies) == chunked  # from pinned buffers, else directly


def test_a_pinned_buffer_is_refilled_only_after_its_copy_is_waited_for(small_chunks, monkeypatch):
    driver = _Driver()
    copyto = np.copyto

    def fill(dst, src):  # the host's writes into a pinned buffer, logged
        driver.calls.append(("fill", dst.ctypes.data))
        copyto(dst, src)

    monkeypatch.setattr(staging.np, "copyto", fill)
    host = np.arange(5000, dtype=np.uint8)
    device = np.zeros(5000, dtype=np.uint8)
    staging.PinnedStaging(driver).upload(host, device.ctypes.data, _Stream())
    np.testing.assert_array_equal(device, host)
    buffers = sorted({c[1] for c in driver.calls if c[0] == "copy"})
    assert len(buffers) == staging.DEPTH

    def buffer_of(address: int) -> int:
        return max(b for b in buffers if b <= address)

    in_flight: dict[int, int] = {}  # event -> the pinned buffer whose copy it follows, until waited for
    source = None
    for call in driver.calls:
        if call[0] == "fill":
            assert buffer_of(call[1]) not in in_flight.values(), "a buffer refilled while its copy may read it"
        elif call[0] == "copy":
            source = call[1]
        elif call[0] == "record":
            in_flight[call[1]] = source
        else:
            in_flight.pop(call[1])
