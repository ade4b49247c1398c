"""The gather_elements operation: its problem (``ElementGatherProblem``), parsing, seeded inputs, the
numpy reference, work, distance and the problem of a caller's arrays (the torch baseline:
``baselines.py``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...dtypes import element_type, padding_bits, parse_padding, random_bits
from ...errors import InvalidProblem
from ...parallel import filled
from ..base import Baseline, BufferSpec, Problem, Work
from ..contract import Operation
from ..indexed import (
    INDEX_TYPES,
    MASK_DTYPE,
    MAX_ELEMENTS,
    caller_problem,
    entries_through,
    index_type,
    matrix_shape,
    parse_promise,
    positive,
    rate,
    reject_unknown,
)
from .baselines import torch_baseline


@dataclass(frozen=True)
class InvalidCounts:
    """How many entries of one index tile are sentinels, out of range and masked out."""

    sentinels: int
    out_of_range: int
    masked_out: int

    @classmethod
    def of(cls, entries: int, sentinel_rate: float, oob_rate: float, mask_rate: float) -> InvalidCounts:
        a = entries_through(entries, sentinel_rate)
        b = entries_through(entries, sentinel_rate + oob_rate)
        return cls(a, b - a, entries_through(entries, sentinel_rate + oob_rate + mask_rate) - b)

    @property
    def total(self) -> int:
        return self.sentinels + self.out_of_range + self.masked_out


@dataclass(frozen=True)
class ElementGatherProblem(Problem):
    element: str
    rows: int  # N
    cols: int  # D
    tile: tuple[int, int]  # (R, C): the output's shape
    index_dtype: str = "int32"
    broadcast: bool = False
    mask: bool = False
    mask_rate: float = 0.0
    sentinel_rate: float = 0.0
    oob_rate: float = 0.0
    padding: str = "zero"
    pad_value: float = 0.0
    valid_promise: bool | None = None  # caller arrays: every index in bounds (check_bounds=False); None: seeded

    @property
    def dtype(self) -> str:
        return self.element

    @property
    def index_shapes(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Shapes of ``ri`` and ``ci``."""
        r, c = self.tile
        return ((r,), (c,)) if self.broadcast else (self.tile, self.tile)

    def invalid(self, entries: int) -> InvalidCounts:
        return InvalidCounts.of(entries, self.sentinel_rate, self.oob_rate, self.mask_rate)

    @property
    def valid_elements(self) -> int:
        """Output elements read from A."""
        r, c = self.tile
        if self.broadcast:
            return (r - self.invalid(r).total) * (c - self.invalid(c).total)
        return r * c - self.invalid(r * c).total

    @property
    def all_valid(self) -> bool:
        if self.valid_promise is not None:
            return self.valid_promise and not self.mask
        return self.sentinel_rate == self.oob_rate == 0.0 and not self.mask

    @property
    def pad_bits(self) -> int:
        return padding_bits(element_type(self.element), self.padding, self.pad_value)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "dtype": self.element,
            "rows": self.rows,
            "cols": self.cols,
            "tile": list(self.tile),
            "index_dtype": self.index_dtype,
            "broadcast": self.broadcast,
            "mask": self.mask,
            "sentinel_rate": self.sentinel_rate,
            "oob_rate": self.oob_rate,
            "padding": self.padding,
        }
        if self.mask:
            d["mask_rate"] = self.mask_rate
        if self.padding == "value":
            d["pad_value"] = self.pad_value
        if self.valid_promise is not None:
            d["valid_promise"] = self.valid_promise
        return d


class GatherElementsOperation(Operation[ElementGatherProblem]):
    name = "gather_elements"
    draws = frozenset({"sentinel_rate", "oob_rate", "mask_rate", "valid_promise"})
    array_fields = frozenset({"dtype", "rows", "cols", "tile", "broadcast", "index_dtype", "mask"})
    fields = {
        "dtype": "element type of A and out: float32, float16 or bfloat16",
        "rows": "N, rows of A",
        "cols": "D, columns of A",
        "tile": "[R, C], the output's shape (and the index tiles')",
        "index_dtype": "int32 (default) or int64",
        "broadcast": "false (default): 2-D index tiles of R x C; true: 1-D tiles of R and C broadcast",
        "mask": "false (default); true: a uint8 mask tile of R x C (2-D tiles only)",
        "mask_rate": "fraction of masked-out entries (mask only)",
        "sentinel_rate": "fraction of -1 entries (with broadcast, of each 1-D tile)",
        "oob_rate": "fraction of entries past N or D (with broadcast, of each 1-D tile)",
        "padding": "value of invalid elements: zero (default), neg_zero, nan, pos_inf, neg_inf or value",
        "pad_value": "the padding number (padding = value only)",
        "valid_promise": "caller arrays only: every index is in bounds (check_bounds=False)",
    }

    def parse(self, data: Mapping[str, Any]) -> ElementGatherProblem:
        reject_unknown(self.name, data, set(self.fields))
        element_type(data.get("dtype"))
        rows, cols = positive(self.name, data, "rows"), positive(self.name, data, "cols")
        tile = data.get("tile")
        if not isinstance(tile, list | tuple) or len(tile) != 2 or not all(type(n) is int and n >= 1 for n in tile):
            raise InvalidProblem(f"{self.name}: tile must be [R, C], two positive integers, got {tile!r}")
        for name, n in (("rows x cols", rows * cols), ("tile R x C", tile[0] * tile[1])):
            if n >= MAX_ELEMENTS:
                raise InvalidProblem(f"{self.name}: {name} = {n} elements is too many (limit 2^40)")
        index_dtype = data.get("index_dtype", "int32")
        if not isinstance(index_dtype, str) or index_dtype not in INDEX_TYPES:
            raise InvalidProblem(f"{self.name}: index_dtype must be one of {sorted(INDEX_TYPES)}, got {index_dtype!r}")
        broadcast, mask = data.get("broadcast", False), data.get("mask", False)
        if not isinstance(broadcast, bool) or not isinstance(mask, bool):
            raise InvalidProblem(f"{self.name}: broadcast and mask must be true or false")
        if mask and broadcast:
            raise InvalidProblem(f"{self.name}: a mask needs 2-D index tiles (broadcast = false)")
        if "mask_rate" in data and not mask:
            raise InvalidProblem(f"{self.name}: mask_rate is given only with mask = true")
        rates = {k: rate(self.name, data, k) for k in ("mask_rate", "sentinel_rate", "oob_rate")}
        if sum(rates.values()) > 1.0:
            raise InvalidProblem(f"{self.name}: sentinel_rate + oob_rate + mask_rate must not exceed 1")
        padding, pad_value = parse_padding(self.name, data)
        promise = parse_promise(self.name, data, *rates.values())
        p = ElementGatherProblem(
            data["dtype"],
            rows,
            cols,
            (tile[0], tile[1]),
            index_dtype,
            broadcast,
            mask,
            padding=padding,
            pad_value=pad_value,
            valid_promise=promise,
            **rates,
        )
        limit = index_type(index_dtype).limits[1]
        if max(rows, cols) - 1 > limit or (p.oob_rate and max(rows, cols) > limit):
            raise InvalidProblem(
                f"{self.name}: indices up to {max(rows, cols) - (0 if p.oob_rate else 1)} do not "
                f"fit {index_dtype}; use index_dtype = 'int64'"
            )
        return p

    def from_arrays(self, arrays: Mapping[str, Any], **options: Any) -> ElementGatherProblem:
        """Arrays ``A`` (N, D), ``ri`` and ``ci`` (both (R, C), or (R,) and (C,) to broadcast), optional
        ``mask`` (R, C) and ``out``; options ``padding``, ``pad_value`` and ``check_bounds``."""
        data = caller_problem(self.name, arrays, ("A", "ri", "ci", "out"), options)
        rows, cols = matrix_shape(self.name, "A", arrays["A"])
        ri, ci = tuple(arrays["ri"].shape), tuple(arrays["ci"].shape)
        broadcast = len(ri) == 1
        tile = [ri[0], ci[0]] if broadcast else list(matrix_shape(self.name, "ri", arrays["ri"]))
        return self.parse(
            {"dtype": str(arrays["A"].dtype), "rows": rows, "cols": cols, "tile": tile, "broadcast": broadcast, **data}
        )

    def buffers(self, problem: ElementGatherProblem) -> tuple[BufferSpec, ...]:
        p = problem
        r_shape, c_shape = p.index_shapes
        mask = (BufferSpec("mask", p.tile, MASK_DTYPE, "input"),) if p.mask else ()
        return (
            BufferSpec("A", (p.rows, p.cols), p.element, "input"),
            BufferSpec("ri", r_shape, p.index_dtype, "input"),
            BufferSpec("ci", c_shape, p.index_dtype, "input"),
            *mask,
            BufferSpec("out", p.tile, p.element, "output"),
        )

    def make_inputs(self, problem: ElementGatherProblem, rng: np.random.Generator) -> dict[str, np.ndarray]:
        p = problem
        inputs = {"A": random_bits(element_type(p.element), (p.rows, p.cols), rng)}
        limit = index_type(p.index_dtype).limits[1]

        def draw(shape: tuple[int, ...], extent: int) -> np.ndarray:
            return rng.integers(0, extent, shape, dtype=np.int64)

        def beyond(extent: int, n: int) -> np.ndarray:  # in [extent, 2 extent), as far as the type reaches
            return extent + rng.integers(0, min(extent, limit + 1 - extent), n, dtype=np.int64)

        if p.broadcast:
            for name, extent, n in (("ri", p.rows, p.tile[0]), ("ci", p.cols, p.tile[1])):
                index, counts = draw((n,), extent), p.invalid(n)
                order = rng.permutation(n)
                index[order[: counts.sentinels]] = -1
                index[order[counts.sentinels : counts.sentinels + counts.out_of_range]] = beyond(
                    extent, counts.out_of_range
                )
                inputs[name] = index.astype(index_type(p.index_dtype).numpy)
            return inputs
        n = p.tile[0] * p.tile[1]
        ri, ci, counts = draw((n,), p.rows), draw((n,), p.cols), p.invalid(n)
        order = rng.permutation(n)
        sentinel = order[: counts.sentinels]
        oob = order[counts.sentinels : counts.sentinels + counts.out_of_range]
        ri[sentinel[0::2]], ci[sentinel[1::2]] = -1, -1  # alternate the dimension that is out of bounds
        ri[oob[0::2]], ci[oob[1::2]] = beyond(p.rows, oob[0::2].size), beyond(p.cols, oob[1::2].size)
        numpy_type = index_type(p.index_dtype).numpy
        inputs["ri"], inputs["ci"] = (x.astype(numpy_type).reshape(p.tile) for x in (ri, ci))
        if p.mask:
            mask = np.ones(n, dtype=np.uint8)
            mask[order[counts.sentinels + counts.out_of_range : counts.total]] = 0
            inputs["mask"] = mask.reshape(p.tile)
        return inputs

    def reference(self, problem: ElementGatherProblem, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        p = problem
        a = inputs["A"]
        r, c = inputs["ri"].astype(np.int64), inputs["ci"].astype(np.int64)
        if p.broadcast:
            r, c = r[:, None], c[None, :]
        r, c = np.broadcast_to(r, p.tile), np.broadcast_to(c, p.tile)
        valid = (r >= 0) & (r < p.rows) & (c >= 0) & (c < p.cols)
        if p.mask:
            valid &= inputs["mask"] != 0
        out = filled(p.tile, p.pad_bits, a.dtype)
        out[valid] = a[r[valid], c[valid]]
        return {"out": out}

    def work(self, problem: ElementGatherProblem) -> Work:
        p = problem
        size, index_size = element_type(p.element).itemsize, index_type(p.index_dtype).itemsize
        entries = sum(math.prod(s) for s in p.index_shapes)
        return Work(
            (p.tile[0] * p.tile[1] + p.valid_elements) * size
            + entries * index_size
            + (p.tile[0] * p.tile[1] if p.mask else 0)
        )

    def distance(self, a: ElementGatherProblem, b: ElementGatherProblem) -> float | None:
        if (a.element, a.index_dtype, a.broadcast, a.mask) != (b.element, b.index_dtype, b.broadcast, b.mask):
            return None
        pairs = ((a.rows, b.rows), (a.cols, b.cols), (a.tile[0], b.tile[0]), (a.tile[1], b.tile[1]))
        return sum(abs(math.log2(x / y)) for x, y in pairs)

    def baselines(self, problem: ElementGatherProblem) -> tuple[Baseline, ...]:
        return (torch_baseline(problem),)
