"""TMA on the GPU: tunebox.tma's validator against the driver itself (seeded requests around every
rule: the validator must reject exactly what cuTensorMapEncodeTiled rejects), and the swizzle address
map against the hardware (a box loaded by TMA with each swizzle mode and dtype, at interior, edge and
negative coordinates, read back byte for byte from shared memory: every element where
``swizzled_offset`` says, out-of-bounds elements zero). Each probe runs in a spawned process."""

from __future__ import annotations

import multiprocessing as mp
import random
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest
import tma_probe

from tunebox.tma import (
    DATA_TYPES,
    SWIZZLE_BYTES,
    TensorMapRequest,
    swizzled_offset,
    violations,
)

pytestmark = pytest.mark.gpu
STORAGE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


@pytest.fixture(scope="module")
def probe():
    """A spawned process for the probes of ``tma_probe`` (a faulting launch cannot poison this one)."""
    with ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("spawn")) as pool:
        yield lambda fn, *args: pool.submit(fn, *args).result(timeout=120)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("swizzle", list(SWIZZLE_BYTES))
def test_tma_boxes_land_where_the_swizzle_map_says(probe, dtype, swizzle):
    size = DATA_TYPES[dtype][0]
    rows, cols, box_rows = 50, 200, 16
    inner = (SWIZZLE_BYTES[swizzle] or 80) // size  # a whole swizzle span per box row (80 B unswizzled)
    storage = STORAGE[size]
    a = (np.arange(rows * cols, dtype=np.int64) + 1).astype(storage).reshape(rows, cols)  # no zero element
    request = TensorMapRequest(dtype, (rows, cols), (cols * size, size), (box_rows, inner), 1 << 20, swizzle)
    assert violations(request) == []
    step = 16 // size  # innermost coordinates at 16-byte multiples (tma.cuh: others fault past an edge)
    corners = [(0, 0), (cols - step, 7), (-step, -5), (inner, rows - 4), (0, -7)]
    boxes = probe(tma_probe.dump_boxes, a, request, corners)
    for (x, y), got in zip(corners, boxes, strict=True):
        logical = np.zeros((box_rows, inner), dtype=storage)
        r0, r1 = max(y, 0), min(y + box_rows, rows)
        c0, c1 = max(x, 0), min(x + inner, cols)
        logical[r0 - y : r1 - y, c0 - x : c1 - x] = a[r0:r1, c0:c1]
        expected = np.zeros(got.size, dtype=np.uint8)
        flat = logical.reshape(-1).view(np.uint8)
        for element in range(box_rows * inner):
            at = swizzled_offset(element * size, swizzle)
            expected[at : at + size] = flat[element * size : (element + 1) * size]
        wrong = np.flatnonzero(got != expected)
        assert wrong.size == 0, (swizzle, dtype, (x, y), f"{wrong.size} bytes differ, first at {wrong[:8]}")


def random_request(rng: random.Random, base: int) -> TensorMapRequest:
    """A request near the rules' edges: each field is valid most of the time, so requests that break
    one rule alone are common."""

    def rarely(bad, good):
        return bad if rng.random() < 0.1 else good

    dtype = rng.choice(sorted(DATA_TYPES))
    size = DATA_TYPES[dtype][0]
    rank = rng.choice([1, 2, 2, 3, 3, 4, 5])
    shape = tuple(rng.choice([1, 3, 64, 1000]) for _ in range(rank))
    strides = [size]
    for d in range(rank - 1, 0, -1):
        padded = -(-strides[0] * shape[d] // 16) * 16
        strides.insert(
            0,
            rarely(
                rng.choice([padded + 8, strides[0] * shape[d], max(padded - 16, 8)]), rng.choice([padded, padded + 16])
            ),
        )
    swizzle = rng.choice(list(SWIZZLE_BYTES))
    box = [rarely(rng.choice([0, 257]), rng.choice([1, 8, 64, 256])) for _ in range(rank)]
    box[-1] = max(1, rarely(rng.choice([4, 8, 24]), rng.choice([16, 32, 64, 128, 256])) // size)
    element_strides = tuple(rarely(rng.choice([0, 9]), rng.choice([1, 1, 2, 8])) for _ in range(rank))
    return TensorMapRequest(
        dtype,
        shape,
        tuple(strides),
        tuple(box),
        base + rarely(8, 0),
        swizzle,
        element_strides if rng.random() < 0.3 else None,
        rarely("nan", "zero") if dtype not in ("float16", "bfloat16", "float32") else rng.choice(["zero", "nan"]),
        rng.choice(["none", "128B", "256B"]),
    )


def test_the_validator_rejects_exactly_what_the_driver_rejects(probe):
    rng = random.Random(2026)
    requests = [random_request(rng, 0) for _ in range(3000)]
    accepted = probe(tma_probe.driver_accepts, requests)
    assert 300 < accepted.count(False) < 2700  # both verdicts are well represented
    mismatches = [(r, violations(r), ok) for r, ok in zip(requests, accepted, strict=True) if ok == bool(violations(r))]
    assert not mismatches, "\n".join(
        f"{r}: ours {v or 'accept'}, driver {'accepts' if ok else 'rejects'}" for r, v, ok in mismatches[:20]
    )
