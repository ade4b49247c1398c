"""Probes of ragged3d's TMA template next to unmapped memory, each run in a spawned process of its own
(importable by it): a faulting launch loses that process only.

A buffer is placed against a reserved but unmapped range of device addresses (cuMemAddressReserve
of the whole range, cuMemCreate + cuMemMap + cuMemSetAccess of one part only): "front" puts it at the
start of the mapped part, behind an unmapped range (which holds the base address of pack's clipping
map, BM rows in front of out); "tail" ends it exactly where the mapped part ends, before an unmapped
range where the rows a copy clips past the last row would lie.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import math

import numpy as np

from tunebox.build.nvrtc import NvrtcBuilder
from tunebox.cuda_api import checked, kernel_launcher, load_kernel, pack
from tunebox.dtypes import element_type
from tunebox.families import get
from tunebox.families.base import BufferArg, KernelSource, LaunchGeometry, ScalarArg, TensorMapArg
from tunebox.families.kernel_args import ArgStruct
from tunebox.families.ragged3d import tma_layout
from tunebox.kernels_dir import kernels_dir

PLACEMENTS = ("front", "tail")


def _device():
    from cuda.bindings import driver as cu
    from cuda.core import Device

    device = Device(0)
    device.set_current()
    return cu, device


def _place(cu, device_id: int, nbytes: int, unmapped: int, placement: str, cleanup: contextlib.ExitStack) -> int:
    """The address of ``nbytes`` of device memory with at least ``unmapped`` reserved, unmapped bytes in
    front of it ("front") or right after it ("tail"); unmapped, released and freed by ``cleanup``."""
    prop = cu.CUmemAllocationProp()
    prop.type = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    prop.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    prop.location.id = device_id
    granularity = int(
        checked(
            cu.cuMemGetAllocationGranularity(prop, cu.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM)
        )
    )
    hole = math.ceil(max(unmapped, 1) / granularity) * granularity
    mapped = math.ceil(max(nbytes, 1) / granularity) * granularity
    base = int(checked(cu.cuMemAddressReserve(hole + mapped, 0, 0, 0)))
    cleanup.callback(_quietly, cu.cuMemAddressFree, base, hole + mapped)
    start = base + hole if placement == "front" else base
    handle = checked(cu.cuMemCreate(mapped, prop, 0))
    cleanup.callback(_quietly, cu.cuMemRelease, handle)
    checked(cu.cuMemMap(start, mapped, 0, handle, 0))
    cleanup.callback(_quietly, cu.cuMemUnmap, start, mapped)
    access = cu.CUmemAccessDesc()
    access.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    access.location.id = device_id
    access.flags = cu.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
    checked(cu.cuMemSetAccess(start, mapped, [access], 1))
    if placement == "front":
        return start
    assert nbytes % 256 == 0, "a tail placement needs a 256-byte multiple to end exactly at the mapping's end"
    return start + mapped - nbytes


def _quietly(fn, *args) -> None:
    """Cleanup that cannot mask the test's own failure (after a fault every driver call fails)."""
    with contextlib.suppress(Exception):
        fn(*args)


def run_next_to_unmapped(problem_data: dict, configs: list[dict], placement: str) -> list[str]:
    """For each config, run ragged3d's variant on seeded inputs with the data buffers (x or ragged, and
    out; offsets is an ordinary allocation) placed per ``placement``, and return '' where ``out`` matches
    the reference bit for bit, else what differs. Raises on a CUDA error (a fault)."""
    cu, device = _device()
    family = get("ragged3d")
    p = family.parse_problem(problem_data)
    inputs = family.make_inputs(p, np.random.default_rng(5))
    expected = family.reference(p, inputs)["out"]
    et = element_type(p.element)
    stream = device.create_stream()
    builder = NvrtcBuilder("sm_90")
    try:
        builds = builder.build([family.render(p, family.config(c)) for c in configs])
    finally:
        builder.close()
    reports = []
    for values, built in zip(configs, builds, strict=True):
        config = family.config(values)
        assert not family.violations(p, config) and built.status.value == "ok", (values, built.log)
        args = family.args(p, config)
        # BM rows: pack's clipping map has its origin that far in front of out, and a copy's box reaches up
        # to that far past a buffer's last row
        unmapped = int(config["BM"]) * p.row * et.itemsize
        assert max(-a.offset_bytes for a in args if isinstance(a, TensorMapArg)) <= unmapped
        with contextlib.ExitStack() as cleanup:
            buffers = {}
            for spec in family.buffers(p):
                nbytes = inputs[spec.name].nbytes if spec.role == "input" else expected.nbytes
                if spec.name == "offsets":
                    buffers[spec.name] = int(checked(cu.cuMemAlloc(nbytes)))
                    cleanup.callback(_quietly, cu.cuMemFree, buffers[spec.name])
                else:
                    buffers[spec.name] = _place(cu, device.device_id, nbytes, unmapped, placement, cleanup)
                if spec.role == "input" and nbytes:
                    array = np.ascontiguousarray(inputs[spec.name])
                    checked(cu.cuMemcpyHtoD(buffers[spec.name], array.ctypes.data, nbytes))
            out = buffers["out"]
            count = expected.size
            if count:
                fill = cu.cuMemsetD32 if et.itemsize == 4 else cu.cuMemsetD16
                checked(fill(out, et.poison, count))
            kernel = load_kernel(
                built.cubin, built.lowered_name, family.geometry(p, config).shared_bytes, device.device_id
            )
            kernel_launcher(stream, kernel, family.geometry(p, config), pack(args, buffers))()
            stream.sync()
            checked(cu.cuCtxSynchronize())
            got = np.empty(count, dtype=et.storage)
            if count:
                checked(cu.cuMemcpyDtoH(got.ctypes.data, out, got.nbytes))
            wrong = np.flatnonzero(got != expected.reshape(-1))
            reports.append(
                ""
                if not wrong.size
                else f"{config.label()}: {wrong.size} of {count} elements wrong, first at "
                f"{np.unravel_index(wrong[0], expected.shape)}: got 0x{int(got[wrong[0]]):x}, "
                f"expected 0x{int(expected.reshape(-1)[wrong[0]]):x}"
            )
    return reports


def read_in_front(nbytes: int) -> str:
    """Control: an ordinary load 16 bytes in front of a "front" buffer (inside the unmapped range). Returns
    the error the launch or the synchronisation reported ('' when the load did not fault)."""
    cu, device = _device()
    code = 'extern "C" __global__ void touch(const unsigned int* p, unsigned int* out) { *out = p[-4]; }'
    builder = NvrtcBuilder("sm_90")
    try:
        built = builder.build_one(KernelSource(code, "touch", ()))
    finally:
        builder.close()
    with contextlib.ExitStack() as cleanup:
        buffer = _place(cu, device.device_id, nbytes, nbytes, "front", cleanup)
        out = int(checked(cu.cuMemAlloc(4)))
        cleanup.callback(_quietly, cu.cuMemFree, out)
        module = checked(cu.cuModuleLoadData(built.cubin))
        cleanup.callback(_quietly, cu.cuModuleUnload, module)
        function = checked(cu.cuModuleGetFunction(module, built.lowered_name.encode()))
        args = ((buffer, out), (ctypes.c_void_p, ctypes.c_void_p))
        err, *_ = cu.cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, 0, args, 0)
        if int(err):
            return repr(err)
        (err,) = cu.cuCtxSynchronize()
        return repr(err) if int(err) else ""


# One load through pack's clipping map (of `out`, rank 3: depth, BM, merged), the map ragged3d's loads do
# not use: a box of the first chunk (G columns of head 0) and BM rows, dyn of them inside. Like ragged3d's
# kernels it takes one argument struct (clip_load_args, which kernel_args.ArgStruct renders in place of
# %(args)s from the arguments load_through_clipping_map describes) and loads through the map where it lies
# in that __grid_constant__ parameter.
CLIP_LOAD = r"""
#include "tunebox/tma_nd.cuh"
using namespace tb;
%(args)s
extern "C" __global__ void clip_load(const __grid_constant__ clip_load_args a) {
  extern __shared__ __align__(128) unsigned char box[];
  __shared__ __align__(8) u64 bar;
  if (threadIdx.x == 0) {
    mbarrier_init(&bar, 1);
    mbarrier_expect_tx(&bar, a.bytes);
    const int c[3] = {a.c0, a.c1, a.c2};
    tma_load_nd<3>(box, &a.map, c, &bar);
  }
  __syncthreads();
  mbarrier_wait(&bar, 0);
  for (unsigned i = threadIdx.x; i < a.bytes / 4; i += blockDim.x) a.got[i] = reinterpret_cast<const unsigned*>(box)[i];
}
"""
CLIP_BM, CLIP_DYN = 16, 5


def load_through_clipping_map(placement: str, dyn: int = CLIP_DYN) -> str:
    """Load rows 0 .. dyn - 1 (0 <= dyn <= CLIP_BM) of a ragged buffer (64 rows of 8 heads x 64
    bfloat16) through pack's clipping map, whose base address lies CLIP_BM rows in front of the buffer,
    placed per ``placement`` ("front": unmapped memory there; "tail": mapped memory). '' when the box
    holds those rows' first chunk of head 0 and zeros past them, else what differs, or the CUDA error
    the load raised."""
    cu, device = _device()
    family = get("ragged3d")
    p = family.parse_problem(
        {"dtype": "bfloat16", "batch": 1, "max_len": 64, "heads": 8, "depth": 64, "direction": "pack", "lengths": [64]}
    )
    config = family.config(
        {"template": "tma", "BM": CLIP_BM, "group": 1, "BN": 0, "swizzle": "none", "tma_blocks_per_op": 0}
    )
    _, typed = family.typed(config)
    assert isinstance(typed, tma_layout.TmaConfig)
    clip = tma_layout.tensor_maps(p, typed)[1]
    assert clip.buffer == "out" and clip.offset_bytes == -CLIP_BM * p.row * 2
    rows = np.random.default_rng(3).integers(1, 2**16, (p.total, p.heads, p.depth), dtype=np.uint16)
    chunk = 8  # 16 bytes of bfloat16
    want = np.zeros((CLIP_BM, chunk), np.uint16)
    want[:dyn] = rows[:dyn, 0, :chunk]
    args = (
        dataclasses.replace(clip, name="map"),
        *(ScalarArg("i32", v, name) for name, v in (("c0", 0), ("c1", CLIP_BM - dyn), ("c2", dyn * p.heads))),
        ScalarArg("u32", want.nbytes, "bytes"),
        BufferArg("got", "unsigned"),
    )
    code = CLIP_LOAD % {"args": ArgStruct.of("clip_load_args", args).source()}
    builder = NvrtcBuilder("sm_90")
    try:
        built = builder.build_one(KernelSource(code, "clip_load", (str(kernels_dir() / "include"),)))
    finally:
        builder.close()
    assert built.status.value == "ok", built.log
    with contextlib.ExitStack() as cleanup:
        buffer = _place(cu, device.device_id, rows.nbytes, -clip.offset_bytes, placement, cleanup)
        checked(cu.cuMemcpyHtoD(buffer, rows.ctypes.data, rows.nbytes))
        out = int(checked(cu.cuMemAlloc(want.nbytes)))
        cleanup.callback(_quietly, cu.cuMemFree, out)
        kernel = load_kernel(built.cubin, built.lowered_name, want.nbytes, device.device_id)
        stream = device.create_stream()
        try:
            kernel_launcher(
                stream,
                kernel,
                LaunchGeometry((1, 1, 1), (32, 1, 1), want.nbytes),
                pack(args, {"out": buffer, "got": out}),
            )()
            stream.sync()
        except Exception as exc:  # the fault this probe looks for
            return f"{type(exc).__name__}: {exc}"
        got = np.empty_like(want)
        checked(cu.cuMemcpyDtoH(got.ctypes.data, out, got.nbytes))
    wrong = np.argwhere(got != want)
    return "" if not wrong.size else f"{len(wrong)} of {want.size} elements wrong, first at {tuple(wrong[0])}"
