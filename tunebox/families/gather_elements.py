"""Family ``gather_elements``: cuTile's gather with a tuple of index tiles, element by element.

The element form of the indexed gather (the row and sparse-view forms are family ``gather``). On a
row-major ``A`` of N x D (``rows`` x ``cols``) elements of ``dtype``, a row-index tile ``ri`` and a
column-index tile ``ci`` pick the R x C (``tile``) output elements, 0-based:

  ``out[i, j] = A[r, c] if valid else padding``, ``valid = mask[i, j] and 0 <= r < N and 0 <= c < D``

with ``(r, c) = (ri[i, j], ci[i, j])`` for 2-D index tiles of R x C, or ``(ri[i], ci[j])`` for
1-D tiles of R and C broadcast against each other (``broadcast = true``: cuTile's
``gather(A, (rows[:, None], cols[None, :]))``). Negative indices are out of bounds (no
wrap-around), so -1 is a padding sentinel; A is read only where valid; repeated indices are fine.
``check_bounds = "false"`` promises every index in bounds (rules accept it only for inputs with no
sentinels, no out-of-range indices and no mask).

Problem keys: ``dtype``, ``rows`` (N), ``cols`` (D), ``tile`` ([R, C]), ``index_dtype`` ("int32"
or "int64", default "int32"), ``broadcast`` (false), ``mask`` (false; 2-D tiles only: a uint8 tile
of R x C), ``mask_rate``, ``sentinel_rate``, ``oob_rate`` (fractions of the entries; with
``broadcast`` of each 1-D tile), ``padding`` and ``pad_value`` as in ``gather``.

Seeded inputs place sentinels, out-of-range and masked-out entries at disjoint positions counted by
cumulative rounding (see ``tunebox.families.indexed``). With 2-D tiles an invalid entry alternates
between its row index and its column index (a sentinel stores -1 there, an out-of-range entry an
index in [N, 2N) or [D, 2D)), so both bounds tests are exercised; with ``broadcast`` each tile's
invalid entries are its own.

Buffers: inputs ``A`` (N, D), ``ri`` and ``ci`` ((R, C), or (R,) and (C,) with ``broadcast``),
``mask`` (R, C) with a mask; output ``out`` (R, C).
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
    Work,
    instantiate,
    library_files,
    problem_as,
)
from .indexed import (
    INDEX_TYPES,
    MASK_DTYPE,
    MAX_ELEMENTS,
    UNCHECKED_NEEDS_VALID,
    _warps,
    caller_problem,
    entries_through,
    index_type,
    matrix_shape,
    parse_padding,
    parse_promise,
    positive,
    rate,
    reject_unknown,
    signed,
)

KNOWN = {"dtype", "rows", "cols", "tile", "index_dtype", "broadcast", "mask", "mask_rate", "sentinel_rate",
         "oob_rate", "padding", "pad_value", "valid_promise"}


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
        d: dict[str, Any] = {"dtype": self.element, "rows": self.rows, "cols": self.cols, "tile": list(self.tile),
                             "index_dtype": self.index_dtype, "broadcast": self.broadcast, "mask": self.mask,
                             "sentinel_rate": self.sentinel_rate, "oob_rate": self.oob_rate,
                             "padding": self.padding}
        if self.mask:
            d["mask_rate"] = self.mask_rate
        if self.padding == "value":
            d["pad_value"] = self.pad_value
        if self.valid_promise is not None:
            d["valid_promise"] = self.valid_promise
        return d


class GatherElements(Family):
    name = "gather_elements"
    space = Space((
        Param("threads", (64, 128, 256, 512), "threads per block"),
        Param("elems_per_thread", (1, 2, 4, 8), "output elements per thread (index loads issued together)"),
        Param("check_bounds", ("true", "false"), "test every index; 'false' promises all are in bounds"),
    ))

    @property
    def source_files(self):  # type: ignore[override]
        return library_files("gather/gather_elements.cu")

    # -- problems ---------------------------------------------------------------------------------
    def parse_problem(self, data: Mapping[str, Any]) -> ElementGatherProblem:
        reject_unknown(self.name, data, KNOWN)
        element_type(data.get("dtype"))
        rows, cols = positive(self.name, data, "rows"), positive(self.name, data, "cols")
        tile = data.get("tile")
        if (not isinstance(tile, list | tuple) or len(tile) != 2
                or not all(type(n) is int and n >= 1 for n in tile)):
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
        p = ElementGatherProblem(data["dtype"], rows, cols, (tile[0], tile[1]), index_dtype, broadcast, mask,
                                 padding=padding, pad_value=pad_value, valid_promise=promise, **rates)
        limit = index_type(index_dtype).limits[1]
        if max(rows, cols) - 1 > limit or (p.oob_rate and max(rows, cols) > limit):
            raise InvalidProblem(f"{self.name}: indices up to {max(rows, cols) - (0 if p.oob_rate else 1)} do not "
                                 f"fit {index_dtype}; use index_dtype = 'int64'")
        return p

    def problem_from_arrays(self, arrays: Mapping[str, Any], **options: Any) -> ElementGatherProblem:
        """Arrays ``A`` (N, D), ``ri`` and ``ci`` (both (R, C), or (R,) and (C,) to broadcast), optional
        ``mask`` (R, C) and ``out``; options ``padding``, ``pad_value`` and ``check_bounds``."""
        data = caller_problem(self.name, arrays, ("A", "ri", "ci", "out"), options)
        rows, cols = matrix_shape(self.name, "A", arrays["A"])
        ri, ci = tuple(arrays["ri"].shape), tuple(arrays["ci"].shape)
        broadcast = len(ri) == 1
        tile = [ri[0], ci[0]] if broadcast else list(matrix_shape(self.name, "ri", arrays["ri"]))
        return self.parse_problem({"dtype": str(arrays["A"].dtype), "rows": rows, "cols": cols, "tile": tile,
                                   "broadcast": broadcast, **data})

    def buffers(self, problem: Problem) -> tuple[BufferSpec, ...]:
        p = self._as_problem(problem)
        r_shape, c_shape = p.index_shapes
        mask = (BufferSpec("mask", p.tile, MASK_DTYPE, "input"),) if p.mask else ()
        return (BufferSpec("A", (p.rows, p.cols), p.element, "input"),
                BufferSpec("ri", r_shape, p.index_dtype, "input"), BufferSpec("ci", c_shape, p.index_dtype, "input"),
                *mask, BufferSpec("out", p.tile, p.element, "output"))

    def make_inputs(self, problem: Problem, rng: np.random.Generator) -> dict[str, np.ndarray]:
        p = self._as_problem(problem)
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
                index[order[:counts.sentinels]] = -1
                index[order[counts.sentinels:counts.sentinels + counts.out_of_range]] = beyond(extent,
                                                                                             counts.out_of_range)
                inputs[name] = index.astype(index_type(p.index_dtype).numpy)
            return inputs
        n = p.tile[0] * p.tile[1]
        ri, ci, counts = draw((n,), p.rows), draw((n,), p.cols), p.invalid(n)
        order = rng.permutation(n)
        sentinel = order[:counts.sentinels]
        oob = order[counts.sentinels:counts.sentinels + counts.out_of_range]
        ri[sentinel[0::2]], ci[sentinel[1::2]] = -1, -1  # alternate the dimension that is out of bounds
        ri[oob[0::2]], ci[oob[1::2]] = beyond(p.rows, oob[0::2].size), beyond(p.cols, oob[1::2].size)
        numpy_type = index_type(p.index_dtype).numpy
        inputs["ri"], inputs["ci"] = (x.astype(numpy_type).reshape(p.tile) for x in (ri, ci))
        if p.mask:
            mask = np.ones(n, dtype=np.uint8)
            mask[order[counts.sentinels + counts.out_of_range:counts.total]] = 0
            inputs["mask"] = mask.reshape(p.tile)
        return inputs

    def reference(self, problem: Problem, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        p = self._as_problem(problem)
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

    def work(self, problem: Problem) -> Work:
        p = self._as_problem(problem)
        size, index_size = element_type(p.element).itemsize, index_type(p.index_dtype).itemsize
        entries = sum(math.prod(s) for s in p.index_shapes)
        return Work((p.tile[0] * p.tile[1] + p.valid_elements) * size + entries * index_size
                    + (p.tile[0] * p.tile[1] if p.mask else 0))

    # -- variants ---------------------------------------------------------------------------------
    @staticmethod
    def blocks(p: ElementGatherProblem, config: Config) -> int:
        """Blocks of the grid: ceil(C / (threads x elems_per_thread)) per output row."""
        return p.tile[0] * math.ceil(p.tile[1] / (int(config["threads"]) * int(config["elems_per_thread"])))

    def default_config(self, problem: Problem) -> Config:
        p = self._as_problem(problem)
        threads = next(t for t in (256, 128, 64) if t <= max(64, _warps(math.ceil(p.tile[1] / 4))))
        return self.space.validate({"threads": threads, "elems_per_thread": 4, "check_bounds": "true"})

    def violations(self, problem: Problem, config: Config) -> list[str]:
        p = self._as_problem(problem)
        threads, per_thread = int(config["threads"]), int(config["elems_per_thread"])
        broken = []
        busy = _warps(math.ceil(p.tile[1] / per_thread))
        if threads > max(64, busy):
            broken.append(f"{threads} threads exceed the {busy} threads a row of {p.tile[1]} elements at "
                          f"{per_thread} per thread keeps busy")
        if self.blocks(p, config) > MAX_GRID_X:
            broken.append(f"{self.blocks(p, config)} blocks exceed the grid limit {MAX_GRID_X}")
        if config["check_bounds"] == "false" and not p.all_valid:
            broken.append(UNCHECKED_NEEDS_VALID)
        return broken

    def render(self, problem: Problem, config: Config) -> KernelSource:
        p = self._as_problem(problem)
        targs = (element_type(p.element).ctype, index_type(p.index_dtype).ctype, config["threads"],
                 config["elems_per_thread"], config["check_bounds"], str(p.broadcast).lower())
        return instantiate("gather/gather_elements.cu", "gather_elements" + ("_masked" if p.mask else ""), targs)

    def geometry(self, problem: Problem, config: Config) -> LaunchGeometry:
        p = self._as_problem(problem)
        return LaunchGeometry((self.blocks(p, config), 1, 1), (int(config["threads"]), 1, 1), 0)

    def args(self, problem: Problem, config: Config) -> tuple[Arg, ...]:
        p = self._as_problem(problem)
        mask = (BufferArg("mask"),) if p.mask else ()
        pad_type = "u32" if element_type(p.element).itemsize == 4 else "u16"
        return (BufferArg("A"), BufferArg("ri"), BufferArg("ci"), *mask, BufferArg("out"),
                *(ScalarArg("i64", v) for v in (p.rows, p.cols, *p.tile)), ScalarArg(pad_type, p.pad_bits))

    def distance(self, a: Problem, b: Problem) -> float | None:
        pa, pb = self._as_problem(a), self._as_problem(b)
        if (pa.element, pa.index_dtype, pa.broadcast, pa.mask) != (pb.element, pb.index_dtype, pb.broadcast, pb.mask):
            return None
        pairs = ((pa.rows, pb.rows), (pa.cols, pb.cols), (pa.tile[0], pb.tile[0]), (pa.tile[1], pb.tile[1]))
        return sum(abs(math.log2(x / y)) for x, y in pairs)

    def torch_baseline(self, problem: Problem) -> Baseline:
        import torch

        p = self._as_problem(problem)
        pad = signed(p.pad_bits, element_type(p.element).itemsize)
        shape = "ri[:, None], ci[None, :]" if p.broadcast else "ri, ci"

        def indices(t: dict[str, Any]) -> tuple[Any, Any]:
            r, c = t["ri"].long(), t["ci"].long()
            return (r[:, None], c[None, :]) if p.broadcast else (r, c)

        if p.all_valid:
            return Baseline(f"torch: A[{shape}]", lambda t: {"out": t["A"][indices(t)]})

        def padded(t: dict[str, Any]) -> dict[str, Any]:
            r, c = indices(t)
            valid = (r >= 0) & (r < p.rows) & (c >= 0) & (c < p.cols)
            if p.mask:
                valid = valid & (t["mask"].view(torch.uint8) != 0)
            out = t["A"][r.clamp(0, p.rows - 1), c.clamp(0, p.cols - 1)]
            return {"out": out.masked_fill_(~valid, pad)}

        return Baseline(f"torch: A[clamp({shape})].masked_fill_(~valid, {p.padding})", padded)

    def _as_problem(self, problem: Problem) -> ElementGatherProblem:
        return problem_as(self.name, problem, ElementGatherProblem)
