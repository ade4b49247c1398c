"""The ragged3d operation: pack a padded (B, Lmax, H, D) tensor into ragged (total, H, D) storage, or
unpack it back; its problems, buffers, seeded inputs, numpy reference, work, distance and torch
baselines, and the rule both templates share (BM within Lmax)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ...dtypes import element_type, random_bits
from ...errors import InvalidProblem
from ...rules import Rules
from ..base import Baseline, BufferSpec, Problem, Work
from ..contract import Operation
from ..indexed import MAX_ELEMENTS, ceil_pow2, positive, reject_unknown

NAME = "ragged3d"
KNOWN = {"dtype", "batch", "max_len", "heads", "depth", "direction", "lengths", "lengths_seed"}
DIRECTIONS = ("pack", "unpack")
BM_DOC = "sequence positions (rows) per block"
BM_CHOICES = (1, 2, 4, 8, 16, 32, 64, 128)


MAX_BATCH = 2**24  # sequences: their lengths and offsets are host arrays


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
    def itemsize(self) -> int:
        return element_type(self.element).itemsize

    @property
    def pack(self) -> bool:
        return self.direction == "pack"

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
        d = {
            "dtype": self.element,
            "batch": self.batch,
            "max_len": self.max_len,
            "heads": self.heads,
            "depth": self.depth,
            "direction": self.direction,
            "lengths": lengths,
        }
        if self.lengths_seed is not None:
            d["lengths_seed"] = self.lengths_seed
        return d


def bm_rule(rules: Rules, p: RaggedProblem, bm: int) -> None:
    """The rule both templates share: a tile no taller than Lmax rounded up to a power of two."""
    rules.require(
        "bm_within_max_len",
        bm <= ceil_pow2(p.max_len),
        f"BM={bm} exceeds max_len={p.max_len} rounded up to a power of two",
    )


class RaggedOperation(Operation[RaggedProblem]):
    name = NAME
    draws = frozenset({"lengths", "lengths_seed"})
    array_fields = frozenset({"dtype", "batch", "max_len", "heads", "depth", "direction"})
    fields = {
        "dtype": "element type",
        "batch": "B, sequences",
        "max_len": "Lmax, positions of the padded tensor per sequence",
        "heads": "H, heads per position",
        "depth": "D, elements per head",
        "direction": "'pack' (padded -> ragged) or 'unpack' (ragged -> padded, zeros past each length)",
        "lengths": "a list of B lengths in [0, Lmax], or 'uniform' (drawn in [1, Lmax] from lengths_seed)",
        "lengths_seed": "seed of the 'uniform' lengths (default 0)",
    }

    def parse(self, data: Mapping[str, Any]) -> RaggedProblem:
        reject_unknown(self.name, data, KNOWN)
        element_type(data.get("dtype"))
        batch, max_len, heads, depth = (positive(self.name, data, k) for k in ("batch", "max_len", "heads", "depth"))
        direction = data.get("direction")
        if direction not in DIRECTIONS:
            raise InvalidProblem(f"{self.name}: direction must be one of {DIRECTIONS}, got {direction!r}")
        if batch > MAX_BATCH:
            raise InvalidProblem(f"{self.name}: batch B = {batch} sequences is too many (limit {MAX_BATCH})")
        if batch * max_len * heads * depth >= MAX_ELEMENTS:
            raise InvalidProblem(
                f"{self.name}: B x Lmax x H x D = {batch * max_len * heads * depth} elements is too many (limit 2^40)"
            )
        lengths, seed = data.get("lengths"), None
        if lengths == "uniform":
            seed = data.get("lengths_seed", 0)
            if type(seed) is not int or seed < 0:
                raise InvalidProblem(f"{self.name}: lengths_seed must be a non-negative integer, got {seed!r}")
            lengths = np.random.default_rng(seed).integers(1, max_len + 1, batch).tolist()
        elif "lengths_seed" in data:
            raise InvalidProblem(f"{self.name}: lengths_seed is given only with lengths = 'uniform'")
        if (
            not isinstance(lengths, list | tuple)
            or len(lengths) != batch
            or not all(type(n) is int and 0 <= n <= max_len for n in lengths)
        ):
            raise InvalidProblem(
                f"{self.name}: lengths must be 'uniform' or a list of {batch} integers in [0, {max_len}]"
            )
        return RaggedProblem(data["dtype"], batch, max_len, heads, depth, direction, tuple(lengths), seed)

    def launch_options(self, problem: RaggedProblem) -> dict[str, Any]:
        """A caller gives its lengths (however a sweep drew them)."""
        return {"lengths": list(problem.lengths)}

    def from_arrays(self, arrays: Mapping[str, Any], **options: Any) -> RaggedProblem:
        """Pack: arrays ``x`` (B, Lmax, H, D), ``offsets`` and ``out``; unpack: ``ragged``, ``offsets``
        and ``out`` (B, Lmax, H, D). Option ``lengths``: the B lengths, on the host (``offsets`` on the
        device must hold their prefix sums)."""
        direction = "pack" if "x" in arrays else "unpack"
        padded = arrays.get("x" if direction == "pack" else "out")
        if padded is None or "lengths" not in options or set(options) != {"lengths"}:
            raise InvalidProblem(
                f"{self.name}: tunebox.launch needs x, offsets and out (pack) or ragged, offsets "
                "and out (unpack), and the option lengths (a list of B lengths) alone"
            )
        shape = tuple(padded.shape)
        if len(shape) != 4:
            raise InvalidProblem(f"{self.name}: the padded array must be (B, Lmax, H, D), got {list(shape)}")
        b, lmax, h, d = shape
        return self.parse(
            {
                "dtype": str(padded.dtype),
                "batch": b,
                "max_len": lmax,
                "heads": h,
                "depth": d,
                "direction": direction,
                "lengths": list(options["lengths"]),
            }
        )

    def buffers(self, problem: RaggedProblem) -> tuple[BufferSpec, ...]:
        p = problem
        source, out = (
            (("x", p.padded_shape), p.ragged_shape) if p.pack else (("ragged", p.ragged_shape), p.padded_shape)
        )
        return (
            BufferSpec(source[0], source[1], p.element, "input"),
            BufferSpec("offsets", (p.batch + 1,), "int64", "input"),
            BufferSpec("out", out, p.element, "output"),
        )

    def make_inputs(self, problem: RaggedProblem, rng: np.random.Generator) -> dict[str, np.ndarray]:
        p = problem
        name, shape = ("x", p.padded_shape) if p.pack else ("ragged", p.ragged_shape)
        return {name: random_bits(element_type(p.element), shape, rng), "offsets": p.offsets.copy()}

    def reference(self, problem: RaggedProblem, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        p = problem
        if p.pack:
            x = inputs["x"]
            out = (
                np.concatenate([x[b, :n] for b, n in enumerate(p.lengths)])
                if p.total
                else np.empty(p.ragged_shape, dtype=x.dtype)
            )
            return {"out": out}
        ragged = inputs["ragged"]
        out = np.zeros(p.padded_shape, dtype=ragged.dtype)
        for b, n in enumerate(p.lengths):
            out[b, :n] = ragged[p.offsets[b] : p.offsets[b] + n]
        return {"out": out}

    def work(self, problem: RaggedProblem) -> Work:
        p = problem
        moved = p.total * p.row * p.itemsize
        written = moved if p.pack else p.batch * p.max_len * p.row * p.itemsize
        return Work(moved + written + (p.batch + 1) * 8)

    def distance(self, a: RaggedProblem, b: RaggedProblem) -> float | None:
        if (a.element, a.direction, a.row) != (b.element, b.direction, b.row):
            return None
        mean = [max(p.total, 1) / p.batch for p in (a, b)]
        return (
            abs(math.log2(a.batch / b.batch))
            + abs(math.log2(a.max_len / b.max_len))
            + abs(math.log2(mean[0] / mean[1]))
        )

    def baselines(self, problem: RaggedProblem) -> tuple[Baseline, ...]:
        """pack: ``torch.cat`` of the sequences' prefixes (as a user writes it, and with the prefix views
        made once outside the timing: the kernel alone), and boolean-mask indexing ``x[mask]``; unpack: a
        zero tensor filled through the mask. The (B, Lmax) mask is built once, outside the timing."""
        import torch

        p = problem
        masks: dict[Any, Any] = {}
        views: dict[int, list[Any]] = {}

        def prefixes(x: Any) -> list[Any]:
            if x.data_ptr() not in views:
                views[x.data_ptr()] = [x[b, :n] for b, n in enumerate(p.lengths)]
            return views[x.data_ptr()]

        def valid(device: Any) -> Any:
            if device not in masks:
                lengths = torch.tensor(p.lengths, device=device)
                masks[device] = torch.arange(p.max_len, device=device)[None, :] < lengths[:, None]
            return masks[device]

        if p.pack:
            return (
                Baseline(
                    "torch: torch.cat([x[b, :len_b] for b in range(B)])",
                    lambda t: {"out": torch.cat([t["x"][b, :n] for b, n in enumerate(p.lengths)])},
                ),
                Baseline(
                    "torch: torch.cat(prefixes), the views x[b, :len_b] made once outside the timing",
                    lambda t: {"out": torch.cat(prefixes(t["x"]))},
                ),
                Baseline(
                    "torch: x[mask] (mask = arange(Lmax) < lengths[:, None])",
                    lambda t: {"out": t["x"][valid(t["x"].device)]},
                ),
            )

        def unpack(t: dict[str, Any]) -> dict[str, Any]:
            ragged = t["ragged"]
            out = ragged.new_zeros(p.padded_shape)
            out[valid(ragged.device)] = ragged
            return {"out": out}

        return (Baseline("torch: out = zeros(B, Lmax, H, D); out[mask] = ragged", unpack),)
