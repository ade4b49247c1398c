"""Copies of the operands whose rows are not 16-byte aligned into workspace rows that are, for the
templates whose TMA loads need aligned row pitches on such problems (``padded``, ``padded_persistent``):
one launch of the helper kernel ``pad_rows`` (kernels/include/tunebox/pad_rows.cuh) before the product,
timed with it. A copy's rows hold ``round8(cols)`` elements, zeros past ``cols``; the tensor maps then
read the copies (``padded_source``)."""

from __future__ import annotations

import math

from ...limits import MAX_GRID_Y
from ...rules import Rules
from ..base import Arg, BufferArg, CType, KernelLaunch, LaunchGeometry, ScalarArg
from .common import input_ctype
from .operation import GemmProblem, round8

PAD_THREADS = 256  # pad_rows: threads per block
PAD_SPAN = 8 * PAD_THREADS  # pad_rows: elements of a row per block step (one 16-byte store per thread)
COPY_SIZES = ("rows", "cols", "ld_src", "ld_dst")  # pad_rows: a copy's scalars (members suffixed 0 or 1)
HELPERS = ("pad_rows",)  # the helper kernel the rendered module instantiates


def padded_source(name: str, cols: int, ld: int) -> tuple[str, int]:
    """The buffer a tensor map of operand ``name`` reads and its leading dimension: the operand itself
    where its rows are aligned, else its copy in workspace."""
    return (f"{name}_padded", round8(cols)) if ld % 8 else (name, ld)


def unaligned_rule(rules: Rules, problem: GemmProblem, instead: str) -> None:
    """The rule ``rows_unaligned``: with every row aligned, the template ``instead`` does the same work
    without the copies."""
    rules.require(
        "rows_unaligned",
        bool(problem.unaligned()),
        f"the rows of A and B are already 16-byte aligned: path {instead!r} does the same without the copies",
    )


def pad_members(problem: GemmProblem) -> dict[str, int | bool | CType]:
    """pad_rows's block and span, and which operands it copies (``PAD_A``, ``PAD_B``: the members of
    its argument struct named after their buffers)."""
    copied = {name for name, *_ in problem.unaligned()}
    return {"PAD_THREADS": PAD_THREADS, "PAD_SPAN": PAD_SPAN, "PAD_A": "A" in copied, "PAD_B": "B" in copied}


def pad_prologue(problem: GemmProblem) -> tuple[KernelLaunch, ...]:
    """One ``pad_rows`` launch copying each operand with unaligned rows into its workspace (gridDim.z =
    the number of copies). The members of its ``Cfg::pad_rows_args``, per copy in order (A's first): the
    operand and its workspace (a buffer argument's member is named after its buffer: ``A``,
    ``A_padded``), then rows, cols, ld_src and ld_dst suffixed with the copy's index (``rows0`` ...
    ``ld_dst1``). With one copy the kernel passes it as the second too (gridDim.z = 1 never reads that)."""
    copies = problem.unaligned()
    bits = input_ctype(problem)
    args: list[Arg] = []
    for i, (name, rows, cols, ld) in enumerate(copies):
        args += [BufferArg(name, f"const {bits}"), BufferArg(f"{name}_padded", bits)]
        args += [
            ScalarArg("i64", v, f"{member}{i}")
            for member, v in zip(COPY_SIZES, (rows, cols, ld, round8(cols)), strict=True)
        ]
    grid = (
        math.ceil(max(round8(cols) for _, _, cols, _ in copies) / PAD_SPAN),
        min(max(rows for _, rows, _, _ in copies), MAX_GRID_Y),
        len(copies),
    )
    return (KernelLaunch("pad_rows", LaunchGeometry(grid, (PAD_THREADS, 1, 1), 0), tuple(args)),)
