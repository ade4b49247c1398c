"""The scatter operation: rows of ``V`` written to ``A`` at indexed rows; every other row untouched."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...dtypes import element_type, random_bits
from ...errors import InvalidProblem
from ...parallel import filled
from ..base import Baseline, BufferSpec, Work
from ..contract import Operation
from ..indexed import (
    MASK_DTYPE,
    IndexedProblem,
    caller_problem,
    check_index_range,
    matrix_shape,
    parse_common,
    reject_unknown,
    signed,
)
from ..indexed_rows import draw_invalid, index_bytes, indexed_distance, mask_bytes, to_index, valid_rows

KNOWN = {"dtype", "rows", "cols", "count", "index_dtype", "offset", "mask", "mask_rate", "valid_promise"}


@dataclass(frozen=True)
class ScatterProblem(IndexedProblem):
    pass


class ScatterOperation(Operation[ScatterProblem]):
    name = "scatter"
    draws = frozenset({"mask_rate", "valid_promise"})
    array_fields = frozenset({"dtype", "rows", "cols", "count", "index_dtype", "mask"})
    fields = {
        "dtype": "element type of V and A",
        "rows": "N: rows of A",
        "cols": "D: columns of A and V",
        "count": "K: indices, at most N (targets are unique)",
        "index_dtype": "int32 (default) or int64",
        "offset": "added to every index (default 0)",
        "mask": "a uint8 mask buffer of K entries (default false)",
        "mask_rate": "fraction of masked-out entries (with a mask only)",
        "valid_promise": "caller arrays: the caller promises every index valid (check_bounds=False)",
    }

    def parse(self, data: Mapping[str, Any]) -> ScatterProblem:
        reject_unknown(self.name, data, KNOWN)
        p = ScatterProblem(**parse_common(self.name, data))
        if p.count > p.rows:
            raise InvalidProblem(f"scatter: count {p.count} exceeds rows {p.rows}: targets must be unique")
        check_index_range(self.name, p, sentinel=False, beyond=False)
        return p

    def from_arrays(self, arrays: Mapping[str, Any], **options: Any) -> ScatterProblem:
        """Arrays ``V`` (K, D), ``idx`` (K,), optional ``mask`` (K,) and ``A`` (N, D), whose valid
        targets must be unique; options ``offset`` and ``check_bounds``."""
        data = caller_problem(self.name, arrays, ("V", "idx", "A"), options)
        count, cols = matrix_shape(self.name, "V", arrays["V"])
        rows, _ = matrix_shape(self.name, "A", arrays["A"])
        matrix_shape(self.name, "idx", arrays["idx"], rank=1)
        return self.parse({"dtype": str(arrays["V"].dtype), "rows": rows, "cols": cols, "count": count, **data})

    def buffers(self, problem: ScatterProblem) -> tuple[BufferSpec, ...]:
        p = problem
        mask = (BufferSpec("mask", (p.count,), MASK_DTYPE, "input"),) if p.mask else ()
        return (
            BufferSpec("V", (p.count, p.cols), p.element, "input"),
            BufferSpec("idx", (p.count,), p.index_dtype, "input"),
            *mask,
            BufferSpec("A", (p.rows, p.cols), p.element, "output"),
        )

    def make_inputs(self, problem: ScatterProblem, rng: np.random.Generator) -> dict[str, np.ndarray]:
        p = problem
        v = random_bits(element_type(p.element), (p.count, p.cols), rng)
        # K distinct rows in random order: distributed like permutation(N)[:K], without O(N) work for large N
        targets = rng.choice(p.rows, size=p.count, replace=False).astype(np.int64)
        _, _, masked = draw_invalid(p, rng)
        inputs = {"V": v, "idx": to_index(p, targets)}
        if p.mask:
            inputs["mask"] = mask_bytes(p, masked)
        return inputs

    def reference(self, problem: ScatterProblem, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        p = problem
        et = element_type(p.element)
        valid, rows = valid_rows(p, inputs)
        a = filled((p.rows, p.cols), et.poison, et.storage)  # untouched rows stay poison
        a[rows[valid]] = inputs["V"][valid]
        return {"A": a}

    def work(self, problem: ScatterProblem) -> Work:
        row_bytes = problem.cols * element_type(problem.element).itemsize
        return Work(2 * problem.valid_entries * row_bytes + index_bytes(problem))

    def distance(self, a: ScatterProblem, b: ScatterProblem) -> float | None:
        return indexed_distance(a, b)

    def baselines(self, problem: ScatterProblem) -> tuple[Baseline, ...]:
        """``A.index_copy_(0, idx + offset, V)`` into an A that starts as poison, like the kernel's
        output (filled once, on the first call: later calls rewrite the same rows). With a mask, the
        selected rows only, ``A.index_copy_(0, (idx + offset)[m], V[m])`` with ``m = mask != 0``:
        what a torch user writes (boolean indexing synchronises with the host)."""
        import torch

        p = problem
        et = element_type(p.element)
        state: dict[str, Any] = {}

        def run(t: dict[str, Any]) -> dict[str, Any]:
            v, idx = t["V"], t["idx"]
            if "A" not in state:
                state["A"] = torch.full(
                    (p.rows, p.cols), signed(et.poison, et.itemsize), dtype=v.dtype, device=v.device
                )
            rows = idx.long() + p.offset
            if p.mask:
                selected = t["mask"].view(torch.uint8) != 0
                rows, v = rows[selected], v[selected]
            state["A"].index_copy_(0, rows, v)
            return {"A": state["A"]}

        selected = "(idx + offset)[m], V[m]) with m = mask != 0" if p.mask else "idx + offset, V)"
        return (Baseline(f"torch: A.index_copy_(0, {selected}", run),)
