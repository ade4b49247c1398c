"""tile_copy without a GPU: numpy reference, problem parsing, the three templates and their
parameters, validity rules, work, distance, and NVRTC compilation (to CUBIN, sm_90) of a spread of
valid variants, with the on-disk build cache."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import json
import math
import os
import random
import re
import threading
from functools import partial
from pathlib import Path

import family_checks
import numpy as np
import pytest

from tunebox.build.nvrtc import NvrtcBuilder
from tunebox.dtypes import PADDING_MODES, element_type, padding_bits
from tunebox.errors import InvalidConfig, InvalidProblem
from tunebox.families.base import BufferArg, BufferSpec, KernelSource, ScalarArg, TensorMapArg
from tunebox.families.tile_copy import (
    FAMILY,
    MAX_REGISTER_BYTES,
    MAX_SHARED_BYTES,
    CpAsyncConfig,
    TileCopyProblem,
    TmaConfig,
    VectorConfig,
)
from tunebox.families.tile_copy.operation import row_alignment
from tunebox.params import Config
from tunebox.records import Status
from tunebox.tma import SWIZZLE_BYTES, TensorMapRequest

TC = FAMILY
DTYPES = ("float32", "float16", "bfloat16")
BOUNDS = ("checked", "split", "unchecked")
STAGED = ("plain", "padded", "swizzled")
NAN32 = 0x7FC00000


def problem(dtype: str = "float32", src=(3, 4), dst=(3, 4), **extra) -> TileCopyProblem:
    return TC.parse_problem({"dtype": dtype, "src": list(src), "dst": list(dst), **extra})


def config(**values) -> Config:
    """A configuration of the vector template (the default's values unless given)."""
    base = {
        "template": "vector",
        "BM": 8,
        "BN": 256,
        "threads": 256,
        "vec_bytes": 16,
        "bounds": "checked",
        "staging": "none",
        "tiles_per_block": 1,
    }
    return TC.config({**base, **values})


def members(source: KernelSource) -> dict[str, str]:
    """The members of the configuration struct a rendered source instantiates its kernel with."""
    struct = source.code[source.code.rindex("struct Cfg {") :]
    found = dict(re.findall(r"static constexpr (?:int|bool) (\w+) = (-?\w+);", struct))
    found["T"] = re.search(r"using T = ([\w ]+);", struct).group(1)
    return found


def arg_members(source: KernelSource) -> list[str]:
    """The members of the argument struct ``Args_t`` a rendered variant's kernel takes, in order, as
    declared ("type name")."""
    found = re.search(r"struct Args_t \{\n(.*?)\n\};", source.code, re.S)
    assert found, "the rendered source defines no struct Args_t"
    return [line.strip().rstrip(";") for line in found.group(1).splitlines()]


def arange_src(dtype: str, shape: tuple[int, int], start: int = 1) -> np.ndarray:
    storage = element_type(dtype).storage
    return np.arange(start, start + shape[0] * shape[1], dtype=np.int64).astype(storage).reshape(shape)


def ref(p: TileCopyProblem, src: np.ndarray) -> np.ndarray:
    before = src.copy()
    out = TC.reference(p, {"src": src})
    np.testing.assert_array_equal(src, before)  # the input is not modified
    assert set(out) == {"dst"}
    dst = out["dst"]
    assert dst.shape == p.dst and dst.dtype == src.dtype
    return dst


# ---------------------------------------------------------------------------------------------
# numpy reference on hand-computed cases. src = [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]

SRC = arange_src("float32", (3, 4))
P = NAN32  # padding "nan" for float32: distinct from every source value and from zero


def test_reference_plain_copy() -> None:
    np.testing.assert_array_equal(ref(problem(padding="nan"), SRC), SRC)


def test_reference_crop_at_positive_origin() -> None:
    got = ref(problem(dst=(2, 2), origin=[1, 1], padding="nan"), SRC)
    np.testing.assert_array_equal(got, [[6, 7], [10, 11]])
    got = ref(problem(dst=(1, 3), origin=[2, 1], padding="nan"), SRC)
    np.testing.assert_array_equal(got, [[10, 11, 12]])


def test_reference_pad_larger_destination() -> None:
    got = ref(problem(dst=(4, 5), padding="nan"), SRC)
    np.testing.assert_array_equal(got, [[1, 2, 3, 4, P], [5, 6, 7, 8, P], [9, 10, 11, 12, P], [P] * 5])
    got = ref(problem(dst=(4, 5)), SRC)  # padding "zero"
    np.testing.assert_array_equal(got, [[1, 2, 3, 4, 0], [5, 6, 7, 8, 0], [9, 10, 11, 12, 0], [0] * 5])


def test_reference_negative_origin() -> None:
    got = ref(problem(dst=(3, 4), origin=[-1, -2], padding="nan"), SRC)
    np.testing.assert_array_equal(got, [[P, P, P, P], [P, P, 1, 2], [P, P, 5, 6]])
    got = ref(problem(dst=(2, 6), origin=[1, -1], padding="nan"), SRC)
    np.testing.assert_array_equal(got, [[P, 5, 6, 7, 8, P], [P, 9, 10, 11, 12, P]])


def test_reference_transpose_without_padding() -> None:
    got = ref(problem(dst=(4, 3), transpose=True, padding="nan"), SRC)
    np.testing.assert_array_equal(got, [[1, 5, 9], [2, 6, 10], [3, 7, 11], [4, 8, 12]])
    got = ref(problem(dst=(2, 2), origin=[1, 2], transpose=True, padding="nan"), SRC)
    np.testing.assert_array_equal(got, [[7, 11], [8, 12]])


def test_reference_transpose_with_padding() -> None:
    # dst[i, j] = src[1 + j, 2 + i]
    got = ref(problem(dst=(3, 4), origin=[1, 2], transpose=True, padding="nan"), SRC)
    np.testing.assert_array_equal(got, [[7, 11, P, P], [8, 12, P, P], [P, P, P, P]])
    # dst[i, j] = src[j - 1, i - 1]
    got = ref(problem(dst=(3, 3), origin=[-1, -1], transpose=True, padding="nan"), SRC)
    np.testing.assert_array_equal(got, [[P, P, P], [P, 1, 5], [P, 2, 6]])


@pytest.mark.parametrize("origin", [(10, 0), (0, 10), (-5, 0), (0, -5), (3, 4), (-100, -100)])
@pytest.mark.parametrize("transpose", [False, True])
def test_reference_window_completely_outside(origin: tuple[int, int], transpose: bool) -> None:
    p = problem(dst=(3, 5), origin=list(origin), transpose=transpose, padding="neg_inf")
    assert p.valid_source_elements() == 0
    np.testing.assert_array_equal(ref(p, SRC), np.full((3, 5), 0xFF800000, dtype=np.uint32))


@pytest.mark.parametrize(("dtype", "pad"), [("bfloat16", 0xC050), ("float16", 0xC280), ("float32", 0xC0500000)])
def test_reference_pad_value(dtype: str, pad: int) -> None:
    src = arange_src(dtype, (2, 2))
    got = ref(problem(dtype, src=(2, 2), dst=(2, 3), padding="value", pad_value=-3.25), src)
    np.testing.assert_array_equal(got, [[1, 2, pad], [3, 4, pad]])


@pytest.mark.parametrize("dtype", DTYPES)
def test_reference_seed_edge(dtype: str) -> None:
    """Seed 001: src (65, 73), a (64, 32) copy at origin (64, 64): one valid row and nine valid
    columns; everything else is padding."""
    src = arange_src(dtype, (65, 73))
    p = problem(dtype, src=(65, 73), dst=(64, 32), origin=[64, 64])
    assert p.valid_source_elements() == 9
    got = ref(p, src)
    np.testing.assert_array_equal(got[0, :9], src[64, 64:73])
    np.testing.assert_array_equal(got[0, :9], np.arange(64 * 73 + 65, 64 * 73 + 74))
    expected = np.zeros((64, 32), dtype=src.dtype)  # padding "zero"; arange starts at 1
    expected[0, :9] = src[64, 64:73]
    np.testing.assert_array_equal(got, expected)
    assert int((got != 0).sum()) == 9
    # the same window transposed: dst (32, 64) reads src[64 + j, 64 + i]: column 0, rows 0..8
    pt = problem(dtype, src=(65, 73), dst=(32, 64), origin=[64, 64], transpose=True, padding="nan")
    got = ref(pt, src)
    pad = pt.pad_bits
    np.testing.assert_array_equal(got[:9, 0], src[64, 64:73])
    assert (got[9:, :] == pad).all() and (got[:, 1:] == pad).all()


def _naive(p: TileCopyProblem, src: np.ndarray) -> np.ndarray:
    out = np.empty(p.dst, dtype=src.dtype)
    oy, ox = p.origin
    for i, j in itertools.product(range(p.dst[0]), range(p.dst[1])):
        r, c = (oy + j, ox + i) if p.transpose else (oy + i, ox + j)
        out[i, j] = src[r, c] if 0 <= r < p.src[0] and 0 <= c < p.src[1] else p.pad_bits
    return out


def test_reference_matches_definition_on_random_problems() -> None:
    rng = np.random.default_rng(7)
    for _ in range(300):
        dtype = DTYPES[int(rng.integers(3))]
        src_shape = tuple(int(v) for v in rng.integers(1, 9, 2))
        dst_shape = tuple(int(v) for v in rng.integers(1, 9, 2))
        origin = [int(v) for v in rng.integers(-10, 10, 2)]
        mode = PADDING_MODES[int(rng.integers(len(PADDING_MODES)))]
        extra = {"pad_value": 1.5} if mode == "value" else {}
        p = problem(
            dtype, src=src_shape, dst=dst_shape, origin=origin, transpose=bool(rng.integers(2)), padding=mode, **extra
        )
        src = TC.make_inputs(p, rng)["src"]
        assert src.shape == p.src and src.dtype == element_type(dtype).storage
        got = ref(p, src)
        np.testing.assert_array_equal(got, _naive(p, src), err_msg=str(p))
        assert int((got == p.pad_bits).sum()) >= p.dst[0] * p.dst[1] - p.valid_source_elements()


# ---------------------------------------------------------------------------------------------
# parse_problem


def test_parse_problem_defaults_and_round_trip() -> None:
    p = TC.parse_problem({"dtype": "bfloat16", "src": [65, 73], "dst": [64, 32]})
    assert p == TileCopyProblem("bfloat16", (65, 73), (64, 32))
    assert (p.origin, p.transpose, p.padding, p.pad_value, p.dtype) == ((0, 0), False, "zero", 0.0, "bfloat16")
    assert TC.parse_problem(p.to_dict()) == p
    q = problem("float16", src=(4, 4), dst=(4, 4), origin=[-3, 5], transpose=True, padding="value", pad_value=2)
    assert q.pad_value == 2.0 and type(q.pad_value) is float
    assert TC.parse_problem(q.to_dict()) == q
    assert q.key() == TC.parse_problem(q.to_dict()).key()
    assert p.key() != q.key()


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"stride": [1, 1]}, "stride"),
        ({"dtype": "float64"}, "float64"),
        ({"dtype": None}, "dtype"),
        ({"src": [4.0, 4]}, "src"),
        ({"src": [4, "4"]}, "src"),
        ({"src": [4, 4, 4]}, "src"),
        ({"src": 16}, "src"),
        ({"dst": [True, 4]}, "dst"),
        ({"src": [0, 4]}, "src"),
        ({"dst": [4, 0]}, "dst"),
        ({"dst": [-4, 4]}, "dst"),
        ({"src": [2**31, 4]}, "src"),
        ({"origin": [True, 0]}, "origin"),
        ({"origin": [0, False]}, "origin"),
        ({"origin": [0.0, 0]}, "origin"),
        ({"origin": [-(2**31), 0]}, "origin"),
        ({"transpose": 1}, "transpose"),
        ({"transpose": "true"}, "transpose"),
        ({"padding": "undetermined"}, "padding"),
        ({"padding": "ZERO"}, "padding"),
        ({"pad_value": 1.0}, "pad_value"),
        ({"padding": "zero", "pad_value": 0.0}, "pad_value"),
        ({"padding": "value", "pad_value": "1"}, "pad_value"),
        ({"padding": "value", "pad_value": True}, "pad_value"),
        ({"src": [2**20, 2**20]}, "too many"),
        ({"dst": [2**21, 2**20]}, "too many"),
    ],
    ids=repr,
)
def test_parse_problem_errors(data: dict, fragment: str) -> None:
    base = {"dtype": "float32", "src": [4, 4], "dst": [4, 4]}
    with pytest.raises(InvalidProblem, match=fragment):
        TC.parse_problem({**base, **data})


def test_parse_problem_huge_pad_value() -> None:
    """tomllib reads integers of any size; one past float range must be an InvalidProblem, not an
    OverflowError from float()."""
    with pytest.raises(InvalidProblem, match="pad_value"):
        TC.parse_problem({"dtype": "float32", "src": [4, 4], "dst": [4, 4], "padding": "value", "pad_value": 10**400})


def test_parse_problem_missing_keys() -> None:
    with pytest.raises(InvalidProblem):
        TC.parse_problem({"src": [4, 4], "dst": [4, 4]})
    with pytest.raises(InvalidProblem, match="src"):
        TC.parse_problem({"dtype": "float32", "dst": [4, 4]})
    with pytest.raises(InvalidProblem, match="dst"):
        TC.parse_problem({"dtype": "float32", "src": [4, 4]})


def test_parse_problem_limits_accepted() -> None:
    p = problem(src=(2**31 - 1, 1), dst=(1, 2**31 - 1), origin=[-(2**31 - 1), 2**31 - 1])
    assert p.valid_source_elements() == 0
    assert problem(src=(2**20, 2**20 - 1), dst=(1, 1)).src == (2**20, 2**20 - 1)


# ---------------------------------------------------------------------------------------------
# validity rules: each with a passing and a failing case

ODD = problem("float32", src=(65, 73), dst=(64, 32), origin=[64, 64])
FULL = problem("float32", src=(256, 1024), dst=(256, 1024))
FULL_T = problem("float32", src=(1024, 256), dst=(256, 1024), transpose=True)


assert_rule = partial(family_checks.assert_rule, TC)


def test_rule_vec_bytes_multiple_of_element() -> None:
    assert_rule(ODD, config(vec_bytes=4), config(vec_bytes=2), "vec_bytes=2")
    assert TC.violations(problem("float16", src=(65, 73), dst=(64, 32)), config(vec_bytes=2)) == []


def test_rule_vector_divides_tile() -> None:
    # BN >= 8 is always a multiple of a vector (at most 8 elements); BM must be one when transposed
    t = problem("float32", src=(64, 64), dst=(64, 64), transpose=True)
    good = config(BM=4, BN=256, threads=64, vec_bytes=16, staging="padded")
    bad = config(BM=2, BN=512, threads=64, vec_bytes=16, staging="padded")
    assert_rule(t, good, bad, "divide")
    assert TC.violations(ODD, config(BM=2, BN=512, threads=64, vec_bytes=16)) == []


def test_rule_vectors_split_evenly_over_threads() -> None:
    assert_rule(
        ODD, config(BM=2, BN=128, threads=64, vec_bytes=4), config(BM=1, BN=128, threads=256, vec_bytes=4), "threads"
    )
    # 8 * 8 / 4 = 16 vectors < 64 threads
    assert "threads" in TC.violations(ODD, config(BM=8, BN=8, threads=64, vec_bytes=16))[0]


def test_rule_staging() -> None:
    t = problem("float32", src=(65, 73), dst=(32, 64), transpose=True)
    assert_rule(
        t,
        config(BM=32, BN=32, staging="padded", vec_bytes=4),
        config(BM=32, BN=32, staging="none", vec_bytes=4),
        "staging",
    )
    for layout in STAGED:
        assert TC.violations(t, config(BM=32, BN=32, staging=layout, vec_bytes=4)) == []
    # a plain copy may take the register path or (since the aligned-window change) a staged one
    for layout in ("none", *STAGED):
        assert TC.violations(ODD, config(BM=8, BN=256, staging=layout)) == []


def test_rule_shared_memory_limit() -> None:
    t = problem("float32", src=(65, 73), dst=(32, 64), transpose=True)
    # transposed: BN rows of BM (+1 padding word) elements: 256 * 129 * 4 = 132096 bytes
    good = config(BM=128, BN=256, threads=1024, vec_bytes=16, staging="padded")
    bad = config(BM=128, BN=512, threads=1024, vec_bytes=16, staging="padded")  # 264192 bytes
    assert TC.geometry(t, good).shared_bytes == 256 * 129 * 4 <= MAX_SHARED_BYTES
    assert TC.geometry(t, bad).shared_bytes == 512 * 129 * 4 > MAX_SHARED_BYTES
    assert_rule(t, good, bad, "shared memory")
    # swizzled needs no padding: 512 * 128 * 2 bytes of float16 fit
    t16 = problem("float16", src=(65, 73), dst=(32, 64), transpose=True)
    assert TC.violations(t16, config(BM=128, BN=512, threads=1024, vec_bytes=16, staging="swizzled")) == []
    assert (
        TC.geometry(t16, config(BM=128, BN=512, threads=1024, vec_bytes=4, staging="padded")).shared_bytes
        == 512 * (128 + 2) * 2
    )
    assert TC.geometry(ODD, config()).shared_bytes == 0


def test_rule_register_bytes_per_thread() -> None:
    # 256 threads: 16 * 1024 * 4 / 256 = 256 bytes per thread is the limit; 32 rows make 512
    good = config(BM=16, BN=1024, threads=256, vec_bytes=16)
    bad = config(BM=32, BN=1024, threads=256, vec_bytes=16)
    assert MAX_REGISTER_BYTES == 256
    assert_rule(ODD, good, bad, "registers")
    # a float16 tile of the same shape needs half the bytes
    assert TC.violations(problem("float16", src=(65, 73), dst=(64, 32)), bad) == []
    # __launch_bounds__(1024) leaves 64 registers a thread: the budget shrinks to 96 bytes
    assert_rule(
        ODD,
        config(BM=16, BN=1024, threads=1024, vec_bytes=16),
        config(BM=32, BN=1024, threads=1024, vec_bytes=16),
        "at 1024 threads",
    )


def test_rule_unchecked() -> None:
    cfg = config(BM=8, BN=256, threads=256, vec_bytes=16, bounds="unchecked")
    assert TC.violations(FULL, cfg) == []
    assert TC.violations(FULL, config(BM=8, BN=256, vec_bytes=16, bounds="checked")) == []
    failing = {
        "edge tile": problem(src=(256, 1024), dst=(252, 1024)),  # 252 % 8 != 0
        "partial column tile": problem(src=(256, 1024), dst=(256, 1000)),
        "outside src": problem(src=(256, 1024), dst=(256, 1024), origin=[1, 0]),
        "negative origin": problem(src=(512, 2048), dst=(256, 1024), origin=[-8, 0]),
        "unaligned origin": problem(src=(512, 2048), dst=(256, 1024), origin=[0, 2]),
        "unaligned leading dimension": problem(src=(256, 1026), dst=(256, 1024)),
        "the seed's edge": ODD,
    }
    for name, p in failing.items():
        broken = TC.violations(p, cfg)
        assert len(broken) == 1 and "unchecked" in broken[0], (name, broken)
        assert TC.violations(p, config(BM=8, BN=256, vec_bytes=16, bounds="split")) == [], name
    # accepted for a full, aligned crop inside a larger source, and for a full transpose
    assert TC.violations(problem(src=(512, 2048), dst=(256, 1024), origin=[8, 4]), cfg) == []
    tcfg = config(BM=32, BN=64, threads=256, vec_bytes=8, staging="swizzled", bounds="unchecked")
    assert TC.violations(FULL_T, tcfg) == []
    assert (
        "unchecked" in TC.violations(problem(src=(1024, 256), dst=(256, 1024), transpose=True, origin=[0, 1]), tcfg)[0]
    )
    assert "unchecked" in TC.violations(problem(src=(1024, 250), dst=(250, 1024), transpose=True), tcfg)[0]


def test_violations_reports_every_broken_rule() -> None:
    t = problem("float32", src=(65, 73), dst=(32, 64), transpose=True)
    broken = TC.violations(t, config(BM=2, BN=8, threads=1024, vec_bytes=16, staging="none", bounds="unchecked"))
    assert len(broken) == 4, broken


# ---------------------------------------------------------------------------------------------
# default_config, geometry, buffers, args


VARIETY = [
    {"dtype": d, "src": s, "dst": t, "origin": o, "transpose": tr}
    for d in DTYPES
    for (s, t, o, tr) in [
        ([1, 1], [1, 1], [0, 0], False),
        ([1, 1], [1, 1], [0, 0], True),
        ([65, 73], [64, 32], [64, 64], False),
        ([65, 73], [32, 64], [64, 64], True),
        ([3, 1000001], [7, 999999], [-5, 3], False),
        ([12345, 6789], [6789, 12345], [0, 0], True),
        ([16384, 16384], [16384, 16384], [0, 0], False),
        ([7, 9], [13, 11], [-2, -3], True),
    ]
]


@pytest.mark.parametrize("data", VARIETY, ids=lambda d: f"{d['dtype']}-{d['src']}-{d['dst']}-T{int(d['transpose'])}")
def test_default_config_is_valid(data: dict) -> None:
    p = TC.parse_problem(data)
    cfg = TC.default_config(p)
    assert TC.violations(p, cfg) == []
    assert cfg["template"] == "vector"
    assert (cfg["staging"] != "none") or not p.kernel_view.transpose  # a unit transpose copies


def test_geometry_buffers_args() -> None:
    p = problem("bfloat16", src=(65, 73), dst=(64, 32), origin=[64, -3], padding="neg_zero")
    cfg = config(BM=4, BN=16, threads=64, vec_bytes=2, tiles_per_block=4)
    geo = TC.geometry(p, cfg)
    assert geo.block == (64, 1, 1) and geo.shared_bytes == 0
    assert geo.grid == (16 * 2 // 4, 1, 1)
    assert TC.buffers(p) == (
        BufferSpec("src", (65, 73), "bfloat16", "input"),
        BufferSpec("dst", (64, 32), "bfloat16", "output"),
    )
    assert TC.args(p, cfg) == (
        BufferArg("src", "const unsigned short"),
        BufferArg("dst", "unsigned short"),
        ScalarArg("i64", 65, "Ms"),
        ScalarArg("i64", 73, "Ns"),
        ScalarArg("i64", 64, "Md"),
        ScalarArg("i64", 32, "Nd"),
        ScalarArg("i64", 64, "oy"),
        ScalarArg("i64", -3, "ox"),
        ScalarArg("u16", 0x8000, "pad"),
        ScalarArg("i64", 2, "tiles_n"),
        ScalarArg("i64", 32, "n_tiles"),
    )
    # ceil division of partial tiles and tiles per block
    g = TC.geometry(
        problem(src=(65, 73), dst=(65, 33)), config(BM=8, BN=16, threads=64, vec_bytes=4, tiles_per_block=2)
    )
    assert g.grid == ((9 * 3 + 1) // 2, 1, 1)


# ---------------------------------------------------------------------------------------------
# work and distance


def test_work_of_a_pad_problem() -> None:
    p = problem("float32", src=(3, 5), dst=(4, 8))
    assert p.valid_source_elements() == 15
    assert TC.work(p).bytes_moved == (15 + 32) * 4
    assert TC.work(p).flops == 0
    seed = problem("bfloat16", src=(65, 73), dst=(64, 32), origin=[64, 64])
    assert TC.work(seed).bytes_moved == (9 + 64 * 32) * 2
    crop = problem("float16", src=(4099, 4097), dst=(4096, 4096), origin=[-3, 5], padding="nan")
    assert TC.work(crop).bytes_moved == ((4096 - 3) * 4092 + 4096 * 4096) * 2
    outside = problem("float32", src=(3, 5), dst=(4, 8), origin=[10, 10])
    assert TC.work(outside).bytes_moved == 32 * 4
    t = problem("float32", src=(3, 5), dst=(8, 4), transpose=True)
    assert TC.work(t).bytes_moved == (15 + 32) * 4


def test_distance() -> None:
    a = problem("float32", src=(1024, 1024), dst=(1024, 1024))
    assert TC.distance(a, a) == 0
    assert TC.distance(a, problem("float32", src=(1024, 1024), dst=(1024, 1024), padding="nan")) == 0
    assert TC.distance(a, problem("float16", src=(1024, 1024), dst=(1024, 1024))) is None
    assert TC.distance(a, problem("float32", src=(1024, 1024), dst=(1024, 1024), transpose=True)) is None
    b2 = problem("float32", src=(2048, 1024), dst=(2048, 1024))
    b4 = problem("float32", src=(4096, 1024), dst=(4096, 1024))
    b8 = problem("float32", src=(4096, 2048), dst=(4096, 2048))
    d2, d4, d8 = (TC.distance(a, b) for b in (b2, b4, b8))
    assert 0 < d2 < d4 < d8
    assert d2 == pytest.approx(2.0) and d4 == pytest.approx(4.0)
    assert TC.distance(b2, a) == d2  # symmetric
    small = problem("float32", src=(512, 1024), dst=(512, 1024))
    assert TC.distance(a, small) == pytest.approx(d2)


def test_distance_counts_how_aligned_the_rows_are() -> None:
    """Rows' alignment (up to a 32-byte sector) decides which templates apply and how whole their
    sectors are: a problem of the same alignment is nearer than one of closer extents but odd rows."""
    target = problem("bfloat16", src=(20000, 3000), dst=(3000, 20000), transpose=True)  # rows 6000 B, 40000 B
    assert row_alignment(target) == (16, 32)
    assert row_alignment(problem("float16", src=(7, 7919), dst=(7, 7919))) == (2, 2)
    same_class = problem("bfloat16", src=(12000, 5000), dst=(5000, 12000), transpose=True)
    odd = problem("bfloat16", src=(13001, 5003), dst=(5003, 13001), transpose=True)
    assert TC.distance(target, same_class) < TC.distance(target, odd)
    extents_only = 4 * abs(math.log2(3000 / 5000))  # 20000 / 12000 is 5000 / 3000: four such ratios
    assert TC.distance(target, same_class) == pytest.approx(extents_only)
    extents = sum(abs(math.log2(x / y)) for x, y in [(20000, 13001), (3000, 5003)] * 2)
    assert TC.distance(target, odd) == pytest.approx(extents + math.log2(16 / 2) + math.log2(32 / 2))


# ---------------------------------------------------------------------------------------------
# compilation under NVRTC (no GPU)


def _full(dtype: str, transpose: bool) -> TileCopyProblem:
    if transpose:
        return problem(dtype, src=(1024, 256), dst=(256, 1024), transpose=True)
    return problem(dtype, src=(256, 1024), dst=(256, 1024))


def _odd(dtype: str, transpose: bool) -> TileCopyProblem:
    if transpose:
        return problem(dtype, src=(65, 73), dst=(40, 24), origin=[-3, 5], transpose=True, padding="nan")
    return problem(dtype, src=(65, 73), dst=(64, 32), origin=[64, 64])


VECTOR = {"template": ["vector"]}


def _matrix() -> list[tuple[str, bool, str, int, str]]:
    """Transport vector: dtype x orientation x staging layout, each with two vector widths (rotating, so that every
    width meets every dtype and orientation) and the bounds modes rotating likewise."""
    cases = []
    for dtype in DTYPES:
        widths = [v for v in (2, 4, 8, 16) if v % element_type(dtype).itemsize == 0]
        for transpose in (False, True):
            layouts = STAGED if transpose else ("none", *STAGED)
            n = 0
            for layout in layouts:
                for _ in range(2):
                    cases.append((dtype, transpose, layout, widths[n % len(widths)], BOUNDS[n % 3]))
                    n += 1
    return cases


MATRIX = _matrix()


def _pick(dtype: str, transpose: bool, layout: str, vec_bytes: int, bounds: str) -> tuple[TileCopyProblem, Config]:
    """A seeded choice among the valid configs of that kind with little work per thread (so the
    compile is quick and nothing spills)."""
    p = _full(dtype, transpose) if bounds == "unchecked" else _odd(dtype, transpose)
    size = element_type(dtype).itemsize
    sub = TC.space.restrict({"staging": [layout], "vec_bytes": [vec_bytes], "bounds": [bounds], **VECTOR})
    candidates = [
        c
        for c in sub
        if c["threads"] <= 256
        and c["BM"] * c["BN"] * size // c["vec_bytes"] <= 4 * c["threads"]
        and not TC.violations(p, c)
    ]
    assert candidates, (dtype, transpose, layout, vec_bytes, bounds)
    return p, random.Random(f"{dtype}/{transpose}/{layout}/{vec_bytes}/{bounds}").choice(candidates)


def test_matrix_covers_every_kind() -> None:
    assert 40 <= len(MATRIX) <= 60
    for dtype, transpose in itertools.product(DTYPES, (False, True)):
        rows = [m for m in MATRIX if m[:2] == (dtype, transpose)]
        widths = {v for v in (2, 4, 8, 16) if v % element_type(dtype).itemsize == 0}
        assert {m[3] for m in rows} == widths
        assert {m[4] for m in rows} == set(BOUNDS)
        assert {m[2] for m in rows} == (set(STAGED) if transpose else {"none", *STAGED})


@pytest.fixture(scope="module")
def builder(tmp_path_factory: pytest.TempPathFactory):
    b = NvrtcBuilder("sm_90", cache_dir=tmp_path_factory.mktemp("nvrtc"), workers=4)
    yield b
    b.close()


@pytest.fixture(scope="module")
def compiled(builder: NvrtcBuilder):
    """Every matrix case and every (dtype, orientation) default, compiled in one parallel batch."""
    picks = [_pick(*m) for m in MATRIX]
    defaults = [(p, TC.default_config(p)) for p in (_odd(d, t) for d in DTYPES for t in (False, True))]
    sources = [TC.render(p, c) for p, c in picks + defaults]
    unique = list(dict.fromkeys(sources))  # identical sources are built once
    results = dict(zip(unique, builder.build(unique), strict=True))
    return [(p, c, results[s]) for (p, c), s in zip(picks + defaults, sources, strict=True)]


def _assert_built(result, p: TileCopyProblem, cfg: Config) -> None:
    assert result.status is Status.OK, result.log
    assert result.cubin.startswith(b"\x7fELF")
    assert result.registers > 0
    assert result.spill_bytes == 0, (cfg.label(), result.log)
    assert result.lowered_name.startswith("_Z") and "tile_copy" in result.lowered_name
    assert result.source.name_expression == "tile_copy<Cfg>"
    named = members(result.source)
    assert (named["T"], named["TRANSPOSE"]) == (element_type(p.element).ctype, str(p.transpose).lower())
    assert int(named["SHARED_BYTES"]) == TC.geometry(p, cfg).shared_bytes


@pytest.mark.parametrize(
    "index", range(len(MATRIX)), ids=[f"{d}-{'T' if t else 'N'}-{s}-v{v}-{b}" for d, t, s, v, b in MATRIX]
)
def test_variant_compiles(compiled, index: int) -> None:
    p, cfg, result = compiled[index]
    dtype, transpose, layout, vec_bytes, bounds = MATRIX[index]
    assert (cfg["staging"], cfg["vec_bytes"], cfg["bounds"], p.element, p.transpose) == (
        layout,
        vec_bytes,
        bounds,
        dtype,
        transpose,
    )
    assert TC.violations(p, cfg) == []
    _assert_built(result, p, cfg)


def test_defaults_compile(compiled) -> None:
    for p, cfg, result in compiled[len(MATRIX) :]:
        assert cfg == TC.default_config(p)
        _assert_built(result, p, cfg)


EXPECTED_PAD = {
    "float32": {
        "zero": 0,
        "neg_zero": 0x80000000,
        "nan": 0x7FC00000,
        "pos_inf": 0x7F800000,
        "neg_inf": 0xFF800000,
        "value": 0xC0500000,
    },
    "bfloat16": {"zero": 0, "neg_zero": 0x8000, "nan": 0x7FC0, "pos_inf": 0x7F80, "neg_inf": 0xFF80, "value": 0xC050},
    "float16": {"zero": 0, "neg_zero": 0x8000, "nan": 0x7E00, "pos_inf": 0x7C00, "neg_inf": 0xFC00, "value": 0xC280},
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("transpose", [False, True])
def test_every_padding_mode_renders_and_compiles(compiled, dtype: str, transpose: bool) -> None:
    """The padding is a runtime argument: every mode renders the default's source (compiled in the
    batch) and passes its bits as the pad scalar."""
    base = _odd(dtype, transpose)
    built = {r.source: r for _, _, r in compiled}
    pad_type = "u32" if element_type(dtype).itemsize == 4 else "u16"
    for mode in PADDING_MODES:
        extra = {"pad_value": -3.25} if mode == "value" else {}
        p = problem(
            dtype, src=base.src, dst=base.dst, origin=list(base.origin), transpose=transpose, padding=mode, **extra
        )
        cfg = TC.default_config(p)
        source = TC.render(p, cfg)
        assert source in built
        _assert_built(built[source], p, cfg)
        args = TC.args(p, cfg)
        pads = [a for a in args if isinstance(a, ScalarArg) and a.ctype in ("u16", "u32")]
        assert pads == [ScalarArg(pad_type, EXPECTED_PAD[dtype][mode], "pad")]
        assert pads[0].value == padding_bits(element_type(dtype), mode, -3.25) == p.pad_bits


def test_compile_error_is_a_result(tmp_path: Path) -> None:
    p = _odd("float32", False)
    good = TC.render(p, TC.default_config(p))
    broken = KernelSource(good.code + "\n__global__ void oops( { }\n", good.name_expression, good.include_dirs)
    b = NvrtcBuilder("sm_90", cache_dir=tmp_path, workers=1)
    try:
        result = b.build_one(broken)
        assert result.status is Status.COMPILE_ERROR
        assert result.log.strip() and "error" in result.log
        assert result.cubin == b""
        assert not list(tmp_path.rglob("*.cubin"))  # failures are not cached
        missing = b.build_one(KernelSource(good.code, "no_such_kernel<int>", good.include_dirs))
        assert missing.status is Status.COMPILE_ERROR and missing.log.strip()
    finally:
        b.close()


# ---------------------------------------------------------------------------------------------
# the build cache


def _small_source() -> KernelSource:
    p = problem("float16", src=(65, 73), dst=(64, 32))
    return TC.render(p, config(BM=1, BN=64, threads=64, vec_bytes=2))


def test_cache_hit_returns_identical_cubin(tmp_path: Path) -> None:
    source = _small_source()
    first = NvrtcBuilder("sm_90", cache_dir=tmp_path, workers=1)
    try:
        assert first.load(source) is None  # the cache lacks it: load never compiles
        a = first.build_one(source)
        b = first.build_one(source)
        loaded = first.load(source)
    finally:
        first.close()
    second = NvrtcBuilder("sm_90", cache_dir=tmp_path, workers=1)
    try:
        c = second.build([source])[0]
    finally:
        second.close()
    assert a.status is Status.OK and not a.cache_hit
    for hit in (b, c, loaded):
        assert hit is not None and hit.cache_hit and hit.status is Status.OK
        assert hit.cubin == a.cubin and hit.binary_hash == a.binary_hash
        assert (hit.lowered_name, hit.registers, hit.spill_bytes, hit.log) == (
            a.lowered_name,
            a.registers,
            a.spill_bytes,
            a.log,
        )
    # another arch is another key
    other = NvrtcBuilder("sm_80", cache_dir=tmp_path, workers=1)
    other.close()
    assert other.cache_key(source) != first.cache_key(source)


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "json", "json_list", "json_fields"])
def test_damaged_cache_entry_is_rebuilt(tmp_path: Path, damage: str) -> None:
    source = _small_source()
    b = NvrtcBuilder("sm_90", cache_dir=tmp_path, workers=1)
    try:
        original = b.build_one(source)
        (cubin,) = tmp_path.rglob("*.cubin")
        (meta,) = tmp_path.rglob("*.json")
        data = cubin.read_bytes()
        if damage == "flip":
            cubin.write_bytes(data[:100] + bytes([data[100] ^ 0xFF]) + data[101:])
        elif damage == "truncate":
            cubin.write_bytes(data[: len(data) // 2])
        elif damage == "empty":
            cubin.write_bytes(b"")
        elif damage == "json":
            meta.write_text("{not json")
        elif damage == "json_list":
            meta.write_text("[1, 2]")
        else:  # the checksum matches but the other fields are gone
            meta.write_text(json.dumps({"sha256": hashlib.sha256(data).hexdigest()}))
        assert b.load(source) is None  # damaged: not loaded
        again = b.build_one(source)
        assert again.status is Status.OK
        assert not again.cache_hit
        assert again.cubin == original.cubin
        assert cubin.read_bytes() == original.cubin  # the entry is repaired
        assert b.build_one(source).cache_hit
    finally:
        b.close()


def test_concurrent_builds_of_one_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """build() is documented thread-safe, and a batch may hold the same source twice (the same
    config for two problems renders the same code). Both builds finish and store; here both
    threads reach the rename of the cache file before either completes it, a legal interleaving."""
    import tunebox.build.nvrtc as nvrtc

    real_replace = os.replace
    barrier = threading.Barrier(2)

    def replace(src, dst):
        if str(dst).endswith(".cubin"):
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.wait(timeout=3)
        return real_replace(src, dst)

    monkeypatch.setattr(nvrtc.os, "replace", replace)
    source = _small_source()
    b = NvrtcBuilder("sm_90", cache_dir=tmp_path, workers=2)
    try:
        results = b.build([source, source])
    finally:
        b.close()
    assert [r.status for r in results] == [Status.OK, Status.OK]
    assert results[0].cubin == results[1].cubin


# ---------------------------------------------------------------------------------------------
# spills in configurations the validity rules accept


def test_largest_register_tile_does_not_spill(builder: NvrtcBuilder) -> None:
    """The largest register tile the rules accept at 1024 threads (where __launch_bounds__ leaves
    64 registers a thread) compiles without spilling; the next size up is rejected."""
    p = problem("float32", src=(256, 1024), dst=(256, 1024))
    cfg = config(BM=16, BN=1024, threads=1024, vec_bytes=16)
    assert TC.violations(p, cfg) == []
    assert TC.violations(p, config(BM=32, BN=1024, threads=1024, vec_bytes=16))
    result = builder.build_one(TC.render(p, cfg))
    assert result.status is Status.OK
    assert result.spill_bytes == 0, f"{cfg.label()}: {result.spill_bytes} bytes spilled"


def test_staged_tile_with_little_work_does_not_spill(builder: NvrtcBuilder) -> None:
    """A staged tile whose aligned-window slots would unroll past MAX_SLOTS per thread is rejected
    (it spilled: 255 registers); its accepted neighbour compiles without spilling, even with
    several tiles per block."""
    p = problem("float16", src=(1024, 256), dst=(256, 1024), transpose=True)
    rejected = config(BM=64, BN=32, threads=64, vec_bytes=2, staging="padded", bounds="split", tiles_per_block=4)
    assert any("slots per thread" in v for v in TC.violations(p, rejected))
    cfg = config(BM=64, BN=32, threads=128, vec_bytes=4, staging="padded", bounds="split", tiles_per_block=4)
    assert TC.violations(p, cfg) == []
    result = builder.build_one(TC.render(p, cfg))
    assert result.status is Status.OK
    assert result.spill_bytes == 0, f"{cfg.label()}: {result.registers} registers, {result.spill_bytes} bytes spilled"


def test_rule_grid_limit() -> None:
    huge = problem("float16", src=(2**20, 2**19), dst=(2**20, 2**19))  # 2^39 elements
    assert_rule(
        huge,
        config(BM=8, BN=1024, threads=256, vec_bytes=16),
        config(BM=1, BN=64, threads=64, vec_bytes=2),
        "grid limit",
    )


# ---------------------------------------------------------------------------------------------
# templates cp_async and tma: validity rules, layout, arguments, compilation

ALIGNED = problem("float32", src=(200, 256), dst=(190, 136), origin=[-5, 8])  # 16-byte rows and origin column
ALIGNED_T = problem("float32", src=(260, 96), dst=(88, 264), origin=[-3, -16], transpose=True)


def cp_async(**values) -> Config:
    base = {
        "template": "cp_async",
        "BM": 8,
        "BN": 64,
        "threads": 128,
        "vec_bytes": 16,
        "bounds": "checked",
        "staging": "plain",
        "tiles_per_block": 4,
        "stages": 2,
    }
    return TC.config({**base, **values})


def tma(**values) -> Config:
    base = {
        "template": "tma",
        "BM": 8,
        "BN": 64,
        "threads": 128,
        "vec_bytes": 16,
        "tiles_per_block": 4,
        "swizzle": "128B",
        "stages": 2,
    }
    return TC.config({**base, **values})


def test_templates_and_their_parameters() -> None:
    """The old transports, in order, then paired, shifted, windowed and narrow, each with only the parameters its
    kernel reads: the vector template moves one tile at a time (no stages), swizzle is the layout of TMA
    boxes, tma clips and fills in hardware with its own layout (no bounds, no staging), paired always
    stages, shifted neither stages nor takes a bounds mode (each tile's path is chosen at run time), and
    windowed stages with a pitch of its own, in a ring of stages, and no bounds mode."""
    tile = ["BM", "BN", "threads", "vec_bytes", "tiles_per_block"]
    assert [(name, [p.name for p in space.params]) for name, space in TC.space.templates] == [
        ("vector", [*tile, "bounds", "staging"]),
        ("cp_async", [*tile, "bounds", "staging", "stages"]),
        ("tma", [*tile, "swizzle", "stages"]),
        ("paired", [*tile, "bounds", "staging"]),
        ("shifted", tile),
        ("windowed", [*tile, "staging", "stages"]),
        ("narrow", ["threads", "vec_bytes", "vectors", "chunks_per_block"]),
    ]
    assert TC.space.template("windowed")["staging"].choices == ("plain", "padded")
    assert TC.space.template("paired")["staging"].choices == STAGED
    for name, typed in (("vector", VectorConfig), ("cp_async", CpAsyncConfig), ("tma", TmaConfig)):
        template, cfg = TC.typed({"vector": config, "cp_async": cp_async, "tma": tma}[name]())
        assert template.name == name and type(cfg) is typed
    for build, extra in (
        (config, {"stages": 2}),
        (config, {"swizzle": "32B"}),
        (cp_async, {"swizzle": "64B"}),
        (tma, {"staging": "plain"}),
        (tma, {"bounds": "split"}),
    ):
        with pytest.raises(InvalidConfig):
            build(**extra)
    with pytest.raises(InvalidConfig, match="template"):
        TC.config({k: v for k, v in config().items if k != "template"})


def test_rule_stages_within_tiles_per_block() -> None:
    assert_rule(
        ALIGNED, cp_async(stages=4, tiles_per_block=4), cp_async(stages=4, tiles_per_block=2), "exceeds tiles_per_block"
    )
    assert_rule(ALIGNED, tma(stages=1, tiles_per_block=1), tma(stages=2, tiles_per_block=1), "exceeds tiles_per_block")


def test_rule_cp_async_stages_through_shared_memory() -> None:
    assert_rule(ALIGNED, cp_async(), cp_async(staging="none"), "staging must be a layout")


def test_rule_cp_async_vector_sizes() -> None:
    bf16 = problem("bfloat16", src=(65, 73), dst=(64, 32))
    assert_rule(bf16, cp_async(vec_bytes=4), cp_async(vec_bytes=2), "cp.async moves 4, 8 or 16 bytes")
    for layout in ("padded", "swizzled"):
        assert_rule(
            bf16,
            cp_async(staging=layout, vec_bytes=4),
            cp_async(staging=layout, vec_bytes=8),
            "keeps only 4-byte words together",
        )
    assert TC.violations(bf16, cp_async(staging="plain", vec_bytes=8)) == []


def test_rule_cp_async_shared_memory() -> None:
    """One staged source block, rounded up to 16 bytes, per stage."""
    t = problem("float32", src=(65, 73), dst=(32, 64), transpose=True)
    good = cp_async(BM=64, BN=256, threads=1024, stages=3)
    bad = cp_async(BM=64, BN=256, threads=1024, stages=4)
    assert TC.geometry(t, good).shared_bytes == 3 * 256 * 64 * 4 <= MAX_SHARED_BYTES
    assert TC.geometry(t, bad).shared_bytes == 4 * 256 * 64 * 4 > MAX_SHARED_BYTES
    assert_rule(t, good, bad, "shared memory")
    row = cp_async(BM=1, BN=64, threads=64, vec_bytes=4, staging="padded", stages=2)
    assert TC.geometry(ODD, row).shared_bytes == 2 * 272  # one row of 65 float32 (260 bytes), rounded up to 16
    assert TC.violations(ODD, row) == []


def test_rule_tma_whole_boxes() -> None:
    # 128-byte swizzle: float32 boxes of 32 columns; float16 of 64
    assert_rule(ALIGNED, tma(BN=32, threads=64), tma(BM=16, BN=16, threads=64), "whole boxes")
    h = problem("float16", src=(200, 256), dst=(190, 136), origin=[-5, 8])
    assert_rule(h, tma(BN=64, threads=64), tma(BM=16, BN=32, threads=64), "whole boxes")
    assert_rule(
        ALIGNED_T,
        tma(BM=32, BN=32, threads=64, swizzle="64B"),
        tma(BM=8, BN=32, threads=64, swizzle="64B"),
        "whole boxes",
    )


def test_rule_tma_origin_column_is_a_16_byte_multiple() -> None:
    good = problem("float32", src=(200, 256), dst=(190, 136), origin=[-5, -12])
    bad = problem("float32", src=(200, 256), dst=(190, 136), origin=[-5, -10])
    assert TC.violations(good, tma()) == []
    assert any("origin column -10" in b for b in TC.violations(bad, tma()))
    assert TC.violations(bad, cp_async()) == []


@pytest.mark.parametrize(("buffer", "shapes"), [("src", ((200, 258), (190, 136))), ("dst", ((200, 256), (190, 130)))])
def test_rule_tma_rows_are_16_byte_multiples(buffer: str, shapes) -> None:
    src, dst = shapes
    bad = problem("float32", src=src, dst=dst, origin=[-5, 8])
    assert TC.violations(ALIGNED, tma()) == []
    broken = TC.violations(bad, tma())
    assert len(broken) == 1 and broken[0].startswith(f"tensor map of {buffer}: strides[0]"), broken
    assert TC.violations(bad, cp_async()) == []


def test_rule_tma_box_limits() -> None:
    # transposed, the source block has BN rows: at most 256 in a box
    t = problem("float32", src=(1024, 256), dst=(256, 1024), transpose=True)
    good = tma(BM=32, BN=256, threads=1024, vec_bytes=16, swizzle="none", tiles_per_block=2)
    bad = tma(BM=32, BN=512, threads=1024, vec_bytes=16, swizzle="none", tiles_per_block=2)
    assert_rule(t, good, bad, "tensor map of src: box")
    # without swizzle the inner box is the whole block row, which must be 16 bytes wide
    assert_rule(
        t,
        tma(BM=4, BN=64, threads=64, vec_bytes=16, swizzle="none"),
        tma(BM=2, BN=64, threads=64, vec_bytes=8, swizzle="none"),
        "multiple of 16",
    )


def test_rule_tma_coordinates_are_32_bit() -> None:
    edge = 2**31 - 1024  # a 16-byte multiple of float32 columns
    near = problem("float32", src=(8, 8), dst=(8, 1024), origin=[0, edge])
    far = problem("float32", src=(8, 8), dst=(8, 2048), origin=[0, edge])
    cfg = tma(BM=8, BN=256, threads=256, swizzle="none", tiles_per_block=4)
    assert TC.violations(near, cfg) == []
    assert any("32-bit" in b for b in TC.violations(far, cfg))
    assert TC.violations(far, cp_async(BM=8, BN=256, threads=256)) == []


def test_rule_tma_shared_memory() -> None:
    """Alignment to the swizzle period, the stages' input boxes (each padded to the period), two
    output buffers when the tile is rebuilt in registers, and an mbarrier per stage."""
    nan = problem("float32", src=(200, 256), dst=(190, 136), origin=[-5, 8], padding="nan")
    # BM=2 rows of 32 float32 = 256 bytes a box, padded to 1024; 2 boxes in a 64-column block
    cfg = tma(BM=2, BN=64, threads=64, vec_bytes=8)
    assert TC.geometry(ALIGNED, cfg).shared_bytes == 1024 + 2 * 2 * 1024 + 2 * 8
    assert TC.geometry(nan, cfg).shared_bytes == 1024 + 2 * 2 * 1024 + 2 * 2 * 1024 + 2 * 8
    assert (
        TC.geometry(nan, tma(BM=2, BN=64, threads=64, vec_bytes=8, tiles_per_block=1, stages=1)).shared_bytes
        == 1024 + 2 * 1024 + 2 * 1024 + 8
    )
    big = problem("float32", src=(1024, 1024), dst=(1024, 1024), padding="nan")
    good = tma(BM=64, BN=256, threads=1024, vec_bytes=16, stages=1, tiles_per_block=1)  # 64 KiB in, 64 KiB out
    bad = tma(BM=64, BN=256, threads=1024, vec_bytes=16, stages=2, tiles_per_block=2)  # twice both
    assert TC.geometry(big, good).shared_bytes == 1024 + 65536 + 65536 + 8
    assert_rule(big, good, bad, "shared memory")


def test_tma_layout_and_arguments() -> None:
    direct = TC.args(ALIGNED, tma())
    src_map, dst_map, *scalars = direct
    assert isinstance(src_map, TensorMapArg) and isinstance(dst_map, TensorMapArg)
    assert src_map == TensorMapArg(
        "src", TensorMapRequest("float32", (200, 256), (1024, 4), (8, 32), 0, "128B"), name="src_map"
    )
    assert dst_map == TensorMapArg(
        "dst", TensorMapRequest("float32", (190, 136), (544, 4), (8, 32), 0, "128B"), name="dst_map"
    )
    tiles_n = math.ceil(136 / 64)
    assert scalars == [
        ScalarArg("i64", 200, "Ms"),
        ScalarArg("i64", 256, "Ns"),
        ScalarArg("i64", -5, "oy"),
        ScalarArg("i64", 8, "ox"),
        ScalarArg("u32", 0, "pad"),
        ScalarArg("i64", tiles_n, "tiles_n"),
        ScalarArg("i64", tiles_n * math.ceil(190 / 8), "n_tiles"),
    ]
    # transposed: source boxes of BN rows; without swizzle as wide as the block (up to 256 elements)
    t_src, t_dst, *_ = TC.args(ALIGNED_T, tma(BM=32, BN=16, threads=64, swizzle="none"))
    assert (t_src.request.box, t_dst.request.box, t_src.request.swizzle) == ((16, 32), (32, 16), "none")
    # the direct copy (not transposed, zero padding) and the one rebuilt in registers differ in source
    nan = problem("float32", src=(200, 256), dst=(190, 136), origin=[-5, 8], padding="nan")
    layout = ("SPAN", "BOX", "OUT_BOX", "DIRECT", "TRANSPOSE")
    assert TC.render(ALIGNED, tma()).name_expression == "tile_copy_tma<Cfg>"
    assert [members(TC.render(ALIGNED, tma()))[k] for k in layout] == ["128", "32", "32", "true", "false"]
    assert [members(TC.render(nan, tma()))[k] for k in layout] == ["128", "32", "32", "false", "false"]
    assert members(TC.render(nan, tma())) == {
        "T": "unsigned int",
        "BM": "8",
        "BN": "64",
        "THREADS": "128",
        "VEC": "4",
        "TPB": "4",
        "STAGES": "2",
        "SPAN": "128",
        "BOX": "32",
        "OUT_BOX": "32",
        "DIRECT": "false",
        "TRANSPOSE": "false",
        "SHARED_BYTES": str(TC.geometry(nan, tma()).shared_bytes),
    }
    staged = TC.render(ALIGNED, cp_async())
    assert staged.name_expression == "tile_copy_cp_async<Cfg>"
    assert members(staged) == {
        "T": "unsigned int",
        "BM": "8",
        "BN": "64",
        "THREADS": "128",
        "VEC": "4",
        "BOUNDS": "0",
        "STAGING": "1",
        "TPB": "4",
        "STAGES": "2",
        "TRANSPOSE": "false",
        "SHARED_BYTES": str(2 * 8 * 64 * 4),
    }
    assert TC.args(ALIGNED, cp_async()) == TC.args(ALIGNED, config(BN=64, threads=128))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_each_kernel_takes_its_arguments_as_one_named_struct(dtype: str) -> None:
    """``struct Args_t`` holds each template's arguments in ``args``' order, by name, the buffers and
    the padding of the element's bits type; ``Cfg::Args`` aliases it and each kernel takes it as its
    one parameter."""
    e = element_type(dtype).ctype
    p = problem(dtype, src=(200, 256), dst=(190, 136), origin=[-5, 8])
    tail = [f"{e} pad", "long long tiles_n", "long long n_tiles"]
    staged = [f"const {e}* src", f"{e}* dst", *(f"long long {n}" for n in ("Ms", "Ns", "Md", "Nd", "oy", "ox")), *tail]
    tma_args = ["tb::TensorMap src_map", "tb::TensorMap dst_map", *(f"long long {n}" for n in ("Ms", "Ns", "oy", "ox"))]
    for cfg, kernel, want in (
        (config(), "tile_copy", staged),
        (cp_async(threads=64), "tile_copy_cp_async", staged),
        (tma(threads=64), "tile_copy_tma", [*tma_args, *tail]),
    ):
        assert TC.violations(p, cfg) == [], cfg.label()
        rendered = TC.render(p, cfg)
        assert arg_members(rendered) == want, cfg.label()
        assert [a.name for a in TC.args(p, cfg)] == [m.rsplit(" ", 1)[1] for m in want]
        assert "using Args = Args_t;" in rendered.code[rendered.code.rindex("struct Cfg {") :]
        assert f"{kernel}(const __grid_constant__ typename Cfg::Args a)" in rendered.code


def _transport_matrix() -> list[tuple[str, str, bool, str, str]]:
    """(template, dtype, transposed, layout, padding): cp_async with every staging layout, tma with
    every swizzle mode and, not transposed, both the direct copy (zero) and the selected padding
    (nan); float32 and bfloat16 (4- and 2-byte elements)."""
    cases = []
    for dtype, transpose in itertools.product(("float32", "bfloat16"), (False, True)):
        cases += [("cp_async", dtype, transpose, layout, "zero") for layout in STAGED]
        paddings = ("nan",) if transpose else ("zero", "nan")
        cases += [("tma", dtype, transpose, swizzle, padding) for swizzle in SWIZZLE_BYTES for padding in paddings]
    return cases


TRANSPORT_MATRIX = _transport_matrix()


def _transport_problem(dtype: str, transpose: bool, padding: str) -> TileCopyProblem:
    if transpose:
        return problem(dtype, src=(260, 96), dst=(88, 264), origin=[-3, -16], transpose=True, padding=padding)
    return problem(dtype, src=(200, 256), dst=(190, 136), origin=[-5, 16], padding=padding)


def _pick_transport(
    transport: str, dtype: str, transpose: bool, layout: str, padding: str
) -> tuple[TileCopyProblem, Config]:
    """A seeded choice among the valid configs of that kind with little work per thread, stages
    rotating through 1..4 with more tiles per block than stages."""
    p = _transport_problem(dtype, transpose, padding)
    n = TRANSPORT_MATRIX.index((transport, dtype, transpose, layout, padding))
    stages = 1 + n % 4
    key = "swizzle" if transport == "tma" else "staging"
    sub = TC.space.restrict(
        {
            "template": [transport],
            key: [layout],
            "stages": [stages],
            "BM": [4, 8, 16, 32, 64],
            "BN": [16, 32, 64, 128],
            "threads": [64, 128],
            "tiles_per_block": [2 ** stages.bit_length()],
        }
    )
    size = element_type(dtype).itemsize
    candidates = [
        c for c in sub if c["BM"] * c["BN"] * size // c["vec_bytes"] <= 4 * c["threads"] and not TC.violations(p, c)
    ]
    assert candidates, (transport, dtype, transpose, layout, padding)
    return p, random.Random(f"{transport}/{dtype}/{transpose}/{layout}/{padding}").choice(candidates)


@pytest.fixture(scope="module")
def transports_compiled(builder: NvrtcBuilder):
    picks = [_pick_transport(*m) for m in TRANSPORT_MATRIX]
    results = builder.build([TC.render(p, c) for p, c in picks])
    return [(p, c, r) for (p, c), r in zip(picks, results, strict=True)]


@pytest.mark.parametrize(
    "index",
    range(len(TRANSPORT_MATRIX)),
    ids=[f"{t}-{d}-{'T' if tr else 'N'}-{lay}-{pad}" for t, d, tr, lay, pad in TRANSPORT_MATRIX],
)
def test_transport_variant_compiles(transports_compiled, index: int) -> None:
    p, cfg, result = transports_compiled[index]
    transport = TRANSPORT_MATRIX[index][0]
    assert TC.violations(p, cfg) == []
    assert cfg["tiles_per_block"] > cfg["stages"] or cfg["stages"] == 1
    assert result.status is Status.OK, result.log
    assert result.registers > 0
    assert result.spill_bytes == 0, (cfg.label(), result.log)
    assert result.source.name_expression == f"tile_copy_{transport}<Cfg>"
    assert members(result.source)["T"] == element_type(p.element).ctype
    if transport == "tma":
        # the bulk copies take the maps' addresses in the __grid_constant__ parameter: a copy of a map
        # into a local (passed by value) would need a stack frame (304 bytes, seen with NVRTC 13)
        assert "0 bytes stack frame" in result.log, result.log


def test_transport_matrix_covers_every_kind() -> None:
    kinds = {(t, d, tr, lay) for t, d, tr, lay, _ in TRANSPORT_MATRIX}
    both = list(itertools.product(("float32", "bfloat16"), (False, True)))
    assert kinds == {("cp_async", d, tr, s) for d, tr in both for s in STAGED} | {
        ("tma", d, tr, s) for d, tr in both for s in SWIZZLE_BYTES
    }
    assert {1 + n % 4 for n in range(len(TRANSPORT_MATRIX))} == {1, 2, 3, 4}


def test_tma_kernel_refuses_older_devices() -> None:
    ((_, result),) = family_checks.compile_cases(TC, [(ALIGNED, tma())], arch="sm_80", workers=1)
    assert result.status is Status.COMPILE_ERROR and "needs sm_90" in result.log


def test_kernels_assert_their_layout_fits_the_shared_memory(builder: NvrtcBuilder) -> None:
    """Each kernel checks at compile time that the shared-memory layout it computes fits in the
    SHARED_BYTES that the Python side computes and launches with: one byte less does not compile."""
    t = problem("float32", src=(65, 73), dst=(32, 64), transpose=True)
    nan = problem("float32", src=(200, 256), dst=(190, 136), origin=[-5, 8], padding="nan")
    cases = [
        (t, config(BM=32, BN=32, staging="padded", vec_bytes=4)),
        (t, cp_async(BM=32, BN=32, vec_bytes=4)),
        (ALIGNED, tma()),
        (nan, tma(swizzle="none")),
    ]
    sources = []
    for p, cfg in cases:
        assert TC.violations(p, cfg) == []
        good = TC.render(p, cfg)
        line = f"static constexpr int SHARED_BYTES = {TC.geometry(p, cfg).shared_bytes};"
        assert line in good.code
        short = line.replace(" = ", " = -1 + ")
        sources += [good, dataclasses.replace(good, code=good.code.replace(line, short))]
    results = builder.build(sources)
    for (_, cfg), good, short in zip(cases, results[::2], results[1::2], strict=True):
        assert good.status is Status.OK, (cfg.label(), good.log)
        assert short.status is Status.COMPILE_ERROR, cfg.label()
        assert "fits in the dynamic shared memory of the launch" in short.log, short.log
