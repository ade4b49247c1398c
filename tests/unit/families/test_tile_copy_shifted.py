"""tile_copy without a GPU, issue 16 item 6: the ``shifted`` template (copies whose destination rows move
in aligned vectors, the source funnel-shifted into place). Its rules; its kernel's slot arithmetic
emulated on numpy (every destination element written once, with the reference's bits; every vector the
INTERIOR path loads inside src) over crops, pads, negative origins and flat views; the funnel's word
and byte steps on every shift; NVRTC compilation (sm_90) for every element width and vector width.
The compiled kernel is checked bit for bit on the GPU (tests/gpu/test_tile_copy_gpu.py)."""

from __future__ import annotations

import itertools
import math
import random
from functools import partial

import family_checks
import numpy as np
import pytest

from tunebox.build.nvrtc import NvrtcBuilder
from tunebox.families.tile_copy import FAMILY as TC
from tunebox.families.tile_copy import TileCopyProblem
from tunebox.kernels_dir import kernel_source
from tunebox.params import Config
from tunebox.records import Status

assert_rule = partial(family_checks.assert_rule, TC)
DTYPES = ("float32", "bfloat16", "float16")
# crops at odd origins, a pad of odd width, negative origins (padding), a destination smaller than one
# tile, tiles wholly outside src, a narrow whole-row copy (flat view from an offset), one row
PROBLEMS = [
    {"src": [60, 60], "dst": [59, 57], "origin": [1, 3]},
    {"src": [300, 77], "dst": [300, 80]},
    {"src": [97, 101], "dst": [120, 90], "origin": [-7, -9]},
    {"src": [5, 7], "dst": [3, 5], "origin": [1, 1]},
    {"src": [50, 50], "dst": [20, 20], "origin": [60, 60]},
    {"src": [301, 3], "dst": [297, 3], "origin": [3, 0]},
    {"src": [1, 1001], "dst": [1, 999], "origin": [0, 1]},
]


def problem(dtype: str, shape: dict, padding: str = "nan") -> TileCopyProblem:
    return TC.parse_problem({"dtype": dtype, **shape, "padding": padding})


def shifted(**values) -> Config:
    base = {"template": "shifted", "BM": 8, "BN": 64, "threads": 128, "vec_bytes": 16, "tiles_per_block": 1}
    return TC.config({**base, **values})


def configs_for(p: TileCopyProblem) -> list[Config]:
    """A seeded spread of valid shifted variants: every vector width, small and large tiles."""
    space = TC.space.restrict(
        {
            "template": ["shifted"],
            "BM": [1, 2, 8],
            "BN": [8, 16, 64, 256],
            "threads": [64, 128],
            "tiles_per_block": [1, 2],
        }
    )
    configs = [c for c in space if not TC.violations(p, c)]
    random.Random(p.key()).shuffle(configs)
    return list({(c["vec_bytes"], c["BN"] > 16): c for c in configs}.values())


# ---------------------------------------------------------------------------------------------
# rules


def test_rule_copies_only() -> None:
    copy, transpose = problem("float32", PROBLEMS[0]), problem("float32", {**PROBLEMS[0], "transpose": True})
    with pytest.raises(Exception, match="a transpose needs vector, cp_async, tma or paired"):
        TC.check(transpose, shifted())
    assert TC.violations(copy, shifted()) == []


def test_rule_whole_words() -> None:
    p = problem("bfloat16", PROBLEMS[0])
    assert_rule(p, shifted(vec_bytes=4), shifted(vec_bytes=2), "vec_bytes=2 is too small")


def test_rule_slots_per_thread() -> None:
    p = problem("float32", {"src": [4096, 4096], "dst": [4096, 4096]})
    # 128 rows x (1024 / 4 + 1) slots over 1024 threads: 33 slots a thread; 16 x 257 / 1024: 5
    assert_rule(p, shifted(BM=16, BN=1024, threads=1024), shifted(BM=128, BN=1024, threads=1024), "slots per thread")


def test_renders_its_kernel_with_the_tile_members() -> None:
    p = problem("float16", PROBLEMS[0])
    source = TC.render(p, shifted(tiles_per_block=4, vec_bytes=8))
    assert source.name_expression == "tile_copy_shifted<Cfg>"
    assert source.code.startswith(kernel_source("tile_copy/tile_copy_shifted.cu"))
    for member in ("BM = 8;", "BN = 64;", "THREADS = 128;", "VEC = 4;", "TPB = 4;"):
        assert f"static constexpr int {member}" in source.code
    assert [a.name for a in TC.args(p, shifted())][:8] == ["src", "dst", "Ms", "Ns", "Md", "Nd", "oy", "ox"]
    assert TC.geometry(p, shifted()).shared_bytes == 0


# ---------------------------------------------------------------------------------------------
# the kernel's arithmetic, emulated


def emulate(p: TileCopyProblem, cfg: Config, src: np.ndarray) -> np.ndarray:
    """What tile_copy_shifted writes, slot by slot as its threads do (tile_copy_shifted.cu mirrored),
    on the problem's kernel view; asserts every vector the INTERIOR path loads lies inside src and no
    element is written twice. Unwritten elements stay at a sentinel."""
    view = p.kernel_view
    (ms, ns), (md, nd), (oy, ox) = view.src, view.dst, view.origin
    vec, bm, bn = cfg["vec_bytes"] // p.itemsize, cfg["BM"], cfg["BN"]
    flat = src.reshape(-1)
    sentinel = np.array(0xDEAD, dtype=flat.dtype)
    dst = np.full(md * nd, sentinel, dtype=flat.dtype)
    written = np.zeros(md * nd, dtype=bool)
    slots, tiles_n = bn // vec + 1, math.ceil(nd / bn)
    for tile in range(math.ceil(md / bm) * tiles_n):
        i0, j0 = tile // tiles_n * bm, tile % tiles_n * bn
        r0, c0 = oy + i0, ox + j0
        inside = r0 >= 0 and c0 >= 0 and r0 + bm <= ms and c0 + bn <= ns and i0 + bm <= md and j0 + bn <= nd
        interior = inside and r0 * ns + c0 >= 2 * vec and (r0 + bm - 1) * ns + c0 + bn + 2 * vec <= ms * ns
        for idx in range(bm * slots):
            i = i0 + idx // slots
            if not interior and i >= md:
                continue
            f = i * nd + j0
            aligned = f - f % vec
            first = idx % slots * vec - (f - aligned)
            width = bn if interior else min(nd - j0, bn)
            if first >= width:
                continue
            if interior:
                s = (oy + i) * ns + ox + j0 + first
                start = s - s % vec
                assert start >= 0 and start + 2 * vec <= ms * ns, (tile, idx)
                values = flat[s : s + vec]
            else:
                r = oy + i
                values = np.full(vec, view.pad_bits, dtype=flat.dtype)
                for e in range(vec):
                    c = ox + j0 + first + e
                    if 0 <= first + e < width and 0 <= r < ms and 0 <= c < ns:
                        values[e] = flat[r * ns + c]
            base = aligned + idx % slots * vec
            for e in range(vec):
                if 0 <= first + e < width:
                    assert not written[base + e], (tile, idx, e)
                    written[base + e] = True
                    dst[base + e] = values[e]
    return dst.reshape(p.dst)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", PROBLEMS, ids=lambda s: f"{s['src']}->{s['dst']}@{s.get('origin', [0, 0])}")
def test_every_slot_writes_the_reference(dtype: str, shape: dict) -> None:
    p = problem(dtype, shape)
    src = TC.make_inputs(p, np.random.default_rng(0))["src"]
    want = TC.reference(p, {"src": src})["dst"]
    configs = configs_for(p)
    assert {c["vec_bytes"] for c in configs} == {v for v in (4, 8, 16) if v % p.itemsize == 0 and v >= 4}
    for cfg in configs:
        got = emulate(p, cfg, src)
        assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), cfg.label()


def funnel_bytes(lo: list[int], hi: list[int], shift: int) -> list[int]:
    """tile_copy_shifted.cu's funnel_bytes on 32-bit words (little-endian), mirrored step by step."""
    words = len(lo)
    t = lo + hi
    step = 1
    while step < words:
        if (shift >> 2) & step:
            t = [t[q + step] if q + step < 2 * words else t[q] for q in range(2 * words)]
        step <<= 1
    bits = (shift & 3) * 8
    return [((t[m] | t[m + 1] << 32) >> bits) & 0xFFFFFFFF for m in range(words)]


@pytest.mark.parametrize("vector_bytes", [4, 8, 16])
def test_the_funnel_gives_the_bytes_from_the_shift_on(vector_bytes: int) -> None:
    data = np.random.default_rng(vector_bytes).integers(0, 256, 2 * vector_bytes, dtype=np.uint8)
    words = data.view("<u4").tolist()
    half = vector_bytes // 4
    for shift in range(vector_bytes):
        got = np.array(funnel_bytes(words[:half], words[half:], shift), dtype="<u4").view(np.uint8)
        assert np.array_equal(got, data[shift : shift + vector_bytes]), shift


# ---------------------------------------------------------------------------------------------
# compilation


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory):
    cases = []
    for dtype, vec_bytes in itertools.product(DTYPES, (4, 8, 16)):
        p = problem(dtype, PROBLEMS[2])
        cases.append((p, shifted(BM=16, vec_bytes=vec_bytes, tiles_per_block=2)))
    builder = NvrtcBuilder("sm_90", cache_dir=tmp_path_factory.mktemp("nvrtc"), workers=4)
    try:
        results = builder.build([TC.render(p, c) for p, c in cases])
    finally:
        builder.close()
    return list(zip(cases, results, strict=True))


def test_every_element_and_vector_width_compiles(compiled) -> None:
    assert len(compiled) == 9
    for (p, cfg), result in compiled:
        assert TC.violations(p, cfg) == []
        assert result.status is Status.OK, result.log
        assert result.spill_bytes == 0 and "tile_copy_shifted" in result.lowered_name, cfg.label()
