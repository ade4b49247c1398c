"""Family ``gather``: rows of ``A`` picked by index, padding for invalid entries.

``out[k, :] = A[idx[k] + offset, :]`` when entry k is valid, else the padding bits, for every
``k < K``; ``A`` is (N, D) and ``out`` (K, D) of ``dtype``. Validity, the mask and the seeded inputs
are described in ``tunebox.families.indexed``. Every element of ``out`` is written; ``A`` is read
only at valid rows (a sentinel or out-of-range entry never touches memory). Repeated indices are
fine: each reads the same row.

Problem keys: ``dtype``, ``rows`` (N), ``cols`` (D), ``count`` (K), ``index_dtype`` ("int32" or
"int64", default "int32"), ``offset`` (0), ``mask`` (false), ``mask_rate`` (0.0, with a mask only),
``sentinel_rate`` (fraction of row -1 entries, 0.0), ``oob_rate`` (fraction of rows >= N, 0.0),
``padding`` ("zero", or any mode of ``tunebox.dtypes.PADDING_MODES``) and ``pad_value`` (with
``padding = "value"`` only). The rates lie in [0, 1] and add up to at most 1.

Buffers: inputs ``A`` (N, D), ``idx`` (K,) of the index type and, with a mask, ``mask`` (K,) uint8;
output ``out`` (K, D).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dtypes import PADDING_MODES, element_type, padding_bits, random_bits
from ..errors import InvalidProblem
from ..params import Config
from .base import Arg, Baseline, BufferArg, BufferSpec, Problem, ScalarArg, Work
from .indexed import (
    MASK_DTYPE,
    IndexedFamily,
    IndexedProblem,
    check_index_range,
    draw_invalid,
    index_type,
    mask_bytes,
    parse_common,
    rate,
    reject_unknown,
    signed,
    to_index,
    valid_rows,
)

KNOWN = {"dtype", "rows", "cols", "count", "index_dtype", "offset", "mask", "mask_rate", "sentinel_rate", "oob_rate",
         "padding", "pad_value"}


@dataclass(frozen=True)
class GatherProblem(IndexedProblem):
    sentinel_rate: float = 0.0
    oob_rate: float = 0.0
    padding: str = "zero"
    pad_value: float = 0.0  # used when padding == "value"

    @property
    def sentinels(self) -> int:
        return round(self.sentinel_rate * self.count)

    @property
    def out_of_range(self) -> int:
        return min(round(self.oob_rate * self.count), self.count - self.sentinels)

    @property
    def pad_bits(self) -> int:
        return padding_bits(element_type(self.element), self.padding, self.pad_value)

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d.update(sentinel_rate=self.sentinel_rate, oob_rate=self.oob_rate, padding=self.padding)
        if self.padding == "value":
            d["pad_value"] = self.pad_value
        return d


class Gather(IndexedFamily):
    name = "gather"
    kernel = "gather_rows"
    problem_type = GatherProblem

    def parse_problem(self, data: Mapping[str, Any]) -> GatherProblem:
        reject_unknown(self.name, data, KNOWN)
        fields = parse_common(self.name, data)
        sentinel_rate, oob_rate = rate(self.name, data, "sentinel_rate"), rate(self.name, data, "oob_rate")
        if sentinel_rate + oob_rate + fields["mask_rate"] > 1.0:
            raise InvalidProblem("gather: sentinel_rate + oob_rate + mask_rate must not exceed 1")
        padding = data.get("padding", "zero")
        if padding not in PADDING_MODES:
            raise InvalidProblem(f"gather: unknown padding {padding!r}; use one of {PADDING_MODES}")
        pad_value = data.get("pad_value", 0.0)
        if type(pad_value) not in (int, float) or (padding != "value" and "pad_value" in data):
            raise InvalidProblem("gather: pad_value must be a number, given only with padding='value'")
        try:
            pad_value = float(pad_value)
        except OverflowError:
            raise InvalidProblem(f"gather: pad_value {pad_value} is too large for a float") from None
        p = GatherProblem(**fields, sentinel_rate=sentinel_rate, oob_rate=oob_rate, padding=padding,
                          pad_value=pad_value)
        check_index_range(self.name, p, sentinel=p.sentinels > 0, beyond=p.out_of_range > 0)
        return p

    def buffers(self, problem: Problem) -> tuple[BufferSpec, ...]:
        p = self._as_problem(problem)
        mask = (BufferSpec("mask", (p.count,), MASK_DTYPE, "input"),) if p.mask else ()
        return (BufferSpec("A", (p.rows, p.cols), p.element, "input"),
                BufferSpec("idx", (p.count,), p.index_dtype, "input"), *mask,
                BufferSpec("out", (p.count, p.cols), p.element, "output"))

    def args(self, problem: Problem, config: Config) -> tuple[Arg, ...]:
        p = self._as_problem(problem)
        mask = (BufferArg("mask"),) if p.mask else ()
        pad_type = "u32" if element_type(p.element).itemsize == 4 else "u16"
        return (BufferArg("A"), BufferArg("idx"), *mask, BufferArg("out"),
                *(ScalarArg("i64", v) for v in (p.rows, p.cols, p.count, p.offset)), ScalarArg(pad_type, p.pad_bits))

    def make_inputs(self, problem: Problem, rng: np.random.Generator) -> dict[str, np.ndarray]:
        p = self._as_problem(problem)
        a = random_bits(element_type(p.element), (p.rows, p.cols), rng)
        rows = rng.integers(0, p.rows, p.count, dtype=np.int64)
        sentinel, beyond, masked = draw_invalid(p, rng)
        rows[sentinel] = -1
        if beyond.size:  # rows in [N, 2N), as far as the index type reaches (at least row N: see parse)
            span = min(p.rows, index_type(p.index_dtype).limits[1] + p.offset + 1 - p.rows)
            rows[beyond] = p.rows + rng.integers(0, span, beyond.size, dtype=np.int64)
        inputs = {"A": a, "idx": to_index(p, rows)}
        if p.mask:
            inputs["mask"] = mask_bytes(p, masked)
        return inputs

    def reference(self, problem: Problem, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        p = self._as_problem(problem)
        a = inputs["A"]
        valid, rows = valid_rows(p, inputs)
        out = np.full((p.count, p.cols), p.pad_bits, dtype=a.dtype)
        out[valid] = a[rows[valid]]
        return {"out": out}

    def work(self, problem: Problem) -> Work:
        p = self._as_problem(problem)
        row_bytes = p.cols * element_type(p.element).itemsize
        return Work((p.count + p.valid_entries) * row_bytes + self.index_bytes(p))

    def torch_baseline(self, problem: Problem) -> Baseline:
        import torch

        p = self._as_problem(problem)
        pad = signed(p.pad_bits, element_type(p.element).itemsize)

        if p.all_valid:
            shift = f" + {p.offset}" if p.offset else ""
            return Baseline(f"torch: index_select(A, 0, idx{shift})", lambda t: {
                "out": torch.index_select(t["A"], 0, t["idx"].long() + p.offset if p.offset else t["idx"])})

        def padded(t: dict[str, Any]) -> dict[str, Any]:
            rows = t["idx"].long() + p.offset
            valid = (rows >= 0) & (rows < p.rows)
            if p.mask:
                valid &= t["mask"].view(torch.uint8) != 0
            out = torch.index_select(t["A"], 0, rows.clamp(0, p.rows - 1))
            return {"out": out.masked_fill_(~valid[:, None], pad)}

        return Baseline(f"torch: index_select(A, 0, clamp(idx + offset)).masked_fill_(~valid, {p.padding})", padded)
