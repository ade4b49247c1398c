"""Family ``windows``: cuTile's ``eachtile`` windows with a step over a 2-D array, unfolded or reduced.

For a row-major R x C array ``A``, window shape (TH, TW) and step (SR, SC) (0-based): window (i, j),
``i < NR = ceil(R / SR)``, ``j < NC = ceil(C / SC)``, has its origin at (i * SR, j * SC) and covers
TH x TW elements. ``step < window`` overlaps windows, ``step > window`` leaves gaps; the last windows
along an axis may reach past the array, and what lies outside reads as padding. ``op``:

- ``unfold``: ``W[i, j, a, b] = A[i * SR + a, j * SC + b]``, or the padding outside A (modes as in
  ``tile_copy``: zero, neg_zero, nan, pos_inf, neg_inf, value with ``pad_value``); W is
  (NR, NC, TH, TW) of A's dtype, moved bit for bit.
- ``sum``, ``max``, ``min``: ``Y[i, j]`` is the window's reduction in float32 with the padding equal to
  the operation's neutral element (0, -inf, +inf): the reduction over the window's part inside A, as
  cuTile's reductions choose their padding. Y is (NR, NC) float32; ``max`` and ``min`` are exact,
  ``sum`` is checked within a tolerance of its float64 reference (float32 accumulation in any order).

Problem keys: ``dtype``, ``rows``, ``cols``, ``window`` [TH, TW] (each 1..64), ``step`` [SR, SC]
(each 1..1024), ``op``, and for ``unfold`` ``padding`` (default "zero") and ``pad_value``.
Buffers: input ``A`` (R, C); output ``out`` (W or Y).

Tunables (``kernels/windows/windows.cu``): a block owns BI x BJ windows; ``staging`` 'shared' copies
their union of A into shared memory first, so overlapping windows read A once; ``vector`` elements per
store of a window row (unfold); ``scheme`` 'separable' reduces each staged row over TW columns, then
over TH rows (TH + TW steps per window instead of TH x TW).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dtypes import element_type, padding_bits, random_bits
from ..errors import InvalidProblem
from ..limits import MAX_GRID_X, MAX_GRID_Y, MAX_SHARED_BYTES
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
from .indexed import MAX_ELEMENTS, _warps, ceil_pow2, parse_padding, positive, reject_unknown

KNOWN = {"dtype", "rows", "cols", "window", "step", "op", "padding", "pad_value"}
OPS = ("unfold", "sum", "max", "min")  # kernel codes 0..3
REDUCTIONS = OPS[1:]
KINDS = {"float32": 0, "float16": 1, "bfloat16": 2}  # how the kernel reads A's bits in a reduction
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
        d: dict[str, Any] = {"dtype": self.element, "rows": self.rows, "cols": self.cols,
                             "window": list(self.window), "step": list(self.step), "op": self.op}
        if not self.reduces:
            d["padding"] = self.padding
            if self.padding == "value":
                d["pad_value"] = self.pad_value
        return d


def _pair(family: str, data: Mapping[str, Any], key: str, limit: int) -> tuple[int, int]:
    value = data.get(key)
    if (not isinstance(value, list | tuple) or len(value) != 2
            or not all(type(v) is int and 1 <= v <= limit for v in value)):
        raise InvalidProblem(f"{family}: {key} must be two integers in [1, {limit}] (rows, columns), got {value!r}")
    return int(value[0]), int(value[1])


def _covered(size: int, step: int, window: int) -> int:
    """Positions of an axis of ``size`` that some window reads: each period of ``step`` starts with
    min(window, step) of them."""
    periods, rest = divmod(size, step)
    return periods * min(window, step) + min(window, step, rest)


class Windows(Family):
    name = "windows"
    space = Space((
        Param("BI", (1, 2, 4, 8, 16, 32), "window rows per block"),
        Param("BJ", (1, 2, 4, 8, 16, 32, 64, 128), "window columns per block"),
        Param("threads", (64, 128, 256, 512), "threads per block"),
        Param("vector", (1, 2, 4, 8), "elements per store of a window row, at most 16 bytes (unfold; reductions "
              "take 1)"),
        Param("staging", ("none", "shared"), "read A directly, or its block region once into shared memory"),
        Param("scheme", ("direct", "separable"), "reductions: walk each window, or rows then columns over the "
              "staged region (unfold takes direct)"),
    ))

    @property
    def source_files(self):  # type: ignore[override]
        return library_files("windows/windows.cu")

    # -- problems ---------------------------------------------------------------------------------
    def parse_problem(self, data: Mapping[str, Any]) -> WindowsProblem:
        reject_unknown(self.name, data, KNOWN)
        element_type(data.get("dtype"))
        rows, cols = positive(self.name, data, "rows"), positive(self.name, data, "cols")
        window = _pair(self.name, data, "window", MAX_WINDOW)
        step = _pair(self.name, data, "step", MAX_STEP)
        op = data.get("op")
        if op not in OPS:
            raise InvalidProblem(f"{self.name}: op must be one of {OPS}, got {op!r}")
        if op in REDUCTIONS and ("padding" in data or "pad_value" in data):
            raise InvalidProblem(f"{self.name}: a {op} pads with its neutral element; give padding only with "
                                 "op = 'unfold'")
        padding, pad_value = parse_padding(self.name, data) if op == "unfold" else ("zero", 0.0)
        p = WindowsProblem(data["dtype"], rows, cols, window, step, op, padding, pad_value)
        if rows * cols >= MAX_ELEMENTS or math.prod(p.out_shape) >= MAX_ELEMENTS:
            raise InvalidProblem(f"{self.name}: A ({rows} x {cols}) or the output {list(p.out_shape)} has too many "
                                 "elements (limit 2^40)")
        return p

    def problem_from_arrays(self, arrays: Mapping[str, Any], **options: Any) -> WindowsProblem:
        """Arrays ``A`` (R, C) and ``out``; options ``window``, ``step``, ``op`` and for unfold
        ``padding`` / ``pad_value``, as the problem keys."""
        if set(arrays) != {"A", "out"}:
            raise InvalidProblem(f"{self.name}: tunebox.launch needs the arrays A and out, got {sorted(arrays)}")
        shape = tuple(arrays["A"].shape)
        if len(shape) != 2:
            raise InvalidProblem(f"{self.name}: A must have 2 dimensions, got shape {list(shape)}")
        return self.parse_problem({"dtype": str(arrays["A"].dtype), "rows": shape[0], "cols": shape[1], **options})

    def buffers(self, problem: Problem) -> tuple[BufferSpec, ...]:
        p = self._as_problem(problem)
        return (BufferSpec("A", (p.rows, p.cols), p.element, "input"),
                BufferSpec("out", p.out_shape, p.out_dtype, "output"))

    def make_inputs(self, problem: Problem, rng: np.random.Generator) -> dict[str, np.ndarray]:
        p = self._as_problem(problem)
        return {"A": random_bits(element_type(p.element), (p.rows, p.cols), rng)}

    def reference(self, problem: Problem, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        p = self._as_problem(problem)
        et = element_type(p.element)
        (th, tw), (sr, sc) = p.window, p.step
        inside = (slice(0, min(p.rows, p.reach[0])), slice(0, min(p.cols, p.reach[1])))  # A's part the windows read
        if not p.reduces:
            padded = np.full(p.reach, padding_bits(et, p.padding, p.pad_value), dtype=et.storage)
            padded[inside] = inputs["A"][inside]
            view = np.lib.stride_tricks.sliding_window_view(padded, p.window)[::sr, ::sc]
            return {"out": np.ascontiguousarray(view)}
        neutral = {"sum": 0.0, "max": -np.inf, "min": np.inf}[p.op]
        reduce = {"sum": np.sum, "max": np.max, "min": np.min}[p.op]
        padded = np.full(p.reach, neutral)
        padded[inside] = et.decode(inputs["A"][inside])
        # separable in float64: over TW columns of every window column, then over TH rows
        across = reduce(np.lib.stride_tricks.sliding_window_view(padded, tw, axis=1)[:, ::sc], axis=2)
        down = reduce(np.lib.stride_tricks.sliding_window_view(across, th, axis=0)[::sr], axis=2)
        return {"out": element_type("float32").encode(down)}

    def tolerance(self, problem: Problem, inputs: Mapping[str, np.ndarray]) -> Tolerance | None:
        """Sums: ``TH x TW x max|A| x 2^-22`` absolute: for the seeded inputs (|A| in [2^-4, 2^4)) about 18
        standard deviations of the rounding of float32 sums in any order, and below the smallest input
        for every allowed window, so a lost or doubled term fails. Other ops are bit-exact."""
        p = self._as_problem(problem)
        if p.op != "sum":
            return None
        largest = float(np.max(np.abs(element_type(p.element).decode(inputs["A"])))) if inputs["A"].size else 0.0
        return Tolerance(rtol=0.0, atol=math.prod(p.window) * largest * SUM_ATOL_PER_TERM)

    def work(self, problem: Problem) -> Work:
        """A's elements that some window reads, once, and the output, once."""
        p = self._as_problem(problem)
        (th, tw), (sr, sc) = p.window, p.step
        read = _covered(p.rows, sr, th) * _covered(p.cols, sc, tw) * element_type(p.element).itemsize
        return Work(read + math.prod(p.out_shape) * element_type(p.out_dtype).itemsize)

    def distance(self, a: Problem, b: Problem) -> float | None:
        pa, pb = self._as_problem(a), self._as_problem(b)
        same = ("element", "window", "step", "op", "padding", "pad_value")
        if any(getattr(pa, k) != getattr(pb, k) for k in same):
            return None
        return abs(math.log2(pa.rows / pb.rows)) + abs(math.log2(pa.cols / pb.cols))

    # -- variants ---------------------------------------------------------------------------------
    @staticmethod
    def region(p: WindowsProblem, config: Config) -> tuple[int, int]:
        """Rows and columns of A that a block's BI x BJ windows cover together."""
        (th, tw), (sr, sc) = p.window, p.step
        return ((int(config["BI"]) - 1) * sr + th, (int(config["BJ"]) - 1) * sc + tw)

    def shared_bytes(self, p: WindowsProblem, config: Config) -> int:
        """A block's dynamic shared memory: the staged region (A's bits for unfold, float32 values for
        reductions) and, for the separable scheme, one float32 per region row and window column."""
        if config["staging"] == "none":
            return 0
        rr, rc = self.region(p, config)
        staged = rr * rc * (4 if p.reduces else element_type(p.element).itemsize)
        return staged + (rr * int(config["BJ"]) * 4 if config["scheme"] == "separable" else 0)

    def blocks(self, p: WindowsProblem, config: Config) -> tuple[int, int]:
        """(block columns, block rows) of the grid."""
        nr, nc = p.grid
        return (-(-nc // int(config["BJ"])), -(-nr // int(config["BI"])))

    def default_config(self, problem: Problem) -> Config:
        p = self._as_problem(problem)
        size = element_type(p.element).itemsize
        vector = 1 if p.reduces else max(v for v in (1, 2, 4, 8) if p.window[1] % v == 0 and v * size <= 16)
        bi = min(8 if p.reduces else 1, ceil_pow2(p.grid[0]))
        bj = min(32 if p.reduces else 8, ceil_pow2(p.grid[1]))
        values = {"BI": bi, "BJ": bj, "vector": vector, "staging": "none", "scheme": "direct"}
        items = self._items(p, values)
        threads = max((t for t in (64, 128, 256) if t <= max(64, _warps(items))), default=64)
        return self.space.validate({**values, "threads": threads})

    def _items(self, p: WindowsProblem, config: Mapping[str, Any]) -> int:
        """Work items of the block's busiest phase: window-row vectors (unfold), windows, region rows
        (separable) or region elements (staging)."""
        bi, bj = int(config["BI"]), int(config["BJ"])
        items = bi * bj * (1 if p.reduces else p.window[0] * p.window[1] // int(config["vector"]))
        rr, rc = self.region(p, config)  # type: ignore[arg-type]
        if config["scheme"] == "separable":
            items = max(items, rr * bj)
        if config["staging"] == "shared":
            items = max(items, rr * rc)
        return items

    def violations(self, problem: Problem, config: Config) -> list[str]:
        p = self._as_problem(problem)
        size = element_type(p.element).itemsize
        bi, bj, threads, vector = (int(config[k]) for k in ("BI", "BJ", "threads", "vector"))
        broken = []
        if p.reduces and vector != 1:
            broken.append(f"vector={vector}: a reduction writes one float per window and takes vector=1")
        if not p.reduces and (p.window[1] % vector or vector * size > 16):
            broken.append(f"vector={vector} must divide the window width {p.window[1]} and span at most 16 bytes "
                          f"({size}-byte elements)")
        if config["scheme"] == "separable" and (not p.reduces or config["staging"] != "shared"):
            broken.append("scheme 'separable' reduces the staged region: it needs a reduction and staging='shared'")
        nr, nc = p.grid
        if bi > ceil_pow2(nr) or bj > ceil_pow2(nc):
            broken.append(f"BI={bi} x BJ={bj} windows per block exceed the {nr} x {nc} windows rounded up to powers "
                          "of two")
        columns, rows = self.blocks(p, config)
        if rows > MAX_GRID_Y or columns > MAX_GRID_X:
            broken.append(f"a grid of {columns} x {rows} blocks exceeds the limits {MAX_GRID_X} x {MAX_GRID_Y}")
        items = self._items(p, config)
        if threads > max(64, _warps(items)):
            broken.append(f"{threads} threads exceed the {items} work items of a block rounded up to whole warps: "
                          "threads would idle")
        shared = self.shared_bytes(p, config)
        if shared > MAX_SHARED_BYTES:
            broken.append(f"{shared} bytes of shared memory exceed the {MAX_SHARED_BYTES} a block may have")
        return broken

    def render(self, problem: Problem, config: Config) -> KernelSource:
        p = self._as_problem(problem)
        et = element_type(p.element)
        staged, separable = config["staging"] == "shared", config["scheme"] == "separable"
        targs = (et.ctype, KINDS[p.element], OPS.index(p.op), *p.window, *p.step, config["BI"], config["BJ"],
                 config["threads"], config["vector"], str(staged).lower(), str(separable).lower())
        return instantiate("windows/windows.cu", "windows", targs)

    def geometry(self, problem: Problem, config: Config) -> LaunchGeometry:
        """ceil(NC / BJ) x ceil(NR / BI) blocks of ``threads``, with the staged region's shared memory."""
        p = self._as_problem(problem)
        columns, rows = self.blocks(p, config)
        return LaunchGeometry((columns, rows, 1), (int(config["threads"]), 1, 1), self.shared_bytes(p, config))

    def args(self, problem: Problem, config: Config) -> tuple[Arg, ...]:
        """(A, out, R, C, NR, NC, padding bits)."""
        p = self._as_problem(problem)
        et = element_type(p.element)
        pad = 0 if p.reduces else padding_bits(et, p.padding, p.pad_value)
        return (BufferArg("A"), BufferArg("out"), ScalarArg("i64", p.rows), ScalarArg("i64", p.cols),
                ScalarArg("i64", p.grid[0]), ScalarArg("i64", p.grid[1]),
                ScalarArg("u16" if et.itemsize == 2 else "u32", pad))

    def torch_baseline(self, problem: Problem) -> Baseline:
        return self.torch_baselines(problem)[0]

    def torch_baselines(self, problem: Problem) -> tuple[Baseline, ...]:
        """A fitted to the windows' reach (``F.pad`` where they reach past A, a view where they do not),
        then ``unfold`` twice and ``contiguous`` (unfold), ``avg_pool2d`` with ``divisor_override=1`` on
        float32 (sum), or ``max_pool2d`` (max; min as the negated max of the negation) and ``float``.
        Reductions also time the pooling with ``ceil_mode=True`` on A itself (no padded copy) where its
        windows are these."""
        import torch
        import torch.nn.functional as F

        p = self._as_problem(problem)
        (th, tw), (sr, sc) = p.window, p.step
        (reach_rows, reach_cols), element = p.reach, element_type(p.element)
        grows = reach_rows > p.rows or reach_cols > p.cols
        extra = (0, reach_cols - p.cols, 0, reach_rows - p.rows)  # F.pad: (left, right, top, bottom); < 0 crops

        def source(t: dict[str, Any], as_float: bool) -> Any:
            a = t["A"].view(getattr(torch, p.element))
            return a.float() if as_float else a

        def fitted(t: dict[str, Any], pad: float, as_float: bool = False) -> Any:
            a = source(t, as_float)
            return F.pad(a, extra, value=pad) if grows else a[:reach_rows, :reach_cols]

        def fit(name: str, pad: str) -> str:
            return f"F.pad({name}, {extra}, value={pad})" if grows else f"{name}[:{reach_rows}, :{reach_cols}]"

        if p.op == "unfold":
            pad = float(element.decode(np.array([padding_bits(element, p.padding, p.pad_value)], element.storage))[0])
            return (Baseline(f"torch: {fit('A', str(pad))}.unfold(0, {th}, {sr}).unfold(1, {tw}, {sc}).contiguous()",
                             lambda t: {"out": fitted(t, pad).unfold(0, th, sr).unfold(1, tw, sc).contiguous()}),)
        windows = f"({th}, {tw}), ({sr}, {sc})"
        native = _ceil_mode_fits(p.rows, th, sr) and _ceil_mode_fits(p.cols, tw, sc)
        if p.op == "sum":
            def summed(a: Any, ceil_mode: bool) -> dict[str, Any]:
                return {"out": F.avg_pool2d(a[None], (th, tw), (sr, sc), ceil_mode=ceil_mode, divisor_override=1)[0]}

            padded = Baseline(f"torch: F.avg_pool2d({fit('A.float()', '0')}[None], {windows}, divisor_override=1)[0]",
                              lambda t: summed(fitted(t, 0.0, as_float=True), False))
            ceiled = Baseline(f"torch: F.avg_pool2d(A.float()[None], {windows}, ceil_mode=True, divisor_override=1)"
                              "[0]", lambda t: summed(source(t, as_float=True), True))
        else:
            sign, infinity = (1.0, "-inf") if p.op == "max" else (-1.0, "inf")
            negate = "" if sign > 0 else "-"

            def pooled(a: Any, ceil_mode: bool) -> dict[str, Any]:
                return {"out": sign * F.max_pool2d(sign * a[None], (th, tw), (sr, sc), ceil_mode=ceil_mode)[0].float()}

            padded = Baseline(f"torch: {negate}F.max_pool2d({negate}{fit('A', infinity)}[None], {windows})[0].float()",
                              lambda t: pooled(fitted(t, -sign * math.inf), False))
            ceiled = Baseline(f"torch: {negate}F.max_pool2d({negate}A[None], {windows}, ceil_mode=True)[0].float()",
                              lambda t: pooled(source(t, as_float=False), True))
        return (padded, ceiled) if native else (padded,)

    def _as_problem(self, problem: Problem) -> WindowsProblem:
        return problem_as(self.name, problem, WindowsProblem)


def _ceil_mode_fits(size: int, window: int, step: int) -> bool:
    """Whether torch's pooling with ``ceil_mode=True`` (no padding) makes this axis's ceil(size / step)
    windows: its count, ceil((size - window) / step) + 1, less a last window that would start past the
    end."""
    if size < window:
        return False
    count = (size - window + step - 1) // step + 1
    if (count - 1) * step >= size:
        count -= 1
    return count == -(-size // step)
