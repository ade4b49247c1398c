"""tile_copy without a GPU, issue 16 item 6: the ``paired`` template (2-byte transposes staged as
32-bit pair words), its rules, layout and NVRTC compilation (sm_90) for bfloat16 and float16 on even,
odd and tiny shapes in every staging layout and bounds mode; and the kernel view of degenerate shapes
(transposes with a unit dimension copy, narrow whole-row copies run as one flat row), checked against
the numpy reference."""

from __future__ import annotations

import dataclasses
import itertools
import random
import re
from functools import partial

import family_checks
import numpy as np
import pytest

from tunebox.build.nvrtc import NvrtcBuilder
from tunebox.errors import InvalidConfig
from tunebox.families.tile_copy import FAMILY as TC
from tunebox.families.tile_copy import MAX_SHARED_BYTES, PairedConfig, TileCopyProblem
from tunebox.families.tile_copy.operation import NARROW
from tunebox.kernels_dir import kernel_source
from tunebox.params import Config
from tunebox.records import Status

STAGED = ("plain", "padded", "swizzled")
BOUNDS = ("checked", "split", "unchecked")
HALF = ("bfloat16", "float16")

assert_rule = partial(family_checks.assert_rule, TC)


def assert_problem_rule(good: TileCopyProblem, bad: TileCopyProblem, cfg: Config, fragment: str) -> None:
    """``cfg`` breaks no rule for ``good``, and one whose message holds ``fragment`` for ``bad``."""
    assert TC.violations(good, cfg) == [], TC.violations(good, cfg)
    with pytest.raises(InvalidConfig, match=fragment):
        TC.check(bad, cfg)


def problem(dtype: str, src, dst, **extra) -> TileCopyProblem:
    return TC.parse_problem({"dtype": dtype, "src": list(src), "dst": list(dst), **extra})


def paired(**values) -> Config:
    base = {
        "template": "paired",
        "BM": 32,
        "BN": 64,
        "threads": 128,
        "vec_bytes": 16,
        "bounds": "checked",
        "staging": "padded",
        "tiles_per_block": 1,
    }
    return TC.config({**base, **values})


# shapes: full and aligned (every bounds mode), odd (a ragged crop at a negative origin: partial tiles,
# unaligned rows, a tail row without a partner), tiny (fewer rows and columns than a tile)
SHAPES = {
    "even": ((1024, 256), (256, 1024), {}),
    "odd": ((65, 73), (40, 24), {"origin": [-3, 5], "padding": "nan"}),
    "tiny": ((3, 5), (6, 4), {"origin": [0, -1], "padding": "neg_inf"}),
}


def shaped(dtype: str, shape: str) -> TileCopyProblem:
    src, dst, extra = SHAPES[shape]
    return problem(dtype, src, dst, transpose=True, **extra)


# ---------------------------------------------------------------------------------------------
# rules: each with a passing and a failing case


def test_rule_two_byte_elements() -> None:
    for dtype in HALF:
        assert_problem_rule(shaped(dtype, "odd"), shaped("float32", "odd"), paired(), "2-byte elements")


def test_rule_transposes_only() -> None:
    copy = problem("bfloat16", (65, 73), (64, 32))
    assert_problem_rule(shaped("bfloat16", "odd"), copy, paired(), "a copy has none to pair")
    # a transpose with a unit dimension is a plain copy of the same memory: nothing to pair
    unit = problem("bfloat16", (1, 37), (37, 1), transpose=True)
    two = problem("bfloat16", (2, 37), (37, 2), transpose=True)
    assert_problem_rule(two, unit, paired(BM=8, BN=16, threads=64, vec_bytes=4), "a copy has none to pair")


def test_rule_vector_of_whole_words() -> None:
    assert_rule(shaped("bfloat16", "tiny"), paired(vec_bytes=4), paired(vec_bytes=2), "vec_bytes=2 is too small")


def test_rule_always_staged() -> None:
    for layout in STAGED:
        assert TC.violations(shaped("float16", "odd"), paired(staging=layout)) == []
    with pytest.raises(InvalidConfig, match="staging"):
        paired(staging="none")


def test_rule_unchecked_needs_full_aligned_tiles() -> None:
    cfg = paired(bounds="unchecked")
    assert_problem_rule(shaped("bfloat16", "even"), shaped("bfloat16", "odd"), cfg, "unchecked")
    unaligned = problem("float16", (1024, 260), (260, 1024), transpose=True)  # rows of 260: not 8-element vectors
    assert_problem_rule(shaped("float16", "even"), unaligned, cfg, "unchecked")


def test_rule_shared_memory() -> None:
    # BN / 2 word rows of BM words (+1 when padded): 512 * 129 * 4 bytes do not fit, 256 * 129 * 4 do
    p = shaped("bfloat16", "even")
    good = paired(BM=128, BN=512, threads=1024, staging="padded")
    bad = paired(BM=128, BN=1024, threads=1024, staging="padded")
    assert TC.geometry(p, good).shared_bytes == 256 * 129 * 4 <= MAX_SHARED_BYTES
    assert TC.geometry(p, bad).shared_bytes == 512 * 129 * 4 > MAX_SHARED_BYTES
    assert_rule(p, good, bad, "shared memory")
    assert TC.geometry(p, paired(staging="swizzled")).shared_bytes == 32 * 32 * 4


# ---------------------------------------------------------------------------------------------
# rendering: the paired kernel, and the other templates' sources as before


def members(code: str) -> dict[str, str]:
    struct = code[code.rindex("struct Cfg {") :]
    return dict(re.findall(r"static constexpr (?:int|bool) (\w+) = (-?\w+);", struct))


def test_paired_renders_its_kernel() -> None:
    p = shaped("float16", "odd")
    source = TC.render(p, paired(staging="swizzled", bounds="split", vec_bytes=8))
    assert source.name_expression == "tile_copy_paired<Cfg>"
    assert source.code.startswith(kernel_source("tile_copy/tile_copy_paired.cu"))
    assert '#include "tunebox/pairs.cuh"' in source.code
    assert members(source.code) == {
        "BM": "32",
        "BN": "64",
        "THREADS": "128",
        "VEC": "4",
        "BOUNDS": "1",
        "STAGING": "3",
        "TPB": "1",
        "TRANSPOSE": "true",
        "SHARED_BYTES": str(32 * 32 * 4),
    }


@pytest.mark.parametrize("template", ["vector", "cp_async"])
def test_the_other_templates_render_as_before(template: str) -> None:
    """The vector and cp_async templates render tile_copy.cu, untouched by pairing, with the members
    they always had: a configuration of theirs renders the same source as before the paired template."""
    p = shaped("bfloat16", "odd")
    space = TC.space.restrict({"template": [template], "BM": [8, 32], "BN": [32, 64], "threads": [64, 128]})
    configs = [c for c in space if not TC.violations(p, c)]
    assert configs
    old = {"BM", "BN", "THREADS", "VEC", "BOUNDS", "STAGING", "TPB", "TRANSPOSE", "SHARED_BYTES"}
    for cfg in random.Random(template).sample(configs, 10):
        code = TC.render(p, cfg).code
        assert code.startswith(kernel_source("tile_copy/tile_copy.cu"))
        assert "pair" not in code.lower() and "__byte_perm" not in code
        assert set(members(code)) == old | ({"STAGES"} if template == "cp_async" else set())


# ---------------------------------------------------------------------------------------------
# compilation: every layout, bounds mode and vector width, bfloat16 and float16, even, odd and tiny


def _matrix() -> list[tuple[str, str, str, int, str]]:
    """(dtype, shape, layout, vec_bytes, bounds): each dtype and shape in every layout, the vector
    widths and (on the shapes that allow them) the bounds modes rotating."""
    cases = []
    for n, (dtype, shape, layout) in enumerate(itertools.product(HALF, SHAPES, STAGED)):
        modes = BOUNDS if shape == "even" else BOUNDS[:2]
        cases.append((dtype, shape, layout, (4, 8, 16)[n % 3], modes[n % len(modes)]))
    cases += [(dtype, "even", layout, 16, "unchecked") for dtype in HALF for layout in STAGED]
    return list(dict.fromkeys(cases))


MATRIX = _matrix()


def _pick(dtype: str, shape: str, layout: str, vec_bytes: int, bounds: str) -> tuple[TileCopyProblem, Config]:
    """A seeded choice among the valid paired configurations of that kind with little work per thread."""
    p = shaped(dtype, shape)
    sub = TC.space.restrict(
        {
            "template": ["paired"],
            "staging": [layout],
            "vec_bytes": [vec_bytes],
            "bounds": [bounds],
            "threads": [64, 128, 256],
            "tiles_per_block": [1, 2, 4],
        }
    )
    candidates = [
        c for c in sub if c["BM"] * c["BN"] * 2 // c["vec_bytes"] <= 4 * c["threads"] and not TC.violations(p, c)
    ]
    assert candidates, (dtype, shape, layout, vec_bytes, bounds)
    return p, random.Random(f"{dtype}/{shape}/{layout}/{vec_bytes}/{bounds}").choice(candidates)


def test_matrix_covers_every_kind() -> None:
    for dtype in HALF:
        rows = [m for m in MATRIX if m[0] == dtype]
        assert {m[1] for m in rows} == set(SHAPES)
        assert {m[2] for m in rows} == set(STAGED)
        assert {m[3] for m in rows} == {4, 8, 16}
        assert {m[4] for m in rows} == set(BOUNDS)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory):
    picks = [_pick(*m) for m in MATRIX]
    builder = NvrtcBuilder("sm_90", cache_dir=tmp_path_factory.mktemp("nvrtc"), workers=4)
    try:
        results = builder.build([TC.render(p, c) for p, c in picks])
    finally:
        builder.close()
    return [(p, c, r) for (p, c), r in zip(picks, results, strict=True)]


@pytest.mark.parametrize("index", range(len(MATRIX)), ids=["-".join(map(str, m)) for m in MATRIX])
def test_paired_variant_compiles(compiled, index: int) -> None:
    p, cfg, result = compiled[index]
    dtype, _, layout, vec_bytes, bounds = MATRIX[index]
    assert (p.element, cfg["staging"], cfg["vec_bytes"], cfg["bounds"]) == (dtype, layout, vec_bytes, bounds)
    assert TC.violations(p, cfg) == []
    assert result.status is Status.OK, result.log
    assert result.registers > 0 and result.spill_bytes == 0, (cfg.label(), result.log)
    assert result.lowered_name.startswith("_Z") and "tile_copy_paired" in result.lowered_name
    assert members(result.source.code)["SHARED_BYTES"] == str(TC.geometry(p, cfg).shared_bytes)


def test_paired_kernel_asserts_its_layout_fits_the_shared_memory() -> None:
    p = shaped("bfloat16", "odd")
    cfg = paired(staging="padded")
    good = TC.render(p, cfg)
    line = f"static constexpr int SHARED_BYTES = {TC.geometry(p, cfg).shared_bytes};"
    assert line in good.code
    short = dataclasses.replace(good, code=good.code.replace(line, line.replace(" = ", " = -1 + ")))
    builder = NvrtcBuilder("sm_90", workers=2)
    try:
        ok, bad = builder.build([good, short])
    finally:
        builder.close()
    assert ok.status is Status.OK, ok.log
    assert bad.status is Status.COMPILE_ERROR and "fits in the dynamic shared memory of the launch" in bad.log


# ---------------------------------------------------------------------------------------------
# degenerate shapes: the kernel view


def _view_agrees(p: TileCopyProblem, rng: np.random.Generator) -> None:
    """The view's copy of the same memory (the source reshaped) gives the reference's bytes."""
    view = p.kernel_view
    assert view.src[0] * view.src[1] == p.src[0] * p.src[1] and view.dst[0] * view.dst[1] == p.dst[0] * p.dst[1]
    src = TC.make_inputs(p, rng)["src"]
    want = TC.reference(p, {"src": src})["dst"]
    got = TC.reference(view, {"src": src.reshape(view.src)})["dst"].reshape(p.dst)
    np.testing.assert_array_equal(got, want)


def test_unit_transposes_and_narrow_copies_are_flat() -> None:
    cases = {
        # (src, dst, origin, transpose): (view src, view dst, view origin, view transpose)
        ((1, 1000), (1000, 1), (0, 0), True): ((1, 1000), (1, 1000), (0, 0), False),
        ((1000, 1), (1, 1000), (0, 0), True): ((1, 1000), (1, 1000), (0, 0), False),
        ((1, 999), (990, 3), (-2, 5), True): ((999, 1), (990, 3), (5, -2), False),
        ((7, 9), (1, 5), (2, -1), True): ((7, 9), (5, 1), (2, -1), False),
        ((10_000_019, 1), (10_000_019, 1), (0, 0), False): ((1, 10_000_019), (1, 10_000_019), (0, 0), False),
        ((300, 3), (310, 3), (-5, 0), False): ((1, 900), (1, 930), (0, -15), False),
    }
    for (src, dst, origin, transpose), want in cases.items():
        view = problem("bfloat16", src, dst, origin=list(origin), transpose=transpose).kernel_view
        assert (view.src, view.dst, view.origin, view.transpose) == want, (src, dst, origin, transpose)


@pytest.mark.parametrize(
    "data",
    [
        {"src": [65, 73], "dst": [73, 65], "transpose": True},
        {"src": [300, 77], "dst": [300, 80]},  # a narrow pad: not whole rows
        {"src": [300, 3], "dst": [300, 3], "origin": [0, 1]},  # whole rows but shifted: not flat
        {"src": [300, NARROW], "dst": [300, NARROW]},  # rows as wide as the narrowest tile
        {"src": [1, 1], "dst": [3, 5], "origin": [-1, -2]},
    ],
)
def test_other_problems_are_their_own_view(data: dict) -> None:
    p = TC.parse_problem({"dtype": "float32", **data})
    assert p.kernel_view == p


def test_views_compute_the_reference() -> None:
    rng = np.random.default_rng(5)
    shapes = [(1, 1), (1, 7), (7, 1), (1, 40), (40, 1), (13, 3), (13, 1), (2, 5)]
    for (src, dst), transpose in itertools.product(itertools.product(shapes, repeat=2), (False, True)):
        for origin in ((0, 0), (-2, 0), (1, -3), (3, 2)):
            _view_agrees(problem("float16", src, dst, origin=list(origin), transpose=transpose, padding="nan"), rng)


def test_flat_views_take_one_row_tiles_and_compile() -> None:
    cases = []
    for data in (
        {"dtype": "float32", "src": [10_000_019, 1], "dst": [10_000_019, 1]},
        {"dtype": "bfloat16", "src": [1, 4097], "dst": [4097, 1], "transpose": True},
        {"dtype": "float16", "src": [30_001, 3], "dst": [30_005, 3], "origin": [-2, 0], "padding": "nan"},
    ):
        p = TC.parse_problem(data)
        cfg = TC.default_config(p)
        assert p.kernel_view.dst[0] == 1 and cfg["BM"] == 1 and TC.violations(p, cfg) == []
        assert [a.value for a in TC.args(p, cfg) if a.name in ("Ms", "Md")] == [1, 1]
        assert TC.geometry(p, cfg).grid[0] == -(-p.dst[0] * p.dst[1] // cfg["BN"])
        cases.append((p, cfg))
    for (_, cfg), result in family_checks.compile_cases(TC, cases, workers=2):
        assert result.status is Status.OK and result.spill_bytes == 0, (cfg.label(), result.log)


def test_paired_config_type() -> None:
    template, typed = TC.typed(paired())
    assert template.name == "paired" and type(typed) is PairedConfig and typed.staged
