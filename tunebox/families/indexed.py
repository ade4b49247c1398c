"""What the indexed families ``gather`` and ``scatter`` share: problems, index types and their
parsing (the parsing helpers serve the other families too). The seeded index draws, the reference's
validity test and the ``rows`` template the two share are in ``indexed_rows.py``.

Both move whole ROWS of a row-major ``A`` of ``rows`` x ``cols`` (N x D) elements through ``count``
(K) indices ``idx`` (int32 or int64) plus a runtime ``offset``; entry k is *valid* when
``mask[k] != 0`` (only if the problem has a ``mask``: a uint8 buffer of K zeros and ones) and
``0 <= idx[k] + offset < N``. A negative row is out of range (no wrap-around), so an index whose row
is -1 is a padding sentinel that never touches memory. (gather's axis-1 form indexes columns instead:
``IndexedProblem.extent``, D there, takes N's place in these rules.) ``check_bounds = "false"`` promises that every
entry is valid: the rules accept it only for problems whose inputs have no sentinels, no
out-of-range indices and no mask.

Seeded inputs place sentinels, out-of-range and masked-out entries at disjoint positions, counted by
cumulative rounding (a category gets ``round(c1 * K) - round(c0 * K)`` entries, c0 and c1 the
rates summed before and through it), so rates summing to 1 cover all K entries and the number of
valid rows, and with it ``work()``, follows from the problem alone. A sentinel entry stores
``-1 - offset`` (row -1; plain -1 when ``offset`` is 0); an out-of-range entry's row lies in
``[N, 2N)`` (as far as the index type reaches: at least row N, checked at parse).

On caller arrays (``problem_from_arrays``, for ``tunebox.launch``) the rates are unknown: the problem
carries ``valid_promise`` instead, True only when the caller passes ``check_bounds=False`` (cuTile's
promise that every index is valid), so a check_bounds='false' winner is never run on indices nobody
vouched for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dtypes import element_type
from ..errors import InvalidProblem
from ..limits import MAX_GRID_X
from .base import Problem


@dataclass(frozen=True)
class IndexType:
    """An index buffer's element type (indices are signed integers, not raw element bits)."""

    name: str
    itemsize: int
    numpy: type[np.signedinteger]
    ctype: str  # C++ type of the kernel's index pointer

    @property
    def limits(self) -> tuple[int, int]:
        info = np.iinfo(self.numpy)
        return int(info.min), int(info.max)


INDEX_TYPES = {"int32": IndexType("int32", 4, np.int32, "int"), "int64": IndexType("int64", 8, np.int64, "long long")}
MASK_DTYPE = "uint8"  # the mask buffer: one byte per index, 0 (masked out) or 1
MASK_CTYPE = "unsigned char"  # C++ type of the mask buffer's bytes in kernels
MAX_ELEMENTS = 2**40  # K * D and N * D stay below this
MAX_COUNT = MAX_GRID_X  # indices per problem: at most one grid block per index
MAX_OFFSET = 2**62  # |offset| below this: idx + offset cannot wrap into [0, N) in the kernel
WARP = 32
UNCHECKED_NEEDS_VALID = "check_bounds='false' needs inputs with no sentinels, no out-of-range indices and no mask"


def index_type(name: str) -> IndexType:
    return INDEX_TYPES[name]


@dataclass(frozen=True)
class IndexedProblem(Problem):
    element: str
    rows: int  # N: rows of A
    cols: int  # D: elements per row
    count: int  # K: indices
    index_dtype: str = "int32"
    offset: int = 0
    mask: bool = False
    mask_rate: float = 0.0  # fraction of masked-out entries (mask only)
    valid_promise: bool | None = None  # caller arrays: every index valid (check_bounds=False); None: seeded

    @property
    def dtype(self) -> str:
        return self.element

    @property
    def extent(self) -> int:
        """Extent of the indexed axis: valid entries satisfy ``0 <= idx + offset < extent`` (N here)."""
        return self.rows

    @property
    def invalid_rate(self) -> float:
        """Fraction of entries that are sentinels or out of range (0 here; gather's inputs have them)."""
        return 0.0

    @property
    def sentinels(self) -> int:
        return 0

    @property
    def out_of_range(self) -> int:
        return 0

    @property
    def masked_out(self) -> int:
        return self.entries_through(self.invalid_rate + self.mask_rate) - self.sentinels - self.out_of_range

    def entries_through(self, cumulative_rate: float) -> int:
        return entries_through(self.count, cumulative_rate)

    @property
    def valid_entries(self) -> int:
        """Entries whose row moves: K less sentinels, out-of-range and masked-out entries."""
        return self.count - self.sentinels - self.out_of_range - self.masked_out

    @property
    def all_valid(self) -> bool:
        """The inputs promise every entry valid: what check_bounds='false' needs."""
        if self.valid_promise is not None:
            return self.valid_promise and not self.mask
        return self.sentinels == 0 and self.out_of_range == 0 and not self.mask

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "dtype": self.element,
            "rows": self.rows,
            "cols": self.cols,
            "count": self.count,
            "index_dtype": self.index_dtype,
            "offset": self.offset,
            "mask": self.mask,
        }
        if self.mask:
            d["mask_rate"] = self.mask_rate
        if self.valid_promise is not None:
            d["valid_promise"] = self.valid_promise
        return d


def entries_through(count: int, cumulative_rate: float) -> int:
    """Of ``count`` entries, those taken by the categories whose rates sum to ``cumulative_rate``
    (cumulative rounding: rates summing to 1 take every entry)."""
    return round(min(cumulative_rate, 1.0) * count)


def reject_unknown(family: str, data: Mapping[str, Any], known: set[str]) -> None:
    unknown = sorted(set(data) - known)
    if unknown:
        raise InvalidProblem(f"{family}: unknown problem key(s) {unknown}; known: {sorted(known)}")


def positive(family: str, data: Mapping[str, Any], key: str) -> int:
    value = data.get(key)
    if type(value) is not int or value < 1:
        raise InvalidProblem(f"{family}: {key} must be a positive integer, got {value!r}")
    return value


def rate(family: str, data: Mapping[str, Any], key: str) -> float:
    value = data.get(key, 0.0)
    if type(value) not in (int, float) or not 0.0 <= value <= 1.0:
        raise InvalidProblem(f"{family}: {key} must be a number in [0, 1], got {value!r}")
    return float(value)


def parse_common(family: str, data: Mapping[str, Any]) -> dict[str, Any]:
    """The fields both families share, checked; the caller rejects unknown keys first."""
    element_type(data.get("dtype"))
    rows, cols, count = (positive(family, data, k) for k in ("rows", "cols", "count"))
    for name, n in (("rows", rows), ("count", count)):
        if n * cols >= MAX_ELEMENTS:
            raise InvalidProblem(f"{family}: {name} x cols = {n} x {cols} has too many elements (limit 2^40)")
    if count > MAX_COUNT:
        raise InvalidProblem(f"{family}: count {count} exceeds {MAX_COUNT}")
    index_dtype = data.get("index_dtype", "int32")
    if not isinstance(index_dtype, str) or index_dtype not in INDEX_TYPES:
        raise InvalidProblem(f"{family}: index_dtype must be one of {sorted(INDEX_TYPES)}, got {index_dtype!r}")
    offset = data.get("offset", 0)
    if type(offset) is not int or not -MAX_OFFSET < offset < MAX_OFFSET:
        raise InvalidProblem(f"{family}: offset must be an integer of magnitude below 2^62, got {offset!r}")
    mask = data.get("mask", False)
    if not isinstance(mask, bool):
        raise InvalidProblem(f"{family}: mask must be true or false, got {mask!r}")
    if "mask_rate" in data and not mask:
        raise InvalidProblem(f"{family}: mask_rate is given only with mask = true")
    mask_rate = rate(family, data, "mask_rate")
    return {
        "element": data["dtype"],
        "rows": rows,
        "cols": cols,
        "count": count,
        "index_dtype": index_dtype,
        "offset": offset,
        "mask": mask,
        "mask_rate": mask_rate,
        "valid_promise": parse_promise(family, data, mask_rate),
    }


def parse_promise(family: str, data: Mapping[str, Any], *rates: float) -> bool | None:
    """``valid_promise`` (true or false, caller arrays only: no rates of seeded invalid entries beside it)."""
    promise = data.get("valid_promise")
    if promise is not None and (not isinstance(promise, bool) or any(rates)):
        raise InvalidProblem(f"{family}: valid_promise (true or false) describes caller arrays: give no rates with it")
    return promise


def caller_problem(
    family: str, arrays: Mapping[str, Any], names: tuple[str, ...], options: Mapping[str, Any]
) -> dict[str, Any]:
    """Problem keys shared by the indexed families on caller arrays: the index type, whether a mask
    is given, and the validity promise (``check_bounds``, default True: indices are checked)."""
    missing = [n for n in names if n not in arrays]
    if missing:
        raise InvalidProblem(
            f"{family}: tunebox.launch needs the arrays {list(names)} (and 'mask' for a masked "
            f"{family}); missing {missing}"
        )
    check_bounds = options.get("check_bounds", True)
    if not isinstance(check_bounds, bool):
        raise InvalidProblem(f"{family}: check_bounds must be True or False, got {check_bounds!r}")
    rest = {k: v for k, v in options.items() if k != "check_bounds"}
    return {
        "index_dtype": str(arrays[names[1]].dtype),
        "mask": "mask" in arrays,
        "valid_promise": not check_bounds,
        **rest,
    }


def matrix_shape(family: str, name: str, array: Any, rank: int = 2) -> tuple[int, ...]:
    shape = tuple(array.shape)
    if len(shape) != rank:
        raise InvalidProblem(f"{family}: array {name} must have {rank} dimension(s), got shape {list(shape)}")
    return shape


def check_index_range(family: str, p: IndexedProblem, sentinel: bool, beyond: bool) -> None:
    """Every stored index (row - offset) of the seeded inputs must fit the index type: the valid rows,
    row -1 when ``sentinel``, and at least row N (``p.extent``) when ``beyond``."""
    lo, hi = index_type(p.index_dtype).limits
    low_row = -1 if sentinel else 0
    high_row = p.extent if beyond else p.extent - 1
    if low_row - p.offset < lo or high_row - p.offset > hi:
        raise InvalidProblem(
            f"{family}: with offset {p.offset}, rows {low_row}..{high_row} need indices outside "
            f"{p.index_dtype}; use index_dtype = 'int64' or a smaller offset"
        )


def signed(bits: int, itemsize: int) -> int:
    """A storage bit pattern as the signed integer of its width (torch moves bits as int16/int32)."""
    width = 8 * itemsize
    return bits - (1 << width) if bits >= 1 << (width - 1) else bits


def _warps(n: int) -> int:
    """n rounded up to whole warps."""
    return -(-n // WARP) * WARP


def ceil_pow2(n: int) -> int:
    """The smallest power of two >= n (n >= 1)."""
    return 1 << (n - 1).bit_length()
