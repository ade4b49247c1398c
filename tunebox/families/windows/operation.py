"""The windows operation: problems, buffers, seeded inputs, the numpy reference, tolerance, work and
distance (the torch baselines are in ``baselines``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...dtypes import element_type, padding_bits, parse_padding, random_bits
from ...errors import InvalidProblem
from ..base import Baseline, BufferSpec, Problem, Tolerance, Work
from ..contract import Operation
from ..indexed import MAX_ELEMENTS, positive, reject_unknown
from .baselines import torch_baselines

KNOWN = {"dtype", "rows", "cols", "window", "step", "op", "padding", "pad_value"}
OPS = ("unfold", "sum", "max", "min")  # kernel codes 0..3
REDUCTIONS = OPS[1:]
MAX_WINDOW = 64  # per axis: a sum of at most 4096 terms keeps its tolerance below the smallest input
MAX_STEP = 1024
SUM_ATOL_PER_TERM = 2.0**-22  # times the largest |A|: float32 rounding of a sum, in any order


@dataclass(frozen=True)
class WindowsProblem(Problem):
    element: str
    rows: int  # R
    cols: int  # C
    window: tuple[int, int]  # (TH, TW)
    step: tuple[int, int]  # (SR, SC)
    op: str
    padding: str = "zero"  # unfold only
    pad_value: float = 0.0

    @property
    def dtype(self) -> str:
        return self.element

    @property
    def grid(self) -> tuple[int, int]:
        """(NR, NC): windows along each axis."""
        return (-(-self.rows // self.step[0]), -(-self.cols // self.step[1]))

    @property
    def reduces(self) -> bool:
        return self.op != "unfold"

    @property
    def out_shape(self) -> tuple[int, ...]:
        return self.grid if self.reduces else (*self.grid, *self.window)

    @property
    def out_dtype(self) -> str:
        return "float32" if self.reduces else self.element

    @property
    def reach(self) -> tuple[int, int]:
        """Rows and columns from A's origin to the far edge of the last windows: (NR - 1) * SR + TH, ..."""
        (nr, nc), (th, tw), (sr, sc) = self.grid, self.window, self.step
        return ((nr - 1) * sr + th, (nc - 1) * sc + tw)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "dtype": self.element,
            "rows": self.rows,
            "cols": self.cols,
            "window": list(self.window),
            "step": list(self.step),
            "op": self.op,
        }
        if not self.reduces:
            d["padding"] = self.padding
            if self.padding == "value":
                d["pad_value"] = self.pad_value
        return d


def _pair(family: str, data: Mapping[str, Any], key: str, limit: int) -> tuple[int, int]:
    value = data.get(key)
    if (
        not isinstance(value, list | tuple)
        or len(value) != 2
        or not all(type(v) is int and 1 <= v <= limit for v in value)
    ):
        raise InvalidProblem(f"{family}: {key} must be two integers in [1, {limit}] (rows, columns), got {value!r}")
    return int(value[0]), int(value[1])


def _covered(size: int, step: int, window: int) -> int:
    """Positions of an axis of ``size`` that some window reads: each period of ``step`` starts with
    min(window, step) of them."""
    periods, rest = divmod(size, step)
    return periods * min(window, step) + min(window, step, rest)


class WindowsOperation(Operation[WindowsProblem]):
    name = "windows"
    array_fields = frozenset({"dtype", "rows", "cols"})
    fields = {
        "dtype": "element type of A: float32, float16 or bfloat16",
        "rows": "R, rows of A",
        "cols": "C, columns of A",
        "window": f"[TH, TW], each 1 .. {MAX_WINDOW}",
        "step": f"[SR, SC], each 1 .. {MAX_STEP}",
        "op": f"one of {', '.join(OPS)}",
        "padding": "unfold only: what lies outside A reads as (zero, neg_zero, nan, pos_inf, neg_inf, value)",
        "pad_value": "unfold with padding 'value': the padding value",
    }

    def parse(self, data: Mapping[str, Any]) -> WindowsProblem:
        reject_unknown(self.name, data, KNOWN)
        element_type(data.get("dtype"))
        rows, cols = positive(self.name, data, "rows"), positive(self.name, data, "cols")
        window = _pair(self.name, data, "window", MAX_WINDOW)
        step = _pair(self.name, data, "step", MAX_STEP)
        op = data.get("op")
        if op not in OPS:
            raise InvalidProblem(f"{self.name}: op must be one of {OPS}, got {op!r}")
        if op in REDUCTIONS and ("padding" in data or "pad_value" in data):
            raise InvalidProblem(
                f"{self.name}: a {op} pads with its neutral element; give padding only with op = 'unfold'"
            )
        padding, pad_value = parse_padding(self.name, data) if op == "unfold" else ("zero", 0.0)
        p = WindowsProblem(data["dtype"], rows, cols, window, step, op, padding, pad_value)
        if rows * cols >= MAX_ELEMENTS or math.prod(p.out_shape) >= MAX_ELEMENTS:
            raise InvalidProblem(
                f"{self.name}: A ({rows} x {cols}) or the output {list(p.out_shape)} has too many elements (limit 2^40)"
            )
        return p

    def from_arrays(self, arrays: Mapping[str, Any], **options: Any) -> WindowsProblem:
        """Arrays ``A`` (R, C) and ``out``; options ``window``, ``step``, ``op`` and for unfold
        ``padding`` / ``pad_value``, as the problem keys."""
        if set(arrays) != {"A", "out"}:
            raise InvalidProblem(f"{self.name}: tunebox.launch needs the arrays A and out, got {sorted(arrays)}")
        shape = tuple(arrays["A"].shape)
        if len(shape) != 2:
            raise InvalidProblem(f"{self.name}: A must have 2 dimensions, got shape {list(shape)}")
        return self.parse({"dtype": str(arrays["A"].dtype), "rows": shape[0], "cols": shape[1], **options})

    def buffers(self, problem: WindowsProblem) -> tuple[BufferSpec, ...]:
        return (
            BufferSpec("A", (problem.rows, problem.cols), problem.element, "input"),
            BufferSpec("out", problem.out_shape, problem.out_dtype, "output"),
        )

    def make_inputs(self, problem: WindowsProblem, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {"A": random_bits(element_type(problem.element), (problem.rows, problem.cols), rng)}

    def reference(self, problem: WindowsProblem, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        p = problem
        et = element_type(p.element)
        (th, tw), (sr, sc) = p.window, p.step
        inside = (slice(0, min(p.rows, p.reach[0])), slice(0, min(p.cols, p.reach[1])))  # A's part the windows read
        if not p.reduces:
            padded = np.full(p.reach, padding_bits(et, p.padding, p.pad_value), dtype=et.storage)
            padded[inside] = inputs["A"][inside]
            view = np.lib.stride_tricks.sliding_window_view(padded, p.window)[::sr, ::sc]
            return {"out": np.ascontiguousarray(view)}
        neutral = {"sum": 0.0, "max": -np.inf, "min": np.inf}[p.op]
        reductions: dict[str, Callable[..., Any]] = {"sum": np.sum, "max": np.max, "min": np.min}
        reduce = reductions[p.op]
        padded = np.full(p.reach, neutral)
        padded[inside] = et.decode(inputs["A"][inside])
        # separable in float64: over TW columns of every window column, then over TH rows
        across = reduce(np.lib.stride_tricks.sliding_window_view(padded, tw, axis=1)[:, ::sc], axis=2)
        down = reduce(np.lib.stride_tricks.sliding_window_view(across, th, axis=0)[::sr], axis=2)
        return {"out": element_type("float32").encode(down)}

    def tolerance(self, problem: WindowsProblem, inputs: Mapping[str, np.ndarray]) -> Tolerance | None:
        """Sums: ``TH x TW x max|A| x 2^-22`` absolute: for the seeded inputs (|A| in [2^-4, 2^4)) about 18
        standard deviations of the rounding of float32 sums in any order, and below the smallest input
        for every allowed window, so a lost or doubled term fails. Other ops are bit-exact."""
        if problem.op != "sum":
            return None
        largest = element_type(problem.element).largest_magnitude(inputs["A"])
        return Tolerance(rtol=0.0, atol=math.prod(problem.window) * largest * SUM_ATOL_PER_TERM)

    def work(self, problem: WindowsProblem) -> Work:
        """A's elements that some window reads, once, and the output, once."""
        p = problem
        (th, tw), (sr, sc) = p.window, p.step
        read = _covered(p.rows, sr, th) * _covered(p.cols, sc, tw) * element_type(p.element).itemsize
        return Work(read + math.prod(p.out_shape) * element_type(p.out_dtype).itemsize)

    def distance(self, a: WindowsProblem, b: WindowsProblem) -> float | None:
        same = ("element", "window", "step", "op", "padding", "pad_value")
        if any(getattr(a, k) != getattr(b, k) for k in same):
            return None
        return abs(math.log2(a.rows / b.rows)) + abs(math.log2(a.cols / b.cols))

    def baselines(self, problem: WindowsProblem) -> tuple[Baseline, ...]:
        """torch's unfold or pooling, in its cheapest form (see ``baselines.torch_baselines``)."""
        return torch_baselines(problem)
