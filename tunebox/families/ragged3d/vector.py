"""ragged3d's template ``vector`` (``kernels/ragged3d/ragged3d.cu``): a block of ``threads`` threads
moves BM rows of one sequence (H x D contiguous elements each) in vectors of ``vec_bytes`` through
registers; B x ceil(Lmax / BM) blocks."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...dtypes import element_type
from ...limits import MAX_GRID_X
from ...rules import Rules
from ..base import Arg, BufferArg, CType, Instantiation, LaunchGeometry, ScalarArg, instantiate
from ..contract import KernelTemplate, TemplateConfig, choice
from ..indexed import _warps, ceil_pow2
from .operation import BM_CHOICES, BM_DOC, RaggedProblem, bm_rule

TILE_BYTES = 64 * 1024  # the default config's tiles: up to 64 KiB


@dataclass(frozen=True)
class VectorConfig(TemplateConfig):
    BM: int = choice(*BM_CHOICES, doc=BM_DOC)
    threads: int = choice(64, 128, 256, 512, doc="threads per block")
    vec_bytes: int = choice(4, 8, 16, doc="bytes per vector access, narrower when H x D needs it")


def blocks(p: RaggedProblem, config: VectorConfig) -> int:
    """B x ceil(Lmax / BM), one flat grid.x."""
    return p.batch * math.ceil(p.max_len / config.BM)


class VectorTemplate(KernelTemplate[RaggedProblem, VectorConfig]):
    name = "vector"
    config_type = VectorConfig
    kernel = "ragged3d/ragged3d.cu"
    rule_names = ("threads_busy", "grid_fits", "bm_within_max_len")

    def default(self, problem: RaggedProblem) -> VectorConfig:
        """The largest BM (up to 128, within Lmax rounded up) whose tile fits 64 KiB, the fewest of 256,
        128 and 64 threads that the tile's 16-byte vectors keep busy."""
        p = problem
        fits = [
            m for m in (128, 64, 32, 16, 8, 4, 2) if m * p.row * p.itemsize <= TILE_BYTES and m <= ceil_pow2(p.max_len)
        ]
        bm = fits[0] if fits else 1
        threads = next(t for t in (256, 128, 64) if t <= max(64, _warps(math.ceil(bm * p.row * p.itemsize / 16))))
        return VectorConfig(BM=bm, threads=threads, vec_bytes=16)

    def violations(self, problem: RaggedProblem, config: VectorConfig) -> list[str]:
        p = problem  # every vec_bytes choice is a multiple of every element size
        bm, threads = config.BM, config.threads
        rules = Rules(self.name)
        vectors = math.ceil(bm * p.row * p.itemsize / config.vec_bytes)
        rules.require(
            "threads_busy",
            threads <= max(64, _warps(vectors)),
            f"{threads} threads exceed the {vectors} vectors of a tile of {bm} rows rounded up to "
            "whole warps: threads would idle",
        )
        n = blocks(p, config)
        rules.require("grid_fits", n <= MAX_GRID_X, f"{n} blocks exceed the grid limit {MAX_GRID_X}")
        bm_rule(rules, p, bm)
        return rules.broken

    def render(self, problem: RaggedProblem, config: VectorConfig) -> Instantiation:
        et = element_type(problem.element)
        return instantiate(
            self.kernel,
            "ragged3d",
            {
                "E": CType(et.ctype),
                "BM": config.BM,
                "THREADS": config.threads,
                "VEC": config.vec_bytes // et.itemsize,
                "PACK": problem.pack,
            },
        )

    def geometry(self, problem: RaggedProblem, config: VectorConfig) -> LaunchGeometry:
        """B x ceil(Lmax / BM) blocks of ``threads``, no shared memory."""
        return LaunchGeometry((blocks(problem, config), 1, 1), (config.threads, 1, 1), 0)

    def args(self, problem: RaggedProblem, config: VectorConfig) -> tuple[Arg, ...]:
        """The argument struct: the source (member ``x`` for pack, ``ragged`` for unpack: a buffer's
        member is named by the buffer), ``out``, ``offsets``, ``Lmax``, ``row`` (H x D)."""
        source = "x" if problem.pack else "ragged"
        e = element_type(problem.element).ctype
        return (
            BufferArg(source, f"const {e}"),
            BufferArg("out", e),
            BufferArg("offsets", "const long long"),
            ScalarArg("i64", problem.max_len, "Lmax"),
            ScalarArg("i64", problem.row, "row"),
        )
