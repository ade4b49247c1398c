"""TMA tensor maps: requests checked against every rule of ``cuTensorMapEncodeTiled``, the swizzle
address map, and encoding through cuda.bindings.

A request is written in numpy's row-major order (shape, byte strides and box outermost first); the
driver's order (innermost first, the innermost stride implied) is derived in ``encode``. ``violations``
needs no GPU and names the driver rule each broken field breaks; it agrees with
``cuTensorMapEncodeTiled`` on all 3140 seeded requests of ``tests/gpu/test_tma_gpu.py`` recorded on the
H200 (driver 580.159.04, cuda-bindings 13.3.1), where the rank-1 refusal and the 128 KiB box limit
were found.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .errors import InvalidConfig
from .rules import Rules

# element type -> (bytes, CUtensorMapDataType member)
DATA_TYPES = {
    "uint8": (1, "CU_TENSOR_MAP_DATA_TYPE_UINT8"),
    "uint16": (2, "CU_TENSOR_MAP_DATA_TYPE_UINT16"),
    "uint32": (4, "CU_TENSOR_MAP_DATA_TYPE_UINT32"),
    "int32": (4, "CU_TENSOR_MAP_DATA_TYPE_INT32"),
    "int64": (8, "CU_TENSOR_MAP_DATA_TYPE_INT64"),
    "float16": (2, "CU_TENSOR_MAP_DATA_TYPE_FLOAT16"),
    "bfloat16": (2, "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16"),
    "float32": (4, "CU_TENSOR_MAP_DATA_TYPE_FLOAT32"),
}
FLOAT_TYPES = ("float16", "bfloat16", "float32")
SWIZZLE_BYTES = {"none": 0, "32B": 32, "64B": 64, "128B": 128}
L2_PROMOTION = ("none", "64B", "128B", "256B")
MAX_BOX_BYTES = 128 * 1024  # fitted to the driver's verdicts on 3140 requests (H200, driver 580.159.04)
MAX_BOX_EXTENT = 256  # elements per box dimension
MAX_COORDINATE = 2**31 - 1  # the coordinates a kernel gives a copy are signed 32-bit
MBARRIER_BYTES = 8  # one mbarrier in shared memory


def swizzle_period(span: int) -> int:
    """Bytes after which a swizzle pattern of ``span`` bytes (0: none) repeats, the alignment a box's
    shared memory needs (tb::swizzle_period in tma.cuh)."""
    return 8 * span if span else 128


@dataclass(frozen=True)
class TensorMapRequest:
    dtype: str
    shape: tuple[int, ...]  # elements, outermost first
    strides: tuple[int, ...]  # bytes, outermost first; the innermost must be the element size
    box: tuple[int, ...]  # elements copied per operation, outermost first
    address: int  # device address of element (0, ..., 0)
    swizzle: str = "none"
    element_strides: tuple[int, ...] | None = None  # traversal strides, default all 1
    oob_fill: str = "zero"  # "zero", or "nan" (floating-point types only)
    l2_promotion: str = "none"


RULE_NAMES = (
    "dtype_known",
    "rank_2_to_5",
    "one_entry_per_dimension",
    "address_aligned",
    "shape_extent",
    "innermost_stride_is_element",
    "outer_stride",
    "box_extent",
    "box_inner_16_bytes",
    "element_strides_range",
    "box_bytes",
    "swizzle_known",
    "swizzle_spans_box",
    "oob_fill",
    "l2_promotion",
)  # the rules of ``violations`` (owner ``tensor_map``)


def violations(req: TensorMapRequest) -> list[str]:
    """Every driver rule the request breaks (empty when ``cuTensorMapEncodeTiled`` would accept it);
    the rules are ``RULE_NAMES``, required by a ``Rules`` of owner ``tensor_map``."""
    rules = Rules("tensor_map")
    if not rules.require(
        "dtype_known",
        req.dtype in DATA_TYPES,
        lambda: f"dtype {req.dtype!r} has no tensor-map type; use one of {sorted(DATA_TYPES)}",
    ):
        return rules.broken
    size = DATA_TYPES[req.dtype][0]
    rank = len(req.shape)
    element_strides = req.element_strides or (1,) * rank
    if not rules.require(
        "rank_2_to_5",
        2 <= rank <= 5,
        f"rank {rank}: use 2 to 5 dimensions (the driver refused every rank-1 request: give a 1-D "
        "tensor an outer dimension of 1)",
    ) or not rules.require(
        "one_entry_per_dimension",
        len(req.strides) == len(req.box) == len(element_strides) == rank,
        "shape, strides, box and element_strides must have one entry per dimension",
    ):
        return rules.broken
    rules.require("address_aligned", req.address % 16 == 0, f"global address 0x{req.address:x} is not 16-byte aligned")
    for d, extent in enumerate(req.shape):
        rules.require(
            "shape_extent", 1 <= extent <= 2**32, f"shape[{d}] = {extent}: each dimension must lie in [1, 2^32]"
        )
    rules.require(
        "innermost_stride_is_element",
        req.strides[-1] == size,
        f"the innermost stride must be the element size ({size} bytes): tensor maps need a "
        "contiguous innermost dimension",
    )
    for d in range(rank - 1):
        stride = req.strides[d]
        rules.require(
            "outer_stride",
            stride % 16 == 0 and 0 < stride < 2**40,
            f"strides[{d}] = {stride} bytes: outer strides must be multiples of 16 below 2^40",
        )
    # Outer strides need not be ordered nor cover a row (RaggedTMA3DTile folds a small-stride selector
    # outermost; the driver accepts overlapping rows).
    for d, extent in enumerate(req.box):
        rules.require(
            "box_extent",
            1 <= extent <= MAX_BOX_EXTENT,
            f"box[{d}] = {extent}: box dimensions must lie in [1, {MAX_BOX_EXTENT}]",
        )
    inner_bytes = req.box[-1] * size
    rules.require(
        "box_inner_16_bytes",
        inner_bytes % 16 == 0,
        f"the box's inner extent is {inner_bytes} bytes: it must be a multiple of 16",
    )
    if rules.require(
        "element_strides_range", all(1 <= s <= 8 for s in element_strides), "element strides must lie in [1, 8]"
    ):  # the driver's size of a box: every dimension's extent divided by its stride, rounded down
        box_bytes = math.prod(b // s for b, s in zip(req.box, element_strides, strict=True)) * size
        rules.require(
            "box_bytes",
            box_bytes <= MAX_BOX_BYTES,
            f"the box holds {box_bytes} bytes (extents divided by the element strides): at most "
            f"{MAX_BOX_BYTES} (128 KiB)",
        )
    if (
        rules.require(
            "swizzle_known",
            req.swizzle in SWIZZLE_BYTES,
            lambda: f"swizzle {req.swizzle!r} is not one of {list(SWIZZLE_BYTES)}",
        )
        and req.swizzle != "none"
    ):
        rules.require(
            "swizzle_spans_box",
            inner_bytes <= SWIZZLE_BYTES[req.swizzle],
            f"swizzle {req.swizzle} spans {SWIZZLE_BYTES[req.swizzle]} bytes but the box's inner "
            f"extent is {inner_bytes} bytes",
        )
    rules.require(
        "oob_fill",
        req.oob_fill == "zero" or (req.oob_fill == "nan" and req.dtype in FLOAT_TYPES),
        f"oob_fill {req.oob_fill!r}: 'zero', or 'nan' for floating-point types only",
    )
    rules.require(
        "l2_promotion",
        req.l2_promotion in L2_PROMOTION,
        lambda: f"l2_promotion {req.l2_promotion!r} is not one of {list(L2_PROMOTION)}",
    )
    return rules.broken


def swizzled_offset(offset: int, swizzle: str) -> int:
    """Byte offset, inside shared memory, of byte ``offset`` of a box stored with ``swizzle``, from a
    base aligned to the swizzle period (256 / 512 / 1024 bytes): the 16-byte chunk index within each
    128-byte line is XORed with the line index modulo 2, 4 or 8 (PTX ISA, tensor swizzling modes).
    Self-inverse."""
    bits = {"none": 0, "32B": 1, "64B": 2, "128B": 3}[swizzle]
    return offset ^ (((offset >> 7) & ((1 << bits) - 1)) << 4)


def encode(req: TensorMapRequest) -> Any:
    """The ``CUtensorMap`` for a valid request (needs the CUDA driver); raises InvalidConfig naming
    every broken rule otherwise."""
    broken = violations(req)
    if broken:
        raise InvalidConfig("tensor map: " + "; ".join(broken))
    from cuda.bindings import driver as cu

    from .cuda_api import checked

    return checked(cu.cuTensorMapEncodeTiled(*driver_arguments(req)))


def driver_arguments(req: TensorMapRequest) -> tuple[Any, ...]:
    """The arguments of ``cuTensorMapEncodeTiled`` for a request, in the driver's order (innermost
    dimension first), not validated: ``encode`` validates first; tests hand the driver requests the
    validator rejects, to check that it rejects them too."""
    from cuda.bindings import driver as cu

    rank = len(req.shape)
    swizzle = {"none": "NONE", "32B": "32B", "64B": "64B", "128B": "128B"}[req.swizzle]
    promotion = {"none": "NONE", "64B": "L2_64B", "128B": "L2_128B", "256B": "L2_256B"}[req.l2_promotion]
    fill = "NONE" if req.oob_fill == "zero" else "NAN_REQUEST_ZERO_FMA"
    return (
        getattr(cu.CUtensorMapDataType, DATA_TYPES[req.dtype][1]),
        rank,
        req.address,
        [cu.cuuint64_t(x) for x in reversed(req.shape)],
        [cu.cuuint64_t(x) for x in reversed(req.strides[:-1])],
        [cu.cuuint32_t(x) for x in reversed(req.box)],
        [cu.cuuint32_t(x) for x in reversed(req.element_strides or (1,) * rank)],
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(cu.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{swizzle}"),
        getattr(cu.CUtensorMapL2promotion, f"CU_TENSOR_MAP_L2_PROMOTION_{promotion}"),
        getattr(cu.CUtensorMapFloatOOBfill, f"CU_TENSOR_MAP_FLOAT_OOB_FILL_{fill}"),
    )
