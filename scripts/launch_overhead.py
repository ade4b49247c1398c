"""Host time per cached ``tunebox.launch`` against the torch call it replaces (issue 16, item 5).

    python scripts/launch_overhead.py OUT.json

Small problems (the GPU finishes each launch long before the host issues the next one, so the loop measures
the host): a 64 x 64 float32 transpose and a 4096-row bfloat16 gather served by tunebox kernels, a 64 x 64 x
64 gemm served by torch.matmul through launch; each beside the torch call a user writes, and the two kernel
calls bound to their tensors (``Launcher.bind``). Mean over 20000 calls after 1000 warm ones, synchronised at
the ends. Then the parts of the kernel path on their own (the floor this host sets): ``cuLaunchKernelEx`` of
an empty kernel through ctypes with every argument converted once (the call ``DirectLaunch`` makes),
``DirectLaunch.run`` on one buffer, the fast path's key of the transpose's call, and the transpose's fast
entry given its key (its own kernel and argument struct re-pointed and launched: the whole call less this and
the key is the glue); and a profile of the kernel path (the 15 costliest functions by own time). Last, the
same host times with the device busy (``busy_device_us``): batches of 20 calls after a synchronise, each
batch issued either at once (``idle``: each call's kernel finds the device free) or behind a 2 ms spin
kernel on the same stream (``behind_a_running_kernel``, as serving's long kernels leave the queue), for the
empty kernel's ``cuLaunchKernelEx``, the transpose bound and launched, and torch's ``copy_``: whether the
driver's own call costs more while the device works. Needs a GPU and torch."""

from __future__ import annotations

import cProfile
import datetime
import io
import json
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
from serving_benchmark import host_us  # scripts/, beside this one

from tunebox.benchmark import versions
from tunebox.families.base import BufferArg, LaunchGeometry, ScalarArg
from tunebox.runtime.fast_path import DirectLaunch, torch_signature
from tunebox.runtime.launch import Launcher

CALLS = 20000
SPIN_CYCLES = 4_000_000  # about 2 ms at the H200's 1.98 GHz
BATCH = 20  # calls between synchronisations in the busy-device comparison (serving_benchmark's batch)
SPIN = """extern "C" __global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {}
}"""


def per_call_us(run: Any) -> float:
    return host_us(run, CALLS, warmups=1000, batch=CALLS)  # one batch: the mean over every call in a row


def compile_kernel(code: str, name: str) -> Any:
    from cuda.core import Program, ProgramOptions

    return Program(code, "c++", ProgramOptions(arch="sm_90")).compile("cubin").get_kernel(name)


def busy_device_us(calls: dict[str, Any], batches: int = 50) -> dict[str, dict[str, float]]:
    """Each call's host time (us, median over ``batches`` of the mean of ``BATCH`` calls) issued with the
    device idle and issued behind a running 2 ms spin kernel on torch's current stream."""
    geometry = LaunchGeometry((1, 1, 1), (1, 1, 1), 0)
    stream = torch.cuda.current_stream().cuda_stream
    spin = DirectLaunch(
        compile_kernel(SPIN, "spin"), geometry, (ScalarArg("i64", SPIN_CYCLES, "cycles"),), {}, stream, ()
    )

    def batch_mean(call: Any, behind: bool) -> float:
        torch.cuda.synchronize()
        if behind:
            spin.run({}, stream, ())
        started = time.perf_counter()
        for _ in range(BATCH):
            call()
        return (time.perf_counter() - started) / BATCH * 1e6

    results = {}
    for name, call in calls.items():
        call()
        results[name] = {
            mode: statistics.median(batch_mean(call, mode == "behind_a_running_kernel") for _ in range(batches))
            for mode in ("idle", "behind_a_running_kernel")
        }
        print(name, results[name], flush=True)
    torch.cuda.synchronize()
    return results


def host_parts(launcher: Launcher, a: Any, b: Any) -> dict[str, Any]:
    """The kernel path's parts on their own, as calls to time (after ``launcher`` ran the transpose)."""
    kernel = compile_kernel('extern "C" __global__ void touch(float* p) {}', "touch")
    stream = torch.cuda.current_stream().cuda_stream
    buffer = {"p": torch.empty(1, device="cuda")}
    direct = DirectLaunch(
        kernel,
        LaunchGeometry((1, 1, 1), (32, 1, 1), 0),
        (BufferArg("p", "float"),),
        {"p": buffer["p"].data_ptr()},
        stream,
        ("p",),
    )
    address = (buffer["p"].data_ptr(),)
    transpose = {"src": a, "dst": b}
    signature = torch_signature("tile_copy", transpose, None, "tunebox", {"transpose": True})
    assert signature is not None, "contiguous CUDA tensors take the fast path"
    key, handle, addresses = signature
    entry = launcher._fast[key]  # the cached launch the call above made (Launcher's fast path)
    return {
        "cuLaunchKernelEx through ctypes (empty kernel)": direct._launch,
        "DirectLaunch.run (empty kernel, one buffer)": lambda: direct.run(buffer, stream, address),
        "torch_signature (the transpose's call)": lambda: torch_signature(
            "tile_copy", transpose, None, "tunebox", {"transpose": True}
        ),
        "the transpose's fast entry, its key given": lambda: entry.run(transpose, handle, addresses),
    }


def main(out: Path) -> None:
    launcher = Launcher(cache_dir=Path("/tmp/tunebox-cubins"), raced=Path("/tmp/overhead-raced.sqlite"))
    a, b = torch.randn(64, 64, device="cuda"), torch.empty(64, 64, device="cuda")
    table, idx = torch.randn(4096, 64, device="cuda").bfloat16(), torch.randint(0, 4096, (256,), device="cuda")
    idx, rows = idx.int(), torch.empty(256, 64, device="cuda", dtype=torch.bfloat16)
    x, y, z = (torch.randn(64, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    cases = {
        "tile_copy transpose 64x64 float32 (kernel)": (
            lambda: launcher("tile_copy", {"src": a, "dst": b}, use="tunebox", transpose=True),
            lambda: b.copy_(a.t()),
        ),
        "gather 256 of 4096 rows bfloat16 (kernel)": (
            lambda: launcher("gather", {"A": table, "idx": idx, "out": rows}, use="tunebox", check_bounds=False),
            lambda: torch.index_select(table, 0, idx, out=rows),
        ),
        "gemm 64x64x64 (library through launch)": (
            lambda: launcher("gemm", {"A": x, "B": y, "D": z}, use="library"),
            lambda: torch.matmul(x, y, out=z),
        ),
    }
    bound = {  # the kernel cases bound to their tensors (tunebox.bind)
        "tile_copy transpose 64x64 float32 (kernel)": launcher.bind(
            "tile_copy", {"src": a, "dst": b}, use="tunebox", transpose=True
        ),
        "gather 256 of 4096 rows bfloat16 (kernel)": launcher.bind(
            "gather", {"A": table, "idx": idx, "out": rows}, use="tunebox", check_bounds=False
        ),
    }
    results = {}
    for name, (tunebox_call, torch_call) in cases.items():
        results[name] = {"tunebox_us": per_call_us(tunebox_call), "torch_us": per_call_us(torch_call)}
        if name in bound:
            results[name]["bound_us"] = per_call_us(bound[name])
        print(name, results[name], flush=True)
    named_parts = host_parts(launcher, a, b)
    parts = {name: per_call_us(call) for name, call in named_parts.items()}
    print(parts, flush=True)
    transpose = cases["tile_copy transpose 64x64 float32 (kernel)"]
    busy = busy_device_us(
        {
            "cuLaunchKernelEx through ctypes (empty kernel)": named_parts[
                "cuLaunchKernelEx through ctypes (empty kernel)"
            ],
            "tunebox.bind transpose 64x64": bound["tile_copy transpose 64x64 float32 (kernel)"],
            "tunebox.launch transpose 64x64": transpose[0],
            "torch copy_ transpose 64x64": transpose[1],
        }
    )
    profile = cProfile.Profile()
    kernel = cases["tile_copy transpose 64x64 float32 (kernel)"][0]
    profile.enable()
    for _ in range(CALLS):
        kernel()
    profile.disable()
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(15)
    out.write_text(
        json.dumps(
            {
                "device": torch.cuda.get_device_name(),
                "date": datetime.date.today().isoformat(),
                "command": "python scripts/launch_overhead.py <out>",
                "versions": versions(),
                "calls": CALLS,
                "cases": results,
                "host_parts_us": parts,
                "busy_device_us": busy,
                "profile_of_the_kernel_path": text.getvalue().splitlines()[:40],
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
