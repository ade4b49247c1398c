"""Family ``gemm``: bounded bfloat16 GEMM on tensor cores (Tylo's boundary-tile GEMM; issue 5).

``D[:M, :N] = epilogue(alpha * A[:M, :K] @ B[:K, :N])`` with A and B bfloat16, float32 accumulation,
D bfloat16 or float32 and epilogue the identity or ReLU. A, B and D are row-major with leading
dimensions ``lda >= K``, ``ldb >= N``, ``ldd >= N`` (any value: rows need not be 16-byte aligned);
D's elements between N and ``ldd`` are never written (the reference keeps them poison), A's past K
and B's past N are never read (the seeded inputs fill them with data, so a read would show).

Three paths (``path``), all in ``kernels/gemm/gemm.cu``:

- ``mma``: mma.sync m16n8k16 fed by a cp.async pipeline of 1-4 stages, 16-byte chunks where a
  chunk is inside and aligned and zero-filled element copies otherwise (the seed's mixed path);
  ``bounds = "false"`` promises full tiles and aligned rows. ``swizzle`` picks the shared tiles'
  layout: "none" pads every row by 16 bytes, "32B" / "64B" / "128B" keep rows unpadded and permute
  their 16-byte chunks with that TMA swizzle pattern. No Hopper-only instruction (cp.async and
  mma.sync are sm_80 features), though only the H200 has run it.
- ``wgmma``: Hopper (sm_90a): TMA loads with the 128-byte swizzle (``swizzle = "128B"``, the layout
  its wgmma descriptors read) into a 2-4 stage mbarrier ring, a producer warpgroup and 1-2 consumer
  warpgroups issuing wgmma m64nBNk16. The tensor maps zero-fill past M, N and K, so any shape works;
  rows must be 16-byte aligned (``lda``, ``ldb`` multiples of 8). A block computes
  ``tiles_per_block`` tiles in turn, so one tile's epilogue overlaps the next one's loads (the grid
  shrinks by that factor).
- ``padded``: for unaligned rows, one ``pad_rows`` launch first copies A and/or B into workspace with
  rows of ``ceil(cols / 8) * 8`` elements, then the wgmma kernel runs on the copies; the copies are
  timed with the product (the seed's compact-versus-padded comparison).

Verification is within a tolerance (``Family.tolerance``): the float64 reference, rounded to D's type,
may differ by ``atol + rtol * |want|`` with ``rtol = 1e-2`` and ``atol = 1e-2 * sqrt(K / 64) *
mean|A| * mean|B|`` (the semantics' bf16 tolerance for unit-scale inputs, scaled to these inputs);
NaN never passes.

Problem keys: ``M``, ``N``, ``K`` (positive), ``lda`` (K), ``ldb`` (N), ``ldd`` (N), ``out_dtype``
("bfloat16" or "float32", default "bfloat16"), ``alpha`` (1.0), ``relu`` (false). Buffers: inputs
``A`` (M, lda) and ``B`` (K, ldb) bfloat16; output ``D`` (M, ldd); workspace ``A_padded`` /
``B_padded`` when ``lda`` / ``ldb`` is not a multiple of 8.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dtypes import element_type, random_bits
from ..errors import InvalidProblem
from ..limits import MAX_GRID_X, MAX_GRID_Y, MAX_SHARED_BYTES
from ..parallel import filled
from ..params import Config, Param, Space
from ..tma import MAX_COORDINATE, SWIZZLE_BYTES, TensorMapRequest
from ..tma import violations as tensor_map_violations
from .base import (
    Arg,
    Baseline,
    BufferArg,
    BufferSpec,
    Family,
    KernelLaunch,
    KernelSource,
    LaunchGeometry,
    Problem,
    ScalarArg,
    TensorMapArg,
    Tolerance,
    Work,
    instantiate,
    library_files,
    problem_as,
)
from .indexed import MAX_ELEMENTS, positive, reject_unknown

KNOWN = {"M", "N", "K", "lda", "ldb", "ldd", "out_dtype", "alpha", "relu"}
OUT_DTYPES = ("bfloat16", "float32")
PAD = 8  # elements of padding per shared-memory row of the mma path with swizzle 'none' (kernels/gemm/gemm.cu)
MAX_ACCUMULATORS = 128  # float32 accumulators per thread (Tylo's register limit)
WG_BK = 64  # K step of the wgmma paths: one 128-byte swizzle row of bfloat16
WGMMA_PATHS = ("wgmma", "padded")
PAD_THREADS, PAD_SPAN = 256, 2048  # pad_rows: threads per block, elements of a row per block step


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
        Param("swizzle", tuple(SWIZZLE_BYTES), "shared tiles: 'none' pads rows (mma); 32B/64B/128B swizzle chunks"),
        Param("bounds", ("true", "false"), "'false' promises full tiles (and, for mma, 16-byte aligned rows)"),
        Param("path", ("mma", "wgmma", "padded"), "mma.sync + cp.async; TMA + wgmma; wgmma on padded copies"),
        Param("consumers", (1, 2), "consumer warpgroups of the wgmma paths"),
        Param("tiles_per_block", (1, 2, 4, 8, 16), "tiles of D each block of the wgmma paths computes in turn"),
    ))

    @property
    def source_files(self):  # type: ignore[override]
        return library_files("gemm/gemm.cu", "include/tunebox/async_copy.cuh", "include/tunebox/tma.cuh")

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
        padded = tuple(BufferSpec(f"{name}_padded", (rows, _round8(cols)), "bfloat16", "workspace")
                       for name, rows, cols, ld in (("A", p.M, p.K, p.lda), ("B", p.K, p.N, p.ldb)) if ld % 8)
        return (BufferSpec("A", (p.M, p.lda), "bfloat16", "input"), BufferSpec("B", (p.K, p.ldb), "bfloat16", "input"),
                BufferSpec("D", (p.M, p.ldd), p.out_dtype, "output"), *padded)

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
        out = filled((p.M, p.ldd), et.poison, et.storage)  # the padding columns stay untouched
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
        """Dynamic shared memory per block: the stages' buffers (for mma, rows padded with swizzle
        'none'; for wgmma swizzled boxes plus 1024 bytes to align them to the swizzle period)."""
        bm, bn, bk, stages = (int(config[k]) for k in ("BM", "BN", "BK", "stages"))
        if config["path"] in WGMMA_PATHS:
            return stages * (bm + bn) * WG_BK * 2 + 1024
        pad = PAD if config["swizzle"] == "none" else 0
        return stages * (bm * (bk + pad) + bk * (bn + pad)) * 2

    def default_config(self, problem: Problem) -> Config:
        p = self._as_problem(problem)
        tile = 128 if min(p.M, p.N) >= 128 else 64 if min(p.M, p.N) >= 64 else 32
        return self.space.validate({"BM": tile, "BN": tile, "BK": 32, "warps_m": 2, "warps_n": 2, "stages": 2,
                                    "swizzle": "none", "bounds": "true", "path": "mma", "consumers": 1,
                                    "tiles_per_block": 1})

    def violations(self, problem: Problem, config: Config) -> list[str]:
        p = self._as_problem(problem)
        bm, bn = int(config["BM"]), int(config["BN"])
        broken = self._wgmma_violations(p, config) if config["path"] in WGMMA_PATHS else self._mma_violations(p, config)
        smem = self.shared_bytes(config)
        if smem > MAX_SHARED_BYTES:
            broken.append(f"{smem} bytes of shared memory exceed {MAX_SHARED_BYTES}")
        if config["bounds"] == "false" and (p.M % bm or p.N % bn):
            broken.append(f"bounds='false' needs full tiles of D: M % BM = N % BN = 0 ({p.M} % {bm}, {p.N} % {bn})")
        return broken

    @staticmethod
    def _mma_violations(p: GemmProblem, config: Config) -> list[str]:
        bm, bn, bk = int(config["BM"]), int(config["BN"]), int(config["BK"])
        wm, wn = int(config["warps_m"]), int(config["warps_n"])
        broken = []
        if config["consumers"] != 1 or config["tiles_per_block"] != 1:
            broken.append("consumers and tiles_per_block belong to the wgmma paths; path 'mma' takes consumers=1, "
                          "tiles_per_block=1 (and warps_m x warps_n warps, one tile each)")
        if math.ceil(p.M / bm) > MAX_GRID_Y or math.ceil(p.N / bn) > MAX_GRID_X:
            broken.append(f"the grid of {math.ceil(p.N / bn)} x {math.ceil(p.M / bm)} blocks exceeds the limits")
        if bm % (16 * wm) or bn % (8 * wn):
            broken.append(f"warp tiles of whole 16 x 8 MMA tiles need BM % (16 x warps_m) = BN % (8 x warps_n) = 0 "
                          f"(BM={bm}, BN={bn}, warps {wm} x {wn})")
        elif (bm // wm // 16) * (bn // wn // 8) * 4 > MAX_ACCUMULATORS:
            broken.append(f"a {bm // wm} x {bn // wn} warp tile holds {(bm // wm) * (bn // wn) // 32} float32 "
                          f"accumulators per thread (at most {MAX_ACCUMULATORS})")
        if config["bounds"] == "false":
            if p.K % bk:
                broken.append(f"bounds='false' needs full K steps on path 'mma': K % BK = 0 ({p.K} % {bk})")
            if p.lda % 8 or p.ldb % 8:
                broken.append(f"bounds='false' needs 16-byte rows of A and B (lda, ldb multiples of 8; "
                              f"{p.lda}, {p.ldb})")
        return broken

    def _wgmma_violations(self, p: GemmProblem, config: Config) -> list[str]:
        bm, bn, consumers = int(config["BM"]), int(config["BN"]), int(config["consumers"])
        broken = []
        if config["BK"] != WG_BK or config["warps_m"] != 1 or config["warps_n"] != 1 or config["swizzle"] != "128B":
            broken.append(f"path {config['path']!r} steps K by {WG_BK} (one 128-byte swizzle row, the layout its "
                          f"wgmma descriptors read) with whole warpgroups: set BK={WG_BK}, swizzle='128B', "
                          "warps_m=1, warps_n=1")
        if bm % (64 * consumers) or bm // (64 * consumers) > 2:
            broken.append(f"each of the {consumers} consumer warpgroup(s) multiplies 1 or 2 tiles of 64 rows: "
                          f"BM must be {64 * consumers} or {128 * consumers} (BM={bm})")
        elif bn % 64:
            broken.append(f"B moves in boxes of 64 columns: BN must be 64, 128 or 256 (BN={bn})")
        elif bm // (64 * consumers) * bn // 2 > MAX_ACCUMULATORS:
            broken.append(f"{bm // (64 * consumers) * bn // 2} float32 accumulators per thread (at most "
                          f"{MAX_ACCUMULATORS}): lower BN or add a consumer")
        if config["stages"] < 2:
            broken.append(f"path {config['path']!r} keeps one stage's products in flight while the next stage "
                          "loads: stages >= 2")
        aligned = p.lda % 8 == 0 and p.ldb % 8 == 0
        if config["path"] == "wgmma" and not aligned:
            broken.append(f"TMA needs 16-byte rows of A and B (lda, ldb multiples of 8; {p.lda}, {p.ldb}): use "
                          "path 'padded'")
        if config["path"] == "padded" and aligned:
            broken.append("the rows of A and B are already 16-byte aligned: path 'wgmma' does the same without "
                          "the copies")
        if max(p.M, p.N, p.K) > MAX_COORDINATE:
            broken.append(f"TMA coordinates are 32-bit: M, N and K must stay below 2^31 ({p.M}, {p.N}, {p.K})")
        elif not broken:
            for arg in self._tensor_maps(p, config):
                broken += [f"tensor map of {arg.buffer}: {b}" for b in
                           tensor_map_violations(dataclasses.replace(arg.request, address=256))]
        return broken

    def render(self, problem: Problem, config: Config) -> KernelSource:
        p = self._as_problem(problem)
        out, relu = element_type(p.out_dtype).ctype, str(p.relu).lower()
        if config["path"] == "mma":
            targs = (out, *(config[k] for k in ("BM", "BN", "BK", "warps_m", "warps_n", "stages")),
                     SWIZZLE_BYTES[config["swizzle"]], config["bounds"], relu)
            return instantiate("gemm/gemm.cu", "gemm", targs)
        source = instantiate("gemm/gemm.cu", "gemm_wgmma", (out, config["BM"], config["BN"], config["consumers"],
                                                            config["stages"], config["bounds"], relu))
        return dataclasses.replace(source, helpers=("pad_rows",) if config["path"] == "padded" else (),
                                   arch_suffix="a")

    def geometry(self, problem: Problem, config: Config) -> LaunchGeometry:
        p = self._as_problem(problem)
        tiles_n, tiles_m = math.ceil(p.N / int(config["BN"])), math.ceil(p.M / int(config["BM"]))
        if config["path"] in WGMMA_PATHS:  # one block per tiles_per_block tiles, tiles in row-major order
            blocks = math.ceil(tiles_n * tiles_m / int(config["tiles_per_block"]))
            return LaunchGeometry((blocks, 1, 1), (128 * (int(config["consumers"]) + 1), 1, 1),
                                  self.shared_bytes(config))
        threads = 32 * int(config["warps_m"]) * int(config["warps_n"])
        return LaunchGeometry((tiles_n, tiles_m, 1), (threads, 1, 1), self.shared_bytes(config))

    def args(self, problem: Problem, config: Config) -> tuple[Arg, ...]:
        p = self._as_problem(problem)
        alpha = ScalarArg("f32", p.alpha)
        if config["path"] in WGMMA_PATHS:
            return (*self._tensor_maps(p, config), BufferArg("D"),
                    *(ScalarArg("i64", v) for v in (p.M, p.N, p.K, p.ldd)), alpha)
        return (BufferArg("A"), BufferArg("B"), BufferArg("D"),
                *(ScalarArg("i64", v) for v in (p.M, p.N, p.K, p.lda, p.ldb, p.ldd)), alpha)

    def prologue(self, problem: Problem, config: Config) -> tuple[KernelLaunch, ...]:
        """Path 'padded': one ``pad_rows`` launch copying each operand with unaligned rows into its
        workspace (gridDim.z = the number of copies; the second argument set repeats the first when
        there is one copy, and is not read)."""
        p = self._as_problem(problem)
        if config["path"] != "padded":
            return ()
        copies = [(name, rows, cols, ld) for name, rows, cols, ld in (("A", p.M, p.K, p.lda), ("B", p.K, p.N, p.ldb))
                  if ld % 8]
        args = [(BufferArg(name), BufferArg(f"{name}_padded"),
                 *(ScalarArg("i64", v) for v in (rows, cols, ld, _round8(cols)))) for name, rows, cols, ld in copies]
        grid = (math.ceil(max(_round8(cols) for _, _, cols, _ in copies) / PAD_SPAN),
                min(max(rows for _, rows, _, _ in copies), MAX_GRID_Y), len(copies))
        return (KernelLaunch("pad_rows", LaunchGeometry(grid, (PAD_THREADS, 1, 1), 0), (*args[0], *args[-1])),)

    @staticmethod
    def _tensor_maps(p: GemmProblem, config: Config) -> tuple[TensorMapArg, TensorMapArg]:
        """TMA maps of A (boxes of BM rows x 64) and B (64 x 64), on the padded copies where used."""
        maps = []
        for name, rows, cols, ld, box in (("A", p.M, p.K, p.lda, (int(config["BM"]), WG_BK)),
                                          ("B", p.K, p.N, p.ldb, (WG_BK, 64))):
            if config["path"] == "padded" and ld % 8:
                name, ld = f"{name}_padded", _round8(cols)
            maps.append(TensorMapArg(name, TensorMapRequest("bfloat16", (rows, cols), (ld * 2, 2), box, 0, "128B",
                                                            l2_promotion="128B")))
        return maps[0], maps[1]

    def distance(self, a: Problem, b: Problem) -> float | None:
        pa, pb = self._as_problem(a), self._as_problem(b)
        if (pa.out_dtype, pa.relu) != (pb.out_dtype, pb.relu):
            return None
        return sum(abs(math.log2(x / y)) for x, y in ((pa.M, pb.M), (pa.N, pb.N), (pa.K, pb.K)))

    def torch_baselines(self, problem: Problem) -> tuple[Baseline, ...]:
        """``torch.matmul`` as a user calls it, and for bfloat16 output also with
        ``allow_bf16_reduced_precision_reduction`` off: on the H200 the default's cuBLAS result for
        4099 x 4097 x 4095 misses the family's tolerance (385884 of 16793603 elements, largest error 16
        against an atol of 0.71: ``rejected_baselines`` in ``results/benchmarks/gemm.json``), the strict
        setting meets it."""
        import torch

        p = self._as_problem(problem)
        if (p.lda, p.ldb, p.ldd) != (p.K, p.N, p.N):
            raise NotImplementedError("gemm: the torch baseline covers dense operands (lda = K, ldb = ldd = N)")
        f32 = p.out_dtype == "float32"
        matmul = "torch.matmul(A.float(), B.float())" if f32 else "torch.matmul(A, B)"
        name = f"torch: {matmul}" + (f" * {p.alpha:g}" if p.alpha != 1.0 else "") + (", relu" if p.relu else "")

        def run(t: dict[str, Any]) -> dict[str, Any]:
            a, b = t["A"].view(torch.bfloat16), t["B"].view(torch.bfloat16)
            d = torch.matmul(a.float(), b.float()) if f32 else torch.matmul(a, b)
            if p.alpha != 1.0:
                d = d * p.alpha
            if p.relu:
                d = torch.relu(d)
            return {"D": d}

        if f32:
            return (Baseline(name, run),)

        def strict(t: dict[str, Any]) -> dict[str, Any]:
            flags = torch.backends.cuda.matmul
            default = flags.allow_bf16_reduced_precision_reduction
            flags.allow_bf16_reduced_precision_reduction = False
            try:
                return run(t)
            finally:
                flags.allow_bf16_reduced_precision_reduction = default

        return Baseline(name, run), Baseline(f"{name} (allow_bf16_reduced_precision_reduction=False)", strict)

    def _as_problem(self, problem: Problem) -> GemmProblem:
        return problem_as(self.name, problem, GemmProblem)


def _round8(n: int) -> int:
    """Elements in a row of ``n`` bfloat16 rounded up to 16 bytes."""
    return -(-n // 8) * 8
