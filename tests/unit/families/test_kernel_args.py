"""Kernel arguments as one named struct: one description gives the C++ struct (its layout proven by
NVRTC through static_asserts) and the bytes the host packs."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from tunebox.build.nvrtc import NvrtcBuilder
from tunebox.cuda_api import pack
from tunebox.errors import InvalidConfig
from tunebox.families.base import BufferArg, KernelSource, ScalarArg, TensorMapArg
from tunebox.families.kernel_args import ArgStruct, arg_structs
from tunebox.kernels_dir import kernels_dir
from tunebox.records import Status
from tunebox.tma import TensorMapRequest

MAP = TensorMapRequest("float32", (64, 64), (256, 4), (8, 32), 0)
ARGS = (
    BufferArg("src", "const float"),
    ScalarArg("u16", 7, "pad"),
    ScalarArg("i64", -3, "rows"),
    TensorMapArg("src", MAP, 0, "src_map"),
    ScalarArg("f32", 0.5, "alpha"),
    BufferArg("dst", "float"),
)


def test_members_take_c_natural_alignment() -> None:
    layout = ArgStruct.of("Args_t", ARGS)
    assert [(m.name, m.offset, m.size) for m in layout.members] == [
        ("src", 0, 8),
        ("pad", 8, 2),
        ("rows", 16, 8),
        ("src_map", 64, 128),
        ("alpha", 192, 4),
        ("dst", 200, 8),
    ]
    assert (layout.size, layout.align) == (256, 64)


def compile_struct(text: str, tmp_path: Path):
    kernel = "template <class A> __global__ void probe(const __grid_constant__ A a) {}"
    code = f"#include <tunebox/tma.cuh>\n{text}\n{kernel}\n"
    builder = NvrtcBuilder("sm_90", cache_dir=tmp_path)
    try:
        return builder.build_one(KernelSource(code, "probe<Args_t>", (str(kernels_dir() / "include"),)))
    finally:
        builder.close()


def test_nvrtc_proves_the_layout_and_refuses_a_different_one(tmp_path: Path) -> None:
    source = ArgStruct.of("Args_t", ARGS).source()
    assert compile_struct(source, tmp_path).status is Status.OK
    drifted = source.replace("float alpha;", "double alpha;")  # the device believing alpha is wider
    result = compile_struct(drifted, tmp_path)
    assert result.status is Status.COMPILE_ERROR and "argument alpha" in result.log


def test_pack_writes_each_member_at_its_offset() -> None:
    args = (
        BufferArg("src", "const float"),
        ScalarArg("u16", 0xBEEF, "pad"),
        ScalarArg("i64", -3, "rows"),
        ScalarArg("f32", 0.5, "alpha"),
        BufferArg("dst", "float"),
    )
    data = pack(args, {"src": 0x1000, "dst": 0x2000}).data
    assert len(data) == 40
    assert struct.unpack_from("<Q", data, 0)[0] == 0x1000 and struct.unpack_from("<H", data, 8)[0] == 0xBEEF
    assert struct.unpack_from("<q", data, 16)[0] == -3 and struct.unpack_from("<f", data, 24)[0] == np.float32(0.5)
    assert struct.unpack_from("<Q", data, 32)[0] == 0x2000


def test_every_kernel_has_its_struct_and_unnamed_or_untyped_arguments_are_refused() -> None:
    assert set(arg_structs(ARGS, [("pad_rows", (ScalarArg("i32", 1, "n"),))])) == {"Args", "pad_rows_args"}
    for unnamed in ((BufferArg("src"),), (ScalarArg("i32", 1),)):
        with pytest.raises(InvalidConfig):
            arg_structs(unnamed, [])


@pytest.mark.parametrize(
    "bad",
    [
        (ScalarArg("i32", 1, "a"), ScalarArg("i32", 2, "a")),
        (BufferArg("x", "float; int y"),),
        (ScalarArg("i32", 1, "not a name"),),
    ],
)
def test_malformed_descriptions_are_refused(bad: tuple) -> None:
    with pytest.raises(InvalidConfig):
        ArgStruct.of("Args_t", bad)
