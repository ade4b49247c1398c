"""tile_copy without a GPU, issue 16 item 6: the ``windowed`` template (2-byte transposes of rows of any
alignment, each source row staged as its aligned window). Its rules; its kernel's arithmetic emulated on
numpy (every destination element written once, with the reference's bits; every window the INTERIOR path
loads inside src; every stage read inside the stage's rows and pitch) over odd shapes, negative origins,
crops and pads; NVRTC compilation (sm_90) for both 2-byte types, every vector width and both pitches.
The compiled kernel is checked bit for bit on the GPU (tests/gpu/test_tile_copy_gpu.py)."""

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
from tunebox.families.tile_copy.windowed import SECTOR, pitch_bytes
from tunebox.kernels_dir import kernel_source
from tunebox.params import Config
from tunebox.records import Status

assert_rule = partial(family_checks.assert_rule, TC)
DTYPES = ("bfloat16", "float16")
# odd rows both ways, an aligned square, negative origins (padding), a crop at an odd origin, tiles
# wholly outside src, a destination smaller than one tile, a single source row
PROBLEMS = [
    {"src": [97, 101], "dst": [101, 97]},
    {"src": [64, 128], "dst": [128, 64]},
    {"src": [131, 77], "dst": [90, 120], "origin": [-7, -3]},
    {"src": [300, 301], "dst": [250, 260], "origin": [5, 3]},
    {"src": [50, 50], "dst": [20, 20], "origin": [60, 60]},
    {"src": [9, 7], "dst": [5, 6], "origin": [1, 2]},
    {"src": [2, 333], "dst": [333, 2]},
]


def problem(dtype: str, shape: dict, padding: str = "nan") -> TileCopyProblem:
    return TC.parse_problem({"dtype": dtype, **shape, "transpose": True, "padding": padding})


def windowed(**values) -> Config:
    base = {
        "template": "windowed",
        "BM": 16,
        "BN": 32,
        "threads": 64,
        "vec_bytes": 16,
        "tiles_per_block": 1,
        "staging": "plain",
        "stages": 1,
    }
    return TC.config({**base, **values})


def pitch(p: TileCopyProblem, cfg: Config) -> int:
    """``pitch_bytes`` of a configuration of the family's space."""
    return pitch_bytes(p, TC.typed(cfg)[1])


def configs_for(p: TileCopyProblem) -> list[Config]:
    """A seeded spread of valid windowed variants: every vector width and pitch, small and large tiles."""
    space = TC.space.restrict(
        {
            "template": ["windowed"],
            "BM": [8, 16, 64],
            "BN": [8, 32, 64],
            "threads": [64, 128],
            "tiles_per_block": [1, 2],
        }
    )
    configs = [c for c in space if not TC.violations(p, c)]
    random.Random(p.key()).shuffle(configs)
    return list({(c["vec_bytes"], c["staging"], c["BM"] > 8): c for c in configs}.values())


# ---------------------------------------------------------------------------------------------
# rules


def test_rule_two_byte_elements() -> None:
    with pytest.raises(Exception, match="2-byte elements"):
        TC.check(TC.parse_problem({"dtype": "float32", **PROBLEMS[0], "transpose": True}), windowed())


def test_rule_transposes_only() -> None:
    copy = TC.parse_problem({"dtype": "bfloat16", "src": [97, 101], "dst": [97, 101]})
    with pytest.raises(Exception, match="a copy of misaligned rows is template 'shifted''s"):
        TC.check(copy, windowed())


def test_rule_whole_words() -> None:
    p = problem("bfloat16", PROBLEMS[0])
    assert_rule(p, windowed(vec_bytes=4), windowed(vec_bytes=2), "vec_bytes=2 is too small")


def test_rule_slots_per_thread() -> None:
    p = problem("float16", {"src": [4096, 4096], "dst": [4096, 4096]})
    # 64 rows x 64 vectors over 256 threads: 16 a thread; the 527 staged rows' 10 windows: 21; 32 rows: 13
    assert_rule(p, windowed(BM=32, BN=512, threads=256), windowed(BM=64, BN=512, threads=256), "slots per thread")


def test_renders_its_kernel_with_the_pitch() -> None:
    p = problem("float16", PROBLEMS[0])
    cfg = windowed(BM=64, BN=64, threads=256, vec_bytes=16, staging="padded")
    source = TC.render(p, cfg)
    assert source.name_expression == "tile_copy_windowed<Cfg>"
    assert source.code.startswith(kernel_source("tile_copy/tile_copy_windowed.cu"))
    # a window of 64 + 16 elements (160 bytes: 40 words), one word more when padded (41: odd)
    assert pitch(p, cfg) == 164 and pitch(p, windowed(BM=64, BN=64, threads=256)) == 160
    # a stage: the 64 + 15 source rows a tile reads, rounded up to 16 bytes (12,956 -> 12,960)
    for member in ("BM = 64;", "BN = 64;", "THREADS = 256;", "VEC = 8;", "TPB = 1;", "PITCH = 164;", "STAGES = 1;"):
        assert f"static constexpr int {member}" in source.code
    assert "static constexpr int STAGE_BYTES = 12960;" in source.code
    assert TC.geometry(p, cfg).shared_bytes == 12960
    ring = windowed(BM=64, BN=64, threads=256, tiles_per_block=4, stages=3)
    assert TC.geometry(p, ring).shared_bytes == 3 * (64 + 15) * 160


# ---------------------------------------------------------------------------------------------
# the kernel's arithmetic, emulated


def emulate(p: TileCopyProblem, cfg: Config, src: np.ndarray) -> tuple[np.ndarray, int]:
    """What tile_copy_windowed writes, as its threads do (tile_copy_windowed.cu mirrored): each tile's
    stage filled (whole windows of the rows its columns need on the INTERIOR path, asserted inside src;
    else element by element with the padding), then each destination vector read from it (asserted
    inside the stage) and stored, clipped to dst; no element written twice, and every whole vector's
    flat offset a multiple of the vector. Unwritten elements stay at a sentinel. Also returns how many
    tiles took the INTERIOR path."""
    (ms, ns), (md, nd), (oy, ox) = p.src, p.dst, p.origin
    vec, bm, bn = cfg["vec_bytes"] // 2, cfg["BM"], cfg["BN"]
    row_elements = pitch(p, cfg) // 2  # a staged row's
    flat = src.reshape(-1)
    dst = np.full(md * nd, 0xDEAD, dtype=flat.dtype)
    written = np.zeros(md * nd, dtype=bool)
    tiles_n = math.ceil((nd + SECTOR - 1) / bn)
    assert TC.args(p, cfg)[-2].value == tiles_n
    interiors = 0
    for tile in range(math.ceil(md / bm) * tiles_n):
        i0, j0 = tile // tiles_n * bm, tile % tiles_n * bn
        jb, c0 = j0 - SECTOR + 1, ox + i0
        rows = min(md - i0, bm)
        j_first, j_end = max(jb, 0), min(j0 + bn, nd)
        last = (oy + j_end - 1) * ns + c0
        interior = (
            c0 >= 0 and c0 + rows <= ns and oy + j_first >= 0 and oy + j_end <= ms
            and last - last % SECTOR + bm + SECTOR <= ms * ns
        )  # fmt: skip
        interiors += interior
        stage = np.full((bn + SECTOR - 1, row_elements), 0xBEEF, dtype=flat.dtype)  # rows never read
        s0 = ((oy + jb) * ns + c0) % SECTOR if interior else 0
        step = ns % SECTOR if interior else 0
        for q in range(bn + SECTOR - 1):
            if interior:
                if not 0 <= jb + q < nd:
                    continue
                start = (oy + jb + q) * ns + c0 - (s0 + q * step) % SECTOR
                assert start % SECTOR == 0 and start >= 0 and start + bm + SECTOR <= ms * ns, (tile, q)
                stage[q, : bm + SECTOR] = flat[start : start + bm + SECTOR]
            else:
                for c in range(bm):
                    r, col = oy + jb + q, c0 + c
                    stage[q, c] = flat[r * ns + col] if 0 <= r < ms and 0 <= col < ns else p.pad_bits
        for i, k in itertools.product(range(bm), range(bn // vec)):  # each vector once, in any order
            if i0 + i >= md:
                continue
            lead = (i0 + i) * nd % SECTOR
            j = j0 - lead + k * vec
            if j >= nd or j + vec <= 0:
                continue
            assert ((i0 + i) * nd + j) % vec == 0
            for e in range(vec):
                q = SECTOR - 1 - lead + k * vec + e
                s = (s0 + q * step) % SECTOR
                assert 0 <= q < bn + SECTOR - 1 and 0 <= i + s < row_elements, (tile, i, k, e)
                if 0 <= j + e < nd:
                    at = (i0 + i) * nd + j + e
                    assert not written[at], (tile, i, k, e)
                    written[at] = True
                    dst[at] = stage[q, i + s]
    return dst.reshape(p.dst), interiors


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", PROBLEMS, ids=lambda s: f"{s['src']}->{s['dst']}@{s.get('origin', [0, 0])}")
def test_every_slot_writes_the_reference(dtype: str, shape: dict) -> None:
    p = problem(dtype, shape)
    src = TC.make_inputs(p, np.random.default_rng(0))["src"]
    want = TC.reference(p, {"src": src})["dst"]
    configs = configs_for(p)
    assert {c["vec_bytes"] for c in configs} == {4, 8, 16} and {c["staging"] for c in configs} == {"plain", "padded"}
    for cfg in configs:
        got, _ = emulate(p, cfg, src)
        assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), cfg.label()


def test_the_interior_path_is_emulated() -> None:
    """A plain odd transpose takes the INTERIOR path on its tiles, the edge ones included (their stores
    clipped), its rows at every offset into their windows (301 is odd: consecutive rows start at
    every residue mod 8)."""
    p = problem("float16", {"src": [200, 301], "dst": [301, 200]})
    src = TC.make_inputs(p, np.random.default_rng(1))["src"]
    got, interiors = emulate(p, windowed(BM=16, BN=32), src)
    assert np.array_equal(got.view(np.uint8), TC.reference(p, {"src": src})["dst"].view(np.uint8))
    # 19 x 7 tiles (200 + 15 columns reached): all but the last, whose last window would end past src
    assert interiors == 19 * 7 - 1
    assert {(q * 301) % 8 for q in range(8)} == set(range(8))


# ---------------------------------------------------------------------------------------------
# compilation


def test_every_type_vector_width_pitch_and_ring_compiles() -> None:
    cases = [
        (problem(dtype, PROBLEMS[2]), windowed(BM=16, vec_bytes=vec_bytes, staging=staging, tiles_per_block=2))
        for dtype, vec_bytes, staging in itertools.product(DTYPES, (4, 8, 16), ("plain", "padded"))
    ]
    cases += [
        (problem("float16", PROBLEMS[0]), windowed(vec_bytes=vec_bytes, tiles_per_block=4, stages=stages))
        for vec_bytes, stages in itertools.product((4, 8, 16), (2, 3))
    ]
    for (p, cfg), result in family_checks.compile_cases(TC, cases, workers=4):
        assert TC.violations(p, cfg) == []
        assert result.status is Status.OK, result.log
        assert result.spill_bytes == 0 and "tile_copy_windowed" in result.lowered_name, cfg.label()


def test_rule_whole_sectors() -> None:
    p = problem("float16", PROBLEMS[0])
    assert_rule(p, windowed(BN=16, vec_bytes=8), windowed(BN=8, vec_bytes=8), "BN=8 is not a multiple of 16")


def test_rule_the_ring_stages_aligned_windows_within_the_tiles() -> None:
    p = problem("float16", PROBLEMS[0])
    assert_rule(p, windowed(stages=2, tiles_per_block=2), windowed(stages=2), "exceeds tiles_per_block=1")
    good, bad = windowed(stages=2, tiles_per_block=2), windowed(stages=2, tiles_per_block=2, staging="padded")
    assert_rule(p, good, bad, "needs the plain pitch")
