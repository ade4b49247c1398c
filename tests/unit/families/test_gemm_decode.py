"""gemm's template ``decode`` without a GPU: each validity rule with a passing and a failing case, the
default (splits that fill the H200 twice, none past M = 64), geometry and the shared memory the ring
and the partial sums take, the argument struct, and NVRTC compilation for sm_90 (the default on tiny,
decode, ragged and odd-leading-dimension problems, a sample of its sweep's space: no spills, no stack
frame) and the kernel's check of its shared memory."""

from __future__ import annotations

import dataclasses
import random
import re
from functools import partial
from pathlib import Path

import family_checks

from tunebox.build.nvrtc import NvrtcBuilder
from tunebox.families.gemm import FAMILY, DecodeConfig
from tunebox.families.gemm.decode import shared_bytes, stage_bytes
from tunebox.limits import SM_COUNT
from tunebox.params import Config
from tunebox.records import Status
from tunebox.sweep_spec import load_sweep

G = FAMILY
T = G.templates["decode"]
SPACES = Path(__file__).resolve().parents[3] / "spaces"
BASE = DecodeConfig(BN=64, tokens=16, BK=64, warps_n=1, warps_k=4, stages=4, swizzle="none", splits=1, load="cp_async")
TMA = {"load": "tma", "swizzle": "128B"}
assert_rule = partial(family_checks.assert_rule, G)


def config(**values) -> Config:
    return G.template_config("decode", dataclasses.replace(BASE, **values))


def problem(**data):
    return G.parse_problem({"M": 16, "N": 4096, "K": 4096, **data})


def test_rules_each_pass_and_fail() -> None:
    p = problem()
    assert_rule(p, config(BN=64, warps_n=4), config(BN=32, warps_n=4), "whole 16-column mma tiles")
    assert_rule(problem(M=128), config(BN=128, tokens=64, warps_n=2), config(BN=128, tokens=64), "accumulators")
    assert_rule(p, config(BK=64, warps_k=4), config(BK=32, warps_k=4), "k16 slices")
    assert_rule(problem(M=9), config(tokens=16), config(tokens=32), "half the block's tokens would idle")
    assert_rule(problem(K=256), config(splits=4), config(splits=8), "K splits need as many K steps")
    assert_rule(problem(M=128 * 65_535), config(BN=32, tokens=128, warps_n=2), config(BN=32, tokens=64), "grid")
    assert_rule(p, config(stages=8, BK=128), config(stages=8, BK=256), "shared memory")
    assert_rule(p, config(**TMA), config(load="tma"), "swizzle '128B'")
    assert_rule(p, config(**TMA), config(**TMA, BN=32, warps_n=2), "BN and BK multiples of 64")
    assert G.violations(problem(lda=4104), config(**TMA)) == []
    assert any("16-byte rows" in b for b in G.violations(problem(lda=4097), config(**TMA)))
    assert G.violations(problem(lda=4097), config()) == []  # cp.async takes any rows


def test_the_default() -> None:
    """Every token in one block (the next power of two from 8, at most 64), TMA where its rules hold,
    and the fewest splits that give every SM two blocks, or leave each split four K steps of 128;
    none past M = 64."""
    tma = dataclasses.replace(BASE, BK=128, warps_n=2, swizzle="128B", load="tma")
    assert T.default(problem()) == dataclasses.replace(tma, splits=8)  # 64 column blocks x 8
    assert T.default(problem(N=16384)) == dataclasses.replace(tma, splits=2)  # 256 x 2 >= 264
    assert T.default(problem(M=1, K=1024)) == dataclasses.replace(tma, tokens=8, splits=2)  # 8 steps
    cp_async = dataclasses.replace(tma, swizzle="none", load="cp_async", splits=8)
    assert T.default(problem(lda=4097)) == cp_async  # A's rows unaligned: no TMA
    assert T.default(problem(M=33)).tokens == 64 and T.default(problem(M=65)) is None
    for shape in ({"M": 1, "N": 1, "K": 1}, {"M": 64, "N": 14336, "K": 4096}, {"M": 7, "N": 9, "K": 4111}):
        default = T.default(G.parse_problem(shape))
        assert default is not None and T.violations(G.parse_problem(shape), default) == []
    assert G.default_config(problem())["template"] == "mma"  # the family's default is unchanged


def test_geometry_and_shared_memory() -> None:
    """Grid (N / BN, splits, M / tokens), warps_n x warps_k warps; the ring's stages of B's BK x BN and
    A's tokens x BK tiles (rows padded by 8 with swizzle 'none'), or the warps' partial sums if larger."""
    geometry = G.geometry(problem(M=33, N=4099), config(tokens=16, splits=4, warps_n=2))
    assert geometry.grid == (65, 4, 3) and geometry.block == (256, 1, 1)
    assert stage_bytes(BASE) == (64 * 72 + 16 * 72) * 2
    assert stage_bytes(dataclasses.replace(BASE, swizzle="128B")) == (64 * 64 + 16 * 64) * 2
    assert shared_bytes(BASE) == 4 * stage_bytes(BASE)
    sums = dataclasses.replace(BASE, BN=256, tokens=64, BK=64, warps_k=4, stages=2)
    assert shared_bytes(sums) == 4 * 64 * 260 * 4 > 2 * stage_bytes(sums)
    assert geometry.shared_bytes == shared_bytes(dataclasses.replace(BASE, warps_n=2, splits=4))
    assert SM_COUNT == 132


def test_the_argument_structs() -> None:
    """cp.async: the mma template's; TMA: the maps of A (boxes of tokens x 64) and B (BK x 64)."""
    p = problem(out_dtype="float32", relu=True)
    names = [a.name for a in G.args(p, config())]
    assert names == ["A", "B", "D", "M", "N", "K", "lda", "ldb", "ldd", "alpha"]
    tma = G.args(p, config(**TMA, BK=128))
    assert [a.name for a in tma] == ["a_map", "b_map", "D", "M", "N", "K", "ldd", "alpha"]
    assert (tma[0].request.box, tma[1].request.box) == ((16, 64), (128, 64))
    assert G.render(p, config(**TMA)).name_expression == "gemm_decode_tma<Cfg>"
    mma = G.template_config("mma", G.templates["mma"].default(p))
    assert G.args(p, config()) == G.args(p, mma)
    struct = G.render(p, config(splits=4)).code
    found = dict(re.findall(r"static constexpr \w+ (\w+) = (\w+);", struct[struct.rindex("struct Cfg {") :]))
    assert (found["SPLITS"], found["TOKENS"], found["RELU"], found["SWIZZLE"]) == ("4", "16", "true", "0")


def sample(count: int) -> list[tuple]:
    """The default on tiny, decode, ragged and odd-leading-dimension problems, float32 output with ReLU,
    with the other load where valid, and ``count`` valid configurations of gemm_decode.toml's space per
    problem of the file."""
    cases = []
    for shape in (
        {"M": 1, "N": 1, "K": 1},
        {"M": 16, "N": 4096, "K": 4096},
        {"M": 7, "N": 4099, "K": 4111, "lda": 4113, "ldb": 4101, "ldd": 4103},
        {"M": 33, "N": 1000, "K": 1000, "out_dtype": "float32", "relu": True, "alpha": -0.5},
    ):
        p = G.parse_problem(shape)
        cases.append((p, G.template_config("decode", T.default(p))))
        default = T.default(p)
        other = {"load": "cp_async", "swizzle": "none"} if default.load == "tma" else TMA
        if not T.violations(p, dataclasses.replace(default, **other)):
            cases.append((p, G.template_config("decode", dataclasses.replace(default, **other))))
    spec = load_sweep(SPACES / "gemm_decode.toml")
    rng = random.Random(0)
    for named in spec.problems:
        valid = [c for c in spec.space if not G.violations(named.problem, c)]
        cases += [(named.problem, c) for c in rng.sample(valid, count)]
    return cases


def test_defaults_and_a_sample_of_the_space_compile() -> None:
    compiled = family_checks.compile_cases(G, sample(2))
    assert len(compiled) == 4 + 2 + 2 * 10 and sum(c["load"] == "tma" for (_, c), _ in compiled) >= 4
    for (_, c), result in compiled:
        assert result.status is Status.OK, (c.label(), result.log[-2000:])
        assert result.spill_bytes == 0 and re.search(r"\b0 bytes stack frame", result.log), (c.label(), result.log)
        assert "warning" not in result.log, result.log


def test_the_kernel_checks_the_shared_memory_it_is_given() -> None:
    p = problem()
    sources = []
    for c in (config(), config(**TMA)):
        source = G.render(p, c)
        shared = G.geometry(p, c).shared_bytes
        line = f"static constexpr int SHARED_BYTES = {shared};"
        short = dataclasses.replace(source, code=source.code.replace(line, line.replace(str(shared), str(shared - 1))))
        assert short.code != source.code
        sources += [source, short]
    builder = NvrtcBuilder("sm_90", workers=1)
    try:
        results = builder.build(sources)
    finally:
        builder.close()
    for good, broken in zip(results[::2], results[1::2], strict=True):
        assert good.status is Status.OK, good.log
        assert broken.status is Status.COMPILE_ERROR and "fit in the dynamic shared memory" in broken.log, broken.log


def test_its_sweep_offers_the_template_on_every_problem() -> None:
    spec = load_sweep(SPACES / "gemm_decode.toml")
    for named in spec.problems:
        assert named.problem.M <= 128
        assert any(not G.violations(named.problem, c) for c in spec.space), named.name
