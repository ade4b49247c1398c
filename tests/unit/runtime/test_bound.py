"""A launch bound to its tensors (``bound.BoundLaunch``) on a stand-in for torch: the fast entry while
every tensor keeps its address, shape and contiguity and the stream stays; the full path otherwise.
Launches themselves are covered by tests/gpu/test_launch_gpu.py."""

from __future__ import annotations

import sys
import types

import pytest

from tunebox.runtime.bound import BoundLaunch, FastSource
from tunebox.runtime.fast_path import FastEntry
from tunebox.runtime.serving import Served


class _Tensor:
    def __init__(self, shape: tuple[int, ...], address: int) -> None:
        self.shape, self.address, self.contiguous = shape, address, True

    def data_ptr(self) -> int:
        return self.address

    def is_contiguous(self) -> bool:
        return self.contiguous

    def get_device(self) -> int:
        return 0


@pytest.fixture
def torch(monkeypatch):
    fake = types.ModuleType("torch")
    fake.current = 1000  # torch's current stream handle
    fake._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: fake.current + device)
    monkeypatch.setitem(sys.modules, "torch", fake)
    return fake


class _Calls:
    """A fast entry and a full path that record their calls."""

    def __init__(self, ran: bool = True) -> None:
        self.fast: list[tuple[int, tuple[int, ...]]] = []
        self.full = 0
        self.ran = ran
        self.served = Served("kernel", None, None, "fast")  # type: ignore[arg-type]

    def entry(self) -> FastEntry:
        def run(_arrays, stream, addresses) -> bool:
            self.fast.append((stream, addresses))
            return self.ran

        return FastEntry(self.served, run)

    def full_path(self) -> Served:
        self.full += 1
        return Served("kernel", None, None, "full")  # type: ignore[arg-type]


def bound(calls: _Calls, arrays, named_stream: bool = False, version=lambda: 0) -> BoundLaunch:
    entry = calls.entry()
    return BoundLaunch(arrays, 1000, named_stream, calls.full_path, FastSource(lambda: entry, version))


def test_unchanged_tensors_take_the_entry_with_their_bound_addresses(torch):
    calls, arrays = _Calls(), {"src": _Tensor((4, 5), 0x1000), "dst": _Tensor((5, 4), 0x2000)}
    again = bound(calls, arrays)
    assert again() is calls.served and again().explanation == "fast"
    assert calls.fast == [(1000, (0x1000, 0x2000))] * 2 and calls.full == 0


@pytest.mark.parametrize("change", ["address", "shape", "layout"])
def test_a_tensor_changed_in_place_takes_the_full_path(torch, change):
    calls, src = _Calls(), _Tensor((4, 4), 0x1000)
    again = bound(calls, {"src": src, "dst": _Tensor((4, 4), 0x2000)})
    if change == "address":
        src.address = 0x3000
    elif change == "shape":
        src.shape = (2, 8)
    else:
        src.contiguous = False  # t_() on a square matrix: same address and shape
    assert again().explanation == "full" and calls.fast == [] and calls.full == 1


def test_another_current_stream_takes_the_full_path_unless_one_was_named(torch):
    calls = _Calls()
    arrays = {"src": _Tensor((4, 4), 0x1000)}
    follows, named = bound(calls, arrays), bound(calls, arrays, named_stream=True)
    torch.current = 2000
    assert follows().explanation == "full"
    assert named() is calls.served  # the named stream is the one launched on, whatever torch's current is
    assert calls.full == 1 and calls.fast == [(1000, (0x1000,))]


def test_an_entry_that_declines_and_a_call_with_none_take_the_full_path(torch):
    declines = _Calls(ran=False)  # a plan encoded on its first addresses (tensor maps, graphs)
    assert bound(declines, {"src": _Tensor((4, 4), 0x1000)})().explanation == "full"
    assert declines.full == 1 and len(declines.fast) == 1
    none = _Calls()
    again = BoundLaunch({"x": object()}, 0, False, none.full_path)  # no fast entry: not torch tensors
    assert again().explanation == "full" and none.full == 1


def test_replaced_plans_take_the_full_path_once_then_the_new_entry(torch):
    """A background race's winner empties the launcher's fast table (its version moves): the next call
    goes through the full path, which makes the new entry, and the calls after use it."""
    calls, version = _Calls(), [0]
    again = bound(calls, {"src": _Tensor((4, 4), 0x1000)}, version=lambda: version[0])
    assert again() is calls.served
    version[0] = 1
    assert again().explanation == "full"
    assert again() is calls.served and again() is calls.served
    assert calls.full == 1 and len(calls.fast) == 3
