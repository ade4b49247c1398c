"""tunebox.launch on CuPy arrays (``__cuda_array_interface__``) and on a DLPack-only producer, on the
device (issue 19 item 8): results bit for bit CuPy's own, on the legacy default stream and on a stream
of the caller's, and clear errors for what cannot be taken."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tunebox.errors import InvalidProblem
from tunebox.runtime.launch import Launcher

pytestmark = pytest.mark.gpu
WINNERS = Path(__file__).resolve().parents[2] / "results" / "winners.sqlite"


@pytest.fixture(scope="module")
def cupy():
    return pytest.importorskip("cupy")  # installed on the GPU host


@pytest.fixture(scope="module")
def launcher(tmp_path_factory):
    return Launcher(WINNERS, cache_dir=tmp_path_factory.mktemp("cubins"))


class DlpackOnly:
    """A producer seen only through DLPack (no ``__cuda_array_interface__``, not a torch tensor)."""

    def __init__(self, array) -> None:
        self._array = array

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_cupy_transpose_on_the_default_stream(launcher, cupy, dtype):
    a = cupy.random.standard_normal((1031, 777), dtype="float32").astype(dtype)
    b = cupy.full((777, 1031), np.nan, dtype=dtype)
    served = launcher("tile_copy", {"src": a, "dst": b}, use="tunebox", transpose=True)
    cupy.cuda.Device().synchronize()
    assert served.ran == "kernel"
    assert cupy.array_equal(b, cupy.ascontiguousarray(a.T))


def test_cupy_on_a_stream_of_the_callers(launcher, cupy):
    """The kernel runs on the given stream: ordered after the caller's fill on that stream."""
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        a = cupy.arange(4096 * 513, dtype="float32").reshape(4096, 513)
        b = cupy.empty((513, 4096), dtype="float32")
        launcher("tile_copy", {"src": a, "dst": b}, stream.ptr, use="tunebox", transpose=True)
    stream.synchronize()
    assert cupy.array_equal(b, a.T)


def test_cupy_gather_with_int64_indices(launcher, cupy):
    a = cupy.random.standard_normal((5000, 96), dtype="float32")
    idx = cupy.random.randint(0, 5000, size=3000, dtype="int64")
    out = cupy.empty((3000, 96), dtype="float32")
    launcher("gather", {"A": a, "idx": idx, "out": out}, use="tunebox")
    cupy.cuda.Device().synchronize()
    assert cupy.array_equal(out, a[idx])


def test_dlpack_only_producer(launcher, cupy):
    a = cupy.random.standard_normal((300, 4099), dtype="float32")
    b = cupy.zeros((300, 4099), dtype="float32")
    launcher("tile_copy", {"src": DlpackOnly(a), "dst": DlpackOnly(b)}, use="tunebox")
    cupy.cuda.Device().synchronize()
    assert cupy.array_equal(a, b)


def test_strided_cupy_views_are_refused(launcher, cupy):
    a = cupy.zeros((64, 128), dtype="float32")
    with pytest.raises(InvalidProblem, match="contiguous"):
        launcher("tile_copy", {"src": a[:, ::2], "dst": cupy.zeros((64, 64), dtype="float32")}, use="tunebox")
