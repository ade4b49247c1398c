"""Runs family quant's rendered kernels on the host: the CUDA source compiled by g++ with a shim that
gives every CUDA thread an OS thread (blocks one after another), warp shuffles and __syncthreads
as barriers, __ldg as a load. The variants' argument structs and configuration structs are the ones
NVRTC compiles (each in a namespace of its own, all in one translation unit); the arguments are
packed by member name from the template's ``args`` and ``prologue``. What this cannot check is the
device itself: the fp8 conversion's PTX (cvt.rn.satfinite; the host takes quant.cuh's portable
rounding), alignment faults and the memory model across CTAs."""

from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path

import numpy as np

from tunebox.dtypes import element_type
from tunebox.families.base import Arg, BufferArg, ScalarArg
from tunebox.kernels_dir import kernel_source, kernels_dir

KERNEL = "quant/quant.cu"


def storage(dtype: str) -> type[np.unsignedinteger]:
    """The bits type of a buffer: bytes for values and scales (uint8), else the element's."""
    return np.uint8 if dtype == "uint8" else element_type(dtype).storage


POISON = 0xAD  # every byte of an output before the launch

SHIM = r"""
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>
struct uint2 { unsigned x, y; };
struct uint4 { unsigned x, y, z, w; };
struct Dim { unsigned x = 0, y = 1, z = 1; };
thread_local Dim threadIdx;
Dim blockIdx, gridDim, blockDim;
#define __device__
#define __host__
#define __forceinline__ inline
#define __global__
#define __launch_bounds__(...)
#define __grid_constant__
#define __shared__ static
static inline float __uint_as_float(unsigned b) { float f; std::memcpy(&f, &b, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned b; std::memcpy(&b, &f, 4); return b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
template <typename T> static inline T __ldg(const T* p) { return *p; }
struct Warp { std::barrier<>* bar; unsigned* slot; };
thread_local Warp tl_warp;
static std::barrier<>* cta_barrier;
static inline void __syncthreads() { cta_barrier->arrive_and_wait(); }
static inline unsigned __shfl_xor_sync(unsigned, unsigned v, int o) {
  const unsigned lane = threadIdx.x % 32;
  tl_warp.slot[lane] = v;
  tl_warp.bar->arrive_and_wait();
  const unsigned r = tl_warp.slot[lane ^ o];
  tl_warp.bar->arrive_and_wait();
  return r;
}
template <typename F>
static void launch(unsigned grid, unsigned block, F body) {
  gridDim.x = grid;
  blockDim.x = block;
  for (unsigned b = 0; b < grid; ++b) {
    blockIdx.x = b;
    std::barrier<> cta(block);
    cta_barrier = &cta;
    std::vector<std::unique_ptr<std::barrier<>>> bars;
    std::vector<unsigned> slots(block + 32);
    for (unsigned w = 0; w < (block + 31) / 32; ++w) bars.emplace_back(new std::barrier<>(32));
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < block; ++t)
      threads.emplace_back([&, t] {
        threadIdx.x = t;
        tl_warp = Warp{bars[t / 32].get(), slots.data() + t / 32 * 32};
        body();
      });
    for (auto& th : threads) th.join();
  }
}
static std::vector<unsigned char> load(const std::string& path, size_t bytes) {
  std::vector<unsigned char> buf(bytes ? bytes : 1, (unsigned char)POISON);
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    if (std::fread(buf.data(), 1, bytes, f) != bytes) std::exit(3);
    std::fclose(f);
  }
  return buf;
}
static void save(const std::string& path, const std::vector<unsigned char>& buf, size_t bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(buf.data(), 1, bytes, f);
  std::fclose(f);
}
"""


MATH = r"""
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#define __device__
#define __forceinline__ inline
static inline float __uint_as_float(unsigned b) { float f; std::memcpy(&f, &b, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned b; std::memcpy(&b, &f, 4); return b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
#include "tunebox/quant.cuh"
#include "tunebox/quant_pairs.cuh"
using namespace tb::quant;
int main(int argc, char** argv) {  // mode; stdin: u32 words (pairs for the two-operand modes)
  const std::string mode = argv[1];
  std::vector<u32> in, out;
  u32 w;
  while (std::fread(&w, 4, 1, stdin) == 1) in.push_back(w);
  const bool pairs = mode == "nvfp4_scale" || mode == "fp8_e4m3" || mode == "fp8_e5m2" || mode == "e2m1_pair_byte";
  for (size_t i = 0; i < in.size(); i += pairs ? 2 : 1) {
    const u32 b = in[i], c = pairs ? in[i + 1] : 0;
    const float f = __uint_as_float(b), g = __uint_as_float(c);
    if (mode == "e2m1_encode") out.push_back(e2m1_encode(f));
    else if (mode == "e2m1_rne") out.push_back(float_rne<1, 1, 7u, 3>(f));
    else if (mode == "fp8_e4m3") out.push_back(fp8_encode2<MXFP8_E4M3>(f, g));
    else if (mode == "fp8_e5m2") out.push_back(fp8_encode2<MXFP8_E5M2>(f, g));
    else if (mode == "e8m0_2") out.push_back(e8m0_of_amax<2>(b));
    else if (mode == "e8m0_8") out.push_back(e8m0_of_amax<8>(b));
    else if (mode == "e8m0_15") out.push_back(e8m0_of_amax<15>(b));
    else if (mode == "e8m0_inverse") out.push_back(__float_as_uint(e8m0_inverse(b)));
    else if (mode == "e8m0_value") out.push_back(__float_as_uint(e8m0_value(b)));
    else if (mode == "e2m1_value") out.push_back(__float_as_uint(e2m1_value(b)));
    else if (mode == "e4m3_value") out.push_back(__float_as_uint(e4m3_value(b)));
    else if (mode == "e5m2_value") out.push_back(__float_as_uint(e5m2_value(b)));
    else if (mode == "bf16_rne") out.push_back(bf16_rne(b));
    else if (mode == "key_amax_f32") out.push_back(key_amax<false>(key_max<false>(KEY_ZERO<false>, b)));
    else if (mode == "key_amax_bf16") out.push_back(key_amax<true>(key_max<true>(KEY_ZERO<true>, b)));
    else if (mode == "nvfp4_scale") out.push_back(nvfp4_scale(f, g));
    else if (mode == "e2m1_pair_byte") out.push_back(e2m1_pair_byte(b, c));
    else return 2;
  }
  std::fwrite(out.data(), 4, out.size(), stdout);
  return 0;
}
"""


def compiler() -> str:
    found = shutil.which("g++")
    assert found, "g++ is needed"
    return found


def build_math(where: Path) -> Path:
    """The host build of quant.cuh's and quant_pairs.cuh's functions: ``exe <mode>`` maps stdin's u32
    words to results."""
    (where / "math.cpp").write_text(MATH)
    exe = where / "math"
    command = [compiler(), "-std=c++17", "-O1", "-ffp-contract=off", f"-I{kernels_dir() / 'include'}"]
    done = subprocess.run([*command, str(where / "math.cpp"), "-o", str(exe)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-4000:]
    return exe


def device_math(exe: Path, mode: str, words: np.ndarray) -> np.ndarray:
    data = np.ascontiguousarray(words, dtype=np.uint32).tobytes()
    done = subprocess.run([str(exe), mode], input=data, capture_output=True, check=True)
    return np.frombuffer(done.stdout, dtype=np.uint32)


def _members(struct: str, args: tuple[Arg, ...], sizes: dict[str, int]) -> list[str]:
    """C++ lines filling ``struct`` from the arguments (buffers by name from ``buf_<name>``)."""
    lines = []
    for arg in args:
        if isinstance(arg, BufferArg):
            lines.append(f"  {struct}.{arg.name} = ({arg.pointee}*)buf_{arg.name}.data();")
        elif isinstance(arg, ScalarArg):
            lines.append(f"  {struct}.{arg.name} = {arg.value};")
        else:
            raise AssertionError(f"no tensor maps in quant: {arg}")
    return lines


def _runner(index: int, family, problem, config) -> tuple[str, str]:
    """The variant's namespace (its structs and Cfg) and its run_<index>(dir) function."""
    source = family.render(problem, config)
    shared = kernel_source(KERNEL)
    assert source.code.startswith(shared)
    ns = f"v{index}"
    structs = f"namespace {ns} {{\n{source.code[len(shared) :]}\n}}\n"
    sizes = {b.name: math.prod(b.shape) * np.dtype(storage(b.dtype)).itemsize for b in family.buffers(problem)}
    body = [f"void run_{index}(const std::string& dir) {{"]
    body += [f'  auto buf_{n} = load(dir + "/{n}.bin", {s});' for n, s in sizes.items()]
    for k, step in enumerate(family.prologue(problem, config)):
        body.append(f"  typename {ns}::Cfg::{step.kernel}_args p{k};")
        body += _members(f"p{k}", step.args, sizes)
        grid, block = step.geometry.grid[0], step.geometry.block[0]
        body.append(f"  launch({grid}, {block}, [&] {{ {step.kernel}<{ns}::Cfg>(p{k}); }});")
    geometry = family.geometry(problem, config)
    body.append(f"  typename {ns}::Cfg::Args a;")
    body += _members("a", family.args(problem, config), sizes)
    kernel = source.name_expression.split("<")[0]
    body.append(f"  launch({geometry.grid[0]}, {geometry.block[0]}, [&] {{ {kernel}<{ns}::Cfg>(a); }});")
    body += [f'  save(dir + "/{n}.out", buf_{n}, {s});' for n, s in sizes.items()]
    body.append("}")
    return structs, "\n".join(body)


def build(family, cases, where: Path) -> Path:
    """One host executable running every (problem, config) of ``cases``: ``exe <index> <dir>``."""
    parts = [_runner(i, family, p, c) for i, (p, c) in enumerate(cases)]
    main = [
        "int main(int argc, char** argv) {",
        "  const std::string dir = argv[2];",
        "  switch (std::atoi(argv[1])) {",
    ]
    main += [f"    case {i}: run_{i}(dir); break;" for i in range(len(cases))]
    main += ["    default: return 2;", "  }", "  return 0;", "}"]
    code = "\n".join(
        [
            SHIM.replace("POISON", str(POISON)),
            kernel_source(KERNEL),
            *(s for s, _ in parts),
            *(r for _, r in parts),
            *main,
        ]
    )
    (where / "host.cpp").write_text(code)
    exe = where / "host"
    command = [compiler(), "-std=c++20", "-O1", "-ffp-contract=off", "-pthread", f"-I{kernels_dir() / 'include'}"]
    done = subprocess.run([*command, str(where / "host.cpp"), "-o", str(exe)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-4000:]
    return exe


def run(exe: Path, index: int, family, problem, inputs: dict[str, np.ndarray], where: Path) -> dict[str, np.ndarray]:
    """The outputs (typed as the reference's) of case ``index`` on ``inputs``."""
    case = where / f"case{index}"
    case.mkdir(exist_ok=True)
    for name, array in inputs.items():
        (case / f"{name}.bin").write_bytes(np.ascontiguousarray(array).tobytes())
    done = subprocess.run([str(exe), str(index), str(case)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    outputs = {}
    for spec in family.buffers(problem):
        if spec.role == "output":
            bits = np.frombuffer((case / f"{spec.name}.out").read_bytes(), dtype=storage(spec.dtype))
            outputs[spec.name] = bits.reshape(spec.shape)
    return outputs
