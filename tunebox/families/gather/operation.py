"""The gather operation: rows (or columns) of ``A`` picked by index, padding for invalid entries."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ...dtypes import element_type, random_bits
from ...parallel import filled
from ..base import Baseline, BufferSpec, Work
from ..contract import Operation
from ..indexed import MASK_DTYPE, caller_problem, index_type, matrix_shape
from ..indexed_rows import draw_invalid, index_bytes, indexed_distance, mask_bytes, to_index, valid_rows
from .baselines import torch_baseline
from .problem import NAME, GatherProblem, parse_gather


class GatherOperation(Operation[GatherProblem]):
    name = NAME
    draws = frozenset({"sentinel_rate", "oob_rate", "mask_rate", "valid_promise"})
    array_fields = frozenset({"dtype", "rows", "cols", "count", "index_dtype", "mask"})
    fields = {
        "dtype": "element type of A and out",
        "rows": "N: rows of A",
        "cols": "D: columns of A",
        "count": "K: indices",
        "index_dtype": "int32 (default) or int64",
        "offset": "added to every index (default 0)",
        "axis": "the indexed axis of A: 0 (rows, default) or 1 (columns)",
        "window": "extent of the dense range (default the whole other dimension)",
        "dense_offset": "start of the dense range (default 0; may be negative or run past the end)",
        "mask": "a uint8 mask buffer of K entries (default false)",
        "mask_rate": "fraction of masked-out entries (with a mask only)",
        "sentinel_rate": "fraction of index -1 entries (default 0)",
        "oob_rate": "fraction of indices beyond the indexed extent (default 0)",
        "padding": "what invalid elements read: zero (default), neg_zero, nan, pos_inf, neg_inf or value",
        "pad_value": "the padding number (with padding = 'value' only)",
        "valid_promise": "caller arrays: the caller promises every index valid (check_bounds=False)",
    }

    def parse(self, data: Mapping[str, Any]) -> GatherProblem:
        return parse_gather(data)

    def from_arrays(self, arrays: Mapping[str, Any], **options: Any) -> GatherProblem:
        """Arrays ``A`` (N, D), ``idx`` (K,), optional ``mask`` (K,) and ``out``; options as the problem
        keys (offset, axis, window, dense_offset, padding, pad_value) and ``check_bounds``."""
        data = caller_problem(self.name, arrays, ("A", "idx", "out"), options)
        rows, cols = matrix_shape(self.name, "A", arrays["A"])
        (count,) = matrix_shape(self.name, "idx", arrays["idx"], rank=1)
        return self.parse({"dtype": str(arrays["A"].dtype), "rows": rows, "cols": cols, "count": count, **data})

    def buffers(self, problem: GatherProblem) -> tuple[BufferSpec, ...]:
        p = problem
        mask = (BufferSpec("mask", (p.count,), MASK_DTYPE, "input"),) if p.mask else ()
        return (
            BufferSpec("A", (p.rows, p.cols), p.element, "input"),
            BufferSpec("idx", (p.count,), p.index_dtype, "input"),
            *mask,
            BufferSpec("out", p.out_shape, p.element, "output"),
        )

    def make_inputs(self, problem: GatherProblem, rng: np.random.Generator) -> dict[str, np.ndarray]:
        p = problem
        a = random_bits(element_type(p.element), (p.rows, p.cols), rng)
        n = p.extent
        rows = rng.integers(0, n, p.count, dtype=np.int64)
        sentinel, beyond, masked = draw_invalid(p, rng)
        rows[sentinel] = -1
        if beyond.size:  # indices in [n, 2n), as far as the index type reaches (at least n: see parse)
            span = min(n, index_type(p.index_dtype).limits[1] + p.offset + 1 - n)
            rows[beyond] = n + rng.integers(0, span, beyond.size, dtype=np.int64)
        inputs = {"A": a, "idx": to_index(p, rows)}
        if p.mask:
            inputs["mask"] = mask_bytes(p, masked)
        return inputs

    def reference(self, problem: GatherProblem, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        p = problem
        a = inputs["A"]
        valid, index = valid_rows(p, inputs)
        out = filled(p.out_shape, p.pad_bits, a.dtype)
        if p.whole_rows:
            out[valid] = a[index[valid]]
            return {"out": out}
        dense = p.dense_offset + np.arange(p.span, dtype=np.int64)
        k, j = np.flatnonzero(valid), np.flatnonzero((dense >= 0) & (dense < p.dense_extent))
        if p.axis == 0:
            out[np.ix_(k, j)] = a[np.ix_(index[k], dense[j])]
        else:
            out[np.ix_(j, k)] = a[np.ix_(dense[j], index[k])]
        return {"out": out}

    def work(self, problem: GatherProblem) -> Work:
        p = problem
        size = element_type(p.element).itemsize
        return Work((p.count * p.span + p.valid_entries * p.dense_inside) * size + index_bytes(p))

    def distance(self, a: GatherProblem, b: GatherProblem) -> float | None:
        base = indexed_distance(a, b)
        if base is None or a.axis != b.axis:
            return None
        if a.whole_rows and b.whole_rows:
            return base
        return base + abs(math.log2(a.span / b.span))

    def baselines(self, problem: GatherProblem) -> tuple[Baseline, ...]:
        return (torch_baseline(problem),)
