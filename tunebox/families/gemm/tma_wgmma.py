"""What the templates ``wgmma`` and ``padded`` share: the Hopper kernel ``gemm_wgmma`` (TMA loads
with the 128-byte swizzle into an mbarrier ring, a producer warpgroup and 1-2 consumer warpgroups
issuing wgmma m64nBNk16; kernels/gemm/gemm.cu), its configuration, rules, rendering, launch geometry
and arguments. The two differ only in which rows the tensor maps read: the operands themselves
(``wgmma``, rows 16-byte aligned) or copies with aligned rows (``padded``)."""

from __future__ import annotations

import abc
import math
from dataclasses import dataclass
from typing import ClassVar

from ...rules import Rules
from ...tma import TensorMapRequest
from ..base import Arg, BufferArg, CType, Instantiation, LaunchGeometry, ScalarArg, TensorMapArg, instantiate
from ..contract import KernelTemplate, TemplateConfig, choice
from .common import (
    COMMON_RULES,
    MAX_ACCUMULATORS,
    TMA_RULES,
    bounds_choice,
    common_rules,
    output_ctype,
    output_members,
    pipeline_stages,
    tile_columns,
    tile_rows,
    tma_rules,
)
from .operation import GemmProblem

WG_BK = 64  # K step of the wgmma kernel: one 128-byte swizzle row of bfloat16
# the rules of both templates (each adds its alignment rule)
WGMMA_RULES = ("consumer_rows", "whole_b_boxes", "accumulators_fit", "stages_at_least_2", *TMA_RULES, *COMMON_RULES)


@dataclass(frozen=True)
class WgmmaConfig(TemplateConfig):
    """The configuration of both wgmma templates: K steps of 64 (BK), the 128-byte swizzle and whole
    warpgroups are fixed by the kernel."""

    BM: int = tile_rows()
    BN: int = tile_columns()
    stages: int = pipeline_stages()
    bounds: str = bounds_choice()
    consumers: int = choice(1, 2, doc="consumer warpgroups of the wgmma paths")
    tiles_per_block: int = choice(1, 2, 4, 8, 16, doc="tiles of D each block of the wgmma paths computes in turn")


class TmaWgmmaTemplate(KernelTemplate[GemmProblem, WgmmaConfig]):
    """A block of 128 x (consumers + 1) threads computes tiles_per_block tiles of D in turn (tiles in
    row-major order), so one tile's epilogue overlaps the next one's loads."""

    config_type = WgmmaConfig
    kernel = "gemm/gemm.cu"
    helpers: ClassVar[tuple[str, ...]] = ()  # helper kernels of the rendered module (launched by prologue)

    @abc.abstractmethod
    def alignment_rule(self, rules: Rules, problem: GemmProblem) -> None:
        """The template's rule on the operands' row alignment."""

    @abc.abstractmethod
    def operand_source(self, name: str, cols: int, ld: int) -> tuple[str, int]:
        """The buffer a tensor map of operand ``name`` (``cols`` columns, leading dimension ``ld``)
        reads, and that buffer's leading dimension."""

    def helper_members(self, problem: GemmProblem) -> dict[str, int | bool | CType]:
        """Members of the configuration struct that only the helper kernels read."""
        return {}

    @staticmethod
    def shared_bytes(config: WgmmaConfig) -> int:
        """Dynamic shared memory per block: the stages' swizzled boxes of A (BM x 64) and B (64 x BN)
        plus 1024 bytes to align them to the swizzle period."""
        return config.stages * (config.BM + config.BN) * WG_BK * 2 + 1024

    def default(self, problem: GemmProblem) -> WgmmaConfig | None:
        return None  # the family's default is the mma template's

    def violations(self, problem: GemmProblem, config: WgmmaConfig) -> list[str]:
        p, c = problem, config
        bm, bn, consumers = c.BM, c.BN, c.consumers
        rules = Rules(self.name)
        if rules.require(
            "consumer_rows",
            bm % (64 * consumers) == 0 and bm // (64 * consumers) <= 2,
            f"each of the {consumers} consumer warpgroup(s) multiplies 1 or 2 tiles of 64 rows: "
            f"BM must be {64 * consumers} or {128 * consumers} (BM={bm})",
        ) and rules.require(
            "whole_b_boxes", bn % 64 == 0, f"B moves in boxes of 64 columns: BN must be 64, 128 or 256 (BN={bn})"
        ):
            rules.require(
                "accumulators_fit",
                bm // (64 * consumers) * bn // 2 <= MAX_ACCUMULATORS,
                f"{bm // (64 * consumers) * bn // 2} float32 accumulators per thread (at most "
                f"{MAX_ACCUMULATORS}): lower BN or add a consumer",
            )
        rules.require(
            "stages_at_least_2",
            c.stages >= 2,
            f"path {self.name!r} keeps one stage's products in flight while the next stage loads: stages >= 2",
        )
        self.alignment_rule(rules, p)
        tma_rules(rules, p, lambda: self.tensor_maps(p, c))
        common_rules(rules, p, bm, bn, c.bounds, self.shared_bytes(c))
        return rules.broken

    def render(self, problem: GemmProblem, config: WgmmaConfig) -> Instantiation:
        c = config
        return instantiate(
            self.kernel,
            "gemm_wgmma",
            {
                **output_members(problem),
                "BM": c.BM,
                "BN": c.BN,
                "CONSUMERS": c.consumers,
                "STAGES": c.stages,
                "BOUNDS": c.bounds == "true",
                "SHARED_BYTES": self.shared_bytes(c),
                **self.helper_members(problem),
            },
            helpers=self.helpers,
            arch_suffix="a",
        )

    def geometry(self, problem: GemmProblem, config: WgmmaConfig) -> LaunchGeometry:
        tiles = math.ceil(problem.N / config.BN) * math.ceil(problem.M / config.BM)
        return LaunchGeometry(
            (math.ceil(tiles / config.tiles_per_block), 1, 1),
            (128 * (config.consumers + 1), 1, 1),
            self.shared_bytes(config),
        )

    def args(self, problem: GemmProblem, config: WgmmaConfig) -> tuple[Arg, ...]:
        """The members of ``Cfg::Args``: a_map, b_map, D, M, N, K, ldd, alpha."""
        p = problem
        return (
            *self.tensor_maps(p, config),
            BufferArg("D", output_ctype(p)),
            *(ScalarArg("i64", getattr(p, name), name) for name in ("M", "N", "K", "ldd")),
            ScalarArg("f32", p.alpha, "alpha"),
        )

    def tensor_maps(self, problem: GemmProblem, config: WgmmaConfig) -> tuple[TensorMapArg, TensorMapArg]:
        """TMA maps of A (boxes of BM rows x 64) and B (64 x 64), 128-byte swizzle: the members
        ``a_map`` and ``b_map``."""
        (a, m, k, lda), (b, _, n, ldb) = problem.operands()
        maps = []
        for name, rows, cols, ld, box in ((a, m, k, lda, (config.BM, WG_BK)), (b, k, n, ldb, (WG_BK, 64))):
            buffer, pitch = self.operand_source(name, cols, ld)
            maps.append(
                TensorMapArg(
                    buffer,
                    TensorMapRequest("bfloat16", (rows, cols), (pitch * 2, 2), box, 0, "128B", l2_promotion="128B"),
                    name=f"{name.lower()}_map",
                )
            )
        return maps[0], maps[1]
