"""The worker's uploads (``tunebox/runner/uploads.py``) on the GPU: arrays below and above the size whose
pages are locked for the copy, one starting at an odd address inside its allocation, and the same array
uploaded twice (its pages were unlocked after the first copy), each read back bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from tunebox.runner import uploads
from tunebox.runner.gpu_session import GpuSession

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def session() -> GpuSession:
    return GpuSession()


def round_trip(session: GpuSession, host: np.ndarray) -> np.ndarray:
    return session.download(session.upload(host), host.size, host.dtype)


@pytest.mark.parametrize("nbytes", [1 << 20, uploads.REGISTER_BYTES, 40_000_003])
def test_an_upload_lands_bit_for_bit(session, nbytes):
    host = np.random.default_rng(nbytes).integers(0, 256, nbytes, dtype=np.uint8)
    np.testing.assert_array_equal(round_trip(session, host), host)


def test_an_array_at_an_odd_address_and_the_same_array_twice(session):
    whole = np.random.default_rng(7).integers(0, 256, 30_000_011, dtype=np.uint8)
    part = whole[3:]  # contiguous, at an odd address inside whole's allocation
    assert part.ctypes.data % 2 == 1 and part.nbytes >= uploads.REGISTER_BYTES
    np.testing.assert_array_equal(round_trip(session, part), part)
    np.testing.assert_array_equal(round_trip(session, whole), whole)  # its pages unlocked after the first copy
