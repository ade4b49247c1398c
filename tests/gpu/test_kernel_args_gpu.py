"""The kernel-argument struct on the H200: a probe kernel reads every member kind (typed pointers,
each scalar type, a tensor map inside the struct) from what ``cuda_api.pack`` wrote, launched alone
and as a CUDA graph of several steps."""

from __future__ import annotations

import numpy as np
import pytest

from tunebox.build.nvrtc import NvrtcBuilder
from tunebox.cuda_api import checked, load_kernel, pack, steps_launcher
from tunebox.families.base import BufferArg, LaunchGeometry, ScalarArg, TensorMapArg, instantiate
from tunebox.families.kernel_args import arg_structs
from tunebox.records import Status
from tunebox.tma import TensorMapRequest

pytestmark = pytest.mark.gpu

ROWS, COLS, BOX_ROWS, BOX_COLS = 64, 64, 8, 32


def args(x: int, y: int) -> tuple:
    request = TensorMapRequest("float32", (ROWS, COLS), (COLS * 4, 4), (BOX_ROWS, BOX_COLS), 0)
    return (
        BufferArg("src", "const unsigned"),
        ScalarArg("i32", -7, "i32"),
        ScalarArg("u16", 0xBEEF, "u16"),
        TensorMapArg("src", request, 0, "map"),
        ScalarArg("i64", -(2**40) - 3, "i64"),
        ScalarArg("u32", 0xDEADBEEF, "u32"),
        ScalarArg("f32", 1.5, "f32"),
        ScalarArg("i32", x, "x"),
        ScalarArg("i32", y, "y"),
        BufferArg("out", "unsigned long long"),
        BufferArg("box_out", "float"),
    )


def test_every_member_kind_arrives_alone_and_in_a_graph(tmp_path) -> None:
    from cuda.bindings import driver
    from cuda.core import Device

    device = Device(0)
    device.set_current()
    stream = device.create_stream()
    source = instantiate("probes/args_probe.cu", "args_probe", {"BOX_ROWS": BOX_ROWS, "BOX_COLS": BOX_COLS})
    builder = NvrtcBuilder("sm_90", cache_dir=tmp_path)
    built = builder.build_one(source.source(arg_structs(args(0, 0), [])))
    builder.close()
    assert built.status is Status.OK, built.log
    kernel = load_kernel(built.cubin, built.lowered_name, 0, device.device_id)
    src = np.arange(ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS)
    buffers = {
        name: device.allocate(size, stream=stream)
        for name, size in (("src", src.nbytes), ("out", 6 * 8), ("box_out", BOX_ROWS * BOX_COLS * 4))
    }
    checked(driver.cuMemcpyHtoD(int(buffers["src"].handle), src.ctypes.data, src.nbytes))
    geometry = LaunchGeometry((1, 1, 1), (32, 1, 1), 0)

    def read(x: int, y: int) -> tuple[np.ndarray, np.ndarray]:
        out = np.zeros(6, dtype=np.uint64)
        box = np.zeros((BOX_ROWS, BOX_COLS), dtype=np.float32)
        checked(driver.cuMemcpyDtoH(out.ctypes.data, int(buffers["out"].handle), out.nbytes))
        checked(driver.cuMemcpyDtoH(box.ctypes.data, int(buffers["box_out"].handle), box.nbytes))
        return out, box

    steps_launcher(stream, [(kernel, geometry, pack(args(32, 8), buffers))])()
    stream.sync()
    out, box = read(32, 8)
    assert out[0] == np.uint64(2**64 - 7) and out[1] == np.uint64(2**64 - 2**40 - 3)
    assert (out[2], out[3], out[4]) == (0xBEEF, 0xDEADBEEF, np.float32(1.5).view(np.uint32))
    assert out[5] == np.float32(0.0).view(np.uint32)  # src[0]'s bits through the typed pointer
    np.testing.assert_array_equal(box, src[8:16, 32:64])
    # two steps as one CUDA graph: the last one's box is what remains
    steps_launcher(
        stream, [(kernel, geometry, pack(args(0, 0), buffers)), (kernel, geometry, pack(args(0, 56), buffers))]
    )()
    stream.sync()
    np.testing.assert_array_equal(read(0, 56)[1], src[56:64, 0:32])
