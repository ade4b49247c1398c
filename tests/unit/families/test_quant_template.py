"""quant's template and operation without a GPU: validity rules, defaults, geometry, kernel arguments and
the NVFP4 prologue, buffers, work, distance, caller arrays, the sweep file, and (where torch is
installed) the torch baseline against the reference on the CPU."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from family_checks import assert_rule

from tunebox.errors import InvalidProblem
from tunebox.families.base import BufferArg
from tunebox.families.quant import FAMILY, FORMATS, BlocksConfig, QuantProblem
from tunebox.families.quant.blocks import cta_blocks, grid_blocks, values_access
from tunebox.runtime.arrays import stores
from tunebox.sweep_spec import load_sweep

Q = FAMILY
SWEEP = Path(__file__).resolve().parents[3] / "spaces" / "quant.toml"


def problem(**extra) -> QuantProblem:
    data = {"dtype": "bfloat16", "rows": 256, "cols": 4096, "format": "mxfp4", "direction": "quantize", **extra}
    return Q.parse_problem(data)


def config(threads=256, ept=8, vec=16, bpt=1):
    return Q.template_config("blocks", BlocksConfig(threads, ept, vec, bpt))


def test_rules_each_pass_and_fail() -> None:
    p = problem()
    assert_rule(Q, problem(dtype="float32"), config(vec=4), config(vec=2), "not a multiple of the 4-byte element")
    assert_rule(Q, problem(format="nvfp4"), config(ept=16), config(ept=32, vec=16), "exceeds the nvfp4 block of 16")
    assert_rule(Q, p, config(ept=8, vec=16), config(ept=4, vec=16), "a vector of 8 elements exceeds elems_per_thread=4")
    assert_rule(Q, problem(cols=4097), config(vec=2), config(vec=4), "do not split into 2-element vectors")
    assert_rule(Q, problem(dtype="float32"), config(ept=16, bpt=4), config(ept=32, bpt=4), "exceed 256 bytes")
    small = problem(rows=1, cols=64)  # 2 scale blocks
    assert_rule(Q, small, config(threads=64), config(threads=128), "threads would idle")


def test_defaults_are_valid_on_odd_and_tiny_shapes() -> None:
    for name in FORMATS:
        for direction in ("quantize", "dequantize"):
            for rows, cols in ((1, 1), (3, 33), (129, 4097), (8192, 4096)):
                for dtype in ("bfloat16", "float32"):
                    p = problem(rows=rows, cols=cols, format=name, direction=direction, dtype=dtype)
                    assert Q.violations(p, Q.default_config(p)) == [], p


def test_geometry_covers_every_block_and_the_swizzled_padding() -> None:
    for p in (problem(rows=130, cols=4100, scale_layout="swizzled_128x4"), problem(direction="dequantize", cols=33)):
        for c in (config(), config(threads=64, ept=32, vec=16, bpt=2)):
            if Q.violations(p, c):
                continue
            grid = Q.geometry(p, c).grid[0]
            typed = Q.typed(c)[1]
            assert (grid - 1) * cta_blocks(p, typed) < grid_blocks(p) <= grid * cta_blocks(p, typed)
    swizzled = problem(rows=130, cols=4100, scale_layout="swizzled_128x4")
    assert grid_blocks(swizzled) == 256 * 132 and swizzled.scale_shape == (256 * 132,)
    assert grid_blocks(problem(rows=130, cols=4100, scale_layout="swizzled_128x4", direction="dequantize")) == 130 * 129


def test_values_access_divides_the_thread_share_and_the_row() -> None:
    typed = BlocksConfig(256, 32, 16, 1)
    assert values_access(problem(cols=4096), typed) == 16  # 16 fp4 bytes a thread, rows of 2048
    assert values_access(problem(cols=4097), typed) == 1  # rows of 2049 bytes
    assert values_access(problem(cols=4100, format="mxfp8_e4m3"), typed) == 4
    assert values_access(problem(cols=4096), BlocksConfig(256, 2, 4, 1)) == 1


def test_arguments_and_the_nvfp4_prologue() -> None:
    p = problem(format="nvfp4", scale_layout="swizzled_128x4", cols=4100)
    c = config(ept=4, vec=8)
    names = [a.name for a in Q.args(p, c)]
    assert names == ["x", "values", "scales", "tensor_scale", "rows", "cols", "nb", "rb", "gc", "sc", "total"]
    scalars = {a.name: a.value for a in Q.args(p, c) if not isinstance(a, BufferArg)}
    assert scalars == {"rows": 256, "cols": 4100, "nb": 257, "rb": 2050, "gc": 260, "sc": 260, "total": 256 * 260}
    partial, final = Q.prologue(p, c)
    assert (partial.kernel, final.kernel) == ("quant_amax_partial", "quant_amax_final")
    assert partial.geometry.grid[0] == final.args[2].value <= 1024
    assert Q.prologue(problem(format="nvfp4", direction="dequantize"), c) == ()
    source = Q.render(p, c)
    assert source.helpers == ("quant_amax_partial<Cfg>", "quant_amax_final<Cfg>")
    for member in ("quant_amax_partial_args_t", "int LP_VEC = 2;", "bool SWIZZLED = true;"):
        assert member in source.code
    dq = Q.args(problem(direction="dequantize"), c)
    assert [a.pointee for a in dq if isinstance(a, BufferArg)] == ["unsigned short"] + ["const unsigned char"] * 2


def test_buffers_work_and_distance() -> None:
    p = problem(format="nvfp4", cols=33)
    specs = {b.name: (b.shape, b.dtype, b.role) for b in Q.buffers(p)}
    assert specs == {
        "x": ((256, 33), "bfloat16", "input"),
        "values": ((256, 17), "uint8", "output"),
        "scales": ((256, 3), "uint8", "output"),
        "tensor_scale": ((1,), "float32", "output"),
        "amax": ((1024,), "float32", "workspace"),
    }
    assert Q.work(p).bytes_moved == 2 * 256 * 33 * 2 + 256 * 17 + 256 * 3 + 4  # x read twice
    dq = problem(direction="dequantize", scale_layout="swizzled_128x4", cols=4096)
    assert {b.name: b.role for b in Q.buffers(dq)} == {"x": "output", "values": "input", "scales": "input"}
    assert Q.work(dq).bytes_moved == 256 * 4096 * 2 + 256 * 2048 + 256 * 128  # the real scales only
    assert Q.distance(problem(), problem(rows=1024, cols=1024)) == 4.0
    assert Q.distance(problem(), problem(format="nvfp4")) is None
    assert Q.distance(problem(), problem(direction="dequantize")) is None


def array(shape, dtype: str) -> SimpleNamespace:
    return SimpleNamespace(shape=shape, dtype=dtype)


def test_caller_arrays() -> None:
    arrays = {"x": array((64, 96), "float32"), "values": array((64, 48), "uint8"), "scales": array((64, 3), "uint8")}
    p = Q.problem_from_arrays(arrays, format="mxfp4", direction="dequantize")
    assert (p.rows, p.cols, p.element, p.direction) == (64, 96, "float32", "dequantize")
    with pytest.raises(InvalidProblem, match="missing \\['tensor_scale'\\]"):
        Q.problem_from_arrays(arrays, format="nvfp4", direction="quantize")
    with pytest.raises(InvalidProblem, match="dtype must be one of"):
        Q.problem_from_arrays({**arrays, "x": array((64, 96), "float16")}, format="mxfp4", direction="quantize")


@pytest.mark.parametrize(
    ("format", "values", "scales"),
    [
        ("mxfp4", "float4_e2m1fn_x2", "float8_e8m0fnu"),
        ("nvfp4", "float4_e2m1fn_x2", "float8_e4m3fn"),
        ("mxfp8_e4m3", "float8_e4m3fn", "float8_e8m0fnu"),
        ("mxfp8_e5m2", "float8_e5m2", "uint8"),
    ],
)
def test_caller_codes_in_torch_storage_types(format: str, values: str, scales: str) -> None:
    """Codes come as bytes or as torch's type of exactly those codes; another code type is refused."""
    rb = 48 if format in ("mxfp4", "nvfp4") else 96
    arrays = {
        "x": array((64, 96), "bfloat16"),
        "values": array((64, rb), values),
        "scales": array((64, 96 // FORMATS[format].block), scales),
        "tensor_scale": array((1,), "float32"),
    }
    assert Q.problem_from_arrays(arrays, format=format, direction="quantize").format == format
    wrong = "float8_e5m2" if values != "float8_e5m2" else "float8_e4m3fn"
    with pytest.raises(InvalidProblem, match=f"values of {format} are uint8 or {values} .*not {wrong}"):
        Q.problem_from_arrays({**arrays, "values": array((64, rb), wrong)}, format=format, direction="quantize")


def test_byte_buffers_take_one_byte_code_types_only() -> None:
    assert stores("uint8", "float4_e2m1fn_x2") and stores("uint8", "float8_e8m0fnu") and stores("uint8", "uint8")
    assert not stores("uint8", "int8") and not stores("float32", "float8_e4m3fn") and not stores("bfloat16", "float16")


def test_sweep_file() -> None:
    spec = load_sweep(SWEEP)
    assert spec.family is Q and spec.space.names() == ("blocks",) and spec.space.size() == Q.space.size() == 240
    problems = [n.problem for n in spec.problems]
    assert {(p.format, p.direction) for p in problems} == {(f, d) for f in FORMATS for d in ("quantize", "dequantize")}
    assert {p.scale_layout for p in problems} == {"row_major", "swizzled_128x4"}
    assert {p.element for p in problems} == {"bfloat16", "float32"}
    assert any(p.cols % 2 and p.rows % 2 for p in problems)  # the odd shape
    for p in problems:
        assert p.rows * p.cols * (2 if p.element == "bfloat16" else 4) >= 64 * 2**20 - 2**20
        assert Q.violations(p, Q.default_config(p)) == []
        assert len([c for c in spec.space if not Q.violations(p, c)]) >= 40


@pytest.mark.parametrize("name", sorted(FORMATS))
@pytest.mark.parametrize("direction", ["quantize", "dequantize"])
def test_torch_baseline_matches_the_reference(name: str, direction: str) -> None:
    """On the CPU (the GPU tests run it on the device): inputs handed over as the worker does (signed
    integer views of the bits), outputs compared bit for bit."""
    torch = pytest.importorskip("torch")
    for dtype, layout in (("bfloat16", "swizzled_128x4"), ("float32", "row_major")):
        p = problem(rows=130, cols=101, format=name, direction=direction, dtype=dtype, scale_layout=layout)
        inputs = Q.make_inputs(p, np.random.default_rng(5))
        signed = {
            k: torch.from_numpy(v.view({1: np.uint8, 2: np.int16, 4: np.int32}[v.itemsize]).copy())
            for k, v in inputs.items()
        }
        (baseline,) = Q.torch_baselines(p)
        outputs = baseline.run(signed)
        for key, want in Q.reference(p, inputs).items():
            got = outputs[key].contiguous().numpy().view(want.dtype).reshape(want.shape)
            np.testing.assert_array_equal(got, want, err_msg=f"{p} {key}")
