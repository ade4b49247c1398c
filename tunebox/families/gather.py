"""Family ``gather``: rows (or columns) of ``A`` picked by index, padding for invalid entries.

The Warp ``tile_load_indexed`` / cuTile sparse-view form, 0-based, on a row-major ``A`` of N x D
(``rows`` x ``cols``) elements of ``dtype`` and K (``count``) indices ``idx``. Along ``axis`` the
source index of entry k is ``idx[k] + offset``; along the other (dense) axis the source index of
output position j is ``dense_offset + j`` for ``j < window``:

  axis 0: ``out[k, j] = A[idx[k] + offset, dense_offset + j]``, ``out`` is (K, window)
  axis 1: ``out[j, k] = A[dense_offset + j, idx[k] + offset]``, ``out`` is (window, K)

An element whose entry is invalid (see ``tunebox.families.indexed``: the mask, and the index out of
``[0, N)`` for axis 0 or ``[0, D)`` for axis 1) or whose dense index lies outside ``[0, D)`` (axis 0)
or ``[0, N)`` (axis 1) reads the padding bits instead: out of range on any side, so -1 is a sentinel.
Every element of ``out`` is written; ``A`` is read only at valid, in-range elements. Repeated indices
are fine. The default ``axis = 0``, ``window = D``, ``dense_offset = 0`` is the whole-row gather
``out[k, :] = A[idx[k] + offset, :]`` (its own, fastest kernel).

Problem keys: ``dtype``, ``rows`` (N), ``cols`` (D), ``count`` (K), ``index_dtype`` ("int32" or
"int64", default "int32"), ``offset`` (0), ``axis`` (0 or 1, default 0), ``window`` (the dense
extent; default the whole other dimension: D for axis 0, N for axis 1), ``dense_offset`` (0; may be
negative or run past the end), ``mask`` (false), ``mask_rate`` (0.0, with a mask only),
``sentinel_rate`` (fraction of index -1 entries, 0.0), ``oob_rate`` (fraction of indices >= the
indexed extent, 0.0), ``padding`` ("zero", or any mode of ``tunebox.dtypes.PADDING_MODES``) and
``pad_value`` (with ``padding = "value"`` only). The rates lie in [0, 1] and add up to at most 1.

Buffers: inputs ``A`` (N, D), ``idx`` (K,) of the index type and, with a mask, ``mask`` (K,) uint8;
output ``out`` ((K, window) for axis 0, (window, K) for axis 1).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dtypes import element_type, padding_bits, random_bits
from ..errors import InvalidProblem
from ..limits import MAX_GRID_X
from ..parallel import filled
from ..params import Config
from .base import Arg, Baseline, BufferArg, BufferSpec, LaunchGeometry, Problem, ScalarArg, Work
from .indexed import (
    MASK_DTYPE,
    MAX_ELEMENTS,
    MAX_OFFSET,
    UNCHECKED_NEEDS_VALID,
    IndexedFamily,
    IndexedProblem,
    _warps,
    caller_problem,
    check_index_range,
    draw_invalid,
    index_type,
    mask_bytes,
    matrix_shape,
    parse_common,
    parse_padding,
    parse_promise,
    rate,
    reject_unknown,
    signed,
    to_index,
    valid_rows,
)

KNOWN = {"dtype", "rows", "cols", "count", "index_dtype", "offset", "axis", "window", "dense_offset", "mask",
         "mask_rate", "sentinel_rate", "oob_rate", "padding", "pad_value", "valid_promise"}


@dataclass(frozen=True)
class GatherProblem(IndexedProblem):
    sentinel_rate: float = 0.0
    oob_rate: float = 0.0
    padding: str = "zero"
    pad_value: float = 0.0  # used when padding == "value"
    axis: int = 0  # the indexed axis of A
    window: int | None = None  # the dense extent; None: the whole other dimension
    dense_offset: int = 0  # start of the dense range

    @property
    def extent(self) -> int:
        return self.rows if self.axis == 0 else self.cols

    @property
    def dense_extent(self) -> int:
        """Size of A along the dense axis."""
        return self.cols if self.axis == 0 else self.rows

    @property
    def span(self) -> int:
        """The window, resolved."""
        return self.dense_extent if self.window is None else self.window

    @property
    def whole_rows(self) -> bool:
        """The whole-row gather out[k, :] = A[idx[k] + offset, :] (its own kernel)."""
        return self.axis == 0 and self.window is None and self.dense_offset == 0

    @property
    def dense_inside(self) -> int:
        """Positions of the window inside A along the dense axis: read for every valid entry."""
        return max(0, min(self.dense_offset + self.span, self.dense_extent) - max(self.dense_offset, 0))

    @property
    def out_shape(self) -> tuple[int, int]:
        return (self.count, self.span) if self.axis == 0 else (self.span, self.count)

    @property
    def invalid_rate(self) -> float:
        return self.sentinel_rate + self.oob_rate

    @property
    def sentinels(self) -> int:
        return self.entries_through(self.sentinel_rate)

    @property
    def out_of_range(self) -> int:
        return self.entries_through(self.invalid_rate) - self.sentinels

    @property
    def pad_bits(self) -> int:
        return padding_bits(element_type(self.element), self.padding, self.pad_value)

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d.update(sentinel_rate=self.sentinel_rate, oob_rate=self.oob_rate, padding=self.padding)
        if self.padding == "value":
            d["pad_value"] = self.pad_value
        if self.axis:
            d["axis"] = self.axis
        if self.window is not None:
            d["window"] = self.window
        if self.dense_offset:
            d["dense_offset"] = self.dense_offset
        return d


class Gather(IndexedFamily):
    name = "gather"
    kernel = "gather_rows"
    problem_type = GatherProblem

    def parse_problem(self, data: Mapping[str, Any]) -> GatherProblem:
        reject_unknown(self.name, data, KNOWN)
        fields = parse_common(self.name, data)
        sentinel_rate, oob_rate = rate(self.name, data, "sentinel_rate"), rate(self.name, data, "oob_rate")
        parse_promise(self.name, data, sentinel_rate, oob_rate)
        if sentinel_rate + oob_rate + fields["mask_rate"] > 1.0:
            raise InvalidProblem("gather: sentinel_rate + oob_rate + mask_rate must not exceed 1")
        padding, pad_value = parse_padding(self.name, data)
        axis = data.get("axis", 0)
        if type(axis) is not int or axis not in (0, 1):
            raise InvalidProblem(f"gather: axis must be 0 or 1, got {axis!r}")
        dense_extent = fields["cols"] if axis == 0 else fields["rows"]
        window = data.get("window", dense_extent)
        if type(window) is not int or window < 1:
            raise InvalidProblem(f"gather: window must be a positive integer, got {window!r}")
        if window * fields["count"] >= MAX_ELEMENTS:
            raise InvalidProblem(f"gather: window x count = {window} x {fields['count']} has too many elements "
                                 "(limit 2^40)")
        dense_offset = data.get("dense_offset", 0)
        if type(dense_offset) is not int or not -MAX_OFFSET < dense_offset < MAX_OFFSET:
            raise InvalidProblem(f"gather: dense_offset must be an integer of magnitude below 2^62, "
                                 f"got {dense_offset!r}")
        p = GatherProblem(**fields, sentinel_rate=sentinel_rate, oob_rate=oob_rate, padding=padding,
                          pad_value=pad_value, axis=axis, window=None if window == dense_extent else window,
                          dense_offset=dense_offset)
        check_index_range(self.name, p, sentinel=p.sentinels > 0, beyond=p.out_of_range > 0)
        return p

    def problem_from_arrays(self, arrays: Mapping[str, Any], **options: Any) -> GatherProblem:
        """Arrays ``A`` (N, D), ``idx`` (K,), optional ``mask`` (K,) and ``out``; options as the problem
        keys (offset, axis, window, dense_offset, padding, pad_value) and ``check_bounds``."""
        data = caller_problem(self.name, arrays, ("A", "idx", "out"), options)
        rows, cols = matrix_shape(self.name, "A", arrays["A"])
        (count,) = matrix_shape(self.name, "idx", arrays["idx"], rank=1)
        return self.parse_problem({"dtype": str(arrays["A"].dtype), "rows": rows, "cols": cols, "count": count,
                                   **data})

    def buffers(self, problem: Problem) -> tuple[BufferSpec, ...]:
        p = self._as_problem(problem)
        mask = (BufferSpec("mask", (p.count,), MASK_DTYPE, "input"),) if p.mask else ()
        return (BufferSpec("A", (p.rows, p.cols), p.element, "input"),
                BufferSpec("idx", (p.count,), p.index_dtype, "input"), *mask,
                BufferSpec("out", p.out_shape, p.element, "output"))

    def args(self, problem: Problem, config: Config) -> tuple[Arg, ...]:
        p = self._as_problem(problem)
        mask = (BufferArg("mask"),) if p.mask else ()
        pad_type = "u32" if element_type(p.element).itemsize == 4 else "u16"
        dense = () if p.whole_rows else (p.dense_offset, p.span)
        return (BufferArg("A"), BufferArg("idx"), *mask, BufferArg("out"),
                *(ScalarArg("i64", v) for v in (p.rows, p.cols, p.count, p.offset, *dense)),
                ScalarArg(pad_type, p.pad_bits))

    def kernel_name(self, p: Any) -> str:
        base = "gather_rows" if p.whole_rows else "gather_window" if p.axis == 0 else "gather_cols"
        return base + ("_masked" if p.mask else "")

    def make_inputs(self, problem: Problem, rng: np.random.Generator) -> dict[str, np.ndarray]:
        p = self._as_problem(problem)
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

    def reference(self, problem: Problem, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        p = self._as_problem(problem)
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

    def work(self, problem: Problem) -> Work:
        p = self._as_problem(problem)
        size = element_type(p.element).itemsize
        return Work((p.count * p.span + p.valid_entries * p.dense_inside) * size + self.index_bytes(p))

    # -- the tunable space on the new forms: axis 0 windows reuse the row rules on the segment; axis 1
    #    gives each thread vec_bytes of consecutive entries (one output vector a row) and each block
    #    rows_per_block output rows.

    @staticmethod
    def row_vectors(p: Any, vec_bytes: int) -> int:
        """Vectors per output row (axis 0) at the widest width of at most vec_bytes dividing D, the
        window and dense_offset: what the kernel uses on aligned buffers."""
        width = vec_bytes // element_type(p.element).itemsize
        while p.cols % width or p.span % width or p.dense_offset % width:
            width //= 2
        return p.span // width

    @staticmethod
    def column_blocks(p: Any, config: Config) -> int:
        """Axis 1: blocks of threads x (vec_bytes / element) entries and strips of rows_per_block output
        rows, one strip a block unless the grid limit makes blocks walk several (the kernel strides)."""
        tile = int(config["threads"]) * (int(config["vec_bytes"]) // element_type(p.element).itemsize)
        tiles, strips = math.ceil(p.count / tile), math.ceil(p.span / int(config["rows_per_block"]))
        return tiles * min(strips, MAX_GRID_X // tiles)

    def default_config(self, problem: Problem) -> Config:
        p = self._as_problem(problem)
        if p.axis == 0:
            return super().default_config(p)
        entries = math.ceil(p.count / (16 // element_type(p.element).itemsize))
        threads = next(t for t in (256, 128, 64) if t <= max(64, _warps(entries)))
        tiles = math.ceil(entries / threads)  # the most rows per block that still leaves 1024 blocks
        per_row = next((r for r in (16, 8, 4, 2) if r <= p.span and tiles * math.ceil(p.span / r) >= 1024), 1)
        return self.space.validate({"rows_per_block": per_row, "threads": threads, "vec_bytes": 16,
                                    "check_bounds": "true"})

    def violations(self, problem: Problem, config: Config) -> list[str]:
        p = self._as_problem(problem)
        if p.axis == 0:
            return super().violations(p, config)
        size = element_type(p.element).itemsize
        vec_bytes, threads, per_row = int(config["vec_bytes"]), int(config["threads"]), int(config["rows_per_block"])
        if vec_bytes % size:
            return [f"vec_bytes={vec_bytes} is not a multiple of the {size}-byte element"]
        broken = []
        vectors = math.ceil(p.count / (vec_bytes // size))
        if threads > max(64, _warps(vectors)):
            broken.append(f"{threads} threads exceed the {vectors} vectors of entries rounded up to whole warps: "
                          "threads would idle")
        if per_row > p.span:
            broken.append(f"rows_per_block={per_row} exceeds the window of {p.span} rows")
        if config["check_bounds"] == "false" and not p.all_valid:
            broken.append(UNCHECKED_NEEDS_VALID)
        return broken

    def geometry(self, problem: Problem, config: Config) -> LaunchGeometry:
        p = self._as_problem(problem)
        if p.axis == 0:
            return super().geometry(p, config)
        return LaunchGeometry((self.column_blocks(p, config), 1, 1), (int(config["threads"]), 1, 1), 0)

    def distance(self, a: Problem, b: Problem) -> float | None:
        pa, pb = self._as_problem(a), self._as_problem(b)
        base = super().distance(pa, pb)
        if base is None or pa.axis != pb.axis:
            return None
        if pa.whole_rows and pb.whole_rows:
            return base
        return base + abs(math.log2(pa.span / pb.span))

    def torch_baseline(self, problem: Problem) -> Baseline:
        import torch

        p = self._as_problem(problem)
        pad = signed(p.pad_bits, element_type(p.element).itemsize)

        if p.whole_rows and p.all_valid:
            shift = f" + {p.offset}" if p.offset else ""
            return Baseline(f"torch: index_select(A, 0, idx{shift})", lambda t: {
                "out": torch.index_select(t["A"], 0, t["idx"].long() + p.offset if p.offset else t["idx"])})

        def valid_entries(t: dict[str, Any]) -> tuple[Any, Any]:
            index = t["idx"].long() + p.offset
            valid = (index >= 0) & (index < p.extent)
            if p.mask:
                valid &= t["mask"].view(torch.uint8) != 0
            return index.clamp(0, p.extent - 1), valid

        if p.whole_rows:
            def padded(t: dict[str, Any]) -> dict[str, Any]:
                rows, valid = valid_entries(t)
                out = torch.index_select(t["A"], 0, rows)
                return {"out": out.masked_fill_(~valid[:, None], pad)}

            return Baseline(f"torch: index_select(A, 0, clamp(idx + offset)).masked_fill_(~valid, {p.padding})",
                            padded)

        # the dense range clipped to A ([c0, c1)), padded back to the window: left and right elements
        c0 = min(max(p.dense_offset, 0), p.dense_extent)
        c1 = min(max(p.dense_offset + p.span, c0), p.dense_extent)
        left, right = c0 - p.dense_offset, p.dense_offset + p.span - c1
        sides = (left, right) if p.axis == 0 else (0, 0, left, right)
        checked = not p.all_valid
        if c1 <= c0:
            name = f"full({p.padding})"
        else:
            cut = f"A[:, {c0}:{c1}]" if p.axis == 0 else f"A[{c0}:{c1}, :]"
            index = "clamp(idx + offset)" if checked else "idx + offset" if p.offset else "idx"
            name = f"index_select({cut}, {p.axis}, {index})"
            if left or right:
                name = f"F.pad({name}, {sides}, {p.padding})"
        if checked:
            name += f".masked_fill_(~valid, {p.padding})"

        def sparse_view(t: dict[str, Any]) -> dict[str, Any]:
            import torch.nn.functional as F

            a = t["A"]
            if checked:
                index, valid = valid_entries(t)
            else:
                index = t["idx"].long() + p.offset if p.offset else t["idx"]
            if c1 <= c0:  # the window misses A: padding only
                out = torch.full(p.out_shape, pad, dtype=a.dtype, device=a.device)
            else:
                src = a[:, c0:c1] if p.axis == 0 else a[c0:c1, :]
                out = torch.index_select(src, p.axis, index)
                if left or right:
                    out = F.pad(out, sides, value=pad)
            if checked:
                out = out.masked_fill_(~(valid[:, None] if p.axis == 0 else valid[None, :]), pad)
            return {"out": out}

        return Baseline(f"torch: {name}", sparse_view)
