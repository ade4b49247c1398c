"""Tensor-map requests against the driver's rules, and the swizzle address map (no GPU needed)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from tunebox.errors import InvalidConfig
from tunebox.tma import TensorMapRequest, encode, swizzled_offset, violations

GOOD = TensorMapRequest(
    "bfloat16", shape=(4096, 4096), strides=(8192, 2), box=(64, 64), address=0x7F0000001000, swizzle="128B"
)


def test_a_valid_request_breaks_no_rule():
    assert violations(GOOD) == []


@pytest.mark.parametrize(
    "change, fragment",
    [
        ({"address": 0x7F0000001008}, "16-byte aligned"),
        ({"shape": (0, 4096)}, "[1, 2^32]"),
        ({"strides": (8192, 4)}, "innermost stride must be the element size"),
        ({"shape": (4096, 4095), "strides": (8190, 2)}, "multiples of 16"),
        ({"dtype": "float32", "strides": (16384, 4), "box": (256, 256), "swizzle": "none"}, "at most 131072"),
        ({"box": (257, 64)}, "[1, 256]"),
        ({"box": (64, 4), "swizzle": "none"}, "multiple of 16"),
        ({"element_strides": (9, 1)}, "element strides"),
        ({"box": (64, 128)}, "swizzle 128B spans 128 bytes"),
        ({"box": (64, 32), "swizzle": "32B"}, "swizzle 32B spans 32 bytes"),
        ({"swizzle": "96B"}, "not one of"),
        ({"dtype": "int32", "strides": (16384, 4), "box": (64, 32), "oob_fill": "nan"}, "floating-point types only"),
        ({"l2_promotion": "512B"}, "l2_promotion"),
    ],
)
def test_each_rule_names_itself(change, fragment):
    broken = violations(replace(GOOD, **change))
    assert any(fragment in b for b in broken), broken


def test_rules_that_were_found_on_the_driver_pass_where_they_should():
    assert violations(replace(GOOD, element_strides=(1, 2))) == []  # an innermost element stride is fine
    assert violations(replace(GOOD, strides=(16, 2))) == []  # rows may overlap
    assert violations(replace(GOOD, box=(256, 64), element_strides=(2, 1))) == []  # 128 KiB after striding
    assert violations(replace(GOOD, box=(256, 128), swizzle="none", element_strides=(2, 2))) == []
    assert violations(replace(GOOD, box=(1, 64), element_strides=(2, 1), shape=(1, 4096))) == []


def test_the_validator_agrees_with_the_driver_on_every_recorded_request():
    """cuTensorMapEncodeTiled's verdicts on 3140 seeded requests, recorded on the H200."""
    recording = json.loads(
        (Path(__file__).resolve().parents[2] / "results" / "recordings" / "tma_driver_verdicts.json").read_text()
    )
    requests = recording["requests"]
    assert len(requests) == 3140 and 0 < sum(r["driver"] for r in requests) < 3140
    disagree = []
    for r in requests:
        req = TensorMapRequest(
            r["dtype"],
            tuple(r["shape"]),
            tuple(r["strides"]),
            tuple(r["box"]),
            r["address"],
            r["swizzle"],
            tuple(r["element_strides"]) if r["element_strides"] else None,
            r["oob_fill"],
            r["l2_promotion"],
        )
        if bool(violations(req)) == r["driver"]:
            disagree.append((req, violations(req), r["driver"]))
    assert not disagree, disagree[:5]


def test_shape_errors():
    assert "rank 6" in violations(replace(GOOD, shape=(2,) * 6, strides=(16,) * 5 + (2,), box=(1,) * 6))[0]
    assert "rank 1" in violations(TensorMapRequest("float32", (1000,), (4,), (32,), 0x7F0000001000))[0]
    assert "one entry per dimension" in violations(replace(GOOD, box=(64,)))[0]
    assert "no tensor-map type" in violations(replace(GOOD, dtype="float64"))[0]


def test_encode_refuses_an_invalid_request_before_touching_the_driver():
    with pytest.raises(InvalidConfig, match="16-byte aligned"):
        encode(replace(GOOD, address=0x7F0000001001))


@pytest.mark.parametrize("group, blocks", [(1, 0), (2, 0), (1, 2), (2, 2)])
def test_ragged_3d_descriptors_are_valid(group, blocks):
    """RaggedTMA3DTile's descriptors (bf16, middle_dim 8, depth 128, BM 64): the (middle, rows) selector is
    folded into an outermost dimension whose stride (one head) is smaller than the rows' stride."""
    depth, heads, rows, bm, size = 128, 8, 10_000, 64, 2
    swizzle, inner = ("none", 8) if blocks else ("128B", 64)
    merged = heads * (rows + 1)
    if group == 1 and not blocks:
        shape, strides, box = (merged, bm, depth), (depth * size, heads * depth * size, size), (1, bm, inner)
    elif not blocks:
        shape = (merged, bm // group, group, depth)
        strides = (group * depth * size, heads * group * depth * size, depth * size, size)
        box = (1, bm // group, group, inner)
    elif group == 1:
        shape, strides = (merged, depth // inner, bm, inner), (depth * size, inner * size, heads * depth * size, size)
        box = (1, blocks, bm, inner)
    else:
        shape = (merged, depth // inner, bm // group, group, inner)
        strides = (group * depth * size, inner * size, heads * group * depth * size, depth * size, size)
        box = (1, blocks, bm // group, group, inner)
    request = TensorMapRequest("bfloat16", shape, strides, box, address=0x7F0000000000, swizzle=swizzle)
    assert violations(request) == []


@pytest.mark.parametrize("mode, period_lines", [("32B", 2), ("64B", 4), ("128B", 8)])
def test_swizzle_matches_the_ptx_tables(mode, period_lines):
    """PTX ISA, swizzling modes: chunk j of 128-byte line l lands at chunk j ^ (l mod 2 / 4 / 8)."""
    for line in range(16):
        for chunk in range(8):
            for byte in (0, 5, 15):
                offset = line * 128 + chunk * 16 + byte
                expected = line * 128 + (chunk ^ (line % period_lines)) * 16 + byte
                assert swizzled_offset(offset, mode) == expected
                assert swizzled_offset(swizzled_offset(offset, mode), mode) == offset


def test_no_swizzle_is_the_identity():
    assert all(swizzled_offset(x, "none") == x for x in range(4096))
