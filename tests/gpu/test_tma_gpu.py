"""TMA on the GPU: tunebox.tma's validator against the driver itself (seeded requests around every
rule: the validator must reject exactly what cuTensorMapEncodeTiled rejects), and the swizzle address
map against the hardware (a box loaded by TMA with each swizzle mode and dtype, at interior, edge and
negative coordinates, read back byte for byte from shared memory: every element where
``swizzled_offset`` says, out-of-bounds elements zero)."""

from __future__ import annotations

import ctypes
import random

import numpy as np
import pytest

from tunebox.build.nvrtc import NvrtcBuilder
from tunebox.cuda_api import checked
from tunebox.families.base import KernelSource
from tunebox.kernels_dir import kernel_source, kernels_dir
from tunebox.tma import (
    DATA_TYPES,
    SWIZZLE_BYTES,
    TensorMapRequest,
    driver_arguments,
    encode,
    swizzled_offset,
    violations,
)

pytestmark = pytest.mark.gpu
STORAGE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


@pytest.fixture(scope="module")
def cuda():
    from cuda.bindings import driver as cu
    from cuda.core import Device

    device = Device(0)
    device.set_current()
    builder = NvrtcBuilder("sm_90")
    built = builder.build_one(KernelSource(kernel_source("tma/dump.cu"), "tma_dump_2d",
                                           (str(kernels_dir() / "include"),)))
    builder.close()
    assert built.status.value == "ok", built.log
    module = checked(cu.cuModuleLoadData(built.cubin))
    function = checked(cu.cuModuleGetFunction(module, built.lowered_name.encode()))
    yield cu, function
    checked(cu.cuModuleUnload(module))


def upload(cu, array: np.ndarray) -> int:
    address = int(checked(cu.cuMemAlloc(array.nbytes)))
    checked(cu.cuMemcpyHtoD(address, array.ctypes.data, array.nbytes))
    return address


def dump(cu, function, tensor_map, x: int, y: int, nbytes: int) -> np.ndarray:
    out = int(checked(cu.cuMemAlloc(nbytes)))
    args = ((tensor_map, out, x, y, nbytes), (None, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_uint))
    checked(cu.cuLaunchKernel(function, 1, 1, 1, 128, 1, 1, nbytes + 1024, 0, args, 0))
    checked(cu.cuCtxSynchronize())
    host = np.empty(nbytes, dtype=np.uint8)
    checked(cu.cuMemcpyDtoH(host.ctypes.data, out, nbytes))
    checked(cu.cuMemFree(out))
    return host


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("swizzle", list(SWIZZLE_BYTES))
def test_tma_boxes_land_where_the_swizzle_map_says(cuda, dtype, swizzle):
    cu, function = cuda
    size = DATA_TYPES[dtype][0]
    rows, cols, box_rows = 50, 200, 16
    inner = (SWIZZLE_BYTES[swizzle] or 80) // size  # a whole swizzle span per box row (80 B unswizzled)
    storage = STORAGE[size]
    a = (np.arange(rows * cols, dtype=np.int64) + 1).astype(storage).reshape(rows, cols)  # no zero element
    address = upload(cu, a)
    try:
        request = TensorMapRequest(dtype, (rows, cols), (cols * size, size), (box_rows, inner), address, swizzle)
        assert violations(request) == []
        tensor_map = encode(request)
        for x, y in ((0, 0), (cols - inner // 2, 7), (-3, -5), (inner, rows - 4)):
            logical = np.zeros((box_rows, inner), dtype=storage)
            r0, r1 = max(y, 0), min(y + box_rows, rows)
            c0, c1 = max(x, 0), min(x + inner, cols)
            logical[r0 - y:r1 - y, c0 - x:c1 - x] = a[r0:r1, c0:c1]
            nbytes = box_rows * inner * size
            expected = np.zeros(nbytes, dtype=np.uint8)
            flat = logical.reshape(-1).view(np.uint8)
            for element in range(box_rows * inner):
                at = swizzled_offset(element * size, swizzle)
                expected[at:at + size] = flat[element * size:(element + 1) * size]
            got = dump(cu, function, tensor_map, x, y, nbytes)
            wrong = np.flatnonzero(got != expected)
            assert wrong.size == 0, (swizzle, dtype, (x, y), f"{wrong.size} bytes differ, first at {wrong[:8]}")
    finally:
        checked(cu.cuMemFree(address))


def random_request(rng: random.Random, base: int) -> TensorMapRequest:
    """A request near the rules' edges: each field is valid most of the time, so requests that break
    one rule alone are common."""
    def rarely(bad, good):
        return bad if rng.random() < 0.1 else good

    dtype = rng.choice(sorted(DATA_TYPES))
    size = DATA_TYPES[dtype][0]
    rank = rng.choice([1, 2, 2, 3, 3, 4, 5])
    shape = tuple(rng.choice([1, 3, 64, 1000]) for _ in range(rank))
    strides = [size]
    for d in range(rank - 1, 0, -1):
        padded = -(-strides[0] * shape[d] // 16) * 16
        strides.insert(0, rarely(rng.choice([padded + 8, strides[0] * shape[d], max(padded - 16, 8)]),
                                 rng.choice([padded, padded + 16])))
    swizzle = rng.choice(list(SWIZZLE_BYTES))
    box = [rarely(rng.choice([0, 257]), rng.choice([1, 8, 64, 256])) for _ in range(rank)]
    box[-1] = max(1, rarely(rng.choice([4, 8, 24]), rng.choice([16, 32, 64, 128, 256])) // size)
    element_strides = tuple(rarely(rng.choice([0, 9]), rng.choice([1, 1, 2, 8])) for _ in range(rank))
    return TensorMapRequest(dtype, shape, tuple(strides), tuple(box), base + rarely(8, 0), swizzle,
                            element_strides if rng.random() < 0.3 else None,
                            rarely("nan", "zero") if dtype not in ("float16", "bfloat16", "float32") else
                            rng.choice(["zero", "nan"]), rng.choice(["none", "128B", "256B"]))


def test_the_validator_rejects_exactly_what_the_driver_rejects(cuda):
    cu, _ = cuda
    base = int(checked(cu.cuMemAlloc(1 << 20)))
    rng = random.Random(2026)
    mismatches, rejected = [], 0
    try:
        for _ in range(3000):
            request = random_request(rng, base)
            ours = violations(request)
            err, *_ = cu.cuTensorMapEncodeTiled(*driver_arguments(request))
            accepted = int(err) == 0
            rejected += not accepted
            if accepted == bool(ours):
                mismatches.append((request, ours, err))
    finally:
        checked(cu.cuMemFree(base))
    assert 300 < rejected < 2700  # both verdicts are well represented
    assert not mismatches, "\n".join(f"{r}: ours {o or 'accept'}, driver {e!r}" for r, o, e in mismatches[:20])
