"""The worker's verification kernels (``kernels/runtime/compare.cu``) against numpy: the count of
positions that differ and the lowest of them, for every word size, with differences at the first and
last element, two in one 16-byte chunk, in the elements past the last whole chunk, and through
pointers that are not 16-byte aligned (the element-at-a-time path); the tolerance kernels on float32
and bfloat16 bits, NaN and infinity included."""

from __future__ import annotations

import numpy as np
import pytest

from tunebox.families.base import Tolerance
from tunebox.runner.gpu_session import GpuSession

pytestmark = pytest.mark.gpu
NONE = (0, 2**64 - 1)
STORAGE = {1: np.uint8, 2: np.uint16, 4: np.uint32}


@pytest.fixture(scope="module")
def session() -> GpuSession:
    return GpuSession()


def expected(a: np.ndarray, b: np.ndarray, differs: np.ndarray | None = None) -> tuple[int, int]:
    wrong = np.flatnonzero(a != b if differs is None else differs)
    return (len(wrong), int(wrong[0])) if len(wrong) else NONE


@pytest.mark.parametrize("itemsize", [1, 2, 4])
@pytest.mark.parametrize("n", [1, 7, 16, 33, 4096, 1_000_003])
def test_bit_differences_counted_and_the_lowest_found(session, itemsize, n):
    rng = np.random.default_rng(n * itemsize)
    a = rng.integers(0, 2 ** (8 * itemsize), n, dtype=STORAGE[itemsize])
    ref = a.copy()
    A, B = session.upload(a), session.upload(ref)
    assert session.mismatches(A, B, n, itemsize) == NONE
    per_chunk = 16 // itemsize
    tail = n - n % per_chunk
    for positions in (
        [n - 1],
        [0],
        [min(1, n - 1), min(2, n - 1)],
        [tail] if tail < n else [n // 2],
        sorted(set(rng.integers(0, n, 50).tolist())),
    ):
        got = a.copy()
        got[positions] ^= 1
        assert session.mismatches(session.upload(got), B, n, itemsize) == expected(got, ref), positions


@pytest.mark.parametrize("itemsize", [1, 2, 4])
def test_pointers_off_the_16_byte_grid_compare_element_by_element(session, itemsize):
    n = 10_001
    rng = np.random.default_rng(itemsize)
    a = rng.integers(0, 2 ** (8 * itemsize), n + 1, dtype=STORAGE[itemsize])
    got = a.copy()
    got[[1, 17, 5000, n]] ^= 1
    A, B = session.upload(got), session.upload(a)
    shifted = [np.uint64(int(buf.handle) + itemsize) for buf in (A, B)]
    assert session.mismatches(*shifted, n, itemsize) == expected(got[1:], a[1:])


def within_reference(got: np.ndarray, want: np.ndarray, tol: Tolerance) -> np.ndarray:
    """The positions where ``got`` is beyond ``tol`` of ``want`` (float32 values)."""
    with np.errstate(invalid="ignore", over="ignore"):
        near = np.abs(got - want) <= tol.atol + tol.rtol * np.abs(want)
    return ~near


@pytest.mark.parametrize("element", ["float32", "bfloat16"])
def test_tolerance_kernels_follow_the_rule(session, element):
    n = 100_003
    rng = np.random.default_rng(7)
    want = rng.standard_normal(n).astype(np.float32)
    got = want * (1 + rng.choice([0, 1e-4, 3e-2], n)).astype(np.float32)
    got[[5, 6]] = np.nan  # NaN where the reference is finite
    want[[9]] = got[[9]] = np.nan  # bit-identical NaN: matches
    want[[n - 2]] = np.inf
    got[[n - 2]] = np.float32(3e38)
    if element == "bfloat16":
        got_bits = (got.view(np.uint32) >> 16).astype(np.uint16)
        want_bits = (want.view(np.uint32) >> 16).astype(np.uint16)
        got_f = (got_bits.astype(np.uint32) << 16).view(np.float32)
        want_f = (want_bits.astype(np.uint32) << 16).view(np.float32)
    else:
        got_bits, want_bits, got_f, want_f = got.view(np.uint32), want.view(np.uint32), got, want
    tol = Tolerance(rtol=1e-2, atol=1e-3)
    beyond = within_reference(got_f, want_f, tol) & (got_bits != want_bits)
    result = session.mismatches_within(session.upload(got_bits), session.upload(want_bits), n, element, tol)
    assert result == expected(got_bits, want_bits, beyond)
    assert 1000 < result[0] < n // 2  # the 3% perturbations, and only they, fail (with the NaNs and inf)
