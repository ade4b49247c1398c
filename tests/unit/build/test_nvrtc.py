"""In-process NVRTC compiles: concurrent compiles leave the interpreter's shared one-character
objects alone. (On the 16-core GPU host some concurrent compiles come back with an empty log, one
byte long; filling ``b" " * size`` buffers then let NVRTC write a NUL into the shared b" " and " ", and
a later ``import torch`` failed to parse "annotate(str\\0tag)".)"""

from __future__ import annotations

from tunebox.build.nvrtc import NvrtcBuilder
from tunebox.families.base import KernelSource
from tunebox.records import Status


def test_concurrent_compiles_keep_the_shared_space_characters():
    sources = [KernelSource(f'extern "C" __global__ void k{i}(float* x) {{ x[threadIdx.x] *= {i}.0f; }}', f"k{i}", ())
               for i in range(96)]
    builder = NvrtcBuilder("sm_90", cache_dir=None, workers=16)
    try:
        results = builder.build(sources)
    finally:
        builder.close()
    assert all(r.status is Status.OK for r in results)
    assert bytes([32])[0] == 32 and ord(" ") == 32 and b" ".decode() == "\x20"
    assert len(results[0].cubin) > 0 and results[0].cubin[:4] == b"\x7fELF"
