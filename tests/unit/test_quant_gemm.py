"""Family quant_gemm without a GPU: problems and their dict form, buffers, work, distance, the
problem of caller arrays, the seeded inputs and their planted edges, the reference against an
independent float64 computation, each template's validity rules (a passing and a failing case each),
and every template's default plus a seeded sample of valid configurations compiled by NVRTC for sm_90
on several problems (the defaults without spills)."""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np
import pytest

from tunebox.build.nvrtc import NvrtcBuilder
from tunebox.dtypes import element_type
from tunebox.errors import InvalidConfig, InvalidProblem
from tunebox.families.quant.formats import E2M1, decode_table, scale_table, unpack_nibbles
from tunebox.families.quant_gemm import FAMILY, DecodeConfig, RegistersConfig, StreamConfig, TiledConfig, WgmmaConfig
from tunebox.records import Status

F = FAMILY
BF16 = element_type("bfloat16")


def problem(**fields):
    return F.parse_problem({"format": "mxfp4", **fields})


@pytest.mark.parametrize(
    "data",
    [
        {"M": 1, "N": 4096, "K": 4096, "format": "mxfp4"},
        {"M": 3, "N": 4099, "K": 4111, "format": "nvfp4", "inputs": "edges"},
    ],
)
def test_problems_survive_their_dict_form(data) -> None:
    p = F.parse_problem(data)
    assert p.to_dict() == data
    assert F.parse_problem(p.to_dict()) == p


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"M": 0, "N": 1, "K": 1, "format": "mxfp4"}, "M must be a positive integer"),
        ({"M": 1, "N": 1.5, "K": 1, "format": "mxfp4"}, "N must be a positive integer"),
        ({"M": 1, "N": 1, "format": "mxfp4"}, "K must be a positive integer"),
        ({"M": 1, "N": 1, "K": 1, "format": "mxfp8_e4m3"}, "format must be one of"),
        ({"M": 1, "N": 1, "K": 1}, "format must be one of"),
        ({"M": 1, "N": 1, "K": 1, "format": "nvfp4", "inputs": "zeros"}, "inputs must be one of"),
        ({"M": 1, "N": 1, "K": 1, "format": "nvfp4", "dtype": "bfloat16"}, "unknown problem key"),
        ({"M": 2**21, "N": 1, "K": 2**20, "format": "nvfp4"}, "A has"),
    ],
)
def test_bad_problems_are_refused_with_a_reason(data, fragment) -> None:
    with pytest.raises(InvalidProblem, match=fragment):
        F.parse_problem(data)


def test_buffers_work_and_distance() -> None:
    nv = problem(M=3, N=5, K=37, format="nvfp4")
    shapes = {b.name: (b.shape, b.dtype, b.role) for b in F.buffers(nv)}
    assert shapes == {
        "a": ((3, 37), "bfloat16", "input"),
        "values": ((5, 19), "uint8", "input"),
        "scales": ((5, 3), "uint8", "input"),
        "tensor_scale": ((1,), "float32", "input"),
        "d": ((3, 5), "bfloat16", "output"),
        "partials": ((8, 3, 5), "float32", "workspace"),  # template wgmma's split-K
        "counters": ((8,), "uint8", "workspace"),
    }
    assert "tensor_scale" not in {b.name for b in F.buffers(problem(M=3, N=5, K=37))}
    work = F.work(nv)
    assert work.flops == 2 * 3 * 5 * 37
    assert work.bytes_moved == 3 * 37 * 2 + 5 * (19 + 3) + 4 + 3 * 5 * 2
    a, b = problem(M=1, N=4096, K=4096), problem(M=4, N=8192, K=4096)
    assert F.distance(a, b) == pytest.approx(3.0)
    assert F.distance(a, problem(M=1, N=4096, K=4096, format="nvfp4")) is None


def arrays(p) -> dict[str, SimpleNamespace]:
    """The caller's arrays of ``p`` (workspace is tunebox's own)."""
    return {b.name: SimpleNamespace(shape=b.shape, dtype=b.dtype) for b in F.buffers(p) if b.role != "workspace"}


def test_caller_arrays_describe_the_problem() -> None:
    p = problem(M=3, N=4099, K=4111, format="nvfp4", inputs="edges")
    caller = F.problem_from_arrays(arrays(p), **F.launch_options(p))
    assert F.identity(caller) == F.identity(p) and caller.inputs == "random"
    missing = arrays(p)
    del missing["tensor_scale"]
    with pytest.raises(InvalidProblem, match="missing"):
        F.problem_from_arrays(missing, format="nvfp4")
    wrong = arrays(p)
    wrong["scales"] = SimpleNamespace(shape=(4099, 258), dtype="uint8")  # mxfp4's scales
    with pytest.raises(InvalidProblem, match="array scales has shape"):
        F.problem_from_arrays(wrong, format="nvfp4")
    stored = arrays(p)
    stored["values"] = SimpleNamespace(shape=stored["values"].shape, dtype="float4_e2m1fn_x2")
    stored["scales"] = SimpleNamespace(shape=stored["scales"].shape, dtype="float8_e4m3fn")
    assert F.identity(F.problem_from_arrays(stored, format="nvfp4")) == F.identity(p)  # torch's code storage
    with pytest.raises(InvalidProblem, match="scales of nvfp4 are uint8 or float8_e4m3fn"):
        F.problem_from_arrays(
            {**stored, "scales": SimpleNamespace(shape=(4099, 258), dtype="float8_e8m0fnu")}, format="nvfp4"
        )


def independent(p, inputs) -> np.ndarray:
    """D in float64 from the formats' decode tables (not the quant reference's dequantize)."""
    codes = unpack_nibbles(inputs["values"], p.K)
    scales = np.repeat(scale_table(p.fmt)[inputs["scales"]].astype(np.float64), p.fmt.block, axis=1)[:, : p.K]
    with np.errstate(invalid="ignore", over="ignore"):
        w = decode_table(E2M1)[codes].astype(np.float64) * scales
        if p.nvfp4:
            w = w * float(inputs["tensor_scale"].view(np.float32)[0])
        w = np.where(np.abs(w) >= 2.0**128, np.copysign(np.inf, w), w)  # float32 overflow, as dequantized
        return np.einsum("mk,nk->mn", BF16.decode(inputs["a"]), w)


@pytest.mark.parametrize("fmt", ["mxfp4", "nvfp4"])
@pytest.mark.parametrize("shape", [(1, 7, 1), (3, 9, 4111 % 200), (5, 11, 300)], ids=str)
@pytest.mark.parametrize("inputs", ["random", "edges"])
def test_the_reference_is_the_float64_product(fmt, shape, inputs) -> None:
    m, n, k = shape
    p = problem(M=m, N=n, K=k, format=fmt, inputs=inputs)
    data = F.make_inputs(p, np.random.default_rng(5))
    got = BF16.decode(F.reference(p, data)["d"])
    want = independent(p, data)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(np.isinf(got), np.isinf(want) | (np.abs(want) > 3.3e38))
    finite = np.isfinite(got)
    tol = F.tolerance(p, data)
    assert np.all(np.abs(got[finite] - want[finite]) <= 2.0**-8 * np.abs(want[finite]) + 1e-30)
    assert tol.rtol == 1e-2 and (0 < tol.atol < np.inf if inputs == "random" else 0 <= tol.atol < np.inf)


def test_edges_plant_nan_infinite_and_large_blocks() -> None:
    p = problem(M=4, N=8, K=100, inputs="edges")
    data = F.make_inputs(p, np.random.default_rng(0))
    d = BF16.decode(F.reference(p, data)["d"])
    assert np.isnan(d[:, 0]).all()  # scale 255
    assert np.isinf(d[:, 2]).all()  # one element 2 * 2^127 in the (partial) last block
    assert np.isfinite(d[:, [1, 3, 4, 5, 6, 7]]).all()
    assert data["scales"][3, 0] == 200 and data["scales"][4, 0] == 129
    nv = problem(M=4, N=8, K=100, format="nvfp4", inputs="edges")
    d = BF16.decode(F.reference(nv, F.make_inputs(nv, np.random.default_rng(0)))["d"])
    assert np.isnan(d[:, :2]).all() and np.isfinite(d[:, 2:]).all()


def assert_rule(p, good, bad, fragment: str) -> None:
    assert F.violations(p, good) == [], F.violations(p, good)
    broken = F.violations(p, bad)
    assert any(fragment in b for b in broken), broken
    with pytest.raises(InvalidConfig, match=fragment):
        F.check(p, bad)


def maker(template: str, config_type, **base):
    """A helper that builds ``template``'s configuration from ``base`` with some fields replaced."""

    def make(**fields):
        return F.template_config(template, config_type(**{**base, **fields}))

    return make


decode = maker(
    "decode", DecodeConfig, rows=16, warps=4, warps_k=1, tokens=8, unroll=2, splits=1, second_factor="branch"
)
stream = maker(
    "stream",
    StreamConfig,
    rows=16,
    warps=4,
    warps_k=1,
    tokens=8,
    chunk=512,
    stages=4,
    blocks_per_sm=1,
    second_factor="branch",
)
tiled = maker("tiled", TiledConfig, BM=64, BN=128, BK=128, warps_m=2, warps_n=2, stages=3)
wgmma = maker(
    "wgmma",
    WgmmaConfig,
    BM=128,
    BN=128,
    stages=4,
    operands=2,
    schedule="cooperative",
    raster="m",
    group=8,
    epilogue="tma",
    producer_registers=88,
    consumer_registers=208,
    scales_ahead=4,
    converters="producer",
    splits=1,
)
registers = maker("registers", RegistersConfig, BW=128, BT=256, stages=4, scales_ahead=2, splits=1, codes="copies")


BIG = problem(M=256, N=4096, K=4096)
SMALL = problem(M=1, N=4096, K=4096)


@pytest.mark.parametrize(
    ("p", "good", "bad", "fragment"),
    [
        (SMALL, decode(warps=4, warps_k=2), decode(warps=2, warps_k=4), "does not divide warps"),
        (problem(M=9, N=4096, K=4096), decode(tokens=16), decode(tokens=32), "whole token tiles would idle"),
        (problem(M=1, N=40, K=4096), decode(warps=2), decode(warps=4), "whole warps would idle"),
        (
            problem(M=1, N=64, K=1024),
            decode(splits=4, warps=2, warps_k=2),
            decode(splits=8, warps=2, warps_k=2),
            "warps would idle",
        ),
        (problem(M=1, N=4096, K=100), decode(splits=1), decode(splits=2), "whole spans of 128"),
        (problem(M=2**20, N=64, K=64), decode(tokens=64, warps=4), decode(tokens=8, warps=4), "exceeds the limits"),
        (problem(M=9, N=4096, K=4096), stream(tokens=16), stream(tokens=32), "whole token tiles would idle"),
        (problem(M=1, N=40, K=4096), stream(warps=2), stream(warps=4), "whole warps would idle"),
        (problem(M=1, N=4096, K=512), stream(chunk=256), stream(chunk=512), "stages would be padding"),
        (SMALL, stream(), stream(rows=32, warps=16, chunk=1024, stages=6), "shared memory"),
        (SMALL, stream(warps=8, warps_k=4), stream(warps=4, warps_k=8), "does not divide warps"),
        (SMALL, stream(warps=8, warps_k=4, chunk=256), stream(warps=8, warps_k=8, chunk=256), "spans of 128 in"),
        (SMALL, stream(blocks_per_sm=1), stream(blocks_per_sm=4), "exceed an SM's"),
        (BIG, tiled(), tiled(BM=32, warps_m=4), "whole 16 x 8 MMA tiles"),
        (BIG, tiled(BM=128, BN=128, warps_m=2, warps_n=2), tiled(BM=256, BN=128, warps_m=2, warps_n=2), "accumulators"),
        (
            BIG,
            tiled(BM=64, BN=64, warps_m=1, warps_n=1),
            tiled(BM=128, BN=32, warps_m=1, warps_n=1),
            "registers of fragments",
        ),
        (problem(M=64, N=4096, K=4096), tiled(BM=64), tiled(BM=128), "token tiles would idle"),
        (problem(M=64, N=4096, K=100), tiled(BK=128), tiled(BK=256), "K steps would be padding"),
        (BIG, tiled(stages=2), tiled(stages=1), "stages >= 2"),
        (BIG, wgmma(BM=128), wgmma(BM=64), "BM must be 128 or 256"),
        (BIG, wgmma(BM=64, schedule="pingpong"), wgmma(BM=256, schedule="pingpong"), "BM must be 64 or 128"),
        (BIG, wgmma(BM=256, BN=128, stages=3), wgmma(BM=256, BN=256, stages=2), "accumulators"),
        (BIG, wgmma(producer_registers=88, consumer_registers=208), wgmma(consumer_registers=224), "register budget"),
        (problem(M=64, N=4096, K=4096), wgmma(BM=64, schedule="pingpong"), wgmma(BM=128), "token rows would idle"),
        (problem(M=256, N=4100, K=4096), wgmma(epilogue="direct"), wgmma(epilogue="tma"), "multiple of 8"),
        (BIG, wgmma(stages=6), wgmma(stages=12), "shared memory"),
        (BIG, wgmma(converters="consumers", operands=4), wgmma(converters="consumers", operands=3), "operands >= 4"),
        (
            BIG,
            wgmma(converters="consumers", operands=4, stages=3),
            wgmma(converters="consumers", operands=4, stages=2),
            "stages >= 3",
        ),
        (
            BIG,
            wgmma(converters="consumers", operands=4),
            wgmma(converters="consumers", operands=4, schedule="pingpong"),
            "schedule 'cooperative'",
        ),
        (
            BIG,
            wgmma(converters="consumers", operands=4, producer_registers=40, consumer_registers=232),
            wgmma(producer_registers=40, consumer_registers=232),
            "decoder warps need 56",
        ),
        (BIG, wgmma(splits=4), wgmma(splits=4, epilogue="direct"), "split-K takes epilogue 'tma'"),
        (
            BIG,
            wgmma(converters="decoders", producer_registers=40, consumer_registers=192),
            wgmma(converters="decoders", producer_registers=40, consumer_registers=224),
            "leave them 24",
        ),
        (
            BIG,
            wgmma(converters="decoders", producer_registers=40, consumer_registers=192, BN=192),
            wgmma(converters="decoders", producer_registers=40, consumer_registers=192, BN=256, stages=3),
            "BN <= 192",
        ),
        (problem(M=256, N=4096, K=128), wgmma(splits=2), wgmma(splits=4), "as many K steps"),
        (problem(M=256, N=16384, K=4096), wgmma(splits=2), wgmma(splits=4), "exceed the workspace"),
        (BIG, tiled(BM=128, BN=128, BK=256, stages=2), tiled(BM=128, BN=128, BK=256, stages=4), "shared memory"),
        (BIG, registers(BW=256, BT=8), registers(BW=64, BT=8), "BT >= 16 or BW > 64"),
        (BIG, registers(BW=256, BT=128), registers(BW=256, BT=256), "accumulators a thread"),
        (BIG, registers(BW=256, BT=64, splits=2), registers(BW=256, BT=128, splits=2), "BT=128 with splits=1"),
        (BIG, registers(BW=256, BT=128), registers(BW=256, BT=128, scales_ahead=4), "scales_ahead <= 2"),
        (problem(M=16, N=4096, K=4096), registers(BT=16), registers(BT=32), "token rows would idle"),
        (BIG, registers(stages=6), registers(stages=8), "shared memory"),
        (problem(M=256, N=4096, K=128), registers(splits=2), registers(splits=4), "as many K steps"),
        (problem(M=256, N=16384, K=4096), registers(splits=2), registers(splits=4), "exceed the workspace"),
        (
            problem(M=17, N=4096, K=4096),
            registers(BT=32, splits=2),
            registers(BT=8, splits=2),
            "split-K counts arrivals",
        ),
        (
            problem(M=2**22, N=8, K=64),
            tiled(BM=256, BN=64, BK=64, warps_m=4),
            tiled(BM=32, BN=64, BK=64),
            "exceeds the limits",
        ),
    ],
)
def test_each_rule_passes_and_fails(p, good, bad, fragment) -> None:
    assert_rule(p, good, bad, fragment)


def test_stream_needs_k_in_whole_pieces() -> None:
    """Rows of codes and scales move in whole 16-byte copies: K a multiple of 16 scale blocks."""
    assert F.violations(problem(M=1, N=4096, K=4352, format="nvfp4"), stream()) == []
    with pytest.raises(InvalidConfig, match="whole 16-byte pieces"):
        F.check(problem(M=1, N=4096, K=4352), stream())
    assert F.templates["stream"].default(problem(M=1, N=4096, K=4352)) is None


def test_registers_needs_k_in_multiples_of_32() -> None:
    assert F.violations(problem(M=256, N=4096, K=4128), registers()) == []
    with pytest.raises(InvalidConfig, match="multiple of 32"):
        F.check(problem(M=256, N=4096, K=4112), registers())
    assert F.templates["registers"].default(problem(M=256, N=4096, K=4112)) is None


def test_registers_default_fills_the_sms_and_the_ring() -> None:
    """Every token up to 256 a tile (at least a wgmma's 8), split along K while the units fit the 132 SMs,
    the deepest ring that fits; the codes map only for codes 'tma'."""
    template = F.templates["registers"]
    one = template.default(problem(M=1, N=4096, K=4096))
    assert (one.BT, one.BW, one.splits, one.stages) == (8, 128, 4, 12)
    wide = template.default(problem(M=256, N=14336, K=4096))
    assert (wide.BT, wide.splits, wide.stages) == (256, 1, 6)
    assert F.geometry(problem(M=256, N=4096, K=4096), F.template_config("registers", template.default(BIG))).grid == (
        128,
        1,
        1,
    )
    huge = problem(M=2**31, N=64, K=64)  # no ring helps: its default breaks only TMA's 32-bit coordinates
    broken = F.violations(huge, F.template_config("registers", template.default(huge)))
    assert len(broken) == 1 and "TMA coordinates are 32-bit" in broken[0], broken
    names = [a.name for a in F.args(BIG, registers(codes="tma"))]
    assert "codes_map" in names and "codes_map" not in [a.name for a in F.args(BIG, registers())]


def test_wgmma_needs_k_in_multiples_of_32() -> None:
    """TMA loads rows of codes (K / 2 bytes) in 16-byte pieces: K a multiple of 32; no default otherwise."""
    assert F.violations(problem(M=256, N=4096, K=4128), wgmma()) == []
    with pytest.raises(InvalidConfig, match="multiple of 32"):
        F.check(problem(M=256, N=4096, K=4112), wgmma())
    assert F.templates["wgmma"].default(problem(M=256, N=4096, K=4112)) is None


PROBLEMS = [
    problem(M=1, N=4096, K=4096),
    problem(M=16, N=14336, K=4096, format="nvfp4"),
    problem(M=3, N=4099, K=4111),
    problem(M=64, N=4096, K=14336, format="nvfp4"),
    problem(M=256, N=4096, K=4096),
    problem(M=5, N=33, K=7, format="nvfp4"),
]


def test_the_defaults_are_valid_and_the_family_default_follows_m() -> None:
    for p in PROBLEMS:
        for name, template in F.templates.items():
            default = template.default(p)
            if default is not None:
                assert F.violations(p, F.template_config(name, default)) == [], (p, name)
        assert F.default_config(p)["template"] == ("tiled" if p.M > 64 else "decode")


def cases() -> list:
    """Every template's default and three seeded valid configurations a template (where it has them),
    per problem."""
    found = []
    for p in PROBLEMS:
        for name, template in F.templates.items():
            default = template.default(p)
            if default is not None:
                found.append((p, F.template_config(name, default)))
            found += [(p, c) for c in sampled_valid(p, name, 3)]
    return found


def sampled_valid(p, template: str, count: int, draws: int = 20_000) -> list:
    """Up to ``count`` distinct valid configurations of ``template`` for ``p``, drawn uniformly from
    its space (seeded by the problem and template; the spaces hold millions, too many to filter)."""
    rng = random.Random(f"{p.key()}{template}")
    params = F.space.template(template).params
    found: list = []
    for _ in range(draws):
        c = F.space.validate({"template": template, **{q.name: rng.choice(q.choices) for q in params}})
        if c not in found and not F.violations(p, c):
            found.append(c)
            if len(found) == count:
                break
    return found


def test_defaults_and_a_sample_compile_for_sm90(tmp_path) -> None:
    """Every case compiles; the defaults do not spill (a few sampled variants spill a word)."""
    chosen = cases()
    builder = NvrtcBuilder("sm_90", cache_dir=tmp_path)
    try:
        results = builder.build([F.render(p, c) for p, c in chosen])
    finally:
        builder.close()
    for (p, config), result in zip(chosen, results, strict=True):
        assert result.status is Status.OK, (p.key(), config.label(), result.log[-2000:])
        if config == F.default_config(p):
            assert result.spill_bytes == 0, (p.key(), config.label(), result.registers)


@pytest.mark.parametrize("template", [decode, stream])
def test_the_second_factor_forms_are_two_binaries_for_mxfp4_only(template) -> None:
    """The small-M templates' ``second_factor``: branch and predicated render two kernels where scales
    take a second factor (mxfp4) and one where none does (nvfp4), so an nvfp4 sweep times that binary
    once."""
    for fmt, distinct in (("mxfp4", True), ("nvfp4", False)):
        p = problem(M=16, N=4096, K=4096, format=fmt)
        sources = {F.render(p, template(second_factor=form)).code for form in ("branch", "predicated")}
        assert len(sources) == (2 if distinct else 1), fmt


def test_wgmma_split_k_takes_units_and_workspace() -> None:
    """splits > 1: the grid covers tiles x splits units (one block an SM at most), the kernel takes the
    workspace's partials and counters, and the problem's workspace holds as many slots as fit."""
    p = problem(M=256, N=4096, K=4096)
    one, four = wgmma(BM=256), wgmma(BM=256, splits=4)
    assert F.geometry(p, one).grid == (32, 1, 1) and F.geometry(p, four).grid == (128, 1, 1)
    assert F.geometry(p, wgmma(BM=256, splits=8)).grid == (132, 1, 1)
    names = [a.name for a in F.args(p, four)]
    assert names[names.index("d") + 1 : names.index("d") + 3] == ["partials", "counters"]
    assert "partials" not in [a.name for a in F.args(p, one)]
    assert "static constexpr int SPLITS = 4;" in F.render(p, four).code
    slots = {b.name: b.shape for b in F.buffers(problem(M=256, N=14336, K=4096))}
    assert slots["partials"] == (2, 256, 14336)


def test_wgmma_decoders_take_a_warpgroup_and_the_registers_left() -> None:
    """converters = decoders: 512 threads, and the decoders' setmaxnreg is what the producer and the two
    consumers leave of the register file (in steps of 8)."""
    p = problem(M=256, N=14336, K=4096)
    config = wgmma(converters="decoders", producer_registers=40, consumer_registers=192)
    assert F.geometry(p, config).block == (512, 1, 1) and F.geometry(p, wgmma()).block == (384, 1, 1)
    code = F.render(p, config).code
    assert "static constexpr int DECODER_REGISTERS = 88;" in code and "static constexpr int THREADS = 512;" in code
    assert "DECODER_REGISTERS" not in F.render(p, wgmma()).code


CONSUMERS = dict(converters="consumers", operands=4, producer_registers=40, consumer_registers=232)
DECODERS = dict(converters="decoders", operands=4, producer_registers=40, consumer_registers=192)
UNSPILLED = {
    # both consumer warpgroups decode beside their accumulators (128 a thread at BM = 256, BN = 128), and
    # the producer's decoder code is gone (40 registers); split-K at BM = 128 (at 256 its epilogue spills
    # 16-32 bytes: the slots' sums, after the main loop)
    "consumers": [
        wgmma(**CONSUMERS),
        wgmma(**CONSUMERS, BM=256, stages=3, epilogue="direct"),
        wgmma(**CONSUMERS, BN=256, stages=3, epilogue="direct"),
        wgmma(**CONSUMERS, stages=4, splits=2),
    ],
    # the block compiled for 128 registers a thread (512 threads): the consumers' 128 accumulators and
    # the decoders' 88 registers
    "decoders": [wgmma(**DECODERS, BM=256, stages=3), wgmma(**DECODERS, BM=128, BN=192, stages=3)],
}


def built_unspilled(tmp_path, p, configs) -> list:
    """Builds valid ``configs`` at ``p`` for sm_90 and checks each compiled without spilling; returns the
    (configuration, build result) pairs."""
    builder = NvrtcBuilder("sm_90", cache_dir=tmp_path)
    try:
        results = builder.build([F.render(p, c) for c in configs])
    finally:
        builder.close()
    for config, result in zip(configs, results, strict=True):
        assert F.violations(p, config) == []
        assert result.status is Status.OK, (config.label(), result.log[-2000:])
        assert result.spill_bytes == 0, (config.label(), result.registers)
    return list(zip(configs, results, strict=True))


REGISTERS = [
    registers(),
    registers(BW=64, BT=256, splits=2, scales_ahead=4),
    registers(BT=128, splits=4, codes="tma", scales_ahead=1),
    registers(BT=8, stages=12),
    registers(BW=256, BT=128, stages=3),
    registers(BW=256, BT=64, splits=4, scales_ahead=4),
]


@pytest.mark.parametrize("fmt", ["mxfp4", "nvfp4"])
def test_registers_compile_without_spilling_or_serialized_wgmmas(tmp_path, fmt) -> None:
    """Template registers spills nothing, and ptxas keeps its wgmmas asynchronous in both formats (it says
    when it serializes them, C7511-C7518; nvfp4's NaN scale codes as a first factor had it serialize them)."""
    p = problem(M=256, N=4096, K=4096, format=fmt)
    for config, result in built_unspilled(tmp_path, p, REGISTERS):
        assert "wgmma.mma_async instructions are serialized" not in result.log, (config.label(), result.log[-2000:])


@pytest.mark.parametrize("converters", sorted(UNSPILLED))
@pytest.mark.parametrize("fmt", ["mxfp4", "nvfp4"])
def test_wgmma_converters_compile_without_spilling(tmp_path, fmt, converters) -> None:
    """converters consumers and decoders at the M = 256 problem's tiles spill nothing."""
    built_unspilled(tmp_path, problem(M=256, N=14336, K=4096, format=fmt), UNSPILLED[converters])
