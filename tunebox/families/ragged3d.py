"""Family ``ragged3d``: pack a padded [B, Lmax, H, D] tensor into ragged [total, H, D] storage, or
unpack it back (Mojo's RaggedTMA3DTile layout).

With per-sequence lengths ``len_b`` (0 <= len_b <= Lmax) and ``offsets`` their B + 1 exclusive
prefix sums (int64; ``total = offsets[B]``), 0-based:

  pack:   ``out[offsets[b] + l, :, :] = x[b, l, :, :]`` for ``l < len_b``; ``out`` is (total, H, D)
  unpack: ``out[b, l, :, :] = ragged[offsets[b] + l, :, :]`` for ``l < len_b``, zero for
          ``len_b <= l < Lmax``; ``out`` is (B, Lmax, H, D)

Every element of ``out`` is written exactly once. Transport ``vector`` never reads positions past a
sequence's length; transport ``tma`` loads whole tiles, so it may read up to BM - 1 rows past a
sequence's end (rows of x's padding, or of the next sequences in ``ragged``; never outside a buffer).
Problem keys: ``dtype``, ``batch`` (B), ``max_len`` (Lmax), ``heads`` (H), ``depth`` (D),
``direction`` ("pack" or "unpack"), ``lengths``: a list of B lengths, or "uniform" (drawn uniformly
in [1, Lmax] from ``lengths_seed``, default 0, so the problem alone fixes them and the work).
Buffers: pack: inputs ``x`` (B, Lmax, H, D), ``offsets`` (B + 1,) int64; output ``out``.
unpack: inputs ``ragged`` (total, H, D), ``offsets``; output ``out``.

Two transports (``transport``), so the search picks per problem:

- ``vector`` (``kernels/ragged3d/ragged3d.cu``): a block of ``threads`` threads moves BM rows of one
  sequence (H x D contiguous elements each) in vectors of ``vec_bytes`` through registers.
- ``tma`` (sm_90+; the kernel refuses to compile for older devices;
  ``kernels/ragged3d/ragged3d_tma.cu``, layout and rules in ``ragged3d_tma.py``): one warp per
  block moves a tile of BM rows x ``group`` heads x ``BN`` columns of depth (0: all of D) with bulk
  tensor loads into shared memory and bulk tensor stores out of it, in chunks one ``swizzle`` span
  wide (16 bytes without swizzle), ``tma_blocks_per_op`` chunks per copy (0: one copy per chunk).
  pack stores through RaggedTMA3DTile's clipping tensor map (base address BM rows in front of out),
  so rows past a sequence's end are not written; unpack zeroes them in shared memory before its
  store. Needs 16-byte heads (D x size).

Each transport takes fixed values of the other's parameters (vector: group=1, BN=0, swizzle='none',
tma_blocks_per_op=0; tma: threads=64, vec_bytes=16), so the search never times a variant twice.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ..dtypes import element_type, random_bits
from ..errors import InvalidProblem
from ..limits import MAX_GRID_X
from ..params import Config, Param, Space
from ..tma import SWIZZLE_BYTES
from . import ragged3d_tma
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
from .indexed import MAX_ELEMENTS, _warps, ceil_pow2, positive, reject_unknown

KNOWN = {"dtype", "batch", "max_len", "heads", "depth", "direction", "lengths", "lengths_seed"}
DIRECTIONS = ("pack", "unpack")
VECTOR_CANONICAL = {"group": 1, "BN": 0, "swizzle": "none", "tma_blocks_per_op": 0}  # the TMA parameters' values


@dataclass(frozen=True)
class RaggedProblem(Problem):
    element: str
    batch: int  # B
    max_len: int  # Lmax
    heads: int  # H
    depth: int  # D
    direction: str  # "pack" or "unpack"
    lengths: tuple[int, ...]  # B lengths in [0, Lmax]
    lengths_seed: int | None = None  # set when the lengths were drawn ("uniform")

    @property
    def dtype(self) -> str:
        return self.element

    @property
    def row(self) -> int:
        """Elements of one sequence position: H x D."""
        return self.heads * self.depth

    @cached_property
    def offsets(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.lengths, dtype=np.int64)]).astype(np.int64)

    @property
    def total(self) -> int:
        return int(self.offsets[-1])

    @property
    def padded_shape(self) -> tuple[int, int, int, int]:
        return (self.batch, self.max_len, self.heads, self.depth)

    @property
    def ragged_shape(self) -> tuple[int, int, int]:
        return (self.total, self.heads, self.depth)

    def to_dict(self) -> dict[str, Any]:
        lengths: Any = "uniform" if self.lengths_seed is not None else list(self.lengths)
        d = {"dtype": self.element, "batch": self.batch, "max_len": self.max_len, "heads": self.heads,
             "depth": self.depth, "direction": self.direction, "lengths": lengths}
        if self.lengths_seed is not None:
            d["lengths_seed"] = self.lengths_seed
        return d


class Ragged3D(Family):
    name = "ragged3d"
    space = Space((
        Param("BM", (1, 2, 4, 8, 16, 32, 64, 128), "sequence positions (rows) per block"),
        Param("threads", (64, 128, 256, 512), "threads per block (vector; tma launches one warp and takes 64)"),
        Param("vec_bytes", (4, 8, 16), "bytes per vector access, narrower when H x D needs it (vector; tma takes 16)"),
        Param("transport", ("vector", "tma"), "ld/st vectors through registers; TMA loads and stores (sm_90+)"),
        Param("group", (1, 2, 4, 8), "consecutive heads per block (tma; vector takes 1)"),
        Param("BN", (0, 16, 32, 64, 128, 256), "columns of depth per block, 0: all of D (tma; vector takes 0)"),
        Param("swizzle", tuple(SWIZZLE_BYTES), "shared-memory swizzle of the TMA boxes, one span per chunk "
              "(tma; vector takes none)"),
        Param("tma_blocks_per_op", (0, 1, 2, 4, 8), "chunks per TMA copy through an extra dimension, 0: one copy "
              "per chunk without it (tma with swizzle none; vector takes 0)"),
    ))

    @property
    def source_files(self):  # type: ignore[override]
        return library_files("ragged3d/ragged3d.cu", "ragged3d/ragged3d_tma.cu", "include/tunebox/tma.cuh",
                             "include/tunebox/tma_nd.cuh")

    # -- problems ---------------------------------------------------------------------------------
    def parse_problem(self, data: Mapping[str, Any]) -> RaggedProblem:
        reject_unknown(self.name, data, KNOWN)
        element_type(data.get("dtype"))
        batch, max_len, heads, depth = (positive(self.name, data, k) for k in ("batch", "max_len", "heads", "depth"))
        direction = data.get("direction")
        if direction not in DIRECTIONS:
            raise InvalidProblem(f"{self.name}: direction must be one of {DIRECTIONS}, got {direction!r}")
        if batch * max_len * heads * depth >= MAX_ELEMENTS:
            raise InvalidProblem(f"{self.name}: B x Lmax x H x D = {batch * max_len * heads * depth} elements is "
                                 "too many (limit 2^40)")
        lengths, seed = data.get("lengths"), None
        if lengths == "uniform":
            seed = data.get("lengths_seed", 0)
            if type(seed) is not int or seed < 0:
                raise InvalidProblem(f"{self.name}: lengths_seed must be a non-negative integer, got {seed!r}")
            lengths = np.random.default_rng(seed).integers(1, max_len + 1, batch).tolist()
        elif "lengths_seed" in data:
            raise InvalidProblem(f"{self.name}: lengths_seed is given only with lengths = 'uniform'")
        if (not isinstance(lengths, list | tuple) or len(lengths) != batch
                or not all(type(n) is int and 0 <= n <= max_len for n in lengths)):
            raise InvalidProblem(f"{self.name}: lengths must be 'uniform' or a list of {batch} integers in "
                                 f"[0, {max_len}]")
        return RaggedProblem(data["dtype"], batch, max_len, heads, depth, direction, tuple(lengths), seed)

    def problem_from_arrays(self, arrays: Mapping[str, Any], **options: Any) -> RaggedProblem:
        """Pack: arrays ``x`` (B, Lmax, H, D), ``offsets`` and ``out``; unpack: ``ragged``, ``offsets``
        and ``out`` (B, Lmax, H, D). Option ``lengths``: the B lengths, on the host (``offsets`` on the
        device must hold their prefix sums)."""
        direction = "pack" if "x" in arrays else "unpack"
        padded = arrays.get("x" if direction == "pack" else "out")
        if padded is None or "lengths" not in options or set(options) != {"lengths"}:
            raise InvalidProblem(f"{self.name}: tunebox.launch needs x, offsets and out (pack) or ragged, offsets "
                                 "and out (unpack), and the option lengths (a list of B lengths) alone")
        shape = tuple(padded.shape)
        if len(shape) != 4:
            raise InvalidProblem(f"{self.name}: the padded array must be (B, Lmax, H, D), got {list(shape)}")
        b, lmax, h, d = shape
        return self.parse_problem({"dtype": str(padded.dtype), "batch": b, "max_len": lmax, "heads": h, "depth": d,
                                   "direction": direction, "lengths": list(options["lengths"])})

    def buffers(self, problem: Problem) -> tuple[BufferSpec, ...]:
        p = self._as_problem(problem)
        source, out = ((("x", p.padded_shape), p.ragged_shape) if p.direction == "pack"
                       else (("ragged", p.ragged_shape), p.padded_shape))
        return (BufferSpec(source[0], source[1], p.element, "input"),
                BufferSpec("offsets", (p.batch + 1,), "int64", "input"), BufferSpec("out", out, p.element, "output"))

    def make_inputs(self, problem: Problem, rng: np.random.Generator) -> dict[str, np.ndarray]:
        p = self._as_problem(problem)
        name, shape = ("x", p.padded_shape) if p.direction == "pack" else ("ragged", p.ragged_shape)
        return {name: random_bits(element_type(p.element), shape, rng), "offsets": p.offsets.copy()}

    def reference(self, problem: Problem, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        p = self._as_problem(problem)
        if p.direction == "pack":
            x = inputs["x"]
            out = np.concatenate([x[b, :n] for b, n in enumerate(p.lengths)]) if p.total else \
                np.empty(p.ragged_shape, dtype=x.dtype)
            return {"out": out}
        ragged = inputs["ragged"]
        out = np.zeros(p.padded_shape, dtype=ragged.dtype)
        for b, n in enumerate(p.lengths):
            out[b, :n] = ragged[p.offsets[b]:p.offsets[b] + n]
        return {"out": out}

    def work(self, problem: Problem) -> Work:
        p = self._as_problem(problem)
        size = element_type(p.element).itemsize
        moved = p.total * p.row * size
        written = moved if p.direction == "pack" else p.batch * p.max_len * p.row * size
        return Work(moved + written + (p.batch + 1) * 8)

    # -- variants ---------------------------------------------------------------------------------
    @staticmethod
    def blocks(p: RaggedProblem, config: Config) -> int:
        if config["transport"] == "tma":
            return ragged3d_tma.blocks(p, config)
        return p.batch * math.ceil(p.max_len / int(config["BM"]))

    def default_config(self, problem: Problem) -> Config:
        p = self._as_problem(problem)
        size = element_type(p.element).itemsize
        fits = [m for m in (128, 64, 32, 16, 8, 4, 2) if m * p.row * size <= 64 * 1024 and m <= ceil_pow2(p.max_len)]
        bm = fits[0] if fits else 1  # tiles of up to 64 KiB
        threads = next(t for t in (256, 128, 64) if t <= max(64, _warps(math.ceil(bm * p.row * size / 16))))
        return self.space.validate({"BM": bm, "threads": threads, "vec_bytes": 16, "transport": "vector",
                                    **VECTOR_CANONICAL})

    def violations(self, problem: Problem, config: Config) -> list[str]:
        p = self._as_problem(problem)
        bm = int(config["BM"])
        broken = ragged3d_tma.violations(p, config) if config["transport"] == "tma" else self._vector_violations(
            p, config)
        if bm > ceil_pow2(p.max_len):
            broken.append(f"BM={bm} exceeds max_len={p.max_len} rounded up to a power of two")
        return broken

    def _vector_violations(self, p: RaggedProblem, config: Config) -> list[str]:
        size = element_type(p.element).itemsize  # every vec_bytes choice is a multiple of every element size
        bm, threads, vec_bytes = int(config["BM"]), int(config["threads"]), int(config["vec_bytes"])
        broken = []
        vectors = math.ceil(bm * p.row * size / vec_bytes)
        if threads > max(64, _warps(vectors)):
            broken.append(f"{threads} threads exceed the {vectors} vectors of a tile of {bm} rows rounded up to "
                          "whole warps: threads would idle")
        if self.blocks(p, config) > MAX_GRID_X:
            broken.append(f"{self.blocks(p, config)} blocks exceed the grid limit {MAX_GRID_X}")
        if any(config[name] != value for name, value in VECTOR_CANONICAL.items()):
            settings = ", ".join(f"{k}={v!r}" for k, v in VECTOR_CANONICAL.items())
            broken.append(f"group, BN, swizzle and tma_blocks_per_op shape the tiles of transport 'tma': transport "
                          f"'vector' moves whole rows and takes {settings}")
        return broken

    def render(self, problem: Problem, config: Config) -> KernelSource:
        p = self._as_problem(problem)
        if config["transport"] == "tma":
            return instantiate("ragged3d/ragged3d_tma.cu", "ragged3d_tma", ragged3d_tma.template_arguments(p, config))
        et = element_type(p.element)
        targs = (et.ctype, config["BM"], config["threads"], int(config["vec_bytes"]) // et.itemsize,
                 str(p.direction == "pack").lower())
        return instantiate("ragged3d/ragged3d.cu", "ragged3d", targs)

    def geometry(self, problem: Problem, config: Config) -> LaunchGeometry:
        """vector: B x ceil(Lmax / BM) blocks of ``threads``; tma: B x ceil(Lmax / BM) x (H / group) x
        column blocks of one warp, with the tile's shared memory."""
        p = self._as_problem(problem)
        if config["transport"] == "tma":
            return LaunchGeometry((self.blocks(p, config), 1, 1), (ragged3d_tma.THREADS, 1, 1),
                                  ragged3d_tma.layout(p, config).shared_bytes)
        return LaunchGeometry((self.blocks(p, config), 1, 1), (int(config["threads"]), 1, 1), 0)

    def args(self, problem: Problem, config: Config) -> tuple[Arg, ...]:
        """vector: (source, out, offsets, Lmax, H x D); tma: the source's and the destination's tensor
        maps, offsets, Lmax, D, H / group, tiles per sequence, column blocks."""
        p = self._as_problem(problem)
        if config["transport"] == "tma":
            return ragged3d_tma.args(p, config)
        source = "x" if p.direction == "pack" else "ragged"
        return (BufferArg(source), BufferArg("out"), BufferArg("offsets"), ScalarArg("i64", p.max_len),
                ScalarArg("i64", p.row))

    def distance(self, a: Problem, b: Problem) -> float | None:
        pa, pb = self._as_problem(a), self._as_problem(b)
        if (pa.element, pa.direction, pa.row) != (pb.element, pb.direction, pb.row):
            return None
        mean = [max(p.total, 1) / p.batch for p in (pa, pb)]
        return abs(math.log2(pa.batch / pb.batch)) + abs(math.log2(pa.max_len / pb.max_len)) + abs(
            math.log2(mean[0] / mean[1]))

    def torch_baseline(self, problem: Problem) -> Baseline:
        return self.torch_baselines(problem)[0]

    def torch_baselines(self, problem: Problem) -> tuple[Baseline, ...]:
        """pack: ``torch.cat`` of the sequences' prefixes (as a user writes it, and with the prefix views
        made once outside the timing: the kernel alone), and boolean-mask indexing ``x[mask]``; unpack: a
        zero tensor filled through the mask. The (B, Lmax) mask is built once, outside the timing."""
        import torch

        p = self._as_problem(problem)
        masks: dict[Any, Any] = {}
        views: dict[int, list[Any]] = {}

        def prefixes(x) -> list[Any]:
            if x.data_ptr() not in views:
                views[x.data_ptr()] = [x[b, :n] for b, n in enumerate(p.lengths)]
            return views[x.data_ptr()]

        def valid(device) -> Any:
            if device not in masks:
                lengths = torch.tensor(p.lengths, device=device)
                masks[device] = torch.arange(p.max_len, device=device)[None, :] < lengths[:, None]
            return masks[device]

        if p.direction == "pack":
            return (Baseline("torch: torch.cat([x[b, :len_b] for b in range(B)])", lambda t: {
                        "out": torch.cat([t["x"][b, :n] for b, n in enumerate(p.lengths)])}),
                    Baseline("torch: torch.cat(prefixes), the views x[b, :len_b] made once outside the timing",
                             lambda t: {"out": torch.cat(prefixes(t["x"]))}),
                    Baseline("torch: x[mask] (mask = arange(Lmax) < lengths[:, None])", lambda t: {
                        "out": t["x"][valid(t["x"].device)]}))

        def unpack(t: dict[str, Any]) -> dict[str, Any]:
            ragged = t["ragged"]
            out = ragged.new_zeros(p.padded_shape)
            out[valid(ragged.device)] = ragged
            return {"out": out}

        return (Baseline("torch: out = zeros(B, Lmax, H, D); out[mask] = ragged", unpack),)

    def _as_problem(self, problem: Problem) -> RaggedProblem:
        return problem_as(self.name, problem, RaggedProblem)
