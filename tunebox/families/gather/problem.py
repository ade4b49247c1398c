"""The gather problem: the indexed problem plus invalid-entry rates, padding and the sparse-view keys."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...dtypes import element_type, padding_bits, parse_padding
from ...errors import InvalidProblem
from ..indexed import (
    MAX_ELEMENTS,
    MAX_OFFSET,
    IndexedProblem,
    check_index_range,
    parse_common,
    parse_promise,
    rate,
    reject_unknown,
)

NAME = "gather"
KNOWN = {
    "dtype",
    "rows",
    "cols",
    "count",
    "index_dtype",
    "offset",
    "axis",
    "window",
    "dense_offset",
    "mask",
    "mask_rate",
    "sentinel_rate",
    "oob_rate",
    "padding",
    "pad_value",
    "valid_promise",
}


@dataclass(frozen=True)
class GatherProblem(IndexedProblem):
    sentinel_rate: float = 0.0
    oob_rate: float = 0.0
    padding: str = "zero"
    pad_value: float = 0.0  # used when padding == "value"
    axis: int = 0  # the indexed axis of A
    window: int | None = None  # the dense extent; None: the whole other dimension
    dense_offset: int = 0  # start of the dense range

    @property
    def extent(self) -> int:
        return self.rows if self.axis == 0 else self.cols

    @property
    def dense_extent(self) -> int:
        """Size of A along the dense axis."""
        return self.cols if self.axis == 0 else self.rows

    @property
    def span(self) -> int:
        """The window, resolved."""
        return self.dense_extent if self.window is None else self.window

    @property
    def whole_rows(self) -> bool:
        """The whole-row gather out[k, :] = A[idx[k] + offset, :] (its own kernel)."""
        return self.axis == 0 and self.window is None and self.dense_offset == 0

    @property
    def dense_inside(self) -> int:
        """Positions of the window inside A along the dense axis: read for every valid entry."""
        return max(0, min(self.dense_offset + self.span, self.dense_extent) - max(self.dense_offset, 0))

    @property
    def out_shape(self) -> tuple[int, int]:
        return (self.count, self.span) if self.axis == 0 else (self.span, self.count)

    @property
    def invalid_rate(self) -> float:
        return self.sentinel_rate + self.oob_rate

    @property
    def sentinels(self) -> int:
        return self.entries_through(self.sentinel_rate)

    @property
    def out_of_range(self) -> int:
        return self.entries_through(self.invalid_rate) - self.sentinels

    @property
    def pad_bits(self) -> int:
        return padding_bits(element_type(self.element), self.padding, self.pad_value)

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d.update(sentinel_rate=self.sentinel_rate, oob_rate=self.oob_rate, padding=self.padding)
        if self.padding == "value":
            d["pad_value"] = self.pad_value
        if self.axis:
            d["axis"] = self.axis
        if self.window is not None:
            d["window"] = self.window
        if self.dense_offset:
            d["dense_offset"] = self.dense_offset
        return d


def parse_gather(data: Mapping[str, Any]) -> GatherProblem:
    """Validate a gather problem description (raises InvalidProblem with a one-line reason)."""
    reject_unknown(NAME, data, KNOWN)
    fields = parse_common(NAME, data)
    sentinel_rate, oob_rate = rate(NAME, data, "sentinel_rate"), rate(NAME, data, "oob_rate")
    parse_promise(NAME, data, sentinel_rate, oob_rate)
    if sentinel_rate + oob_rate + fields["mask_rate"] > 1.0:
        raise InvalidProblem("gather: sentinel_rate + oob_rate + mask_rate must not exceed 1")
    padding, pad_value = parse_padding(NAME, data)
    axis = data.get("axis", 0)
    if type(axis) is not int or axis not in (0, 1):
        raise InvalidProblem(f"gather: axis must be 0 or 1, got {axis!r}")
    dense_extent = fields["cols"] if axis == 0 else fields["rows"]
    window = data.get("window", dense_extent)
    if type(window) is not int or window < 1:
        raise InvalidProblem(f"gather: window must be a positive integer, got {window!r}")
    if window * fields["count"] >= MAX_ELEMENTS:
        raise InvalidProblem(
            f"gather: window x count = {window} x {fields['count']} has too many elements (limit 2^40)"
        )
    dense_offset = data.get("dense_offset", 0)
    if type(dense_offset) is not int or not -MAX_OFFSET < dense_offset < MAX_OFFSET:
        raise InvalidProblem(f"gather: dense_offset must be an integer of magnitude below 2^62, got {dense_offset!r}")
    p = GatherProblem(
        **fields,
        sentinel_rate=sentinel_rate,
        oob_rate=oob_rate,
        padding=padding,
        pad_value=pad_value,
        axis=axis,
        window=None if window == dense_extent else window,
        dense_offset=dense_offset,
    )
    check_index_range(NAME, p, sentinel=p.sentinels > 0, beyond=p.out_of_range > 0)
    return p
