"""The fast path of ``Launcher``: repeated calls on torch tensors skip everything but shapes, types,
contiguity and pointers (see ``launch.py``'s module doc).

``torch_signature`` keys a call; a ``FastEntry`` runs it: a ``DirectLaunch`` rewrites the buffer
addresses of a kernel's argument struct in place and calls ``cuLaunchKernelEx`` through ctypes;
``on_addresses`` reruns launches encoded on fixed addresses (tensor maps, graphs) only for a call on
those addresses; ``library_runner`` runs the library call on a call's tensors.
"""

from __future__ import annotations

import ctypes
import functools
import sys
import threading
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from ..cuda_api import checked, pack
from ..families.base import Arg, BufferArg, LaunchGeometry, TensorMapArg
from ..families.kernel_args import ArgStruct
from .arrays import ALIGNMENT
from .serving import Served


def torch_signature(
    family_name: str, arrays: Mapping[str, Any], stream: int | None, use: str, options: Mapping[str, Any]
) -> tuple[Hashable, int, tuple[int, ...]] | None:
    """(fast-path key, stream handle, the arrays' addresses in their order) of a call whose arrays are
    all contiguous CUDA torch tensors and whose options are hashable; else None. The key holds every
    name, shape, type and device, the options, ``use``, the stream and whether every address is
    ``ALIGNMENT``-byte aligned: all a plan depends on but the addresses (read here, in the same pass)."""
    torch = sys.modules.get("torch")
    if torch is None or not arrays:
        return None
    tensor = torch.Tensor
    parts, addresses = [], []
    low_bits = 0  # the addresses or-ed: a bit below ALIGNMENT set in any of them shows
    for name, t in arrays.items():
        if not isinstance(t, tensor) or not t.is_contiguous():
            return None
        device = t.get_device()  # -1: on the host
        if device < 0:
            return None
        parts.append((name, t.shape, t.dtype, device))
        address = t.data_ptr()
        addresses.append(address)
        low_bits |= address
    if stream is None:
        stream = current_stream(torch, parts[0][3])
    # options in the call's order: another order is another key, never a wrong one
    settings = tuple(options.items()) if options else ()
    if settings:
        for _, value in settings:
            if type(value) is list:  # a list option is keyed as its tuple
                settings = tuple((k, tuple(v) if type(v) is list else v) for k, v in settings)
                break
        try:
            hash(settings)  # the rest of the key is hashable: names, shapes, dtypes, ints
        except TypeError:  # an unhashable option (an array of lengths, a nested list): the full path every call
            return None
    aligned = low_bits % ALIGNMENT == 0
    return (family_name, use, stream, tuple(parts), settings, aligned), stream, tuple(addresses)


def current_stream(torch: Any, device: int) -> int:
    """The handle of torch's current stream on ``device``."""
    raw = _raw_stream(torch)
    return int(raw(device)) if raw is not None else int(torch.cuda.current_stream(device).cuda_stream)


@functools.cache
def _raw_stream(torch: Any) -> Any:
    """torch's current-stream handle getter that makes no Stream object (None where it has none)."""
    return getattr(torch._C, "_cuda_getCurrentRawStream", None)


def repointable(args: tuple[Arg, ...]) -> bool:
    """Whether an argument struct changes with the caller's pointers only in its buffer addresses
    (tensor maps are encoded on their address: those plans take the full path when pointers change)."""
    return not any(isinstance(arg, TensorMapArg) for arg in args)


FastRun = Callable[[Mapping[str, Any], int, tuple[int, ...]], bool]
"""(the call's tensors, stream handle, their addresses in their order) -> ran (else: the full path)."""


@dataclass(frozen=True)
class FastEntry:
    served: Served
    run: FastRun


def on_addresses(
    arrays: Mapping[str, Any], run: Callable[[Mapping[str, Any], int, tuple[int, ...]], object]
) -> FastRun:
    """``run`` (launches encoded on ``arrays``' addresses) for later calls on the same addresses; other
    addresses take the full path. Keeps the addresses, not the arrays."""
    bound = tuple(array.data_ptr() for array in arrays.values())

    def again(call: Mapping[str, Any], stream: int, addresses: tuple[int, ...]) -> bool:
        if addresses != bound:
            return False
        run(call, stream, addresses)
        return True

    return again


def library_runner(call: Callable[[Mapping[str, Any]], None], stream: int | None) -> FastRun:
    """The library call on a call's tensors: on torch's current stream, or on ``stream`` when the
    caller named one."""
    named = None
    if stream is not None:
        import torch

        named = torch.cuda.ExternalStream(stream)

    def run(arrays: Mapping[str, Any], _stream: int, _addresses: tuple[int, ...]) -> bool:
        if named is None:
            call(arrays)
        else:
            with torch.cuda.stream(named):
                call(arrays)
        return True

    return run


def all_torch(arrays: Mapping[str, Any]) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and bool(arrays) and all(isinstance(a, torch.Tensor) for a in arrays.values())


class LaunchConfig(ctypes.Structure):
    """cuda.h's CUlaunchConfig: grid, block, dynamic shared bytes and stream of a launch; no attributes."""

    _fields_ = [
        ("grid", ctypes.c_uint * 3),
        ("block", ctypes.c_uint * 3),
        ("shared_bytes", ctypes.c_uint),
        ("stream", ctypes.c_void_p),
        ("attributes", ctypes.c_void_p),
        ("attribute_count", ctypes.c_uint),
    ]


class DirectLaunch:
    """One kernel whose argument struct is rewritten in place with a call's buffer addresses (8 bytes
    each, at 8-byte aligned offsets) and launched through ``cuLaunchKernelEx``, which copies the struct
    at launch. The launch's configuration is built once, here: the call passes four addresses, where
    cuLaunchKernel's eleven arguments cost ctypes a conversion each (the call alone 6.8 -> 5.1 us on the
    H200 host: results/benchmarks/launch_overhead_cuLaunchKernel.json, launch_overhead.json). ``names``:
    the call's buffers in the order of its addresses; the others (workspace) stay as ``pointers`` has them."""

    def __init__(
        self,
        kernel: Any,
        geometry: LaunchGeometry,
        args: tuple[Arg, ...],
        pointers: Mapping[str, int],
        stream: int,
        names: tuple[str, ...],
    ) -> None:
        from cuda.bindings import driver

        layout = ArgStruct.of("Args_t", args)
        packed = pack(args, pointers)
        members = zip(args, layout.members, strict=True)
        slots = [(member.offset, arg.name) for arg, member in members if isinstance(arg, BufferArg)]
        assert all(offset % 8 == 0 for offset, _ in slots), "C aligns a pointer member to 8 bytes"
        # (word index, position among the call's addresses)
        self._slots = tuple((offset // 8, names.index(name)) for offset, name in slots if name in names)
        self._storage = ctypes.create_string_buffer(packed.data, len(packed.data))
        self._words = (ctypes.c_uint64 * (len(packed.data) // 8)).from_buffer(self._storage)
        self._parameters = (ctypes.c_void_p * 1)(ctypes.addressof(self._storage))
        function = int(checked(driver.cuKernelGetFunction(kernel.handle)))
        self._config = LaunchConfig(
            (ctypes.c_uint * 3)(*geometry.grid), (ctypes.c_uint * 3)(*geometry.block), geometry.shared_bytes, stream
        )
        self._launch = functools.partial(
            _driver_launch(), ctypes.addressof(self._config), function, ctypes.addressof(self._parameters), None
        )
        self._lock = threading.Lock()
        self._written: tuple[int, ...] | None = None  # the call's addresses the struct holds (None: the first)

    def run(self, _arrays: Mapping[str, Any], _stream: int, addresses: tuple[int, ...]) -> bool:
        with self._lock:  # the struct is shared: one writer-and-launcher at a time
            if addresses != self._written:  # a loop on the same buffers rewrites nothing
                words = self._words
                for index, position in self._slots:
                    words[index] = addresses[position]
                self._written = addresses
            err = self._launch()
        if err != 0:
            raise RuntimeError(f"cuLaunchKernelEx failed: CUresult {err}")
        return True


@functools.cache
def _driver_launch() -> Any:
    """``cuLaunchKernelEx(config, function, kernelParams, extra)`` of the driver library cuda.bindings
    loaded, called through ctypes with raw addresses (the bindings' own call converts each argument to
    its handle type first). The host time of whole cached launches, and of this call alone, is
    measured in results/benchmarks/launch_overhead.json."""
    library = ctypes.CDLL("libcuda.so.1", mode=ctypes.RTLD_GLOBAL)
    launch = library.cuLaunchKernelEx
    launch.restype = ctypes.c_int
    launch.argtypes = [ctypes.c_void_p] * 4
    return launch
