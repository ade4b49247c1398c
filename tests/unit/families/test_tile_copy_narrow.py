"""tile_copy without a GPU, issue 16 item 6: the ``narrow`` template (destination rows of a few
elements moved as one flat destination). Its rules; its kernel's arithmetic emulated on numpy (every
destination element written once with the reference's bits, every whole vector aligned, the unchecked
chunks reading only inside src) over transposes and copies, crops, pads and negative origins; NVRTC
compilation (sm_90) for every element type, both directions and every vector width. The compiled kernel
is checked bit for bit on the GPU (tests/gpu/test_tile_copy_gpu.py)."""

from __future__ import annotations

import itertools
import math
import random
from functools import partial

import family_checks
import numpy as np
import pytest

from tunebox.families.tile_copy import FAMILY as TC
from tunebox.families.tile_copy import TileCopyProblem
from tunebox.families.tile_copy.narrow import NARROW_ROWS
from tunebox.kernels_dir import kernel_source
from tunebox.params import Config
from tunebox.records import Status

assert_rule = partial(family_checks.assert_rule, TC)
DTYPES = ("float32", "bfloat16", "float16")
# narrow transposes (the dst rows as wide as src has rows), one row of dst wider than a vector, copies
# and crops of narrow rows at odd origins, pads reading outside src, a destination smaller than a chunk
PROBLEMS = [
    {"src": [3, 1001], "dst": [1001, 3], "transpose": True},
    {"src": [4, 517], "dst": [517, 4], "transpose": True},
    {"src": [13, 300], "dst": [300, 13], "transpose": True},
    {"src": [7, 250], "dst": [260, 9], "origin": [-1, -5], "transpose": True},
    {"src": [801, 7], "dst": [800, 5], "origin": [1, 1]},
    {"src": [300, 5], "dst": [310, 8], "origin": [-4, -2]},
    {"src": [2, 3], "dst": [3, 2], "transpose": True},
]


def problem(dtype: str, shape: dict, padding: str = "nan") -> TileCopyProblem:
    return TC.parse_problem({"dtype": dtype, **shape, "padding": padding})


def narrow(**values) -> Config:
    base = {"template": "narrow", "threads": 64, "vec_bytes": 16, "vectors": 2, "chunks_per_block": 1}
    return TC.config({**base, **values})


def configs_for(p: TileCopyProblem) -> list[Config]:
    """A seeded spread of valid narrow variants: every vector width, one and several vectors a thread,
    one and several chunks a block."""
    space = TC.space.restrict({"template": ["narrow"], "threads": [64, 128]})
    configs = [c for c in space if not TC.violations(p, c)]
    random.Random(p.key()).shuffle(configs)
    return list({(c["vec_bytes"], c["vectors"] > 1, c["chunks_per_block"] > 1): c for c in configs}.values())


# ---------------------------------------------------------------------------------------------
# rules


def test_rule_narrow_rows() -> None:
    fits = problem("float32", {"src": [NARROW_ROWS, 100], "dst": [100, NARROW_ROWS], "transpose": True})
    wide = problem("float32", {"src": [NARROW_ROWS + 1, 100], "dst": [100, NARROW_ROWS + 1], "transpose": True})
    assert TC.violations(fits, narrow()) == []
    with pytest.raises(Exception, match=f"rows of at most {NARROW_ROWS} elements, not {NARROW_ROWS + 1}"):
        TC.check(wide, narrow())


def test_rule_whole_elements() -> None:
    p = problem("float32", PROBLEMS[0])
    assert_rule(p, narrow(vec_bytes=4), narrow(vec_bytes=2), "not a multiple of the 4-byte element")


def test_takes_the_kernel_view() -> None:
    """A copy of whole narrow rows is one flat row (a tile template's, unless that row is narrow too); a
    transpose with a unit dimension is a copy."""
    flat = problem("float32", {"src": [1000, 3], "dst": [1000, 3]})
    assert TC.violations(flat, narrow()) and "not 3000" in TC.violations(flat, narrow())[0]
    column = problem("float32", {"src": [1, 20], "dst": [20, 1], "transpose": True})
    assert TC.violations(column, narrow()) == [] and TC.args(column, narrow())[5].value == 20  # one row: Nd


def test_renders_its_kernel() -> None:
    p = problem("bfloat16", PROBLEMS[0])
    cfg = narrow(threads=128, vec_bytes=8, vectors=4, chunks_per_block=2)
    source = TC.render(p, cfg)
    assert source.name_expression == "tile_copy_narrow<Cfg>"
    assert source.code.startswith(kernel_source("tile_copy/tile_copy_narrow.cu"))
    for member in ("THREADS = 128;", "VEC = 4;", "ITEMS = 4;", "TPB = 2;"):
        assert f"static constexpr int {member}" in source.code
    # 3003 elements in chunks of 128 x 4 vectors of 4: 2 chunks, one block
    assert TC.args(p, cfg)[-1].value == 2 and TC.geometry(p, cfg).grid == (1, 1, 1)
    assert TC.geometry(p, cfg).block == (128, 1, 1) and TC.geometry(p, cfg).shared_bytes == 0


# ---------------------------------------------------------------------------------------------
# the kernel's arithmetic, emulated


def emulate(p: TileCopyProblem, cfg: Config, src: np.ndarray) -> tuple[np.ndarray, int]:
    """What tile_copy_narrow writes, as its threads do (tile_copy_narrow.cu mirrored): for each chunk,
    each thread's vectors, each element read from src (asserted inside src on the unchecked path) and
    the vector stored whole (asserted aligned and inside dst) or element by element at dst's end; no
    element written twice. Unwritten elements stay at a sentinel. Also returns the unchecked chunks."""
    view = p.kernel_view
    (ms, ns), (md, nd), (oy, ox) = view.src, view.dst, view.origin
    vec = cfg["vec_bytes"] // view.itemsize
    threads, items = cfg["threads"], cfg["vectors"]
    chunk = threads * items * vec
    total = md * nd
    flat = src.reshape(-1)
    dst = np.full(total, 0xDEAD, dtype=flat.dtype)
    written = np.zeros(total, dtype=bool)
    n_chunks = TC.args(p, cfg)[-1].value
    assert n_chunks == math.ceil(total / chunk)
    assert TC.geometry(p, cfg).grid[0] == math.ceil(n_chunks / cfg["chunks_per_block"])
    unchecked = 0
    for c in range(n_chunks):
        start = c * chunk
        i_first, i_last = start // nd, (start + chunk - 1) // nd
        rows = i_last - i_first + 1
        if view.transpose:
            inside = oy >= 0 and ox + i_first >= 0 and oy + nd <= ms and ox + i_first + rows <= ns
        else:
            inside = oy + i_first >= 0 and ox >= 0 and oy + i_first + rows <= ms and ox + nd <= ns
        check = not (start + chunk <= total and inside)
        unchecked += not check
        row0, col0 = start // nd, start % nd
        for t, k in itertools.product(range(threads), range(items)):
            offset = col0 + (k * threads + t) * vec
            i, j = row0 + offset // nd, offset % nd
            values = []
            for _ in range(vec):
                r, col = (oy + j, ox + i) if view.transpose else (oy + i, ox + j)
                if check:
                    values.append(flat[r * ns + col] if 0 <= r < ms and 0 <= col < ns else p.pad_bits)
                else:
                    assert 0 <= r < ms and 0 <= col < ns, (c, t, k)
                    values.append(flat[r * ns + col])
                j += 1
                if j == nd:
                    j, i = 0, i + 1
            f = start + (k * threads + t) * vec
            assert f % vec == 0
            for e in range(vec):
                if f + e < total:
                    assert check or f + vec <= total
                    assert not written[f + e], (c, t, k, e)
                    written[f + e] = True
                    dst[f + e] = values[e]
    assert written.all()
    return dst.reshape(p.dst), unchecked


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape", PROBLEMS, ids=lambda s: f"{s['src']}->{s['dst']}@{s.get('origin', [0, 0])}{'T' * s.get('transpose', 0)}"
)
def test_every_vector_writes_the_reference(dtype: str, shape: dict) -> None:
    p = problem(dtype, shape)
    src = TC.make_inputs(p, np.random.default_rng(0))["src"]
    want = TC.reference(p, {"src": src})["dst"]
    configs = configs_for(p)
    widths = {4, 8, 16} if dtype == "float32" else {2, 4, 8, 16}
    assert {c["vec_bytes"] for c in configs} == widths
    for cfg in configs:
        got, _ = emulate(p, cfg, src)
        assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), cfg.label()


def test_the_unchecked_path_is_emulated() -> None:
    """A plain narrow transpose moves its whole chunks unchecked, its last (cut at dst's end) checked."""
    p = problem("float32", {"src": [3, 4000], "dst": [4000, 3], "transpose": True})
    src = TC.make_inputs(p, np.random.default_rng(1))["src"]
    cfg = narrow(threads=64, vec_bytes=16, vectors=2)  # chunks of 512 elements: 12000 = 23 x 512 + 224
    got, unchecked = emulate(p, cfg, src)
    assert np.array_equal(got.view(np.uint8), TC.reference(p, {"src": src})["dst"].view(np.uint8))
    assert unchecked == 23


# ---------------------------------------------------------------------------------------------
# compilation


def test_every_type_direction_and_vector_width_compiles() -> None:
    cases = []
    for dtype, shape in itertools.product(DTYPES, (PROBLEMS[0], PROBLEMS[4])):
        p = problem(dtype, shape)
        for vec_bytes in (2, 4, 8, 16) if dtype != "float32" else (4, 8, 16):
            cases.append((p, narrow(vec_bytes=vec_bytes, vectors=8 if vec_bytes == 16 else 1, chunks_per_block=4)))
    for (p, cfg), result in family_checks.compile_cases(TC, cases, workers=4):
        assert TC.violations(p, cfg) == []
        assert result.status is Status.OK, result.log
        assert result.spill_bytes == 0 and "tile_copy_narrow" in result.lowered_name, cfg.label()
