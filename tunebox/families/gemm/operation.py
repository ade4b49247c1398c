"""The gemm operation: ``D[:M, :N] = epilogue(alpha * A[:M, :K] @ B[:K, :N])`` on bfloat16 bits, its
problems, buffers, seeded inputs, float64 reference, tolerance, work, distance and torch baselines."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...dtypes import element_type, random_bits
from ...errors import InvalidProblem
from ...parallel import filled
from ..base import Baseline, BufferSpec, Problem, Tolerance, Work
from ..contract import Operation
from ..indexed import MAX_ELEMENTS, positive, reject_unknown
from .products import product_tolerance, shape_distance
from .split_k import split_buffers, split_slots

OUT_DTYPES = ("bfloat16", "float32")


FLOAT32_MAX = float(np.finfo(np.float32).max)  # alpha is applied in float32


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
        return {
            "M": self.M,
            "N": self.N,
            "K": self.K,
            "lda": self.lda,
            "ldb": self.ldb,
            "ldd": self.ldd,
            "out_dtype": self.out_dtype,
            "alpha": self.alpha,
            "relu": self.relu,
        }

    def operands(self) -> tuple[tuple[str, int, int, int], tuple[str, int, int, int]]:
        """(name, rows, columns, leading dimension) of A and of B."""
        return ("A", self.M, self.K, self.lda), ("B", self.K, self.N, self.ldb)

    def unaligned(self) -> tuple[tuple[str, int, int, int], ...]:
        """The operands whose rows are not 16-byte aligned (leading dimension not a multiple of 8):
        those the template ``padded`` copies into workspace."""
        return tuple(operand for operand in self.operands() if operand[3] % 8)

    def split_slots(self) -> int:
        """How many float32 partial sums of D (M x N each) split-K's workspace holds: the most K splits
        a tile may take (split_k.split_slots; 0 for unaligned rows, which the persistent template
        cannot read)."""
        return 0 if self.unaligned() else split_slots(self.M, self.N)


def round8(n: int) -> int:
    """Elements in a row of ``n`` bfloat16 rounded up to 16 bytes."""
    return -(-n // 8) * 8


class GemmOperation(Operation[GemmProblem]):
    name = "gemm"
    array_fields = frozenset({"M", "N", "K", "lda", "ldb", "ldd", "out_dtype"})
    fields = {
        "M": "rows of A and D (positive)",
        "N": "columns of B and D (positive)",
        "K": "columns of A, rows of B (positive)",
        "lda": "leading dimension of A in elements (>= K, default K)",
        "ldb": "leading dimension of B in elements (>= N, default N)",
        "ldd": "leading dimension of D in elements (>= N, default N)",
        "out_dtype": "D's type: 'bfloat16' (default) or 'float32'",
        "alpha": "scale of the product (finite, default 1.0)",
        "relu": "ReLU epilogue (default false)",
    }

    def parse(self, data: Mapping[str, Any]) -> GemmProblem:
        reject_unknown(self.name, data, set(self.fields))
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
        if type(alpha) not in (int, float) or not math.isfinite(alpha) or abs(alpha) > FLOAT32_MAX:
            raise InvalidProblem(f"{self.name}: alpha must be a finite float32 number, got {alpha!r}")
        if not isinstance(relu, bool):
            raise InvalidProblem(f"{self.name}: relu must be true or false, got {relu!r}")
        return GemmProblem(m, n, k, **lds, out_dtype=out_dtype, alpha=float(np.float32(alpha)), relu=relu)

    def from_arrays(self, arrays: Mapping[str, Any], **options: Any) -> GemmProblem:
        """Arrays ``A`` (M, lda), ``B`` (K, ldb) bfloat16 and ``D`` (M, ldd); options ``K`` (default
        lda), ``N`` (default ldb), ``alpha`` and ``relu``."""
        shapes = {}
        for name in ("A", "B", "D"):
            if name not in arrays or len(tuple(arrays[name].shape)) != 2:
                raise InvalidProblem(f"{self.name}: tunebox.launch needs 2-D arrays A, B and D")
            shapes[name] = tuple(arrays[name].shape)
        (m, lda), (_, ldb), (_, ldd) = shapes["A"], shapes["B"], shapes["D"]
        return self.parse(
            {
                "M": m,
                "K": lda,
                "N": ldb,
                "lda": lda,
                "ldb": ldb,
                "ldd": ldd,
                "out_dtype": str(arrays["D"].dtype),
                **options,
            }
        )

    def buffers(self, problem: GemmProblem) -> tuple[BufferSpec, ...]:
        p = problem
        padded = tuple(
            BufferSpec(f"{name}_padded", (rows, round8(cols)), "bfloat16", "workspace")
            for name, rows, cols, _ in p.unaligned()
        )
        return (
            BufferSpec("A", (p.M, p.lda), "bfloat16", "input"),
            BufferSpec("B", (p.K, p.ldb), "bfloat16", "input"),
            BufferSpec("D", (p.M, p.ldd), p.out_dtype, "output"),
            *padded,
            *split_buffers(p.M, p.N, p.split_slots()),
        )

    def make_inputs(self, problem: GemmProblem, rng: np.random.Generator) -> dict[str, np.ndarray]:
        bf16 = element_type("bfloat16")
        return {
            "A": random_bits(bf16, (problem.M, problem.lda), rng),
            "B": random_bits(bf16, (problem.K, problem.ldb), rng),
        }

    def reference(self, problem: GemmProblem, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        p = problem
        bf16 = element_type("bfloat16")
        d = p.alpha * (bf16.decode(inputs["A"][:, : p.K]) @ bf16.decode(inputs["B"][:, : p.N]))
        if p.relu:
            d = np.maximum(d, 0.0)
        et = element_type(p.out_dtype)
        out = filled((p.M, p.ldd), et.poison, et.storage)  # the padding columns stay untouched
        out[:, : p.N] = et.encode(d)
        return {"D": out}

    def tolerance(self, problem: GemmProblem, inputs: Mapping[str, np.ndarray]) -> Tolerance:
        p = problem
        bf16 = element_type("bfloat16")
        scale = bf16.mean_magnitude(inputs["A"][:, : p.K]) * bf16.mean_magnitude(inputs["B"][:, : p.N])
        return product_tolerance(p.K, scale * abs(p.alpha))

    def work(self, problem: GemmProblem) -> Work:
        p = problem
        out = element_type(p.out_dtype).itemsize
        return Work((p.M * p.K + p.K * p.N) * 2 + p.M * p.N * out, flops=2 * p.M * p.N * p.K)

    def distance(self, a: GemmProblem, b: GemmProblem) -> float | None:
        if (a.out_dtype, a.relu) != (b.out_dtype, b.relu):
            return None
        return shape_distance((a.M, a.N, a.K), (b.M, b.N, b.K))

    def baselines(self, problem: GemmProblem) -> tuple[Baseline, ...]:
        """``torch.matmul`` as a user calls it, and for bfloat16 output also with
        ``allow_bf16_reduced_precision_reduction`` off: on the H200 the default's cuBLAS result for
        4099 x 4097 x 4095 misses the family's tolerance (385884 of 16793603 elements, largest error 16
        against an atol of 0.71: ``rejected_baselines`` in ``results/benchmarks/gemm.json``), the strict
        setting meets it."""
        import torch

        p = problem
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
        plain = p.alpha == 1.0 and not p.relu

        def into(t: dict[str, Any], out: dict[str, Any]) -> None:
            torch.matmul(t["A"], t["B"], out=out["D"])

        def strictly(call: Callable[..., Any]) -> Callable[..., Any]:
            def strict(*args: Any) -> Any:
                flags = torch.backends.cuda.matmul
                default = flags.allow_bf16_reduced_precision_reduction
                flags.allow_bf16_reduced_precision_reduction = False
                try:
                    return call(*args)
                finally:
                    flags.allow_bf16_reduced_precision_reduction = default

            return strict

        return (
            Baseline(name, run, into if plain else None),
            Baseline(
                f"{name} (allow_bf16_reduced_precision_reduction=False)",
                strictly(run),
                strictly(into) if plain else None,
            ),
        )
