"""What the windows templates share: ``kernels/windows/windows.cu``, whose block owns BI x BJ windows
and the region of A they cover together, and the rules, rendering, geometry and arguments that follow
from that layout. Each template fixes a ``Variant`` of the kernel from its configuration."""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import TypeVar

from ...dtypes import element_type, padding_bits
from ...limits import MAX_GRID_X, MAX_GRID_Y
from ...rules import Rules, shared_memory_fits
from ..base import Arg, BufferArg, CType, Instantiation, LaunchGeometry, ScalarArg, instantiate
from ..contract import KernelTemplate, TemplateConfig, choice
from ..indexed import _warps, ceil_pow2
from .operation import OPS, WindowsProblem

KINDS = {"float32": 0, "float16": 1, "bfloat16": 2}  # how the kernel reads A's bits in a reduction


@dataclass(frozen=True)
class BlockConfig(TemplateConfig):
    """The parameters every windows template has: a block's windows and threads."""

    BI: int = choice(1, 2, 4, 8, 16, 32, doc="window rows per block")
    BJ: int = choice(1, 2, 4, 8, 16, 32, 64, 128, doc="window columns per block")
    threads: int = choice(64, 128, 256, 512, doc="threads per block")


@dataclass(frozen=True)
class Variant:
    """The kernel's configuration beyond the problem, as a template's configuration fixes it."""

    BI: int
    BJ: int
    threads: int
    vector: int  # elements per store of a window row (unfold)
    staged: bool  # the block's region of A copied into shared memory first
    separable: bool  # a reduction over each staged row's TW columns, then over TH rows


def region(p: WindowsProblem, v: Variant) -> tuple[int, int]:
    """Rows and columns of A that a block's BI x BJ windows cover together."""
    (th, tw), (sr, sc) = p.window, p.step
    return ((v.BI - 1) * sr + th, (v.BJ - 1) * sc + tw)


def shared_bytes(p: WindowsProblem, v: Variant) -> int:
    """A block's dynamic shared memory: the staged region (A's bits for unfold, float32 values for
    reductions) and, for the separable scheme, one float32 per region row and window column (the
    kernel asserts that its layout fits in this, passed as ``SHARED_BYTES``)."""
    if not v.staged:
        return 0
    rr, rc = region(p, v)
    staged = rr * rc * (4 if p.reduces else element_type(p.element).itemsize)
    return staged + (rr * v.BJ * 4 if v.separable else 0)


def blocks(p: WindowsProblem, v: Variant) -> tuple[int, int]:
    """(block columns, block rows) of the grid."""
    nr, nc = p.grid
    return (-(-nc // v.BJ), -(-nr // v.BI))


def items(p: WindowsProblem, v: Variant) -> int:
    """Work items of the block's busiest phase: window-row vectors (unfold), windows, region rows
    (separable) or region elements (staging)."""
    count = v.BI * v.BJ * (1 if p.reduces else p.window[0] * p.window[1] // v.vector)
    rr, rc = region(p, v)
    if v.separable:
        count = max(count, rr * v.BJ)
    if v.staged:
        count = max(count, rr * rc)
    return count


BLOCK_RULES = ("block_within_grid", "grid_fits", "threads_busy", "shared_memory_fits")  # block_rules's


def block_rules(rules: Rules, p: WindowsProblem, v: Variant) -> None:
    """The rules every template keeps: blocks within the window grid and the grid limits, no idle
    threads, shared memory within a block's."""
    nr, nc = p.grid
    rules.require(
        "block_within_grid",
        ceil_pow2(nr) >= v.BI and ceil_pow2(nc) >= v.BJ,
        f"BI={v.BI} x BJ={v.BJ} windows per block exceed the {nr} x {nc} windows rounded up to powers of two",
    )
    columns, rows = blocks(p, v)
    rules.require(
        "grid_fits",
        rows <= MAX_GRID_Y and columns <= MAX_GRID_X,
        f"a grid of {columns} x {rows} blocks exceeds the limits {MAX_GRID_X} x {MAX_GRID_Y}",
    )
    work = items(p, v)
    rules.require(
        "threads_busy",
        v.threads <= max(64, _warps(work)),
        f"{v.threads} threads exceed the {work} work items of a block rounded up to whole warps: threads would idle",
    )
    shared = shared_bytes(p, v)
    shared_memory_fits(rules, shared)


C = TypeVar("C", bound=BlockConfig)


class WindowsTemplate(KernelTemplate[WindowsProblem, C]):
    """A template of ``windows.cu``: subclasses say which ``Variant`` a configuration is and add their
    own rules; the block rules, rendering, geometry and arguments are common."""

    kernel = "windows/windows.cu"

    @abc.abstractmethod
    def variant(self, config: C) -> Variant: ...

    @abc.abstractmethod
    def own_rules(self, rules: Rules, problem: WindowsProblem, config: C) -> None:
        """The rules of this template's own parameters (``rule_names`` adds them to ``BLOCK_RULES``)."""

    def violations(self, problem: WindowsProblem, config: C) -> list[str]:
        rules = Rules(self.name)
        self.own_rules(rules, problem, config)
        block_rules(rules, problem, self.variant(config))
        return rules.broken

    def render(self, problem: WindowsProblem, config: C) -> Instantiation:
        p, v = problem, self.variant(config)
        (th, tw), (sr, sc) = p.window, p.step
        return instantiate(
            self.kernel,
            "windows",
            {
                "E": CType(element_type(p.element).ctype),
                "KIND": KINDS[p.element],
                "OP": OPS.index(p.op),
                "TH": th,
                "TW": tw,
                "SR": sr,
                "SC": sc,
                "BI": v.BI,
                "BJ": v.BJ,
                "THREADS": v.threads,
                "VEC": v.vector,
                "STAGED": v.staged,
                "SEPARABLE": v.separable,
                "SHARED_BYTES": shared_bytes(p, v),
            },
        )

    def geometry(self, problem: WindowsProblem, config: C) -> LaunchGeometry:
        """ceil(NC / BJ) x ceil(NR / BI) blocks of ``threads``, with the staged region's shared memory."""
        v = self.variant(config)
        columns, rows = blocks(problem, v)
        return LaunchGeometry((columns, rows, 1), (v.threads, 1, 1), shared_bytes(problem, v))

    def args(self, problem: WindowsProblem, config: C) -> tuple[Arg, ...]:
        """The members of the kernel's ``Cfg::Args``, in order: ``A`` (``const E*``), ``out`` (``void*``:
        W of E's bits or Y of float32), ``R``, ``C``, ``NR``, ``NC`` and ``pad`` (E, the padding's bits;
        0 for reductions)."""
        p = problem
        et = element_type(p.element)
        pad = 0 if p.reduces else padding_bits(et, p.padding, p.pad_value)
        return (
            BufferArg("A", f"const {et.ctype}"),
            BufferArg("out", "void"),
            ScalarArg("i64", p.rows, "R"),
            ScalarArg("i64", p.cols, "C"),
            ScalarArg("i64", p.grid[0], "NR"),
            ScalarArg("i64", p.grid[1], "NC"),
            ScalarArg("u16" if et.itemsize == 2 else "u32", pad, "pad"),
        )
