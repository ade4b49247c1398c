"""The one thin layer over cuda.core / cuda.bindings used by the GPU worker and by ``launch``.

Importing this module does not touch CUDA; its functions do (call them only in a process that
owns a CUDA context: the GPU worker, or an application launching tuned kernels).
"""

from __future__ import annotations

import ctypes
import dataclasses
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .families.base import Arg, BufferArg, LaunchGeometry, TensorMapArg
from .families.kernel_args import ArgStruct
from .tma import encode

DEFAULT_SHARED_BYTES = 48 * 1024  # dynamic shared memory a kernel gets without opting in
SCALAR_TYPES: dict[str, type[np.generic]] = {
    "i32": np.int32,
    "i64": np.int64,
    "u16": np.uint16,
    "u32": np.uint32,
    "f32": np.float32,
}


def checked(result: tuple[Any, ...]) -> Any:
    """Unpack a cuda.bindings result ``(error, *values)``, raising on a non-zero error."""
    err, *values = result
    if int(err) != 0:
        raise RuntimeError(f"CUDA call failed: {err!r}")
    return values[0] if len(values) == 1 else (tuple(values) or None)


def load_kernel(cubin: bytes, symbol: str, shared_bytes: int, device_id: int) -> Any:
    """Load ``symbol`` from a CUBIN and allow it ``shared_bytes`` of dynamic shared memory."""
    from cuda.bindings import driver
    from cuda.core import ObjectCode

    kernel = ObjectCode.from_cubin(cubin).get_kernel(symbol)
    if shared_bytes > DEFAULT_SHARED_BYTES:
        attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        checked(driver.cuKernelSetAttribute(attr, shared_bytes, kernel.handle, device_id))
    return kernel


@dataclass(frozen=True)
class PackedArgs:
    """A kernel's argument struct, packed (``kernel_args.ArgStruct``): launched as its one parameter."""

    data: bytes


def pack(args: tuple[Arg, ...], buffers: Mapping[str, Any]) -> PackedArgs:
    """The bytes of the argument struct ``args`` describe: buffers' device addresses, tensor maps
    encoded on their buffer's address plus ``offset_bytes``, scalars in their exact C type."""
    layout = ArgStruct.of("Args_t", args)
    data = bytearray(layout.size)
    for arg, member in zip(args, layout.members, strict=True):
        if isinstance(arg, BufferArg):
            struct.pack_into("<Q", data, member.offset, address(buffers[arg.name]))
        elif isinstance(arg, TensorMapArg):
            at = address(buffers[arg.buffer]) + arg.offset_bytes
            tensor_map = encode(dataclasses.replace(arg.request, address=at))
            data[member.offset : member.offset + member.size] = ctypes.string_at(int(tensor_map.getPtr()), member.size)
        else:
            data[member.offset : member.offset + member.size] = SCALAR_TYPES[arg.ctype](arg.value).tobytes()
    return PackedArgs(bytes(data))


def zero_bytes(buffer: Any, size: int, stream: Any) -> None:
    """Fill the first ``size`` bytes of a cuda.core ``buffer`` with zeros, in ``stream``'s order."""
    from cuda.bindings import driver

    checked(driver.cuMemsetD8Async(int(buffer.handle), 0, size, int(stream.handle)))


def address(buffer: Any) -> int:
    """Device address of a cuda.core Buffer, or of an address given as int."""
    return buffer if isinstance(buffer, int) else int(buffer.handle)


def kernel_launcher(stream: Any, kernel: Any, geometry: LaunchGeometry, packed: PackedArgs) -> Callable[[], None]:
    """A callable launching ``kernel`` with its one argument struct through ``cuLaunchKernel`` (the
    driver copies the struct's bytes into the parameter; the bytes are kept alive here)."""
    from cuda.bindings import driver

    function = checked(driver.cuKernelGetFunction(kernel.handle))
    storage = ctypes.create_string_buffer(packed.data, len(packed.data))
    parameters = (ctypes.c_void_p * 1)(ctypes.addressof(storage))
    address_of_parameters = ctypes.addressof(parameters)
    handle = stream.handle

    def run() -> None:
        checked(
            driver.cuLaunchKernel(
                function, *geometry.grid, *geometry.block, geometry.shared_bytes, handle, address_of_parameters, 0
            )
        )

    run.keep_alive = (storage, parameters)  # type: ignore[attr-defined]
    return run


Step = tuple[Any, LaunchGeometry, PackedArgs]  # (kernel, geometry, its packed argument struct)


def steps_launcher(stream: Any, steps: list[Step]) -> Callable[[], None]:
    """A callable that runs ``steps`` in order on ``stream``: one kernel launch for a single step;
    for several, one launch of a CUDA graph of them (captured once on a private stream), so the
    kernels run back to back however slow the host is to issue launches."""
    if len(steps) == 1:
        return kernel_launcher(stream, *steps[0])
    import weakref

    from cuda.bindings import driver
    from cuda.core import Device

    capture = Device().create_stream()
    runs = [kernel_launcher(capture, *step) for step in steps]
    checked(driver.cuStreamBeginCapture(capture.handle, driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL))
    try:
        for run in runs:
            run()
    finally:
        graph = checked(driver.cuStreamEndCapture(capture.handle))
    executable = checked(driver.cuGraphInstantiate(graph, 0))
    handle = stream.handle

    def run_graph() -> None:
        checked(driver.cuGraphLaunch(executable, handle))

    weakref.finalize(run_graph, _destroy_graph, graph, executable)
    return run_graph


def _destroy_graph(graph: Any, executable: Any) -> None:
    from cuda.bindings import driver

    driver.cuGraphExecDestroy(executable)
    driver.cuGraphDestroy(graph)
