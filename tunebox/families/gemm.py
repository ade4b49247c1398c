"""Family ``gemm``: bounded bfloat16 GEMM on tensor cores (Tylo's boundary-tile GEMM; issue 5).

``D[:M, :N] = epilogue(alpha * A[:M, :K] @ B[:K, :N])`` with A and B bfloat16, float32 accumulation
(mma.sync m16n8k16), D bfloat16 or float32 and epilogue the identity or ReLU. A, B and D are row-major
with leading dimensions ``lda >= K``, ``ldb >= N``, ``ldd >= N`` (any value: rows need not be
16-byte aligned); D's elements between N and ``ldd`` are never written (the reference keeps them
poison), A's past K and B's past N are never read (the seeded inputs fill them with data, so a read
would show).

Verification is within a tolerance (``Family.tolerance``): the float64 reference, rounded to D's type,
may differ by ``atol + rtol * |want|`` with ``rtol = 1e-2`` and ``atol = 1e-2 * sqrt(K / 64) *
mean|A| * mean|B|`` (the semantics' bf16 tolerance for unit-scale inputs, scaled to these inputs);
NaN never passes. The path implemented is ``bounds = "true"`` (cp.async 16-byte chunks where a chunk
is inside and aligned, zero-filled element copies otherwise) and its ``"false"`` promise (full
tiles, aligned rows). TMA + wgmma and the padded path are still to come.

Problem keys: ``M``, ``N``, ``K`` (positive), ``lda`` (K), ``ldb`` (N), ``ldd`` (N), ``out_dtype``
("bfloat16" or "float32", default "bfloat16"), ``alpha`` (1.0), ``relu`` (false). Buffers: inputs
``A`` (M, lda) and ``B`` (K, ldb) bfloat16; output ``D`` (M, ldd).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dtypes import element_type, random_bits
from ..errors import InvalidProblem
from ..limits import MAX_SHARED_BYTES
from ..params import Config, Param, Space
from .base import (
    Arg,
    Baseline,
    BufferArg,
    BufferSpec,
    Family,
    KernelSource,
    LaunchGeometry,
    Problem,
    ScalarArg,
    Tolerance,
    Work,
    instantiate,
    library_files,
    problem_as,
)
from .indexed import MAX_COUNT, MAX_ELEMENTS, positive, reject_unknown

KNOWN = {"M", "N", "K", "lda", "ldb", "ldd", "out_dtype", "alpha", "relu"}
OUT_DTYPES = ("bfloat16", "float32")
PAD = 8  # elements of padding per shared-memory row (kernels/gemm/gemm.cu)
MAX_ACCUMULATORS = 128  # float32 accumulators per thread (Tylo's register limit)
MAX_GRID_Y = 65_535


@dataclass(frozen=True)
class GemmProblem(Problem):
    M: int
    N: int
    K: int
    lda: int
    ldb: int
    ldd: int
    out_dtype: str = "bfloat16"
    alpha: float = 1.0
    relu: bool = False

    @property
    def dtype(self) -> str:
        return "bfloat16"  # the inputs' type

    def to_dict(self) -> dict[str, Any]:
        return {"M": self.M, "N": self.N, "K": self.K, "lda": self.lda, "ldb": self.ldb, "ldd": self.ldd,
                "out_dtype": self.out_dtype, "alpha": self.alpha, "relu": self.relu}


class Gemm(Family):
    name = "gemm"
    space = Space((
        Param("BM", (32, 64, 128, 256), "block tile rows of D"),
        Param("BN", (32, 64, 128, 256), "block tile columns of D"),
        Param("BK", (16, 32, 64), "K step per shared-memory stage"),
        Param("warps_m", (1, 2, 4), "warps along M"),
        Param("warps_n", (1, 2, 4), "warps along N"),
        Param("stages", (1, 2, 3, 4), "shared-memory buffers in the cp.async pipeline"),
        Param("bounds", ("true", "false"), "'false' promises full tiles and 16-byte aligned rows"),
    ))

    @property
    def source_files(self):  # type: ignore[override]
        return library_files("gemm/gemm.cu")

    # -- problems ---------------------------------------------------------------------------------
    def parse_problem(self, data: Mapping[str, Any]) -> GemmProblem:
        reject_unknown(self.name, data, KNOWN)
        m, n, k = (positive(self.name, data, key) for key in ("M", "N", "K"))
        lds = {}
        for key, least in (("lda", k), ("ldb", n), ("ldd", n)):
            value = data.get(key, least)
            if type(value) is not int or value < least:
                raise InvalidProblem(f"{self.name}: {key} must be an integer >= {least}, got {value!r}")
            lds[key] = value
        for name, rows, ld in (("A", m, lds["lda"]), ("B", k, lds["ldb"]), ("D", m, lds["ldd"])):
            if rows * ld >= MAX_ELEMENTS:
                raise InvalidProblem(f"{self.name}: {name} has {rows * ld} elements (limit 2^40)")
        out_dtype = data.get("out_dtype", "bfloat16")
        if out_dtype not in OUT_DTYPES:
            raise InvalidProblem(f"{self.name}: out_dtype must be one of {OUT_DTYPES}, got {out_dtype!r}")
        alpha, relu = data.get("alpha", 1.0), data.get("relu", False)
        if type(alpha) not in (int, float) or not math.isfinite(alpha):
            raise InvalidProblem(f"{self.name}: alpha must be a finite number, got {alpha!r}")
        if not isinstance(relu, bool):
            raise InvalidProblem(f"{self.name}: relu must be true or false, got {relu!r}")
        return GemmProblem(m, n, k, **lds, out_dtype=out_dtype, alpha=float(np.float32(alpha)), relu=relu)

    def problem_from_arrays(self, arrays: Mapping[str, Any], **options: Any) -> GemmProblem:
        """Arrays ``A`` (M, lda), ``B`` (K, ldb) bfloat16 and ``D`` (M, ldd); options ``K`` (default
        lda), ``N`` (default ldb), ``alpha`` and ``relu``."""
        shapes = {}
        for name in ("A", "B", "D"):
            if name not in arrays or len(tuple(arrays[name].shape)) != 2:
                raise InvalidProblem(f"{self.name}: tunebox.launch needs 2-D arrays A, B and D")
            shapes[name] = tuple(arrays[name].shape)
        (m, lda), (_, ldb), (_, ldd) = shapes["A"], shapes["B"], shapes["D"]
        return self.parse_problem({"M": m, "K": lda, "N": ldb, "lda": lda, "ldb": ldb, "ldd": ldd,
                                   "out_dtype": str(arrays["D"].dtype), **options})

    def buffers(self, problem: Problem) -> tuple[BufferSpec, ...]:
        p = self._as_problem(problem)
        return (BufferSpec("A", (p.M, p.lda), "bfloat16", "input"), BufferSpec("B", (p.K, p.ldb), "bfloat16", "input"),
                BufferSpec("D", (p.M, p.ldd), p.out_dtype, "output"))

    def make_inputs(self, problem: Problem, rng: np.random.Generator) -> dict[str, np.ndarray]:
        p = self._as_problem(problem)
        bf16 = element_type("bfloat16")
        return {"A": random_bits(bf16, (p.M, p.lda), rng), "B": random_bits(bf16, (p.K, p.ldb), rng)}

    def reference(self, problem: Problem, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        p = self._as_problem(problem)
        bf16 = element_type("bfloat16")
        d = p.alpha * (bf16.decode(inputs["A"][:, :p.K]) @ bf16.decode(inputs["B"][:, :p.N]))
        if p.relu:
            d = np.maximum(d, 0.0)
        et = element_type(p.out_dtype)
        out = np.full((p.M, p.ldd), et.poison, dtype=et.storage)  # the padding columns stay untouched
        out[:, :p.N] = et.encode(d)
        return {"D": out}

    def tolerance(self, problem: Problem, inputs: Mapping[str, np.ndarray]) -> Tolerance:
        p = self._as_problem(problem)
        bf16 = element_type("bfloat16")
        a, b = bf16.decode(inputs["A"][:, :p.K]), bf16.decode(inputs["B"][:, :p.N])
        scale = float(np.abs(a).mean() * np.abs(b).mean())
        return Tolerance(rtol=1e-2, atol=1e-2 * math.sqrt(p.K / 64) * scale * abs(p.alpha))

    def work(self, problem: Problem) -> Work:
        p = self._as_problem(problem)
        out = element_type(p.out_dtype).itemsize
        return Work((p.M * p.K + p.K * p.N) * 2 + p.M * p.N * out, flops=2 * p.M * p.N * p.K)

    # -- variants ---------------------------------------------------------------------------------
    @staticmethod
    def shared_bytes(config: Config) -> int:
        bm, bn, bk, stages = (int(config[k]) for k in ("BM", "BN", "BK", "stages"))
        return stages * (bm * (bk + PAD) + bk * (bn + PAD)) * 2

    def default_config(self, problem: Problem) -> Config:
        p = self._as_problem(problem)
        tile = 128 if min(p.M, p.N) >= 128 else 64 if min(p.M, p.N) >= 64 else 32
        return self.space.validate({"BM": tile, "BN": tile, "BK": 32, "warps_m": 2, "warps_n": 2, "stages": 2,
                                    "bounds": "true"})

    def violations(self, problem: Problem, config: Config) -> list[str]:
        p = self._as_problem(problem)
        bm, bn, bk = int(config["BM"]), int(config["BN"]), int(config["BK"])
        wm, wn = int(config["warps_m"]), int(config["warps_n"])
        broken = []
        if bm % (16 * wm) or bn % (8 * wn):
            broken.append(f"warp tiles of whole 16 x 8 MMA tiles need BM % (16 x warps_m) = BN % (8 x warps_n) = 0 "
                          f"(BM={bm}, BN={bn}, warps {wm} x {wn})")
        elif (bm // wm // 16) * (bn // wn // 8) * 4 > MAX_ACCUMULATORS:
            broken.append(f"a {bm // wm} x {bn // wn} warp tile holds {(bm // wm) * (bn // wn) // 32} float32 "
                          f"accumulators per thread (at most {MAX_ACCUMULATORS})")
        smem = self.shared_bytes(config)
        if smem > MAX_SHARED_BYTES:
            broken.append(f"{smem} bytes of shared memory exceed {MAX_SHARED_BYTES}")
        if config["bounds"] == "false":
            if p.M % bm or p.N % bn or p.K % bk:
                broken.append(f"bounds='false' needs full tiles: M % BM = N % BN = K % BK = 0 "
                              f"({p.M} % {bm}, {p.N} % {bn}, {p.K} % {bk})")
            if p.lda % 8 or p.ldb % 8:
                broken.append(f"bounds='false' needs 16-byte rows of A and B (lda, ldb multiples of 8; "
                              f"{p.lda}, {p.ldb})")
        if math.ceil(p.M / bm) > MAX_GRID_Y or math.ceil(p.N / bn) > MAX_COUNT:
            broken.append(f"the grid of {math.ceil(p.N / bn)} x {math.ceil(p.M / bm)} blocks exceeds the limits")
        return broken

    def render(self, problem: Problem, config: Config) -> KernelSource:
        p = self._as_problem(problem)
        targs = (element_type(p.out_dtype).ctype, config["BM"], config["BN"], config["BK"], config["warps_m"],
                 config["warps_n"], config["stages"], config["bounds"], str(p.relu).lower())
        return instantiate("gemm/gemm.cu", "gemm", targs)

    def geometry(self, problem: Problem, config: Config) -> LaunchGeometry:
        p = self._as_problem(problem)
        threads = 32 * int(config["warps_m"]) * int(config["warps_n"])
        return LaunchGeometry((math.ceil(p.N / int(config["BN"])), math.ceil(p.M / int(config["BM"])), 1),
                              (threads, 1, 1), self.shared_bytes(config))

    def args(self, problem: Problem, config: Config) -> tuple[Arg, ...]:
        p = self._as_problem(problem)
        return (BufferArg("A"), BufferArg("B"), BufferArg("D"),
                *(ScalarArg("i64", v) for v in (p.M, p.N, p.K, p.lda, p.ldb, p.ldd)), ScalarArg("f32", p.alpha))

    def distance(self, a: Problem, b: Problem) -> float | None:
        pa, pb = self._as_problem(a), self._as_problem(b)
        if (pa.out_dtype, pa.relu) != (pb.out_dtype, pb.relu):
            return None
        return sum(abs(math.log2(x / y)) for x, y in ((pa.M, pb.M), (pa.N, pb.N), (pa.K, pb.K)))

    def torch_baseline(self, problem: Problem) -> Baseline:
        import torch

        p = self._as_problem(problem)
        if (p.lda, p.ldb, p.ldd) != (p.K, p.N, p.N):
            raise NotImplementedError("gemm: the torch baseline covers dense operands (lda = K, ldb = ldd = N)")
        f32 = p.out_dtype == "float32"

        def run(t: dict[str, Any]) -> dict[str, Any]:
            a, b = t["A"].view(torch.bfloat16), t["B"].view(torch.bfloat16)
            d = torch.matmul(a.float(), b.float()) if f32 else torch.matmul(a, b)
            if p.alpha != 1.0:
                d = d * p.alpha
            if p.relu:
                d = torch.relu(d)
            return {"D": d}

        epilogue = (f" * {p.alpha:g}" if p.alpha != 1.0 else "") + (", relu" if p.relu else "")
        matmul = "torch.matmul(A.float(), B.float())" if f32 else "torch.matmul(A, B)"
        return Baseline(f"torch: {matmul}{epilogue}", run)

    def _as_problem(self, problem: Problem) -> GemmProblem:
        return problem_as(self.name, problem, GemmProblem)
