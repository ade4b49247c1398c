"""Template ``wgmma`` (``quant_gemm_wgmma`` in kernels/quant_gemm/quant_gemm_wgmma.cu), Hopper (sm_90a): the
gemm family's persistent, warp-specialized kernel (kernels/include/tunebox/persistent_gemm.cuh) with W's
codes loaded by TMA beside A's boxes (``stages`` ring buffers) and decoded into the wgmma's bfloat16 B
operand in shared memory (``operands`` buffers), K step by K step, by three producer warps, by both
consumer warpgroups, or by a fourth warpgroup of their own (``converters``), their scale codes read
``scales_ahead`` steps ahead and the codes prefetched into L2 in runs of 512 bytes. K must be a multiple
of 32 (rows of codes 16-byte aligned for TMA). With ``splits`` > 1 each tile's K steps are cut over that
many work units (split-K, gemm's split_k.py), for shapes with fewer tiles than SMs."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from ...limits import SM_COUNT, SM_REGISTERS
from ...rules import Rules, shared_memory_fits
from ...tma import TensorMapRequest
from ..base import Arg, CType, Instantiation, LaunchGeometry, TensorMapArg, instantiate
from ..contract import KernelTemplate, TemplateConfig, choice
from ..gemm.common import TMA_RULES, tma_rules
from ..gemm.persistent import EPI_BUFFER_BYTES, EPI_BUFFERS, THREADS, WARPGROUP_RULES, warpgroup_rules
from ..gemm.split_k import SPLIT_RULES, split_rules, split_slots
from ..gemm.tma_wgmma import WG_BK
from .common import code_rows_rule, power_ceiling, tma_kernel_args
from .problem import QuantGemmProblem

KERNEL = "quant_gemm/quant_gemm_wgmma.cu"
CODE_BYTES = WG_BK // 2  # a row's codes of one K step
OPERAND_ROW_BYTES = WG_BK * 2  # a row of the decoded operand: 64 bfloat16
DECODER_REGISTERS = 56  # the fewest a decoder thread runs in (below: spills)
DECODER_THREADS = 128  # converters 'decoders': warpgroup 3 of the block


@dataclass(frozen=True)
class WgmmaConfig(TemplateConfig):
    BM: int = choice(64, 128, 256, doc="tile rows (tokens): 128 or 256 (cooperative), 64 or 128 (pingpong)")
    BN: int = choice(64, 128, 192, 256, doc="tile columns (rows of W; the wgmma's N)")
    stages: int = choice(2, 3, 4, 6, 8, 12, doc="ring buffers of A's box and W's codes (TMA loads in flight)")
    operands: int = choice(2, 3, 4, doc="buffers of the decoded operand (K steps decoded ahead of the wgmma)")
    schedule: str = choice("cooperative", "pingpong", doc="consumers share each tile, or take alternate tiles")
    raster: str = choice("m", "n", doc="tile order: strips of `group` tile rows ('m') or columns ('n')")
    group: int = choice(1, 2, 4, 8, 16, doc="tiles across a strip of the tile order (L2 reuse)")
    epilogue: str = choice("tma", "direct", doc="D through shared memory and TMA stores, or stored from registers")
    producer_registers: int = choice(
        40, 56, 72, 88, doc="registers per thread of the loader (and, converters 'producer', decoder) warps"
    )
    consumer_registers: int = choice(
        184, 192, 200, 208, 216, 224, 232, doc="registers per thread of the consumers (setmaxnreg)"
    )
    scales_ahead: int = choice(2, 4, 8, doc="K steps ahead that the decoders read their scale codes")
    converters: str = choice(
        "producer",
        "consumers",
        "decoders",
        doc="who decodes: three producer warps, both consumer warpgroups while their wgmmas of two steps run, or "
        "a warpgroup of their own (512 threads; it takes the registers the others leave)",
    )
    splits: int = choice(1, 2, 4, 8, doc="work units per tile along K (split-K), summed through workspace in order")


def shared_bytes(config: WgmmaConfig) -> int:
    """The ring (A's BM x 64 box and BN rows of codes a buffer), the operand buffers (BN rows of 64
    bfloat16), the consumers' epilogue buffers (TMA epilogue), two mbarriers a buffer of either, and
    1024 bytes of alignment."""
    c = config
    epilogue = 2 * EPI_BUFFERS * EPI_BUFFER_BYTES if c.epilogue == "tma" else 0
    ring = c.stages * (c.BM * WG_BK * 2 + c.BN * CODE_BYTES)
    return ring + c.operands * c.BN * OPERAND_ROW_BYTES + epilogue + 2 * (c.stages + c.operands) * 8 + 1024


def threads(config: WgmmaConfig) -> int:
    """The block's threads: a producer and two consumer warpgroups, and the decoders' own."""
    return THREADS + (DECODER_THREADS if config.converters == "decoders" else 0)


def decoder_registers(config: WgmmaConfig) -> int:
    """Registers per thread of the decoding threads: the producer's (converters 'producer'), or for
    converters 'decoders' the register file's rest after the producer and consumers, in steps of 8
    (setmaxnreg's)."""
    c = config
    if c.converters != "decoders":
        return c.producer_registers
    start = SM_REGISTERS // threads(c)  # each thread's at launch; setmaxnreg moves them between warpgroups
    rest = 4 * start - c.producer_registers - 2 * c.consumer_registers  # the four warpgroups' sum, less the others
    return rest // 8 * 8


def tiles(p: QuantGemmProblem, config: WgmmaConfig) -> int:
    """Tiles of D: the persistent blocks' work units."""
    return math.ceil(p.M / config.BM) * math.ceil(p.N / config.BN)


class WgmmaTemplate(KernelTemplate[QuantGemmProblem, WgmmaConfig]):
    """At most one block per SM walks the BM x BN tiles of D; 384 threads (a loader and decoder
    warpgroup, two consumer warpgroups), 512 with a decoder warpgroup."""

    name = "wgmma"
    config_type = WgmmaConfig
    rule_names: ClassVar[tuple[str, ...]] = (
        "k_whole_code_rows",
        *WARPGROUP_RULES,
        "bm_within_m",
        "consumers_convert",
        "decoder_registers",
        "decoders_wgmma_width",
        "tma_epilogue_chunks",
        *SPLIT_RULES,
        *TMA_RULES,
        "shared_memory_fits",
    )
    kernel = KERNEL

    def default(self, problem: QuantGemmProblem) -> WgmmaConfig | None:
        """None where K is not a multiple of 32; else one 64-row tile a consumer in turn (pingpong) up
        to M = 64, past it cooperative tiles of 128 or 256 tokens, 128 rows of W a tile."""
        p = problem
        if p.K % 32:
            return None
        small = p.M <= 64
        bm = 64 if small else 128 if p.M <= 128 else 256
        return WgmmaConfig(
            BM=bm,
            BN=128,
            stages={64: 8, 128: 6, 256: 4}[bm],
            operands=2,
            schedule="pingpong" if small else "cooperative",
            raster="m",
            group=8,
            epilogue="tma" if p.N % 8 == 0 else "direct",
            producer_registers=88,
            consumer_registers=208,
            scales_ahead=4,
            converters="producer",
            splits=1,
        )

    def violations(self, problem: QuantGemmProblem, config: WgmmaConfig) -> list[str]:
        p, c = problem, config
        rules = Rules(self.name)
        code_rows_rule(rules, p)
        warpgroup_rules(rules, c)
        rules.require(
            "bm_within_m",
            max(64, power_ceiling(p.M)) >= c.BM,
            f"BM={c.BM} is past M={p.M} rounded up to a power of two: token rows would idle",
        )
        if c.converters == "consumers":
            rules.require(
                "consumers_convert",
                c.schedule == "cooperative" and c.operands >= 4 and c.stages >= 3,
                f"converters 'consumers' decode a step ahead of their wgmma, in step with each other: schedule "
                f"'cooperative', operands >= 4 and stages >= 3 (schedule {c.schedule!r}, operands={c.operands}, "
                f"stages={c.stages}); or converters 'producer'",
            )
        else:
            rules.require(
                "decoder_registers",
                decoder_registers(c) >= DECODER_REGISTERS,
                lambda: (
                    f"the decoder warps need {DECODER_REGISTERS} registers or more: converters {c.converters!r} "
                    f"leave them {decoder_registers(c)} (producer_registers={c.producer_registers}, "
                    f"consumer_registers={c.consumer_registers}; 'decoders' take what 512 threads leave of "
                    f"{SM_REGISTERS}); or converters 'consumers'"
                ),
            )
        if c.converters == "decoders":
            rules.require(
                "decoders_wgmma_width",
                c.BN <= 192,
                f"converters 'decoders' compile the block's 512 threads for 128 registers each, fewer than one "
                f"wgmma of {c.BN} columns holds ({c.BN // 2} accumulators beside its operands): BN <= 192",
            )
        if c.epilogue == "tma":
            rules.require(
                "tma_epilogue_chunks",
                p.N % 8 == 0,
                f"epilogue 'tma' writes whole 16-byte chunks of D's rows: N must be a multiple of 8 (N={p.N}); "
                "use epilogue 'direct'",
            )
        split_rules(rules, c.splits, c.epilogue == "tma", math.ceil(p.K / WG_BK), split_slots(p.M, p.N))
        tma_rules(rules, p, lambda: self.tensor_maps(p, c))
        shared_memory_fits(rules, shared_bytes(c), ": fewer stages or a smaller tile")
        return rules.broken

    def render(self, problem: QuantGemmProblem, config: WgmmaConfig) -> Instantiation:
        p, c = problem, config
        return instantiate(
            self.kernel,
            "quant_gemm_wgmma",
            {
                "O": CType("unsigned short"),
                "RELU": False,
                "NVFP4": p.nvfp4,
                "BM": c.BM,
                "BN": c.BN,
                "STAGES": c.stages,
                "COOPERATIVE": c.schedule == "cooperative",
                "RASTER_M": c.raster == "m",
                "GROUP": c.group,
                "TMA_EPILOGUE": c.epilogue == "tma",
                "STAGED_EPILOGUE": False,  # the persistent kernel's staged epilogue: not offered here
                "SPLITS": c.splits,
                "CLUSTER_M": 1,
                "CLUSTER_N": 1,
                "PRODUCER_REGISTERS": c.producer_registers,
                "CONSUMER_REGISTERS": c.consumer_registers,
                "OPERANDS": c.operands,
                "SCALES_AHEAD": c.scales_ahead,
                "CONSUMERS_CONVERT": c.converters == "consumers",
                "DECODERS_CONVERT": c.converters == "decoders",
                "THREADS": threads(c),
                **({"DECODER_REGISTERS": decoder_registers(c)} if c.converters == "decoders" else {}),
                "SHARED_BYTES": shared_bytes(c),
            },
            arch_suffix="a",
        )

    def geometry(self, problem: QuantGemmProblem, config: WgmmaConfig) -> LaunchGeometry:
        """One block per SM at most: a work unit is a tile and one of its K splits."""
        blocks = min(tiles(problem, config) * config.splits, SM_COUNT)
        return LaunchGeometry((blocks, 1, 1), (threads(config), 1, 1), shared_bytes(config))

    def args(self, problem: QuantGemmProblem, config: WgmmaConfig) -> tuple[Arg, ...]:
        """``common.tma_kernel_args`` with the maps a_map, codes_map and d_map (epilogue 'tma')."""
        return tma_kernel_args(problem, self.tensor_maps(problem, config), config.splits)

    def tensor_maps(self, problem: QuantGemmProblem, config: WgmmaConfig) -> tuple[TensorMapArg, ...]:
        """A in boxes of BM rows x 64 (128-byte swizzle), the codes (``values``) in boxes of BN rows x
        32 bytes (no swizzle), and with the TMA epilogue D in boxes of 64 rows x 64 (128-byte swizzle)."""
        p, c = problem, config
        maps = [
            ("a", "a_map", "bfloat16", (p.M, p.K), (2 * p.K, 2), (c.BM, WG_BK), "128B"),
            ("values", "codes_map", "uint8", (p.N, p.row_bytes), (p.row_bytes, 1), (c.BN, CODE_BYTES), "none"),
        ]
        if c.epilogue == "tma":
            maps.append(("d", "d_map", "bfloat16", (p.M, p.N), (2 * p.N, 2), (64, 64), "128B"))
        return tuple(
            TensorMapArg(buffer, TensorMapRequest(dtype, shape, strides, box, 0, swizzle), name=name)
            for buffer, name, dtype, shape, strides, box, swizzle in maps
        )
