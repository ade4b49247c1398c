"""The worker's verification kernels compile with NVRTC for sm_90 in every instantiation the worker
loads (bitwise at 1, 2 and 4 bytes; within a tolerance on float32 and bfloat16 bits). Their results
are checked against numpy on the GPU (tests/gpu/test_compare_gpu.py)."""

from __future__ import annotations

import pytest

from tunebox.build.nvrtc import NvrtcBuilder
from tunebox.families.base import KernelSource
from tunebox.kernels_dir import kernel_source
from tunebox.records import Status

INSTANCES = [
    "mismatches<unsigned char>",
    "mismatches<unsigned short>",
    "mismatches<unsigned int>",
    "mismatches_within<unsigned int, false>",
    "mismatches_within<unsigned short, true>",
]


@pytest.fixture(scope="module")
def builder():
    b = NvrtcBuilder("sm_90", cache_dir=None, workers=1)
    yield b
    b.close()


@pytest.mark.parametrize("name", INSTANCES)
def test_every_compare_kernel_compiles(builder, name):
    built = builder.build_one(KernelSource(kernel_source("runtime/compare.cu"), name, ()))
    assert built.status is Status.OK, built.log
    assert built.cubin and built.lowered_name
