"""gemm without a GPU: the float64 reference against a hand-computed product (epilogue, D's padding
left poison, A's and B's padding never used), the tolerance, problem parsing, the default, validity
rules of the three templates each with a passing and a failing case (and the parameters a template
does not take refused), geometry, the named configuration struct, the argument structs (members in
order, pad_rows's for one copy and for two), and NVRTC compilation (to CUBIN, sm_90) of every
template: bounds true and false x bfloat16 and float32 output x ReLU, the mma template with each
shared-memory layout (padded rows, 32B/64B/128B swizzle), pad_rows copying A, B or both; no kernel
keeps a stack frame (the wgmma kernel reads its tensor maps in its parameter, never a copy); the
kernels' checks of the shared memory they are given."""

from __future__ import annotations

import dataclasses
import itertools
import re
from functools import partial
from pathlib import Path

import family_checks
import numpy as np
import pytest

from tunebox.build.nvrtc import BuildResult, NvrtcBuilder
from tunebox.dtypes import element_type
from tunebox.errors import InvalidConfig, InvalidProblem
from tunebox.families import get
from tunebox.families.base import KernelSource
from tunebox.families.gemm import FAMILY, GemmProblem, MmaConfig, WgmmaConfig
from tunebox.families.kernel_args import ArgStruct
from tunebox.params import Config
from tunebox.records import Status
from tunebox.sweep_spec import load_sweep
from tunebox.tma import violations as tensor_map_violations

G = FAMILY
BF16 = element_type("bfloat16")
F32_POISON = element_type("float32").poison


def problem(**extra) -> GemmProblem:
    return G.parse_problem({"M": 2, "N": 2, "K": 3, **extra})


def bf16(values) -> np.ndarray:
    return BF16.encode(np.asarray(values, dtype=np.float64))


def test_registered() -> None:
    assert get("gemm") is FAMILY and G.space.names() == (
        "mma",
        "wgmma",
        "padded",
        "persistent",
        "padded_persistent",
        "decode",
        "cluster",
    )


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
    assert ta is not None and tb is not None
    assert ta.rtol == tb.rtol == 1e-2 and 6 < tb.atol / ta.atol < 10  # sqrt(4096 / 64) = 8


def test_the_seeded_product_is_what_numpy_says() -> None:
    p = G.parse_problem({"M": 65, "N": 97, "K": 73, "lda": 75, "ldb": 101, "ldd": 99})
    inputs = G.make_inputs(p, np.random.default_rng(1))
    d = G.reference(p, inputs)["D"]
    want = BF16.decode(inputs["A"][:, :73]) @ BF16.decode(inputs["B"][:, :97])
    np.testing.assert_allclose(BF16.decode(d[:, :97]), want, rtol=2**-8, atol=1e-6)
    assert (d[:, 97:] == element_type("bfloat16").poison).all()
    assert G.work(p).flops == 2 * 65 * 97 * 73


def test_problem_dict_is_unchanged() -> None:
    """Recordings are matched on the problem's dict: every key, defaults filled in, alpha as float."""
    assert problem(alpha=2).to_dict() == {
        "M": 2,
        "N": 2,
        "K": 3,
        "lda": 3,
        "ldb": 2,
        "ldd": 2,
        "out_dtype": "bfloat16",
        "alpha": 2.0,
        "relu": False,
    }
    assert set(G.operation.fields) == set(problem().to_dict())


@pytest.mark.parametrize(
    "data, message",
    [
        ({"M": 0}, "positive integer"),
        ({"lda": 2}, "lda must be an integer >= 3"),
        ({"ldd": 1.5}, "ldd"),
        ({"out_dtype": "float16"}, "out_dtype"),
        ({"alpha": float("inf")}, "finite"),
        ({"relu": 1}, "true or false"),
        ({"transpose": True}, "unknown problem key"),
        ({"M": 2**21, "K": 2**20}, "limit 2\\^40"),
    ],
)
def test_bad_problems_say_what_to_do(data, message) -> None:
    with pytest.raises(InvalidProblem, match=message):
        problem(**data)


assert_rule = partial(family_checks.assert_rule, G)


def config(**values) -> Config:
    return G.config(
        {
            "template": "mma",
            "BM": 64,
            "BN": 64,
            "BK": 32,
            "warps_m": 2,
            "warps_n": 2,
            "stages": 2,
            "swizzle": "none",
            "bounds": "true",
            **values,
        }
    )


def wgmma(template: str = "wgmma", **values) -> Config:
    return G.config(
        {
            "template": template,
            "BM": 128,
            "BN": 256,
            "stages": 4,
            "bounds": "true",
            "consumers": 2,
            "tiles_per_block": 1,
            **values,
        }
    )


def test_default_is_the_mma_template_as_before() -> None:
    for (m, n), tile in (((4099, 4097), 128), ((100, 64), 64), ((4096, 63), 32)):
        p = G.parse_problem({"M": m, "N": n, "K": 77})
        assert G.default_config(p) == config(BM=tile, BN=tile)


def test_each_template_takes_only_its_parameters() -> None:
    """The old flat space's forced values are gone: mma has no consumers or tiles_per_block, the wgmma
    templates no BK, warps or swizzle (K steps of 64, whole warpgroups, the 128-byte swizzle)."""
    assert (
        [p.name for p in G.space.template("mma").params]
        == [f.name for f in dataclasses.fields(MmaConfig)]
        == ["BM", "BN", "BK", "warps_m", "warps_n", "stages", "swizzle", "bounds"]
    )
    for template in ("wgmma", "padded"):
        assert [p.name for p in G.space.template(template).params] == [
            "BM",
            "BN",
            "stages",
            "bounds",
            "consumers",
            "tiles_per_block",
        ]
    assert G.typed(wgmma("padded"))[1] == WgmmaConfig(
        BM=128, BN=256, stages=4, bounds="true", consumers=2, tiles_per_block=1
    )
    for bad in ({"consumers": 2}, {"tiles_per_block": 2}):
        with pytest.raises(InvalidConfig, match="unknown parameter"):
            config(**bad)
    for bad in ({"BK": 64}, {"warps_m": 1}, {"swizzle": "128B"}):
        with pytest.raises(InvalidConfig, match="unknown parameter"):
            wgmma(**bad)
    with pytest.raises(InvalidConfig, match="missing parameter"):
        G.config({"template": "mma", "BM": 64})


def test_rules_each_pass_and_fail() -> None:
    ragged = G.parse_problem({"M": 4099, "N": 4097, "K": 4095})
    assert G.violations(ragged, config()) == [] and G.violations(ragged, G.default_config(ragged)) == []
    assert_rule(ragged, config(BM=64, warps_m=4), config(BM=32, warps_m=4), "whole 16 x 8 MMA tiles")
    assert_rule(ragged, config(BM=128, BN=128), config(BM=256, BN=256), "accumulators")
    big = {"BM": 256, "BN": 256, "BK": 64, "warps_m": 4, "warps_n": 4}
    assert_rule(ragged, config(**big, stages=3), config(**big, stages=4), "shared memory")
    tiled = G.parse_problem({"M": 4160, "N": 4160, "K": 4096})  # 65 x 64, 32.5 x 128
    assert_rule(tiled, config(bounds="false"), config(bounds="false", BM=128, BN=128), "full tiles of D")
    assert any("full tiles" in b for b in G.violations(ragged, config(bounds="false")))
    steps = G.parse_problem({"M": 4096, "N": 4096, "K": 4000})  # 125 x 32, 62.5 x 64
    assert_rule(steps, config(bounds="false"), config(bounds="false", BK=64), "full K steps on path 'mma'")
    odd_rows = G.parse_problem({"M": 4096, "N": 4096, "K": 4096, "lda": 4100})
    assert_rule(odd_rows, config(), config(bounds="false"), "16-byte rows")
    tall = G.parse_problem({"M": 2**22, "N": 1, "K": 1})
    assert_rule(tall, config(BM=128), config(BM=32), "grid")
    for swizzle in ("32B", "64B", "128B"):
        assert G.violations(ragged, config(swizzle=swizzle)) == []


def test_wgmma_rules_each_pass_and_fail() -> None:
    """The rules both wgmma templates share, on a problem each accepts, and their alignment rules."""
    aligned = G.parse_problem({"M": 4099, "N": 4097, "K": 4095, "lda": 4096, "ldb": 4104})
    ragged = G.parse_problem({"M": 4099, "N": 4097, "K": 4095})
    for template, p in (("wgmma", aligned), ("padded", ragged)):
        rule = partial(assert_rule, p)
        rule(wgmma(template, BM=256, BN=128), wgmma(template, BM=64), "BM must be 128 or 256")
        rule(
            wgmma(template, BM=128, BN=128, consumers=1),
            wgmma(template, BM=256, BN=128, consumers=1),
            "BM must be 64 or 128",
        )
        rule(wgmma(template, BN=64), wgmma(template, BN=32), "BN must be 64, 128 or 256")
        rule(wgmma(template, BM=256, BN=128), wgmma(template, BM=256, BN=256), "accumulators per thread")
        rule(wgmma(template), wgmma(template, bounds="false"), "full tiles of D")
        rule(wgmma(template, stages=2), wgmma(template, stages=1), f"path {template!r} keeps one stage")
        rule(wgmma(template, stages=2), wgmma(template, stages=1), "stages >= 2")
        assert any("shared memory" in b for b in G.violations(p, wgmma(template, BM=256, BN=256)))
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
    assert (a_map.name, a_map.buffer, a_map.request.shape, a_map.request.strides, a_map.request.box) == (
        "a_map",
        "A",
        (4096, 4096),
        (8192, 2),
        (128, 64),
    )
    assert (b_map.name, b_map.buffer, b_map.request.box, b_map.request.swizzle) == ("b_map", "B", (64, 64), "128B")
    assert (d.name, d.pointee) == ("D", "unsigned short")
    assert [(s.name, s.value) for s in scalars] == [
        ("M", 4096),
        ("N", 4096),
        ("K", 4096),
        ("ldd", 4096),
        ("alpha", 1.0),
    ]
    assert G.prologue(p, c) == () and all(b.role != "workspace" for b in G.buffers(p))
    for m in (a_map, b_map):
        assert tensor_map_violations(dataclasses.replace(m.request, address=1 << 20)) == []


def test_padded_template_copies_only_the_unaligned_operand() -> None:
    """lda 4095 is unaligned, ldb 4104 is not: one pad_rows for A into A_padded (rows of 4096), and
    the tensor map of A reads the copy while B's reads B."""
    p = G.parse_problem({"M": 4099, "N": 4097, "K": 4095, "ldb": 4104})
    c = wgmma("padded")
    workspace = [b for b in G.buffers(p) if b.role == "workspace"]
    assert [(b.name, b.shape) for b in workspace] == [("A_padded", (4099, 4096))]
    (pad,) = G.prologue(p, c)
    assert pad.kernel == "pad_rows" and [a.name for a in pad.args] == [
        "A",
        "A_padded",
        "rows0",
        "cols0",
        "ld_src0",
        "ld_dst0",
    ]  # one copy: the kernel passes it as the second too (gridDim.y = 1 never reads that)
    assert [a.value for a in pad.args[2:]] == [4099, 4095, 4095, 4096]
    # 4099 x 512 chunks of 16 bytes, a chunk a thread: 8198 blocks, at most 8 a SM
    assert pad.geometry.grid == (8 * 132, 1, 1) and pad.geometry.block == (256, 1, 1)
    a_map, b_map = G.args(p, c)[:2]
    assert (a_map.buffer, a_map.request.strides) == ("A_padded", (8192, 2))
    assert (b_map.buffer, b_map.request.strides) == ("B", (8208, 2))
    assert G.geometry(p, c) == G.geometry(p, wgmma()) and G.args(p, c)[2:] == G.args(p, wgmma())[2:]
    both = G.parse_problem({"M": 65, "N": 97, "K": 73})
    (pad,) = G.prologue(both, wgmma("padded", BN=128))  # one launch copies both: gridDim.y = 2
    assert [pad.args[1].name, pad.args[6].name, pad.args[7].name] == ["A_padded", "B", "B_padded"]
    assert [a.value for a in pad.args[8:]] == [73, 97, 97, 104] and pad.geometry.grid == (4, 2, 1)
    assert G.render(both, wgmma("padded", BN=128)).helpers == ("pad_rows<Cfg>",)
    assert G.render(both, config()).helpers == () and G.render(both, config()).arch_suffix == ""


def members(source: KernelSource) -> dict[str, str]:
    """The named configuration struct a rendered variant instantiates its kernels with."""
    struct = source.code[source.code.rindex("struct Cfg {") :]
    found = dict(re.findall(r"static constexpr \w+ (\w+) = (\w+);", struct))
    found.update(re.findall(r"using (\w+) = ([\w ]+);", struct))
    return found


def test_the_configuration_struct_names_every_value() -> None:
    p = G.parse_problem({"M": 65, "N": 97, "K": 73, "out_dtype": "float32", "relu": True})
    mma = G.render(p, config(BM=128, BK=64, warps_m=4, warps_n=1, stages=3, swizzle="64B", bounds="false"))
    assert mma.name_expression == "gemm<Cfg>" and members(mma) == {
        "O": "unsigned int",
        "RELU": "true",
        "BM": "128",
        "BN": "64",
        "BK": "64",
        "WARPS_M": "4",
        "WARPS_N": "1",
        "STAGES": "3",
        "SWIZZLE": "64",
        "BOUNDS": "false",
        "SHARED_BYTES": str(3 * (128 * 64 + 64 * 64) * 2),
        "Args": "Args_t",
    }
    plain = G.render(G.parse_problem({"M": 64, "N": 64, "K": 64}), wgmma(BM=256, BN=128, stages=3, consumers=2))
    assert (
        plain.name_expression == "gemm_wgmma<Cfg>"
        and plain.arch_suffix == "a"
        and members(plain)
        == {
            "O": "unsigned short",
            "RELU": "false",
            "BM": "256",
            "BN": "128",
            "CONSUMERS": "2",
            "STAGES": "3",
            "BOUNDS": "true",
            "SHARED_BYTES": str(3 * 384 * 128 + 1024),
            "Args": "Args_t",
        }
    )
    padded = G.render(p, wgmma("padded", BM=256, BN=128, stages=3, consumers=2))
    assert members(padded) == {
        **members(plain),
        "O": "unsigned int",
        "RELU": "true",
        "PAD_THREADS": "256",
        "PAD_UNROLL": "4",
        "PAD_A": "true",
        "PAD_B": "true",
        "pad_rows_args": "pad_rows_args_t",
    }


def struct_members(source: KernelSource, type_name: str) -> list[str]:
    """The member declarations of a rendered argument struct, in order."""
    found = re.search(rf"^struct {type_name} {{\n(.*?)\n}};", source.code, re.S | re.M)
    assert found, f"no struct {type_name}"
    return [line.strip().rstrip(";") for line in found.group(1).splitlines()]


WGMMA_MEMBERS = [
    "tb::TensorMap a_map",
    "tb::TensorMap b_map",
    "unsigned int* D",
    "long long M",
    "long long N",
    "long long K",
    "long long ldd",
    "float alpha",
]


def copy_members(operand: str, index: int) -> list[str]:
    """pad_rows's members of one copy: the buffers named after them, the sizes after the copy's index."""
    sizes = [f"long long {name}{index}" for name in ("rows", "cols", "ld_src", "ld_dst")]
    return [f"const unsigned short* {operand}", f"unsigned short* {operand}_padded", *sizes]


def test_the_argument_structs_name_every_member_in_order() -> None:
    """Each template's ``Cfg::Args`` holds the old parameters in their order (the pointers typed as the
    kernels read them: bfloat16 bits as const unsigned short, D as Cfg::O), and the host packs them at
    the offsets the static_asserts prove; pad_rows's struct holds the copies it makes."""
    p = G.parse_problem({"M": 65, "N": 97, "K": 73, "out_dtype": "float32"})
    mma = G.render(p, config())
    assert struct_members(mma, "Args_t") == [
        "const unsigned short* A",
        "const unsigned short* B",
        "unsigned int* D",
        *(f"long long {name}" for name in ("M", "N", "K", "lda", "ldb", "ldd")),
        "float alpha",
    ]
    assert "struct pad_rows_args_t" not in mma.code
    aligned = G.parse_problem({**p.to_dict(), "lda": 80, "ldb": 104})
    assert struct_members(G.render(aligned, wgmma()), "Args_t") == WGMMA_MEMBERS
    layout = ArgStruct.of("Args_t", G.args(aligned, wgmma()))
    assert [m.offset for m in layout.members] == [0, 128, 256, 264, 272, 280, 288, 296] and layout.size == 320
    padded = G.render(p, wgmma("padded", BN=128))
    assert struct_members(padded, "Args_t") == WGMMA_MEMBERS
    assert struct_members(padded, "pad_rows_args_t") == copy_members("A", 0) + copy_members("B", 1)
    for unaligned, operand in (({"lda": 80}, "B"), ({"ldb": 104}, "A")):
        one = G.render(G.parse_problem({**p.to_dict(), **unaligned}), wgmma("padded", BN=128))
        assert struct_members(one, "pad_rows_args_t") == copy_members(operand, 0)
        assert (members(one)["PAD_A"], members(one)["PAD_B"]) == (
            str(operand == "A").lower(),
            str(operand == "B").lower(),
        )


# Valid configurations per problem of each shipped sweep, counted on the old flat [space] tables (the
# path a selector, the forced values of the parameters a path ignored): the new tables keep them all.
SLICES = {
    "gemm": {
        "ragged_4099x4097x4095": 1346,
        "cube_2047": 1346,
        "cube_4096": 2692,
        "cube_8192": 2692,
        "skinny_16384x128x4096": 2426,
        "small_65x97x73": 1346,
    },
    "gemm_wgmma": {"cube_4096": 24, "cube_8192": 24},
    "gemm_skinny": {"skinny_16384x128x4096": 48},
}


@pytest.mark.parametrize("sweep", sorted(SLICES))
def test_shipped_sweeps_keep_their_slices(sweep: str) -> None:
    spec = load_sweep(Path(__file__).resolve().parents[3] / "spaces" / f"{sweep}.toml")
    assert spec.family.name == "gemm"
    if sweep == "gemm":
        shapes = {(n.problem.M, n.problem.N, n.problem.K) for n in spec.problems}
        assert {(4099, 4097, 4095), (2047, 2047, 2047), (4096, 4096, 4096), (65, 97, 73)} <= shapes
    valid = {n.name: sum(1 for c in spec.space if not G.violations(n.problem, c)) for n in spec.problems}
    assert valid == SLICES[sweep]


def main_kernel(result: BuildResult) -> tuple[int, list[int]]:
    """Registers of the main kernel (the log lists every kernel of the module, in no fixed order) and
    the spill stores of every kernel."""
    properties = dict(re.findall(r"Function properties for (\w+)\n.*\n.*Used (\d+) registers", result.log))
    return int(properties[result.lowered_name]), [int(n) for n in re.findall(r"(\d+) bytes spill stores", result.log)]


@pytest.fixture(scope="module")
def compiled():
    p = G.parse_problem({"M": 128, "N": 128, "K": 128})
    cases = []
    for out_dtype, relu, bounds in itertools.product(("bfloat16", "float32"), (False, True), ("true", "false")):
        q = G.parse_problem({**p.to_dict(), "out_dtype": out_dtype, "relu": relu})
        for values in (
            {"BM": 128, "BN": 128, "BK": 32, "warps_m": 2, "warps_n": 2, "stages": 3, "swizzle": "none"},
            {"BM": 64, "BN": 128, "BK": 64, "warps_m": 1, "warps_n": 4, "stages": 2, "swizzle": "128B"},
            {"BM": 64, "BN": 64, "BK": 32, "warps_m": 2, "warps_n": 2, "stages": 4, "swizzle": "64B"},
            {"BM": 32, "BN": 32, "BK": 16, "warps_m": 1, "warps_n": 1, "stages": 1, "swizzle": "32B"},
        ):
            cases.append((q, config(**values, bounds=bounds)))
    ragged = G.parse_problem({"M": 65, "N": 97, "K": 73})
    for out_dtype, relu in itertools.product(("bfloat16", "float32"), (False, True)):
        q = G.parse_problem({**p.to_dict(), "out_dtype": out_dtype, "relu": relu})
        cases += [
            (q, wgmma(BM=128, BN=256, consumers=2)),
            (q, wgmma(BM=128, BN=128, consumers=1, bounds="false")),
            (q, wgmma(BM=256, BN=128, consumers=2, stages=3, tiles_per_block=4)),
            (q, wgmma(BM=64, BN=64, consumers=1, stages=2, tiles_per_block=2)),
        ]
        cases.append(
            (
                G.parse_problem({**ragged.to_dict(), "out_dtype": out_dtype, "relu": relu}),
                wgmma("padded", BN=128, stages=2),
            )
        )
    for aligned in ({"lda": 80}, {"ldb": 104}):  # pad_rows copying B only, A only
        cases.append((G.parse_problem({**ragged.to_dict(), **aligned}), wgmma("padded", BN=128, stages=2)))
    return family_checks.compile_cases(G, cases)


def test_every_template_compiles(compiled) -> None:
    """sm_90a for the wgmma templates, with no spills, and pad_rows in the padded template's module."""
    assert len(compiled) == 54
    for (q, c), result in compiled:
        assert G.violations(q, c) == []
        assert result.status is Status.OK, result.log
        registers, spills = main_kernel(result)
        assert result.cubin.startswith(b"\x7fELF") and registers > 0 and spills and not any(spills), result.log
        assert ("--gpu-architecture=sm_90a" in NvrtcBuilder("sm_90").options(result.source)) == (c["template"] != "mma")
        assert len(result.helper_symbols) == len(spills) - 1 == (c["template"] == "padded")


def test_no_kernel_keeps_a_stack_frame(compiled) -> None:
    """ptxas reports "0 bytes stack frame" for every kernel: the wgmma kernel hands its body the tensor
    maps as references into its __grid_constant__ argument struct, so TMA reads them there (a copy,
    by value or into a local, costs a 304-byte stack frame), and no argument struct is copied."""
    for (_, c), result in compiled:
        frames = dict(re.findall(r"Function properties for (\w+)\n\S+\s+\.\s+(\d+) bytes stack frame", result.log))
        assert set(frames) == {result.lowered_name, *result.helper_symbols}, result.log
        assert set(frames.values()) == {"0"}, (c.label(), frames)


def test_kernels_check_the_shared_memory_they_are_given() -> None:
    """Each kernel's compile-time layout against SHARED_BYTES (the templates' shared_bytes): one byte
    short fails to compile, so the two formulas cannot drift apart."""
    p = G.parse_problem({"M": 65, "N": 97, "K": 73})
    cases = [(p, config(swizzle="32B")), (p, wgmma("padded", BN=128, stages=2))]
    sources = []
    for q, c in cases:
        source = G.render(q, c)
        shared = G.geometry(q, c).shared_bytes
        line = f"static constexpr int SHARED_BYTES = {shared};"
        sources.append(
            dataclasses.replace(source, code=source.code.replace(line, line.replace(str(shared), str(shared - 1))))
        )
        assert sources[-1].code != source.code
    builder = NvrtcBuilder("sm_90", workers=1)
    try:
        results = builder.build(sources)
    finally:
        builder.close()
    for result, message in zip(
        results,
        (
            "the stages fit in the dynamic shared memory",
            "the stages and their alignment fit in shared memory",
        ),
        strict=True,
    ):
        assert result.status is Status.COMPILE_ERROR and message in result.log, result.log
