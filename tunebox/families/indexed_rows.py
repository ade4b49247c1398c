"""What ``gather`` and ``scatter`` share beyond ``indexed.py``: the seeded index draws, the
reference's validity test, the bytes of the index buffers and the distance of problems (for their
operations), and their one template ``rows``.

The ``rows`` template moves whole rows by index (``kernels/gather/gather.cu``), a block of
``rows_per_block`` rows at a time, one team of ``threads / rows_per_block`` threads per row striding
over the row's vectors. Its typed configuration, validity rules, default, launch geometry and
rendering live here; each family subclasses ``RowsTemplate`` for its problem type, naming its kernel
and its arguments (and gather adds its sparse-view forms). Every kernel takes its arguments as one
struct (``Cfg::Args``): the rows' source, ``idx``, ``mask`` (masked kernels only) and the rows'
destination (``row_buffers``), then the 64-bit extents and offsets, then (gather) the padding bits.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, TypeVar

import numpy as np

from ..dtypes import element_type
from ..rules import Rules, whole_elements
from .base import BufferArg, CType, Instantiation, LaunchGeometry, instantiate
from .contract import KernelTemplate, TemplateConfig, choice
from .indexed import MASK_CTYPE, UNCHECKED_NEEDS_VALID, IndexedProblem, _warps, index_type

PR = TypeVar("PR", bound=IndexedProblem)


def draw_invalid(p: IndexedProblem, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Seeded, disjoint positions of the sentinel, out-of-range and masked-out entries."""
    if p.sentinels == p.out_of_range == p.masked_out == 0:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, empty
    order = rng.permutation(p.count)
    a, b = p.sentinels, p.sentinels + p.out_of_range
    return order[:a], order[a:b], order[b : b + p.masked_out]


def mask_bytes(p: IndexedProblem, masked: np.ndarray) -> np.ndarray:
    mask = np.ones(p.count, dtype=np.uint8)
    mask[masked] = 0
    return mask


def to_index(p: IndexedProblem, rows: np.ndarray) -> np.ndarray:
    """Stored indices of the given rows: row - offset, in the index type (range checked at parse)."""
    return (rows.astype(np.int64) - p.offset).astype(index_type(p.index_dtype).numpy)


def valid_rows(p: IndexedProblem, inputs: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(valid, rows): which entries are valid, and their rows (idx + offset; meaningful where valid).
    Validity is tested without forming idx + offset, so no index can overflow."""
    idx = inputs["idx"].astype(np.int64)
    valid = (idx >= -p.offset) & (idx < p.extent - p.offset)
    if p.mask:
        valid &= inputs["mask"] != 0
    return valid, np.where(valid, idx, -p.offset) + p.offset


def row_buffers(p: IndexedProblem, source: str, destination: str) -> tuple[BufferArg, ...]:
    """The buffers a ``rows`` kernel takes, in its argument struct's order: ``source`` (const
    elements), ``idx`` (const indices), ``mask`` (const bytes, masked problems only) and
    ``destination`` (elements), typed as the kernel's ``Cfg::E`` / ``Cfg::I`` (``RowsTemplate.render``)."""
    element, index = element_type(p.element).ctype, index_type(p.index_dtype).ctype
    mask = (BufferArg("mask", f"const {MASK_CTYPE}"),) if p.mask else ()
    return (
        BufferArg(source, f"const {element}"),
        BufferArg("idx", f"const {index}"),
        *mask,
        BufferArg(destination, element),
    )


def index_bytes(p: IndexedProblem) -> int:
    """Bytes of the index (and mask) buffers, each read once."""
    return p.count * (index_type(p.index_dtype).itemsize + (1 if p.mask else 0))


def indexed_distance(a: IndexedProblem, b: IndexedProblem) -> float | None:
    """log2 distance of N, D and K; None across element types, index types or masked-ness."""
    if (a.element, a.index_dtype, a.mask) != (b.element, b.index_dtype, b.mask):
        return None
    return sum(abs(math.log2(x / y)) for x, y in ((a.rows, b.rows), (a.cols, b.cols), (a.count, b.count)))


@dataclass(frozen=True)
class RowsConfig(TemplateConfig):
    rows_per_block: int = choice(1, 2, 4, 8, 16, doc="indices (rows) each block moves, one team of threads per row")
    threads: int = choice(64, 128, 256, 512, doc="threads per block")
    vec_bytes: int = choice(2, 4, 8, 16, doc="bytes per vector access (narrower when the row pitch needs it)")
    check_bounds: str = choice("true", "false", doc="test every index; 'false' promises all are valid")


class RowsTemplate(KernelTemplate[PR, RowsConfig]):
    """The shared rules, default, geometry and rendering of the ``rows`` template."""

    name = "rows"
    config_type = RowsConfig
    rule_names: ClassVar[tuple[str, ...]] = ("vec_bytes_whole_elements", "team_within_row", "unchecked_needs_valid")
    kernel = "gather/gather.cu"

    @abc.abstractmethod
    def kernel_name(self, p: PR) -> str:
        """The kernel (of ``kernel``) that moves ``p``."""

    def row_vectors(self, p: PR, vec_bytes: int) -> int:
        """Vectors per row at the widest width (at most vec_bytes) dividing the row: what the kernel
        uses on aligned buffers."""
        width = vec_bytes // element_type(p.element).itemsize
        while p.cols % width:
            width //= 2
        return p.cols // width

    def default(self, problem: PR) -> RowsConfig:
        """256 threads in 16-byte vectors, with as few rows per block as keep every thread busy."""
        vectors = self.row_vectors(problem, 16)
        per_row = next(r for r in (1, 2, 4, 8, 16) if 256 // r <= _warps(vectors))
        return RowsConfig(rows_per_block=per_row, threads=256, vec_bytes=16, check_bounds="true")

    def violations(self, problem: PR, config: RowsConfig) -> list[str]:
        size = element_type(problem.element).itemsize
        rules = Rules(self.name)
        if not whole_elements(rules, config.vec_bytes, size):
            return rules.broken
        self.team_rules(rules, problem, config)
        if config.check_bounds == "false":
            rules.require("unchecked_needs_valid", problem.all_valid, UNCHECKED_NEEDS_VALID)
        return rules.broken

    def team_rules(self, rules: Rules, problem: PR, config: RowsConfig) -> None:
        """The rules on how the threads share the work (the vector width divides the element)."""
        team, vectors = config.threads // config.rows_per_block, self.row_vectors(problem, config.vec_bytes)
        rules.require(
            "team_within_row",
            team <= _warps(vectors),
            f"{team} threads per row (threads / rows_per_block) exceed the row's {vectors} vectors "
            "rounded up to whole warps: threads would idle",
        )

    def render(self, problem: PR, config: RowsConfig) -> Instantiation:
        et = element_type(problem.element)
        members: dict[str, int | bool | CType] = {
            "E": CType(et.ctype),
            "I": CType(index_type(problem.index_dtype).ctype),
            "RPB": config.rows_per_block,
            "THREADS": config.threads,
            "VEC": config.vec_bytes // et.itemsize,
            "CHECK": config.check_bounds == "true",
        }
        return instantiate(self.kernel, self.kernel_name(problem), members)

    def geometry(self, problem: PR, config: RowsConfig) -> LaunchGeometry:
        return LaunchGeometry((math.ceil(problem.count / config.rows_per_block), 1, 1), (config.threads, 1, 1), 0)
