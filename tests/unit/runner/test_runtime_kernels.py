"""The worker's own kernels compile with NVRTC for sm_90 in every instantiation it loads: verification
(bitwise at 1, 2 and 4 bytes; within a tolerance on float32 and bfloat16 bits; checked against numpy on
the GPU by tests/gpu/test_compare_gpu.py) and the timing gate (tests/gpu/test_timing_gate_gpu.py)."""

from __future__ import annotations

import pytest

from tunebox.build.nvrtc import NvrtcBuilder
from tunebox.families.base import KernelSource
from tunebox.kernels_dir import kernel_source
from tunebox.records import Status

INSTANCES = [
    ("compare.cu", "mismatches<unsigned char>"),
    ("compare.cu", "mismatches<unsigned short>"),
    ("compare.cu", "mismatches<unsigned int>"),
    ("compare.cu", "mismatches_within<unsigned int, false>"),
    ("compare.cu", "mismatches_within<unsigned short, true>"),
    ("gate.cu", "timing_gate"),
]


@pytest.fixture(scope="module")
def builder():
    b = NvrtcBuilder("sm_90", cache_dir=None, workers=1)
    yield b
    b.close()


@pytest.mark.parametrize(("file", "name"), INSTANCES)
def test_every_runtime_kernel_compiles(builder, file, name):
    built = builder.build_one(KernelSource(kernel_source(f"runtime/{file}"), name, ()))
    assert built.status is Status.OK, built.log
    assert built.cubin and built.lowered_name
