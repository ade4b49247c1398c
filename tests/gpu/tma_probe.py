"""TMA probes run in a spawned process of their own (importable by it): a faulting TMA launch then
loses that process only, never the test session's CUDA context."""

from __future__ import annotations

import ctypes

import numpy as np

from tunebox.build.nvrtc import NvrtcBuilder
from tunebox.cuda_api import checked
from tunebox.families.base import KernelSource
from tunebox.kernels_dir import kernel_source, kernels_dir
from tunebox.tma import TensorMapRequest, driver_arguments, encode


def _context():
    from cuda.bindings import driver as cu
    from cuda.core import Device

    Device(0).set_current()
    return cu


def dump_boxes(array: np.ndarray, request: TensorMapRequest, corners: list[tuple[int, int]]) -> list[np.ndarray]:
    """Upload ``array`` (the request's address is ignored), load the request's 2-D box at each
    (x, y) corner (innermost first) with TMA, and return each box's shared-memory bytes as they lie."""
    cu = _context()
    builder = NvrtcBuilder("sm_90")
    built = builder.build_one(
        KernelSource(kernel_source("tma/dump.cu"), "tma_dump_2d", (str(kernels_dir() / "include"),))
    )
    builder.close()
    if built.status.value != "ok":
        raise RuntimeError(built.log)
    module = checked(cu.cuModuleLoadData(built.cubin))
    function = checked(cu.cuModuleGetFunction(module, built.lowered_name.encode()))
    address = int(checked(cu.cuMemAlloc(array.nbytes)))
    checked(cu.cuMemcpyHtoD(address, np.ascontiguousarray(array).ctypes.data, array.nbytes))
    tensor_map = encode(
        TensorMapRequest(request.dtype, request.shape, request.strides, request.box, address, request.swizzle)
    )
    nbytes = int(np.prod(request.box)) * array.itemsize
    out = int(checked(cu.cuMemAlloc(nbytes)))
    boxes = []
    for x, y in corners:
        args = ((tensor_map, out, x, y, nbytes), (None, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_uint))
        checked(cu.cuLaunchKernel(function, 1, 1, 1, 128, 1, 1, nbytes + 1024, 0, args, 0))
        checked(cu.cuCtxSynchronize())
        host = np.empty(nbytes, dtype=np.uint8)
        checked(cu.cuMemcpyDtoH(host.ctypes.data, out, nbytes))
        boxes.append(host)
    return boxes


def driver_accepts(requests: list[TensorMapRequest]) -> list[bool]:
    """Whether ``cuTensorMapEncodeTiled`` accepts each request; addresses are offsets into a fresh
    1 MiB allocation."""
    cu = _context()
    base = int(checked(cu.cuMemAlloc(1 << 20)))
    verdicts = []
    for r in requests:
        placed = TensorMapRequest(
            r.dtype,
            r.shape,
            r.strides,
            r.box,
            base + r.address,
            r.swizzle,
            r.element_strides,
            r.oob_fill,
            r.l2_promotion,
        )
        err, *_ = cu.cuTensorMapEncodeTiled(*driver_arguments(placed))
        verdicts.append(int(err) == 0)
    return verdicts
