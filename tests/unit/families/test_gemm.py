"""gemm without a GPU: the float64 reference against a hand-computed product (epilogue, D's padding
left poison, A's and B's padding never used), the tolerance, problem parsing,
validity rules each with a passing and a failing case, geometry, and NVRTC compilation (to CUBIN,
sm_90) of every path: bounds true and false x bfloat16 and float32 output x ReLU, and the mma
path with each shared-memory layout (padded rows, 32B/64B/128B swizzle)."""

from __future__ import annotations

import dataclasses
import itertools
from functools import partial
from pathlib import Path

import family_checks
import numpy as np
import pytest

from tunebox.build.nvrtc import NvrtcBuilder
from tunebox.dtypes import element_type
from tunebox.errors import InvalidProblem
from tunebox.families import get
from tunebox.families.gemm import Gemm, GemmProblem
from tunebox.records import Status
from tunebox.sweep_spec import load_sweep
from tunebox.tma import violations as tensor_map_violations

G = Gemm()
BF16 = element_type("bfloat16")
F32_POISON = element_type("float32").poison


def problem(**extra) -> GemmProblem:
    return G.parse_problem({"M": 2, "N": 2, "K": 3, **extra})


def bf16(values) -> np.ndarray:
    return BF16.encode(np.asarray(values, dtype=np.float64))


def test_registered() -> None:
    assert isinstance(get("gemm"), Gemm)


def test_reference_by_hand_with_padding_everywhere() -> None:
    """A (2 x 3, lda 4) and B (3 x 2, ldb 3): the padding columns hold 100s that must not count; D
    (ldd 3) keeps its padding column poison."""
    p = problem(lda=4, ldb=3, ldd=3, out_dtype="float32", alpha=0.5, relu=True)
    a = bf16([[1, 2, 3, 100], [-1, 0, 2, 100]])
    b = bf16([[1, 0, 100], [0, 1, 100], [1, -4, 100]])
    d = G.reference(p, {"A": a, "B": b})["D"]
    # A @ B = [[4, -10], [1, -8]]; * 0.5 = [[2, -5], [0.5, -4]]; relu
    np.testing.assert_array_equal(d[:, :2].view(np.float32), [[2.0, 0.0], [0.5, 0.0]])
    assert (d[:, 2] == F32_POISON).all()


def test_tolerance_scales_with_k_and_the_inputs() -> None:
    small, big = problem(K=64), problem(K=4096)
    ta = G.tolerance(small, G.make_inputs(small, np.random.default_rng(0)))
    tb = G.tolerance(big, G.make_inputs(big, np.random.default_rng(0)))
    assert ta.rtol == tb.rtol == 1e-2 and 6 < tb.atol / ta.atol < 10  # sqrt(4096 / 64) = 8


def test_the_seeded_product_is_what_numpy_says() -> None:
    p = G.parse_problem({"M": 65, "N": 97, "K": 73, "lda": 75, "ldb": 101, "ldd": 99})
    inputs = G.make_inputs(p, np.random.default_rng(1))
    d = G.reference(p, inputs)["D"]
    want = BF16.decode(inputs["A"][:, :73]) @ BF16.decode(inputs["B"][:, :97])
    np.testing.assert_allclose(BF16.decode(d[:, :97]), want, rtol=2**-8, atol=1e-6)
    assert (d[:, 97:] == element_type("bfloat16").poison).all()
    assert G.work(p).flops == 2 * 65 * 97 * 73


@pytest.mark.parametrize("data, message", [
    ({"M": 0}, "positive integer"), ({"lda": 2}, "lda must be an integer >= 3"), ({"ldd": 1.5}, "ldd"),
    ({"out_dtype": "float16"}, "out_dtype"), ({"alpha": float("inf")}, "finite"), ({"relu": 1}, "true or false"),
    ({"transpose": True}, "unknown problem key"), ({"M": 2**21, "K": 2**20}, "limit 2\\^40"),
])
def test_bad_problems_say_what_to_do(data, message) -> None:
    with pytest.raises(InvalidProblem, match=message):
        problem(**data)


assert_rule = partial(family_checks.assert_rule, G)


def config(**values):
    return G.config({"BM": 64, "BN": 64, "BK": 32, "warps_m": 2, "warps_n": 2, "stages": 2, "swizzle": "none",
                     "bounds": "true", "path": "mma", "consumers": 1, "tiles_per_block": 1, **values})


def wgmma(path="wgmma", **values):
    return config(**{"BM": 128, "BN": 256, "BK": 64, "warps_m": 1, "warps_n": 1, "stages": 4, "consumers": 2,
                     "swizzle": "128B", "path": path, **values})


def test_rules_each_pass_and_fail() -> None:
    ragged = G.parse_problem({"M": 4099, "N": 4097, "K": 4095})
    aligned = G.parse_problem({"M": 4096, "N": 4096, "K": 4096})
    assert G.violations(ragged, config()) == [] and G.violations(ragged, G.default_config(ragged)) == []
    assert "whole 16 x 8 MMA tiles" in G.violations(ragged, config(BM=32, warps_m=4))[0]
    assert G.violations(ragged, config(BM=64, warps_m=4)) == []
    assert "accumulators" in G.violations(ragged, config(BM=256, BN=256))[0]
    assert G.violations(ragged, config(BM=128, BN=128)) == []
    assert "shared memory" in G.violations(ragged, config(BM=256, BN=256, BK=64, stages=4, warps_m=4, warps_n=4))[0]
    assert any("full tiles" in b for b in G.violations(ragged, config(bounds="false")))
    assert G.violations(aligned, config(bounds="false")) == []
    odd_rows = G.parse_problem({"M": 4096, "N": 4096, "K": 4096, "lda": 4100})
    assert "16-byte rows" in G.violations(odd_rows, config(bounds="false"))[0]
    assert "grid" in G.violations(G.parse_problem({"M": 2**22, "N": 1, "K": 1}), config(BM=32))[0]
    assert_rule(ragged, config(), config(consumers=2), "path 'mma' takes consumers=1")
    assert_rule(ragged, config(), config(tiles_per_block=2), "tiles_per_block=1")
    for swizzle in ("32B", "64B", "128B"):
        assert G.violations(ragged, config(swizzle=swizzle)) == []


def test_wgmma_rules_each_pass_and_fail() -> None:
    aligned = G.parse_problem({"M": 4099, "N": 4097, "K": 4095, "lda": 4096, "ldb": 4104})
    ragged = G.parse_problem({"M": 4099, "N": 4097, "K": 4095})
    assert_rule(aligned, wgmma(), wgmma(BK=32), "set BK=64, swizzle='128B', warps_m=1, warps_n=1")
    assert_rule(aligned, wgmma(), wgmma(warps_m=2), "set BK=64, swizzle='128B', warps_m=1, warps_n=1")
    assert_rule(aligned, wgmma(), wgmma(swizzle="64B"), "set BK=64, swizzle='128B'")
    assert_rule(aligned, wgmma(BM=256, BN=128), wgmma(BM=64), "BM must be 128 or 256")
    assert_rule(aligned, wgmma(BM=128, BN=128, consumers=1), wgmma(BM=256, BN=128, consumers=1),
                "BM must be 64 or 128")
    assert_rule(aligned, wgmma(BN=64), wgmma(BN=32), "BN must be 64, 128 or 256")
    assert_rule(aligned, wgmma(BM=256, BN=128), wgmma(BM=256, BN=256), "accumulators per thread")
    assert_rule(aligned, wgmma(), wgmma(bounds="false"), "full tiles of D")
    assert_rule(aligned, wgmma(stages=2), wgmma(stages=1), "stages >= 2")
    assert G.violations(G.parse_problem({"M": 4096, "N": 4096, "K": 4095, "lda": 4096}), wgmma(bounds="false")) == []
    assert_rule(ragged, wgmma("padded"), wgmma(), "use path 'padded'")
    assert_rule(aligned, wgmma(), wgmma("padded"), "already 16-byte aligned")
    huge = G.parse_problem({"M": 2**31, "N": 8, "K": 8})
    assert any("32-bit" in b for b in G.violations(huge, wgmma(BM=128, BN=64, stages=2)))


def test_geometry() -> None:
    p = G.parse_problem({"M": 4099, "N": 4097, "K": 4095})
    geo = G.geometry(p, config(BM=128, BN=64, warps_m=4))
    assert geo.grid == (65, 33, 1) and geo.block == (256, 1, 1)
    assert geo.shared_bytes == 2 * (128 * 40 + 32 * 72) * 2  # rows padded by 8 elements
    assert G.geometry(p, config(BM=128, BN=64, warps_m=4, swizzle="64B")).shared_bytes == 2 * (128 * 32 + 32 * 64) * 2


def test_wgmma_geometry_and_tensor_maps() -> None:
    p = G.parse_problem({"M": 4096, "N": 4096, "K": 4096})
    c = wgmma()
    geo = G.geometry(p, c)
    assert geo.grid == (512, 1, 1) and geo.block == (384, 1, 1) and geo.shared_bytes == 4 * 384 * 128 + 1024
    assert G.geometry(p, wgmma(tiles_per_block=4)).grid == (128, 1, 1)  # 512 tiles, 4 per block
    assert G.geometry(p, wgmma(BM=256, BN=128, tiles_per_block=16)).grid == (32, 1, 1)
    a_map, b_map, d, *scalars = G.args(p, c)
    assert (a_map.buffer, a_map.request.shape, a_map.request.strides, a_map.request.box) == \
        ("A", (4096, 4096), (8192, 2), (128, 64))
    assert (b_map.buffer, b_map.request.box, b_map.request.swizzle) == ("B", (64, 64), "128B")
    assert d.name == "D" and [s.value for s in scalars] == [4096, 4096, 4096, 4096, 1.0]
    assert G.prologue(p, c) == () and all(b.role != "workspace" for b in G.buffers(p))
    for m in (a_map, b_map):
        assert tensor_map_violations(dataclasses.replace(m.request, address=1 << 20)) == []


def test_padded_path_copies_only_the_unaligned_operand() -> None:
    """lda 4095 is unaligned, ldb 4104 is not: one pad_rows for A into A_padded (rows of 4096), and
    the tensor map of A reads the copy while B's reads B."""
    p = G.parse_problem({"M": 4099, "N": 4097, "K": 4095, "ldb": 4104})
    c = wgmma("padded")
    workspace = [b for b in G.buffers(p) if b.role == "workspace"]
    assert [(b.name, b.shape) for b in workspace] == [("A_padded", (4099, 4096))]
    (pad,) = G.prologue(p, c)
    assert pad.kernel == "pad_rows" and [a.name for a in pad.args[:2]] == ["A", "A_padded"]
    assert [a.value for a in pad.args[2:6]] == [4099, 4095, 4095, 4096]
    assert pad.args[6:] == pad.args[:6]  # the unused second copy repeats the first
    assert pad.geometry.grid == (2, 4099, 1) and pad.geometry.block == (256, 1, 1)
    a_map, b_map = G.args(p, c)[:2]
    assert (a_map.buffer, a_map.request.strides) == ("A_padded", (8192, 2))
    assert (b_map.buffer, b_map.request.strides) == ("B", (8208, 2))
    both = G.parse_problem({"M": 65, "N": 97, "K": 73})
    (pad,) = G.prologue(both, wgmma("padded", BN=128))  # one launch copies both: gridDim.z = 2
    assert [pad.args[1].name, pad.args[7].name] == ["A_padded", "B_padded"]
    assert [a.value for a in pad.args[8:]] == [73, 97, 97, 104] and pad.geometry.grid == (1, 73, 2)
    assert G.render(both, wgmma("padded", BN=128)).helpers == ("pad_rows",)
    assert G.render(both, config()).helpers == () and G.render(both, config()).arch_suffix == ""


def test_shipped_sweep_loads() -> None:
    spec = load_sweep(Path(__file__).resolve().parents[3] / "spaces" / "gemm.toml")
    assert spec.family.name == "gemm"
    shapes = {(n.problem.M, n.problem.N, n.problem.K) for n in spec.problems}
    assert {(4099, 4097, 4095), (2047, 2047, 2047), (4096, 4096, 4096), (65, 97, 73)} <= shapes
    for named in spec.problems:
        assert sum(1 for c in spec.space if not G.violations(named.problem, c)) >= 20


@pytest.fixture(scope="module")
def compiled():
    p = G.parse_problem({"M": 128, "N": 128, "K": 128})
    cases = []
    for out_dtype, relu, bounds in itertools.product(("bfloat16", "float32"), (False, True), ("true", "false")):
        q = G.parse_problem({**p.to_dict(), "out_dtype": out_dtype, "relu": relu})
        for values in ({"BM": 128, "BN": 128, "BK": 32, "warps_m": 2, "warps_n": 2, "stages": 3, "swizzle": "none"},
                       {"BM": 64, "BN": 128, "BK": 64, "warps_m": 1, "warps_n": 4, "stages": 2, "swizzle": "128B"},
                       {"BM": 64, "BN": 64, "BK": 32, "warps_m": 2, "warps_n": 2, "stages": 4, "swizzle": "64B"},
                       {"BM": 32, "BN": 32, "BK": 16, "warps_m": 1, "warps_n": 1, "stages": 1, "swizzle": "32B"}):
            cases.append((q, config(**values, bounds=bounds)))
    ragged = G.parse_problem({"M": 65, "N": 97, "K": 73})
    for out_dtype, relu in itertools.product(("bfloat16", "float32"), (False, True)):
        q = G.parse_problem({**p.to_dict(), "out_dtype": out_dtype, "relu": relu})
        cases += [(q, wgmma(BM=128, BN=256, consumers=2)), (q, wgmma(BM=128, BN=128, consumers=1, bounds="false")),
                  (q, wgmma(BM=256, BN=128, consumers=2, stages=3, tiles_per_block=4)),
                  (q, wgmma(BM=64, BN=64, consumers=1, stages=2, tiles_per_block=2))]
        cases.append((G.parse_problem({**ragged.to_dict(), "out_dtype": out_dtype, "relu": relu}),
                      wgmma("padded", BN=128, stages=2)))
    return family_checks.compile_cases(G, cases)


def test_every_path_compiles(compiled) -> None:
    """sm_90a for the wgmma paths, with no spills, and pad_rows in the padded path's module."""
    assert len(compiled) == 52
    for (q, c), result in compiled:
        assert G.violations(q, c) == []
        assert result.status is Status.OK, result.log
        assert result.cubin.startswith(b"\x7fELF") and result.registers > 0 and result.spill_bytes == 0, result.log
        assert ("--gpu-architecture=sm_90a" in NvrtcBuilder("sm_90").options(result.source)) == (c["path"] != "mma")
        assert len(result.helper_symbols) == (c["path"] == "padded")
