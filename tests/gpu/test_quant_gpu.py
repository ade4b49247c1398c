"""quant on the GPU, verified bit for bit by the worker: every format, direction, dtype and scale layout on
odd shapes (one row, one column, K not a multiple of the block, odd fp4 rows, rows off the swizzled
layout's 128) at the default and a seeded spread of variants; the seeded inputs plant NaN, +-infinity,
zero, subnormal, largest-value and tie blocks (quantize) and the edge scale codes (dequantize) in every
problem; all-zero tensors (NVFP4's T = 0); the sweep's 64 MB problems (NVFP4's 1024-CTA prologue);
sabotaged variants are rejected; the torch baseline matches the reference and is timed; and
tunebox.launch round-trips caller tensors."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from gpu_jobs import assert_sabotage_caught, evaluate, retime_with_baseline

from tunebox.families import get
from tunebox.records import Status
from tunebox.sweep_spec import load_sweep

pytestmark = pytest.mark.gpu
QUANT = get("quant")
FORMATS = ["mxfp4", "nvfp4", "mxfp8_e4m3", "mxfp8_e5m2"]
DIRECTIONS = ["quantize", "dequantize"]
DTYPES = ["bfloat16", "float32"]
LAYOUTS = ["row_major", "swizzled_128x4"]
ODD = [(1, 1), (1, 4099), (37, 101), (130, 33), (1001, 64)]  # (rows, cols)
SWEEP = Path(__file__).resolve().parents[2] / "spaces" / "quant.toml"
WINNERS = Path(__file__).resolve().parents[2] / "results" / "winners.sqlite"
BIG_TIMEOUT_S = 300  # 64 MB inputs and references are made inside the job


def problem(**fields):
    return QUANT.parse_problem(fields)


def spread(p):
    """The default and a seeded spread of valid variants: every elems_per_thread once (lanes 1 to 16
    a block; vector widths, blocks per thread and thread counts vary with the draw)."""
    configs = [c for c in QUANT.space if not QUANT.violations(p, c)]
    random.Random(str(p)).shuffle(configs)
    chosen = {c["elems_per_thread"]: c for c in configs}
    return [QUANT.default_config(p), *chosen.values()]


def assert_all_ok(runner, builder, p, configs, timeout_s=None) -> None:
    assert configs
    for config in configs:
        outcome = evaluate(runner, builder, QUANT, p, config, timeout_s=timeout_s)
        assert outcome.status is Status.OK, (p, config.label(), outcome.message)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("shape", ODD, ids=str)
def test_every_format_is_exact_on_odd_shapes(runner, builder, shape, name, direction, dtype, layout):
    rows, cols = shape
    p = problem(dtype=dtype, rows=rows, cols=cols, format=name, direction=direction, scale_layout=layout)
    assert_all_ok(runner, builder, p, spread(p))


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_all_zero_tensors(runner, builder, name, dtype):
    """Signed zeros everywhere: MX scales 2^-127, NVFP4's tensor scale 0 and block scales 2^-6."""
    p = problem(dtype=dtype, rows=257, cols=100, format=name, direction="quantize", inputs="zeros")
    assert_all_ok(runner, builder, p, spread(p)[:4])


@pytest.mark.parametrize("index", range(12))
def test_sweep_problems_are_exact(runner, builder, index):
    """The 64 MB problems at their default and two spread variants (NVFP4 quantize: partial maxima
    of 1024 CTAs, then their maximum, then the blocks)."""
    named = load_sweep(SWEEP).problems[index]
    assert_all_ok(runner, builder, named.problem, spread(named.problem)[:3], timeout_s=BIG_TIMEOUT_S)


def test_sabotaged_variants_are_rejected(runner, builder):
    """Swapped nibbles (the reinterpret order), scales written past the swizzled layout's real blocks
    (its padding must be 0), a NaN block quantized like any other, and the two elements of a word
    swapped in the packed bfloat16 paths."""
    fp4 = problem(
        dtype="bfloat16", rows=130, cols=96, format="nvfp4", direction="quantize", scale_layout="swizzled_128x4"
    )
    config = QUANT.default_config(fp4)
    swap = ("e2m1_encode(lo) | e2m1_encode(hi) << 4", "e2m1_encode(hi) | e2m1_encode(lo) << 4")
    assert_sabotage_caught(runner, builder, QUANT, fp4, config, *swap, expect="values:")
    padding = ("real[k] ? (u8)scale : 0", "(u8)scale")
    assert_sabotage_caught(runner, builder, QUANT, fp4, config, *padding, expect="scales:")
    fp8 = problem(dtype="float32", rows=64, cols=96, format="mxfp8_e4m3", direction="quantize")
    nan = ("codes = (codes & keep) | fill;", "(void)keep, (void)fill;")
    assert_sabotage_caught(runner, builder, QUANT, fp8, QUANT.default_config(fp8), *nan, expect="values:")
    # the packed bfloat16 paths (MXFP4 quantize, fp4 dequantize): a word's two elements swapped
    for direction, swapped in (
        ("quantize", ("e2m1_pair_byte(in[k].w[i],", "e2m1_pair_byte(in[k].w[i] >> 16 | in[k].w[i] << 16,")),
        ("dequantize", ("(b & 0xFu) | (b & 0xF0u) << 12", "(b & 0xF0u) >> 4 | (b & 0xFu) << 16")),
    ):
        mx = problem(dtype="bfloat16", rows=33, cols=96, format="mxfp4", direction=direction)
        expect = "values:" if direction == "quantize" else "x:"
        assert_sabotage_caught(runner, builder, QUANT, mx, QUANT.default_config(mx), *swapped, expect=expect)


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("name", FORMATS)
def test_variants_time_and_torch_baseline_matches(runner, builder, name, direction):
    pytest.importorskip("torch")
    layout = "swizzled_128x4" if name == "nvfp4" else "row_major"
    p = problem(dtype="bfloat16", rows=1024, cols=4096, format=name, direction=direction, scale_layout=layout)
    outcomes = retime_with_baseline(runner, builder, QUANT, p, QUANT.default_config(p))
    assert len(outcomes) == 2
    assert outcomes[0].status is Status.OK and len(outcomes[0].samples_ms) >= 10, outcomes[0].message
    assert outcomes[1].status is Status.OK, outcomes[1].message
    assert outcomes[1].baseline.startswith("torch: ")


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("use", ["tunebox", "library"])
@pytest.mark.parametrize("storage", ["bytes", "torch"])
def test_launch_round_trips_caller_tensors(tmp_path, name, storage, use):
    """tunebox.launch quantizes a caller's bfloat16 tensor and dequantizes it back, both bit for bit the
    reference's, through the kernel and through the torch composition's in-place form, with the codes
    in uint8 tensors or in torch's own float8 / float4 storage types."""
    torch = pytest.importorskip("torch")
    from tunebox.runtime.launch import Launcher

    launcher = Launcher(WINNERS, cache_dir=tmp_path / "cubins")  # no quant winners: the default variant
    p = problem(dtype="bfloat16", rows=300, cols=4099, format=name, direction="quantize")
    x = QUANT.make_inputs(p, np.random.default_rng(7))["x"]
    want = QUANT.reference(p, {"x": x})
    types = {"values": p.fmt.value_storage, "scales": p.fmt.scale_storage}
    arrays = {"x": torch.from_numpy(x.view(np.int16)).cuda().view(torch.bfloat16)}
    for spec in QUANT.buffers(p):
        if spec.role == "output":
            dtype = torch.float32 if spec.dtype == "float32" else torch.uint8
            if storage == "torch" and spec.name in types:
                dtype = getattr(torch, types[spec.name])
            arrays[spec.name] = torch.empty(spec.shape, dtype=dtype, device="cuda")
    served = launcher("quant", arrays, use=use, format=name, direction="quantize")
    assert served.ran == ("kernel" if use == "tunebox" else "library"), served.explanation
    torch.cuda.synchronize()
    for key, bits in want.items():
        raw = arrays[key].view(torch.uint8) if arrays[key].element_size() == 1 else arrays[key]
        got = raw.cpu().numpy().view(bits.dtype).reshape(bits.shape)
        np.testing.assert_array_equal(got, bits, err_msg=key)
    back = QUANT.parse_problem({**p.to_dict(), "direction": "dequantize"})
    out = torch.empty_like(arrays["x"])
    served = launcher("quant", {**arrays, "x": out}, use=use, format=name, direction="dequantize")
    assert served.ran == ("kernel" if use == "tunebox" else "library"), served.explanation
    torch.cuda.synchronize()
    expected = QUANT.reference(back, {k: v for k, v in want.items()})["x"]
    np.testing.assert_array_equal(out.cpu().view(torch.int16).numpy().view(np.uint16), expected)
