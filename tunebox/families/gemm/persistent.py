"""Template ``persistent``: a persistent, warp-specialized Hopper kernel (kernels/gemm/gemm_persistent.cu).

At most ``SM_COUNT`` blocks (one per SM: 384 threads at 168 registers fill its register file) walk the
output tiles in the static order ``tile_coordinates`` gives (the kernel's arithmetic, mirrored here):
a producer warpgroup streams A and B through a ring of ``stages`` TMA buffers whose mbarrier phases
run on across tiles, two consumer warpgroups multiply with wgmma (``cooperative``: both on each tile;
``pingpong``: alternate tiles, one's epilogue beside the other's mainloop), registers move from the
producer to the consumers with setmaxnreg, and the epilogue stores D through shared memory with TMA
(``epilogue = "tma"``: D's rows and N 16-byte aligned, since a TMA store writes whole 16-byte chunks
of a row, past N too, measured on the H200), directly from registers (``"direct"``: pieces of 8 rows
an instruction, two elements a thread where D's rows allow, else one), or through a shared buffer per
consumer warp, row by row (``"staged"``: whole runs of a row at any alignment; on D's odd rows the
direct stores used about 6 of each 32-byte sector written, and cost up to 15 us at 2048 x 4097 x 2048
on the H200, results/README.md, session 37). With ``splits``
> 1 each tile's K steps are cut over that many work units (split-K, for shapes with fewer tiles than
SMs; TMA epilogue), whose float32 partial sums meet in workspace; the last unit to arrive sums them
in split order and runs the epilogue."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Protocol

from ...dtypes import element_type
from ...limits import CLUSTERS_AT_ONCE, SM_REGISTERS
from ...rules import Rules
from ...tma import TensorMapRequest
from ..base import Arg, BufferArg, CType, Instantiation, LaunchGeometry, ScalarArg, TensorMapArg, instantiate
from ..contract import KernelTemplate, TemplateConfig, choice
from .common import MAX_ACCUMULATORS, TMA_RULES, common_rules, output_ctype, output_members, tma_rules
from .operation import GemmProblem
from .split_k import SPLIT_RULES, split_args, split_rules
from .tma_wgmma import WG_BK

THREADS = 384  # a producer and two consumer warpgroups
LAUNCH_REGISTERS = SM_REGISTERS // THREADS // 8 * 8  # 168: what each thread starts with
EPI_BUFFER_BYTES = 64 * 128  # an epilogue chunk: 64 rows of one 128-byte swizzle span
EPI_BUFFERS = 2  # chunk buffers per consumer (kernels/include/tunebox/persistent_gemm.cuh)
# staged epilogue: each of the 8 consumer warps' buffer of 16 rows x 36 element pairs (persistent_gemm.cuh's
# CONSUMER_WARPS, STAGED_ROWS, STAGED_PITCH; its static_assert checks SHARED_BYTES covers them)
STAGED_PAIRS = 8 * 16 * 36
ROWS = {"cooperative": (128, 256), "pingpong": (64, 128)}  # BM each schedule takes


def tile_coordinates(index: int, tiles_m: int, tiles_n: int, raster: str, group: int) -> tuple[int, int]:
    """(tile row, tile column) of the ``index``-th tile of the order the kernel walks: with ``raster``
    "m", strips of ``group`` tile rows, each walked column by column (Triton's GROUP_M); with "n",
    strips of ``group`` tile columns walked row by row. The kernel's ``tile_coordinates`` is the same
    arithmetic."""
    major, minor = (tiles_m, tiles_n) if raster == "m" else (tiles_n, tiles_m)
    per_strip = group * minor
    strip = index // per_strip
    first = strip * group
    width = min(major - first, group)
    rest = index - strip * per_strip
    along, across = first + rest % width, rest // width
    return (along, across) if raster == "m" else (across, along)


class WarpgroupLayout(Protocol):
    """What warpgroup_rules reads of a configuration of the persistent kernel."""

    @property
    def BM(self) -> int: ...
    @property
    def BN(self) -> int: ...
    @property
    def schedule(self) -> str: ...
    @property
    def producer_registers(self) -> int: ...
    @property
    def consumer_registers(self) -> int: ...


WARPGROUP_RULES = ("schedule_rows", "accumulators_fit", "register_budget")  # warpgroup_rules's


def warpgroup_rules(rules: Rules, c: WarpgroupLayout) -> None:
    """The rules ``schedule_rows``, ``accumulators_fit`` and ``register_budget`` of the persistent kernel's
    warpgroups (templates persistent and cluster, and quant_gemm's wgmma)."""
    if rules.require(
        "schedule_rows",
        c.BM in ROWS[c.schedule],
        lambda: (
            f"schedule {c.schedule!r} gives each consumer warpgroup 1 or 2 tiles of 64 rows: "
            f"BM must be {' or '.join(map(str, ROWS[c.schedule]))} (BM={c.BM})"
        ),
    ):
        accumulators = c.BM // (2 if c.schedule == "cooperative" else 1) * c.BN // 128
        rules.require(
            "accumulators_fit",
            accumulators <= MAX_ACCUMULATORS,
            f"{accumulators} float32 accumulators per consumer thread (at most {MAX_ACCUMULATORS}): lower BM or BN",
        )
    budget = THREADS * LAUNCH_REGISTERS
    rules.require(
        "register_budget",
        128 * c.producer_registers + 256 * c.consumer_registers <= budget,
        f"register budget: 128 x {c.producer_registers} (producer) + 256 x {c.consumer_registers} "
        f"(consumers) exceed the block's {budget} (384 threads x {LAUNCH_REGISTERS})",
    )


@dataclass(frozen=True)
class PersistentConfig(TemplateConfig):
    BM: int = choice(64, 128, 256, doc="tile rows: 128 or 256 (cooperative, both consumers), 64 or 128 (pingpong)")
    BN: int = choice(64, 128, 192, 256, doc="tile columns (the wgmma's N)")
    stages: int = choice(2, 3, 4, 5, 6, 8, 10, 12, doc="TMA buffers of A and B in the ring")
    schedule: str = choice("cooperative", "pingpong", doc="consumers share each tile, or take alternate tiles")
    raster: str = choice("m", "n", doc="tile order: strips of `group` tile rows ('m') or columns ('n')")
    group: int = choice(1, 2, 4, 8, 16, doc="tiles across a strip of the tile order (L2 reuse)")
    epilogue: str = choice(
        "tma",
        "direct",
        "staged",
        doc="D through shared memory and TMA stores, stored from registers, or staged in shared memory by "
        "warp and stored row by row (D's rows at any alignment)",
    )
    producer_registers: int = choice(24, 40, doc="registers per thread of the producer warpgroup (setmaxnreg)")
    consumer_registers: int = choice(224, 232, 240, doc="registers per thread of the consumers (setmaxnreg)")
    splits: int = choice(1, 2, 4, 8, doc="work units per tile along K (split-K), summed through workspace in order")

    def cluster_shape(self) -> tuple[int, int]:
        """Tiles along M and N of a thread-block cluster (template ``cluster``); none here."""
        return (1, 1)


class PersistentTemplate(KernelTemplate[GemmProblem, PersistentConfig]):
    name = "persistent"
    config_type = PersistentConfig
    # common_rules's full_tiles applies to bounds='false' only, which this kernel has not
    rule_names: ClassVar[tuple[str, ...]] = (
        *WARPGROUP_RULES,
        "rows_aligned",
        "tma_epilogue_chunks",
        *SPLIT_RULES,
        *TMA_RULES,
        "shared_memory_fits",
    )
    kernel = "gemm/gemm_persistent.cu"
    entry = "gemm_persistent"  # the kernel's function template
    helpers: ClassVar[tuple[str, ...]] = ()  # helper kernels of the rendered module (launched by prologue)

    @staticmethod
    def shared_bytes(problem: GemmProblem, config: PersistentConfig) -> int:
        """Dynamic shared memory: the ring's boxes of A (BM x 64) and B (64 x BN), the consumers'
        epilogue buffers (TMA epilogue) or their warps' staging buffers (staged epilogue: pairs of
        D's elements), a full and an empty mbarrier per buffer, and 1024 bytes to align the boxes to
        the swizzle period."""
        c = config
        buffers = {
            "tma": 2 * EPI_BUFFERS * EPI_BUFFER_BYTES,
            "staged": STAGED_PAIRS * 2 * element_type(problem.out_dtype).itemsize,
        }
        return c.stages * (c.BM + c.BN) * WG_BK * 2 + buffers.get(c.epilogue, 0) + 2 * c.stages * 8 + 1024

    def default(self, problem: GemmProblem) -> PersistentConfig | None:
        if problem.unaligned():
            return None
        return PersistentConfig(
            BM=128,
            BN=256 if problem.N > 128 else 128,
            stages=4,
            schedule="cooperative",
            raster="m",
            group=8,
            epilogue="tma" if self.tma_stores_fit(problem) else "direct",
            producer_registers=40,
            consumer_registers=232,
            splits=1,
        )

    @staticmethod
    def tma_stores_fit(problem: GemmProblem) -> bool:
        """Whether TMA stores write D exactly: its rows (ldd) and N are whole 16-byte chunks (a TMA
        store clips at N in 16-byte chunks, so a partial one would overwrite D's padding columns)."""
        size = element_type(problem.out_dtype).itemsize
        return problem.ldd * size % 16 == 0 and problem.N * size % 16 == 0

    def violations(self, problem: GemmProblem, config: PersistentConfig) -> list[str]:
        p, c = problem, config
        rules = Rules(self.name)
        warpgroup_rules(rules, c)
        self.alignment_rule(rules, p)
        if c.epilogue == "tma":
            rules.require(
                "tma_epilogue_chunks",
                self.tma_stores_fit(p),
                f"epilogue 'tma' needs D's rows and N in whole 16-byte chunks (ldd={p.ldd}, N={p.N}; a TMA "
                "store writes whole chunks past N, over D's padding): use epilogue 'staged' or 'direct'",
            )
        split_rules(rules, c.splits, c.epilogue == "tma", math.ceil(p.K / WG_BK), p.split_slots())
        self.cluster_rules(rules, p, c)
        tma_rules(rules, p, lambda: self.tensor_maps(p, c))
        common_rules(rules, p, c.BM, c.BN, "true", self.shared_bytes(p, c))
        return rules.broken

    def cluster_rules(self, rules: Rules, problem: GemmProblem, config: PersistentConfig) -> None:
        """The rules of a cluster's shape (template ``cluster``); none without clusters."""

    def alignment_rule(self, rules: Rules, problem: GemmProblem) -> None:
        """The rule on the operands' rows: TMA reads them in place, so they must be 16-byte aligned."""
        p = problem
        rules.require(
            "rows_aligned",
            not p.unaligned(),
            f"TMA needs 16-byte rows of A and B (lda, ldb multiples of 8; {p.lda}, {p.ldb}): use path "
            "'padded_persistent'",
        )

    def operand_source(self, name: str, cols: int, ld: int) -> tuple[str, int]:
        """The buffer a tensor map of operand ``name`` (``cols`` columns, leading dimension ``ld``) reads,
        and that buffer's leading dimension: the operand itself."""
        return name, ld

    def helper_members(self, problem: GemmProblem) -> dict[str, int | bool | CType]:
        """Members of the configuration struct that only the helper kernels read (none here)."""
        return {}

    def render(self, problem: GemmProblem, config: PersistentConfig) -> Instantiation:
        c = config
        cluster_m, cluster_n = c.cluster_shape()
        return instantiate(
            self.kernel,
            self.entry,
            {
                **output_members(problem),
                "BM": c.BM,
                "BN": c.BN,
                "STAGES": c.stages,
                "COOPERATIVE": c.schedule == "cooperative",
                "RASTER_M": c.raster == "m",
                "GROUP": c.group,
                "TMA_EPILOGUE": c.epilogue == "tma",
                "STAGED_EPILOGUE": c.epilogue == "staged",
                "SPLITS": c.splits,
                "CLUSTER_M": cluster_m,
                "CLUSTER_N": cluster_n,
                "PRODUCER_REGISTERS": c.producer_registers,
                "CONSUMER_REGISTERS": c.consumer_registers,
                "SHARED_BYTES": self.shared_bytes(problem, c),
                **self.helper_members(problem),
            },
            helpers=self.helpers,
            arch_suffix="a",
        )

    def geometry(self, problem: GemmProblem, config: PersistentConfig) -> LaunchGeometry:
        """One block per SM at most, whole clusters, no more clusters than run at once: a work unit is a
        cluster's group of tiles (and one of its K splits)."""
        cluster_m, cluster_n = config.cluster_shape()
        size = cluster_m * cluster_n
        units = (
            math.ceil(math.ceil(problem.M / config.BM) / cluster_m)
            * math.ceil(math.ceil(problem.N / config.BN) / cluster_n)
            * config.splits
        )
        clusters = min(units, CLUSTERS_AT_ONCE[size])
        return LaunchGeometry((clusters * size, 1, 1), (THREADS, 1, 1), self.shared_bytes(problem, config))

    def args(self, problem: GemmProblem, config: PersistentConfig) -> tuple[Arg, ...]:
        """The members of ``Cfg::Args``: a_map, b_map, d_map (epilogue 'tma'), D, partials and counters
        (split-K), M, N, K, ldd, alpha."""
        p = problem
        return (
            *self.tensor_maps(p, config),
            BufferArg("D", output_ctype(p)),
            *split_args(config.splits),
            *(ScalarArg("i64", getattr(p, name), name) for name in ("M", "N", "K", "ldd")),
            ScalarArg("f32", p.alpha, "alpha"),
        )

    def tensor_maps(self, problem: GemmProblem, config: PersistentConfig) -> tuple[TensorMapArg, ...]:
        """TMA maps with the 128-byte swizzle: A in boxes of BM rows x 64, B of 64 x 64 (with clusters,
        each block loads the part it multicasts: BM / cluster_n rows of A, 64 / cluster_m of B), and with
        the TMA epilogue D in boxes of 64 rows x 128 bytes (the epilogue's chunks)."""
        p = problem
        out = element_type(p.out_dtype)
        cluster_m, cluster_n = config.cluster_shape()
        (a, lda), (b, ldb) = self.operand_source("A", p.K, p.lda), self.operand_source("B", p.N, p.ldb)
        maps = [
            ("a", a, "bfloat16", (p.M, p.K), lda * 2, (config.BM // cluster_n, WG_BK), "128B"),
            ("b", b, "bfloat16", (p.K, p.N), ldb * 2, (WG_BK // cluster_m, 64), "128B"),
        ]
        if config.epilogue == "tma":
            maps.append(("d", "D", p.out_dtype, (p.M, p.N), p.ldd * out.itemsize, (64, 128 // out.itemsize), "none"))
        return tuple(
            TensorMapArg(
                buffer,
                TensorMapRequest(
                    dtype, shape, (pitch, element_type(dtype).itemsize), box, 0, "128B", l2_promotion=promotion
                ),
                name=f"{member}_map",
            )
            for member, buffer, dtype, shape, pitch, box, promotion in maps
        )
