"""Template ``registers`` (``quant_gemm_registers`` in kernels/quant_gemm/quant_gemm_registers.cu), Hopper
(sm_90a): D's transpose by wgmma with W's decoded rows as the register operand and the activations as the
shared-memory one, so that the decoded weights never pass through shared memory. Persistent blocks of a
loader warpgroup (the tile's tokens x 64 of A by TMA and its rows of codes, by TMA or by the warpgroup's
copies, ``codes``, per K step into ``stages`` ring buffers) and two consumer warpgroups that decode their
rows' codes of a step in registers while their wgmmas of the group before run. A tile is ``BW`` rows of W
(columns of D) by ``BT`` tokens (rows of D); ``splits`` > 1 cuts each tile's K steps over that many units
(split-K, summed through workspace in order). K must be a multiple of 32 (rows of codes 16-byte aligned
for TMA)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import ClassVar

from ...limits import MAX_SHARED_BYTES, SM_COUNT
from ...rules import Rules, shared_memory_fits
from ...tma import TensorMapRequest
from ..base import Arg, Instantiation, LaunchGeometry, TensorMapArg, instantiate
from ..contract import KernelTemplate, TemplateConfig, choice
from ..gemm.common import TMA_RULES, tma_rules
from ..gemm.split_k import COUNTER_TILE, MAX_SPLITS, SPLIT_SIZE_RULES, counter_tiles, split_rules, split_slots
from .common import access_bytes, code_rows_rule, power_ceiling, tma_kernel_args
from .problem import QuantGemmProblem

KERNEL = "quant_gemm/quant_gemm_registers.cu"
BK = 64  # K a step
THREADS = 384  # a loader warpgroup and two consumer warpgroups
SHARED_STAGES = (12, 8, 6, 4, 3, 2)  # the default's ring: the deepest that fits


@dataclass(frozen=True)
class RegistersConfig(TemplateConfig):
    BW: int = choice(
        64,
        128,
        256,
        doc="rows of W a tile (columns of D): 128 or 256, half a consumer; 64, both consumers on them, half the tokens "
        "each",
    )
    BT: int = choice(8, 16, 32, 64, 128, 256, doc="tokens a tile (rows of D): the wgmma's N, halved with BW = 64")
    stages: int = choice(2, 3, 4, 6, 8, 12, doc="ring buffers of A's box and W's codes (K steps loaded ahead)")
    scales_ahead: int = choice(1, 2, 4, doc="K steps ahead that a consumer reads its scale codes")
    splits: int = choice(1, 2, 4, 8, doc="work units per tile along K (split-K), summed through workspace in order")
    codes: str = choice(
        "copies",
        "tma",
        doc="W's codes loaded by the loader warpgroup's 16-byte copies, or as one TMA box of 32-byte rows",
    )


def stage_bytes(config: RegistersConfig) -> int:
    """A ring buffer: BT tokens x 64 bfloat16 of A, BW rows x 32 bytes of codes."""
    return config.BT * BK * 2 + config.BW * BK // 2


def shared_bytes(config: RegistersConfig) -> int:
    """The ring, two mbarriers a buffer, and 1024 bytes of alignment."""
    return config.stages * (stage_bytes(config) + 16) + 1024


def scale_load(p: QuantGemmProblem) -> int:
    """Bytes a load of a row's scale codes (the kernel's SCALE_LOAD): all of a K step's (2 for MXFP4, 4 for
    NVFP4) where the rows' nb is a multiple of that (K a multiple of 64), else the widest access dividing nb."""
    return min(access_bytes(p.blocks_per_row), BK // p.fmt.block)


def tiles(p: QuantGemmProblem, config: RegistersConfig) -> int:
    """Tiles of D: the persistent blocks' work units without split-K."""
    return math.ceil(p.M / config.BT) * math.ceil(p.N / config.BW)


class RegistersTemplate(KernelTemplate[QuantGemmProblem, RegistersConfig]):
    """At most one block per SM walks the units (tile, split) of D; 384 threads."""

    name = "registers"
    config_type = RegistersConfig
    rule_names: ClassVar[tuple[str, ...]] = (
        "k_whole_code_rows",
        "consumer_tokens",
        "accumulators",
        "bt_within_m",
        *SPLIT_SIZE_RULES,
        "split_counters",
        *TMA_RULES,
        "shared_memory_fits",
    )
    kernel = KERNEL

    def default(self, problem: QuantGemmProblem) -> RegistersConfig | None:
        """None where K is not a multiple of 32; else 128 rows of W by every token up to 256 a tile, split
        along K until the units fill the SMs (where the workspace and K steps allow), the deepest ring that
        fits, scale codes two steps ahead."""
        p = problem
        if p.K % 32:
            return None
        config = RegistersConfig(
            BW=128, BT=min(256, max(8, power_ceiling(p.M))), stages=2, scales_ahead=2, splits=1, codes="copies"
        )
        stages = next(s for s in SHARED_STAGES if shared_bytes(replace(config, stages=s)) <= MAX_SHARED_BYTES)
        config = replace(config, stages=stages)
        for splits in (2, 4, MAX_SPLITS):
            split = replace(config, splits=splits)
            if tiles(p, config) * splits > SM_COUNT or self.violations(p, split):
                break
            config = split
        return config

    def violations(self, problem: QuantGemmProblem, config: RegistersConfig) -> list[str]:
        p, c = problem, config
        rules = Rules(self.name)
        code_rows_rule(rules, p)
        rules.require(
            "consumer_tokens",
            c.BW > 64 or c.BT >= 16,
            f"BW=64 gives each consumer half of BT={c.BT} tokens, fewer than a wgmma's 8: BT >= 16 or BW > 64",
        )
        if c.BW == 256:
            rules.require(
                "accumulators",
                c.BT < 128 or (c.BT == 128 and c.splits == 1 and c.scales_ahead <= 2),
                f"BW=256 gives each consumer two m64 tiles of BT={c.BT} tokens, {c.BT} accumulators a thread; "
                "beside two tiles' decoding the registers hold 128 only without split-K's sums and with scale "
                "codes at most 2 steps ahead: BT <= 64, or BT=128 with splits=1 and scales_ahead <= 2",
            )
        rules.require(
            "bt_within_m",
            max(8, power_ceiling(p.M)) >= c.BT,
            f"BT={c.BT} is past M={p.M} rounded up to a power of two: token rows would idle",
        )
        split_rules(rules, c.splits, None, math.ceil(p.K / BK), split_slots(p.M, p.N))
        if c.splits > 1:
            rules.require(
                "split_counters",
                tiles(p, c) <= counter_tiles(p.M, p.N),
                lambda: (
                    f"split-K counts arrivals per tile: {tiles(p, c)} tiles of {c.BT} x {c.BW} exceed the "
                    f"workspace's {counter_tiles(p.M, p.N)} (tiles of {COUNTER_TILE}): a larger BT, or splits = 1"
                ),
            )
        tma_rules(rules, p, lambda: self.tensor_maps(p, c))
        shared_memory_fits(rules, shared_bytes(c), ": fewer stages or a smaller tile")
        return rules.broken

    def render(self, problem: QuantGemmProblem, config: RegistersConfig) -> Instantiation:
        c = config
        return instantiate(
            self.kernel,
            "quant_gemm_registers",
            {
                "NVFP4": problem.nvfp4,
                "SCALE_LOAD": scale_load(problem),
                "BW": c.BW,
                "BT": c.BT,
                "STAGES": c.stages,
                "SCALES_AHEAD": c.scales_ahead,
                "SPLITS": c.splits,
                "COPIES": c.codes == "copies",
                "SHARED_BYTES": shared_bytes(c),
            },
            arch_suffix="a",
        )

    def geometry(self, problem: QuantGemmProblem, config: RegistersConfig) -> LaunchGeometry:
        """One block per SM at most: a work unit is a tile and one of its K splits."""
        blocks = min(tiles(problem, config) * config.splits, SM_COUNT)
        return LaunchGeometry((blocks, 1, 1), (THREADS, 1, 1), shared_bytes(config))

    def args(self, problem: QuantGemmProblem, config: RegistersConfig) -> tuple[Arg, ...]:
        """``common.tma_kernel_args`` with the maps a_map and codes_map (codes 'tma')."""
        return tma_kernel_args(problem, self.tensor_maps(problem, config), config.splits)

    def tensor_maps(self, problem: QuantGemmProblem, config: RegistersConfig) -> tuple[TensorMapArg, ...]:
        """A in boxes of BT tokens x 64 (128-byte swizzle) and, codes 'tma', the codes (``values``) in boxes
        of BW rows x 32 bytes (no swizzle)."""
        p, c = problem, config
        a = TensorMapArg(
            "a", TensorMapRequest("bfloat16", (p.M, p.K), (2 * p.K, 2), (c.BT, BK), 0, "128B"), name="a_map"
        )
        if c.codes != "tma":
            return (a,)
        codes = TensorMapRequest("uint8", (p.N, p.row_bytes), (p.row_bytes, 1), (c.BW, BK // 2), 0, "none")
        return (a, TensorMapArg("values", codes, name="codes_map"))
