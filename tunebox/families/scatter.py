"""Family ``scatter``: rows of ``V`` written to ``A`` at indexed rows; every other row untouched.

``A[idx[k] + offset, :] = V[k, :]`` for each ``k < K`` whose entry is valid (see
``tunebox.families.indexed``: the mask, and ``0 <= idx[k] + offset < N``); ``V`` is (K, D) and ``A``
(N, D) of ``dtype``. An invalid entry writes nothing, and no row outside the valid targets is
written. Targets must be unique: with duplicate targets the result is undefined (the seeded inputs
draw K distinct rows, a random K-subset of range(N) in random order, so ``count <= rows``).

Verification contract ("untouched" means "still poison"): ``A`` is this family's output buffer, and
the GPU worker fills every output with the element type's poison bits
(``tunebox.dtypes.ElementType.poison``) before each launch. ``reference()`` therefore returns poison
for every row that no valid entry targets and ``V[k]`` for each valid target, so the bit-exact
comparison proves both that every valid row was written and that nothing else was. The kernel keeps
the real semantics: it never reads ``A`` and writes only the targeted rows.

Problem keys: ``dtype``, ``rows`` (N), ``cols`` (D), ``count`` (K <= N), ``index_dtype`` ("int32"
or "int64", default "int32"), ``offset`` (0), ``mask`` (false) and ``mask_rate`` (0.0, with a mask
only). Buffers: inputs ``V`` (K, D), ``idx`` (K,) and, with a mask, ``mask`` (K,) uint8; output
``A`` (N, D).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dtypes import element_type, random_bits
from ..errors import InvalidProblem
from ..parallel import filled
from ..params import Config
from .base import Arg, Baseline, BufferArg, BufferSpec, Problem, ScalarArg, Work
from .indexed import (
    MASK_DTYPE,
    IndexedFamily,
    IndexedProblem,
    caller_problem,
    check_index_range,
    draw_invalid,
    mask_bytes,
    matrix_shape,
    parse_common,
    reject_unknown,
    signed,
    to_index,
    valid_rows,
)

KNOWN = {"dtype", "rows", "cols", "count", "index_dtype", "offset", "mask", "mask_rate", "valid_promise"}


@dataclass(frozen=True)
class ScatterProblem(IndexedProblem):
    pass


class Scatter(IndexedFamily):
    name = "scatter"
    kernel = "scatter_rows"
    problem_type = ScatterProblem

    def parse_problem(self, data: Mapping[str, Any]) -> ScatterProblem:
        reject_unknown(self.name, data, KNOWN)
        p = ScatterProblem(**parse_common(self.name, data))
        if p.count > p.rows:
            raise InvalidProblem(f"scatter: count {p.count} exceeds rows {p.rows}: targets must be unique")
        check_index_range(self.name, p, sentinel=False, beyond=False)
        return p

    def problem_from_arrays(self, arrays: Mapping[str, Any], **options: Any) -> ScatterProblem:
        """Arrays ``V`` (K, D), ``idx`` (K,), optional ``mask`` (K,) and ``A`` (N, D), whose valid
        targets must be unique; options ``offset`` and ``check_bounds``."""
        data = caller_problem(self.name, arrays, ("V", "idx", "A"), options)
        count, cols = matrix_shape(self.name, "V", arrays["V"])
        rows, _ = matrix_shape(self.name, "A", arrays["A"])
        matrix_shape(self.name, "idx", arrays["idx"], rank=1)
        return self.parse_problem({"dtype": str(arrays["V"].dtype), "rows": rows, "cols": cols, "count": count,
                                   **data})

    def buffers(self, problem: Problem) -> tuple[BufferSpec, ...]:
        p = self._as_problem(problem)
        mask = (BufferSpec("mask", (p.count,), MASK_DTYPE, "input"),) if p.mask else ()
        return (BufferSpec("V", (p.count, p.cols), p.element, "input"),
                BufferSpec("idx", (p.count,), p.index_dtype, "input"), *mask,
                BufferSpec("A", (p.rows, p.cols), p.element, "output"))

    def args(self, problem: Problem, config: Config) -> tuple[Arg, ...]:
        p = self._as_problem(problem)
        mask = (BufferArg("mask"),) if p.mask else ()
        return (BufferArg("V"), BufferArg("idx"), *mask, BufferArg("A"),
                *(ScalarArg("i64", v) for v in (p.rows, p.cols, p.count, p.offset)))

    def make_inputs(self, problem: Problem, rng: np.random.Generator) -> dict[str, np.ndarray]:
        p = self._as_problem(problem)
        v = random_bits(element_type(p.element), (p.count, p.cols), rng)
        # K distinct rows in random order: distributed like permutation(N)[:K], without O(N) work for large N
        targets = rng.choice(p.rows, size=p.count, replace=False).astype(np.int64)
        _, _, masked = draw_invalid(p, rng)
        inputs = {"V": v, "idx": to_index(p, targets)}
        if p.mask:
            inputs["mask"] = mask_bytes(p, masked)
        return inputs

    def reference(self, problem: Problem, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        p = self._as_problem(problem)
        et = element_type(p.element)
        valid, rows = valid_rows(p, inputs)
        a = filled((p.rows, p.cols), et.poison, et.storage)  # untouched rows stay poison
        a[rows[valid]] = inputs["V"][valid]
        return {"A": a}

    def work(self, problem: Problem) -> Work:
        p = self._as_problem(problem)
        row_bytes = p.cols * element_type(p.element).itemsize
        return Work(2 * p.valid_entries * row_bytes + self.index_bytes(p))

    def torch_baseline(self, problem: Problem) -> Baseline:
        """``A.index_copy_(0, idx + offset, V)`` into an A that starts as poison, like the kernel's
        output (filled once, on the first call: later calls rewrite the same rows). With a mask, the
        selected rows only, ``A.index_copy_(0, (idx + offset)[m], V[m])`` with ``m = mask != 0``:
        what a torch user writes (boolean indexing synchronises with the host)."""
        import torch

        p = self._as_problem(problem)
        et = element_type(p.element)
        state: dict[str, Any] = {}

        def run(t: dict[str, Any]) -> dict[str, Any]:
            v, idx = t["V"], t["idx"]
            if "A" not in state:
                state["A"] = torch.full((p.rows, p.cols), signed(et.poison, et.itemsize), dtype=v.dtype,
                                        device=v.device)
            rows = idx.long() + p.offset
            if p.mask:
                selected = t["mask"].view(torch.uint8) != 0
                rows, v = rows[selected], v[selected]
            state["A"].index_copy_(0, rows, v)
            return {"A": state["A"]}

        selected = "(idx + offset)[m], V[m]) with m = mask != 0" if p.mask else "idx + offset, V)"
        return Baseline(f"torch: A.index_copy_(0, {selected}", run)
