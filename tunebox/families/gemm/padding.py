"""Copies of the operands whose rows are not 16-byte aligned into workspace rows that are, for the
templates whose TMA loads need aligned row pitches on such problems (``padded``, ``padded_persistent``:
``PaddedOperands`` mixed into their kernel's template): one launch of the helper kernel ``pad_rows``
(kernels/include/tunebox/pad_rows.cuh) before the product, timed with it. A copy's rows hold
``round8(cols)`` elements, zeros past ``cols``; the tensor maps then read the copies (``padded_source``)."""

from __future__ import annotations

import math
from typing import Any, ClassVar

from ...limits import SM_COUNT
from ...rules import Rules
from ..base import Arg, BufferArg, CType, KernelLaunch, LaunchGeometry, ScalarArg
from .common import input_ctype
from .operation import GemmProblem, round8

PAD_THREADS = 256  # pad_rows: threads per block
PAD_UNROLL = 4  # pad_rows: 16-byte chunks a thread has in flight at once
PAD_BLOCKS = 8 * SM_COUNT  # pad_rows: at most this many blocks (full SMs; threads then take several steps)
MAX_CHUNKS = 2**31  # pad_rows indexes a copy's 16-byte chunks in 32 bits, with room for its steps
COPY_SIZES = ("rows", "cols", "ld_src", "ld_dst")  # pad_rows: a copy's scalars (members suffixed 0 or 1)
HELPERS = ("pad_rows",)  # the helper kernel the rendered module instantiates
PAD_RULES = ("rows_unaligned", "pad_chunks_32bit")  # pad_rules's


def padded_source(name: str, cols: int, ld: int) -> tuple[str, int]:
    """The buffer a tensor map of operand ``name`` reads and its leading dimension: the operand itself
    where its rows are aligned, else its copy in workspace."""
    return (f"{name}_padded", round8(cols)) if ld % 8 else (name, ld)


def pad_rules(rules: Rules, problem: GemmProblem, instead: str) -> None:
    """The rules ``rows_unaligned`` (with every row aligned, the template ``instead`` does the same work
    without the copies) and ``pad_chunks_32bit``."""
    rules.require(
        "rows_unaligned",
        bool(problem.unaligned()),
        f"the rows of A and B are already 16-byte aligned: path {instead!r} does the same without the copies",
    )
    largest = max((rows * round8(cols) // 8 for _, rows, cols, _ in problem.unaligned()), default=0)
    rules.require(
        "pad_chunks_32bit",
        largest < MAX_CHUNKS,
        f"pad_rows counts a copy's 16-byte chunks in 32 bits: {largest} of them (fewer than 2^31): a template that "
        "reads unaligned rows in place (mma)",
    )


def pad_members(problem: GemmProblem) -> dict[str, int | bool | CType]:
    """pad_rows's block and chunks in flight a thread, and which operands it copies (``PAD_A``, ``PAD_B``:
    the members of its argument struct named after their buffers)."""
    copied = {name for name, *_ in problem.unaligned()}
    return {"PAD_THREADS": PAD_THREADS, "PAD_UNROLL": PAD_UNROLL, "PAD_A": "A" in copied, "PAD_B": "B" in copied}


def pad_prologue(problem: GemmProblem) -> tuple[KernelLaunch, ...]:
    """One ``pad_rows`` launch copying each operand with unaligned rows into its workspace (gridDim.y =
    the number of copies). The members of its ``Cfg::pad_rows_args``, per copy in order (A's first): the
    operand and its workspace (a buffer argument's member is named after its buffer: ``A``,
    ``A_padded``), then rows, cols, ld_src and ld_dst suffixed with the copy's index (``rows0`` ...
    ``ld_dst1``). With one copy the kernel passes it as the second too (gridDim.y = 1 never reads that)."""
    copies = problem.unaligned()
    bits = input_ctype(problem)
    args: list[Arg] = []
    for i, (name, rows, cols, ld) in enumerate(copies):
        args += [BufferArg(name, f"const {bits}"), BufferArg(f"{name}_padded", bits)]
        args += [
            ScalarArg("i64", v, f"{member}{i}")
            for member, v in zip(COPY_SIZES, (rows, cols, ld, round8(cols)), strict=True)
        ]
    chunks = max(rows * round8(cols) // 8 for _, rows, cols, _ in copies)  # the larger copy's
    grid = (min(math.ceil(chunks / PAD_THREADS), PAD_BLOCKS), len(copies), 1)  # a chunk a thread till the SMs fill
    return (KernelLaunch("pad_rows", LaunchGeometry(grid, (PAD_THREADS, 1, 1), 0), tuple(args)),)


class PaddedOperands:
    """The hooks of a TMA template (``TmaWgmmaTemplate``, ``PersistentTemplate``) that make it read pad_rows's
    copies: mixed in before the template's class; ``aligned_path`` names the template that does the same
    work on aligned rows without the copies."""

    helpers: ClassVar[tuple[str, ...]] = HELPERS
    aligned_path: ClassVar[str]

    def alignment_rule(self, rules: Rules, problem: GemmProblem) -> None:
        pad_rules(rules, problem, self.aligned_path)

    def operand_source(self, name: str, cols: int, ld: int) -> tuple[str, int]:
        return padded_source(name, cols, ld)

    def helper_members(self, problem: GemmProblem) -> dict[str, int | bool | CType]:
        return pad_members(problem)

    def prologue(self, problem: GemmProblem, config: Any) -> tuple[KernelLaunch, ...]:
        return pad_prologue(problem)
