"""Split-K of the persistent wgmma kernel (kernels/include/tunebox/persistent_gemm.cuh), shared by the
gemm family's template ``persistent`` and quant_gemm's ``wgmma``: each tile's K steps cut over
``splits`` work units whose float32 partial sums of D meet in workspace (``partials``, one M x N slot a
split), the last unit to arrive on its tile's counter (``counters``) summing them in split order."""

from __future__ import annotations

import math

from ...rules import Rules
from ..base import BufferArg, BufferSpec

MAX_SPLITS = 8  # the most work units a tile may take along K
SPLIT_WORKSPACE_BYTES = 32 * 2**20  # the partial sums of D take at most this
COUNTER_TILE = 64  # the smallest tile side: the arrival counters cover the most tiles there is
SPLIT_RULES = ("split_tma_epilogue", "splits_within_k_steps", "splits_within_workspace")
SPLIT_SIZE_RULES = SPLIT_RULES[1:]  # those of a template without a choice of epilogue


def split_slots(m: int, n: int) -> int:
    """How many float32 partial sums of an M x N D the workspace holds: the most K splits a tile may
    take (at most MAX_SPLITS)."""
    return min(MAX_SPLITS, SPLIT_WORKSPACE_BYTES // (4 * m * n))


def counter_tiles(m: int, n: int) -> int:
    """The tiles of an M x N D whose arrivals the workspace counts (two 32-bit counters each): as many as
    tiles of COUNTER_TILE there are, so a template with smaller tiles must check it has no more."""
    return math.ceil(m / COUNTER_TILE) * math.ceil(n / COUNTER_TILE)


def split_buffers(m: int, n: int, slots: int) -> tuple[BufferSpec, ...]:
    """The workspace of ``slots`` splits of an M x N D: none below two."""
    if slots < 2:
        return ()
    tiles = counter_tiles(m, n)
    return (
        BufferSpec("partials", (slots, m, n), "float32", "workspace"),
        # a 32-bit counter per tile half (its bytes: workspace types are element types or bytes)
        BufferSpec("counters", (2 * tiles * 4,), "uint8", "workspace", zeroed=True),
    )


def split_args(splits: int) -> tuple[BufferArg, ...]:
    """The kernel argument struct's members of split-K: partials and counters, or none."""
    return (BufferArg("partials", "float"), BufferArg("counters", "unsigned int")) if splits > 1 else ()


def split_rules(rules: Rules, splits: int, tma_epilogue: bool | None, k_steps: int, slots: int) -> None:
    """SPLIT_RULES for ``splits`` units a tile over ``k_steps`` K steps with ``slots`` workspace slots;
    ``tma_epilogue`` None where the template has no choice of epilogue (no rule split_tma_epilogue)."""
    if splits == 1:
        return
    if tma_epilogue is not None:
        rules.require(
            "split_tma_epilogue",
            tma_epilogue,
            "split-K takes epilogue 'tma' (beside the direct one, its sums spilled registers): use splits = 1",
        )
    rules.require(
        "splits_within_k_steps",
        splits <= k_steps,
        f"{splits} K splits need as many K steps (the problem has {k_steps})",
    )
    rules.require(
        "splits_within_workspace",
        splits <= slots,
        lambda: (
            f"split-K's partial sums: {splits} x M x N floats exceed the workspace's {slots} slots "
            f"({SPLIT_WORKSPACE_BYTES >> 20} MiB; rows 16-byte aligned): fewer splits"
        ),
    )
