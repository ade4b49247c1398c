"""In-process NVRTC compiles write logs and CUBINs into buffers that are theirs alone. A one-byte
(empty) log, which concurrent compiles sometimes return on the 16-core GPU host, once went into
``b" " * 1``: CPython's shared b" ", into which NVRTC wrote a NUL, corrupting every b" " and " " of
the process (a later ``import torch`` failed to parse "annotate(str\\0tag)"). Here NVRTC's two log
calls are replaced by ones that answer an empty log and write its NUL into the caller's buffer as the
C library does, in a child process, so a regression cannot corrupt this one."""

from __future__ import annotations

import subprocess
import sys

CHILD = r"""
import ctypes
from cuda.bindings import nvrtc
from tunebox.build.nvrtc import compile_nvrtc
from tunebox.families.base import KernelSource

def empty_log_size(prog):
    return nvrtc.nvrtcResult.NVRTC_SUCCESS, 1

def write_terminator(prog, buffer):  # into the caller's memory, as nvrtcGetProgramLog does
    target = (ctypes.c_char * len(buffer)).from_buffer(buffer) if isinstance(buffer, bytearray) else buffer
    ctypes.memmove(target, b"\0", 1)
    return (nvrtc.nvrtcResult.NVRTC_SUCCESS,)

nvrtc.nvrtcGetProgramLogSize, nvrtc.nvrtcGetProgramLog = empty_log_size, write_terminator
result = compile_nvrtc(KernelSource('extern "C" __global__ void k(float* x) { x[0] = 1.0f; }', "k", ()), "sm_90",
                       ["--gpu-architecture=sm_90"])
print(result.status.value, repr(result.log), bytes([32])[0], ord(" "), result.cubin[:4] == b"\x7fELF")
"""


def test_an_empty_log_leaves_the_shared_space_characters_alone():
    run = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["ok", "''", "32", "32", "True"], run.stdout


def test_registers_are_the_main_kernels_whatever_order_ptxas_reports_them_in():
    from tunebox.build.nvrtc import _kernel_resources

    log = (
        "ptxas info    : Compiling entry function '_Z8pad_rowsI3CfgEvv' for 'sm_90'\n"
        "ptxas         .     0 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n"
        "ptxas info    : Used 21 registers, used 0 barriers\n"
        "ptxas info    : Compiling entry function '_Z4gemmI3CfgEvv' for 'sm_90'\n"
        "ptxas         .     0 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
        "ptxas info    : Used 168 registers, used 1 barriers\n"
    )
    assert _kernel_resources(log, "_Z4gemmI3CfgEvv") == (168, 12)
    assert _kernel_resources(log, "_Z8pad_rowsI3CfgEvv") == (21, 12)
