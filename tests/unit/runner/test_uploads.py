"""``upload_to`` on a stand-in driver whose copies land at once in host memory: which arrays are
page-locked for their copy, that the lock is always released, and that a refused lock still copies."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from tunebox.runner import uploads


class _Driver:
    def __init__(self, register_error: int = 0, copy_error: int = 0) -> None:
        self.register_error, self.copy_error = register_error, copy_error
        self.calls: list[str] = []

    def cuMemHostRegister(self, address, size, flags):
        self.calls.append("register")
        return (self.register_error,)

    def cuMemHostUnregister(self, address):
        self.calls.append("unregister")
        return (0,)

    def cuMemcpyHtoDAsync(self, dst, src, size, stream):
        self.calls.append("copy")
        if self.copy_error:
            return (self.copy_error,)
        ctypes.memmove(dst, src, size)
        return (0,)


class _Stream:
    handle = 7

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def sync(self) -> None:
        self.calls.append("sync")


def _upload(driver: _Driver, count: int) -> tuple[np.ndarray, np.ndarray]:
    host = np.random.default_rng(count).integers(0, 2**16, count, dtype=np.uint16)
    device = np.zeros_like(host)
    uploads.upload_to(driver, host, device.ctypes.data, _Stream(driver.calls))
    return host, device


@pytest.fixture
def small_threshold(monkeypatch):
    monkeypatch.setattr(uploads, "REGISTER_BYTES", 2000)


def test_a_large_array_is_locked_for_its_copy_and_released_after_it_lands(small_threshold):
    driver = _Driver()
    host, device = _upload(driver, 1000)  # 2000 bytes: at the threshold
    np.testing.assert_array_equal(device, host)
    assert driver.calls == ["register", "copy", "sync", "unregister"]


def test_a_small_array_is_copied_from_pageable_memory(small_threshold):
    driver = _Driver()
    host, device = _upload(driver, 999)
    np.testing.assert_array_equal(device, host)
    assert driver.calls == ["copy", "sync"]


def test_a_refused_lock_still_copies_and_unlocks_nothing(small_threshold):
    driver = _Driver(register_error=2)  # CUDA_ERROR_OUT_OF_MEMORY, say
    host, device = _upload(driver, 5000)
    np.testing.assert_array_equal(device, host)
    assert driver.calls == ["register", "copy", "sync"]


def test_a_failed_copy_releases_the_lock_and_raises(small_threshold):
    driver = _Driver(copy_error=1)
    with pytest.raises(RuntimeError, match="CUDA call failed"):
        _upload(driver, 5000)
    assert driver.calls == ["register", "copy", "unregister"]
