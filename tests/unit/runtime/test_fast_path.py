"""The fast path's key (``fast_path.torch_signature``) on a stand-in for torch: what it holds, and which
calls take the full path. Launches themselves are covered by tests/gpu/test_launch_gpu.py."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from tunebox.runtime.fast_path import on_addresses, torch_signature


class _Tensor:
    def __init__(
        self,
        shape: tuple[int, ...],
        dtype: str = "float32",
        device: int = 0,
        contiguous: bool = True,
        address: int = 0x1000,
    ):
        self.shape, self.dtype, self._device, self._contiguous = shape, dtype, device, contiguous
        self._address = address

    def data_ptr(self) -> int:
        return self._address

    def is_contiguous(self) -> bool:
        return self._contiguous

    def get_device(self) -> int:
        return self._device


@pytest.fixture
def torch(monkeypatch):
    fake = types.ModuleType("torch")
    fake.Tensor = _Tensor
    fake._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: 1000 + device)
    monkeypatch.setitem(sys.modules, "torch", fake)
    return fake


def key(arrays, stream=None, use="auto", **options):
    signature = torch_signature("tile_copy", arrays, stream, use, options)
    return None if signature is None else signature[0]


def test_the_key_holds_shapes_types_devices_stream_use_and_options(torch):
    arrays = {"src": _Tensor((4, 5)), "dst": _Tensor((5, 4))}
    base = key(arrays, transpose=True)
    assert base is not None and base == key(dict(arrays), transpose=True)
    assert torch_signature("tile_copy", arrays, None, "auto", {})[1] == 1000  # torch's current stream on device 0
    others = [
        key({"src": _Tensor((4, 6)), "dst": _Tensor((5, 4))}, transpose=True),
        key({"src": _Tensor((4, 5), "float16"), "dst": _Tensor((5, 4))}, transpose=True),
        key({"src": _Tensor((4, 5), device=1), "dst": _Tensor((5, 4), device=1)}, transpose=True),
        key(arrays, stream=7, transpose=True),
        key(arrays, use="tunebox", transpose=True),
        key(arrays, transpose=False),
        key(arrays),
    ]
    assert None not in others and len({base, *others}) == len(others) + 1


def test_a_list_option_is_keyed_as_its_tuple(torch):
    arrays = {"src": _Tensor((4, 5)), "dst": _Tensor((4, 8))}
    assert key(arrays, pad=[0, 3]) == key(arrays, pad=(0, 3)) is not None


def test_calls_the_fast_path_cannot_key_take_the_full_path(torch):
    good = _Tensor((4, 5))
    assert key({"src": good, "dst": _Tensor((5, 4), contiguous=False)}) is None
    assert key({"src": good, "dst": _Tensor((5, 4), device=-1)}) is None  # a host tensor
    assert key({"src": good, "dst": np.zeros((5, 4))}) is None  # not a torch tensor
    assert key({"src": good}, lengths=np.arange(3)) is None  # an unhashable option
    assert key({"src": good}, lengths=[[1, 2], [3]]) is None  # a nested list
    assert key({}) is None


def test_the_signature_carries_the_addresses_in_the_arrays_order(torch):
    arrays = {"src": _Tensor((4, 5), address=0x2000), "dst": _Tensor((5, 4), address=0x1000)}
    assert torch_signature("tile_copy", arrays, None, "auto", {})[2] == (0x2000, 0x1000)


def test_the_key_says_whether_every_address_is_16_byte_aligned(torch):
    """A plan for aligned arrays (a kernel) is never reused for a call with a view from an offset."""

    def at(src, dst):
        return key({"src": _Tensor((4, 5), address=src), "dst": _Tensor((5, 4), address=dst)})

    assert at(0x2000, 0x1000) == at(0x3000, 0x1010)
    assert at(0x2004, 0x1000) == at(0x2000, 0x1002) != at(0x2000, 0x1000)


def test_a_launch_on_fixed_addresses_runs_only_on_those(torch):
    """``on_addresses``: a call on the plan's own addresses runs; any other takes the full path."""
    arrays = {"src": _Tensor((4, 5), address=0x2000), "dst": _Tensor((5, 4), address=0x1000)}
    ran = []
    again = on_addresses(arrays, lambda call, stream, addresses: ran.append((stream, addresses)))
    assert again(arrays, 7, (0x2000, 0x1000)) and ran == [(7, (0x2000, 0x1000))]
    assert not again(arrays, 7, (0x3000, 0x1000)) and not again(arrays, 7, (0x1000, 0x2000))
    assert len(ran) == 1


def test_without_torch_there_is_no_fast_path(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert key({"src": object()}) is None


def test_the_launch_configuration_is_cuda_h_s_byte_for_byte():
    """``LaunchConfig`` (what the fast path hands cuLaunchKernelEx) holds the same bytes as the
    CUlaunchConfig cuda.bindings builds from the same grid, block, shared bytes and stream."""
    import ctypes

    from cuda.bindings import driver

    from tunebox.runtime.fast_path import LaunchConfig

    grid, block, shared, stream = (3, 5, 7), (32, 2, 1), 49152, 0x1234ABCD5678
    ours = LaunchConfig((ctypes.c_uint * 3)(*grid), (ctypes.c_uint * 3)(*block), shared, stream)
    theirs = driver.CUlaunchConfig()
    theirs.gridDimX, theirs.gridDimY, theirs.gridDimZ = grid
    theirs.blockDimX, theirs.blockDimY, theirs.blockDimZ = block
    theirs.sharedMemBytes, theirs.hStream = shared, driver.CUstream(stream)
    assert bytes(ours) == ctypes.string_at(theirs.getPtr(), ctypes.sizeof(LaunchConfig))
