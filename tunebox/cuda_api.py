"""The one thin layer over cuda.core / cuda.bindings used by the GPU worker and by ``launch``.

Importing this module does not touch CUDA; its functions do (call them only in a process that
owns a CUDA context: the GPU worker, or an application launching tuned kernels).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .families.base import Arg, BufferArg

DEFAULT_SHARED_BYTES = 48 * 1024  # dynamic shared memory a kernel gets without opting in
SCALAR_TYPES = {"i32": np.int32, "i64": np.int64, "u16": np.uint16, "u32": np.uint32, "f32": np.float32}


def checked(result: tuple) -> Any:
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


def marshal(args: tuple[Arg, ...], buffers: Mapping[str, Any]) -> list[Any]:
    """Kernel arguments for ``cuda.core.launch``: buffers by name (a Buffer or a device address
    as int), scalars as numpy values of their exact C type (never a bare Python number)."""
    return [buffers[a.name] if isinstance(a, BufferArg) else SCALAR_TYPES[a.ctype](a.value) for a in args]
