"""The quant family's one template, ``blocks`` (``kernels/quant/quant.cu``): threads share scale blocks.

``block / elems_per_thread`` consecutive threads (lanes) share a scale block, each holding
``elems_per_thread`` consecutive elements: one warp-shuffle max gives the block's amax. x moves in
``vec_bytes`` accesses; the values side in the widest power of two up to 16 bytes that divides both
a thread's share of the values and a row of them (so no access straddles a row). A CTA takes
``threads / lanes`` consecutive blocks ``blocks_per_thread`` times, all loads issued first. NVFP4
quantize runs two helpers first (the prologue): the finite |x| maxima of grid-strided slices into
the ``amax`` workspace, then their maximum, which makes the tensor scale the main kernel reads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...dtypes import element_type
from ...limits import MAX_GRID_X
from ...rules import Rules, whole_elements
from ..base import Arg, BufferArg, CType, Instantiation, KernelLaunch, LaunchGeometry, ScalarArg, instantiate
from ..contract import KernelTemplate, TemplateConfig, choice
from .operation import AMAX_SLOTS
from .problem import QuantProblem

MAX_REGISTER_BYTES = 256  # x bytes a thread holds in flight (64 registers)
AMAX_THREADS = 256  # threads of the prologue's CTAs
AMAX_ELEMENTS = 64  # elements per prologue thread, at least (fewer CTAs for small tensors)


@dataclass(frozen=True)
class BlocksConfig(TemplateConfig):
    threads: int = choice(64, 128, 256, 512, doc="threads per CTA")
    elems_per_thread: int = choice(
        2, 4, 8, 16, 32, doc="elements of a scale block a thread holds: block / elems_per_thread threads share it"
    )
    vec_bytes: int = choice(2, 4, 8, 16, doc="bytes per access of x (a whole number of elements)")
    blocks_per_thread: int = choice(
        1, 2, 4, doc="scale blocks each group of threads takes, loads issued together (CTA: threads / lanes x this)"
    )


def lanes(p: QuantProblem, config: BlocksConfig) -> int:
    """Threads sharing a scale block."""
    return max(1, p.fmt.block // config.elems_per_thread)


def cta_blocks(p: QuantProblem, config: BlocksConfig) -> int:
    """Scale blocks one CTA takes."""
    return config.threads // lanes(p, config) * config.blocks_per_thread


def grid_blocks(p: QuantProblem) -> int:
    """Scale blocks the grid walks: a quantize's whole scale layout (swizzled padding included)."""
    return math.prod(p.scale_grid) if p.quantize else p.rows * p.blocks_per_row


def values_access(p: QuantProblem, config: BlocksConfig) -> int:
    """Bytes per access of values: the widest power of two <= 16 dividing a thread's bytes and rb."""
    share = config.elems_per_thread // (2 if p.fmt.packed else 1)
    width = min(16, share)
    while p.row_bytes % width:
        width //= 2
    return width


def amax_ctas(p: QuantProblem) -> int:
    """CTAs of the prologue's partial maxima (at most the workspace's slots)."""
    return min(AMAX_SLOTS, math.ceil(p.rows * p.cols / (AMAX_THREADS * AMAX_ELEMENTS)))


class BlocksTemplate(KernelTemplate[QuantProblem, BlocksConfig]):
    name = "blocks"
    config_type = BlocksConfig
    rule_names = (
        "vec_bytes_whole_elements",
        "ept_within_block",
        "vector_within_ept",
        "vectors_split_rows",
        "registers_fit",
        "threads_busy",
        "grid_fits",
    )
    kernel = "quant/quant.cu"

    def default(self, problem: QuantProblem) -> BlocksConfig:
        p = problem
        size = element_type(p.element).itemsize
        vec = next(v for v in (16, 8, 4, size) if v % size == 0 and 8 % (v // size) == 0 and p.cols % (v // size) == 0)
        configs = [BlocksConfig(threads, 8, vec, 1) for threads in (256, 128, 64)]
        return next(c for c in configs if c.threads == 64 or cta_blocks(p, c) <= grid_blocks(p))

    def violations(self, problem: QuantProblem, config: BlocksConfig) -> list[str]:
        p = problem
        size = element_type(p.element).itemsize
        ept, block = config.elems_per_thread, p.fmt.block
        rules = Rules(self.name)
        if not whole_elements(rules, config.vec_bytes, size):
            return rules.broken
        vec = config.vec_bytes // size
        rules.require(
            "ept_within_block", ept <= block, f"elems_per_thread={ept} exceeds the {p.format} block of {block} elements"
        )
        rules.require("vector_within_ept", vec <= ept, f"a vector of {vec} elements exceeds elems_per_thread={ept}")
        rules.require(
            "vectors_split_rows",
            p.cols % vec == 0,
            f"rows of {p.cols} elements do not split into {vec}-element vectors (vectors are aligned): "
            "use a smaller vec_bytes",
        )
        held = config.blocks_per_thread * ept * size
        rules.require(
            "registers_fit",
            held <= MAX_REGISTER_BYTES,
            f"blocks_per_thread x elems_per_thread x {size} bytes = {held} exceed {MAX_REGISTER_BYTES} "
            "bytes a thread holds in registers",
        )
        if config.threads > 64:
            rules.require(
                "threads_busy",
                cta_blocks(p, config) <= grid_blocks(p),
                lambda: (
                    f"a CTA takes {cta_blocks(p, config)} scale blocks but the problem has {grid_blocks(p)}: "
                    "threads would idle"
                ),
            )
        grid = self.geometry(p, config).grid[0]
        rules.require(
            "grid_fits", grid <= MAX_GRID_X, f"{grid} CTAs exceed the grid limit {MAX_GRID_X}: take more blocks per CTA"
        )
        return rules.broken

    def render(self, problem: QuantProblem, config: BlocksConfig) -> Instantiation:
        p = problem
        et = element_type(p.element)
        members: dict[str, int | bool | CType] = {
            "E": CType(et.ctype),
            "BF16": p.element == "bfloat16",
            "FORMAT": p.fmt.kernel_id,
            "B": p.fmt.block,
            "EPT": config.elems_per_thread,
            "VEC": config.vec_bytes // et.itemsize,
            "LP_VEC": values_access(p, config),
            "BPT": config.blocks_per_thread,
            "THREADS": config.threads,
            "SWIZZLED": p.swizzled,
        }
        kernel = "quant_quantize" if p.quantize else "quant_dequantize"
        helpers: tuple[str, ...] = ()
        if p.reads_twice:
            members["AMAX_THREADS"] = AMAX_THREADS
            helpers = ("quant_amax_partial", "quant_amax_final")
        return instantiate(self.kernel, kernel, members, helpers)

    def geometry(self, problem: QuantProblem, config: BlocksConfig) -> LaunchGeometry:
        return LaunchGeometry(
            (math.ceil(grid_blocks(problem) / cta_blocks(problem, config)), 1, 1), (config.threads, 1, 1), 0
        )

    def args(self, problem: QuantProblem, config: BlocksConfig) -> tuple[Arg, ...]:
        """The members of ``Cfg::Args``: x, values, scales, tensor_scale (nvfp4), then rows, cols, nb
        (blocks a row), rb (values bytes a row), gc (the grid's blocks a row), sc (the scale layout's
        blocks a row) and total (the grid's blocks)."""
        p = problem
        et = element_type(p.element)
        read, written = "const ", ""
        x, low = (read, written) if p.quantize else (written, read)
        nv = (BufferArg("tensor_scale", "const float"),) if p.format == "nvfp4" else ()
        sc = p.scale_grid[1]
        scalars = {
            "rows": p.rows,
            "cols": p.cols,
            "nb": p.blocks_per_row,
            "rb": p.row_bytes,
            "gc": sc if p.quantize else p.blocks_per_row,
            "sc": sc,
            "total": grid_blocks(p),
        }
        return (
            BufferArg("x", f"{x}{et.ctype}"),
            BufferArg("values", f"{low}unsigned char"),
            BufferArg("scales", f"{low}unsigned char"),
            *nv,
            *(ScalarArg("i64", v, name) for name, v in scalars.items()),
        )

    def prologue(self, problem: QuantProblem, config: BlocksConfig) -> tuple[KernelLaunch, ...]:
        """NVFP4 quantize: quant_amax_partial (x, amax, n: each CTA's finite |x| maximum into amax) and
        quant_amax_final (amax, tensor_scale, parts: T = their maximum / 2688)."""
        p = problem
        if not p.reads_twice:
            return ()
        parts = amax_ctas(p)
        block = (AMAX_THREADS, 1, 1)
        partial = (
            BufferArg("x", f"const {element_type(p.element).ctype}"),
            BufferArg("amax", "unsigned int"),
            ScalarArg("i64", p.rows * p.cols, "n"),
        )
        final = (
            BufferArg("amax", "const unsigned int"),
            BufferArg("tensor_scale", "float"),
            ScalarArg("i32", parts, "parts"),
        )
        return (
            KernelLaunch("quant_amax_partial", LaunchGeometry((parts, 1, 1), block, 0), partial),
            KernelLaunch("quant_amax_final", LaunchGeometry((1, 1, 1), block, 0), final),
        )
