"""quant_gemm on the GPU, verified by the worker against the reference within the family's tolerance (NaN and
infinity only bit for bit): every template at M = 1, 3, 16, 64, 256 on odd shapes (odd N; for decode and
tiled K not a multiple of the block nor of 128, K below one span; for stream, which takes K in whole pieces
of 512, one chunk, several and a partial last one; for wgmma and registers, which take K in multiples of 32,
a last K step half past K, and for registers also K a multiple of 64 and N of 8) in both formats, at its
default and a seeded variant (wgmma's three converters and its split-K on their own; registers' split-K on
its own), every structural value of each template's parameters once on one odd shape, on inputs with planted
NaN, zero, subnormal, infinite and large (two-factor) scale blocks; the sweep's shapes at the family default
and at stream's; sabotaged reductions and stream's scale mapping are caught; the torch baselines match the
reference and are timed."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from gpu_jobs import assert_sabotage_caught, evaluate, retime_with_baseline

from tunebox.families import get
from tunebox.records import Status

pytestmark = pytest.mark.gpu
QG = get("quant_gemm")
WINNERS = Path(__file__).resolve().parents[2] / "results" / "winners.sqlite"
TOKENS = [1, 3, 16, 64, 256]
SHAPES = [(4099, 4111), (33, 300), (7, 100)]  # (N, K): odd N; K % 32, K % 128 != 0; K below one span
STREAM_SHAPES = [(4099, 2560), (33, 512), (7, 1024)]  # odd N, fewer rows than a warp's; K of 1 to 5 chunks
WGMMA_SHAPES = [(4099, 4128), (33, 320), (7, 96)]  # odd N; K % 64 = 32 (a half K step past K); one step and a half
# and K % 64 = 0 (a row's scale codes of a step in one load), N % 8 = 0 (split-K's whole parts by vectors)
REGISTERS_SHAPES = [*WGMMA_SHAPES, (4104, 4160)]
SPLIT_SHAPES = [(4104, 4128), (40, 320), (8, 160)]  # split-K's TMA epilogue: N % 8 = 0; K % 64 = 32; 3 steps
STRUCTURAL_SHAPES = {
    "decode": (4099, 4111),
    "tiled": (4099, 4111),
    "stream": (4099, 2560),
    "wgmma": (4104, 4128),
    "registers": (4099, 4128),
}
STRUCTURAL_KEYS = {
    "decode": ("splits", "warps_k", "unroll", "rows", "tokens", "second_factor"),
    "tiled": ("stages", "BK", "BM", "warps_m", "warps_n"),
    "stream": ("rows", "warps", "warps_k", "tokens", "chunk", "stages", "blocks_per_sm", "second_factor"),
    "wgmma": (
        "BM", "BN", "stages", "schedule", "raster", "group", "epilogue", "producer_registers", "consumer_registers",
        "scales_ahead", "operands", "converters", "splits",
    ),
    "registers": ("BW", "BT", "stages", "scales_ahead", "splits", "codes"),
}  # fmt: skip
# wgmma's tiles of 128 and 256 tokens take M past 64, as do registers' of 128 and 256
STRUCTURAL_TOKENS = [(t, m) for t in STRUCTURAL_KEYS for m in (3, 64)] + [("wgmma", 256), ("registers", 256)]
TIMEOUT_S = 300


def problem(**fields):
    return QG.parse_problem(fields)


def spread(p, template: str, keys: tuple[str, ...] = (), only: dict | None = None, draws: int = 5_000):
    """The template's default (where it has one, and ``only`` is not given), one seeded valid variant,
    and variants covering each value of ``keys`` once (where one is valid); ``only`` restricts the space
    (values per field). Variants are drawn at random from the (restricted) space: wgmma's holds millions."""
    space = QG.space.restrict({"template": [template], **(only or {})}).template(template)
    rng = random.Random(p.key() + template)

    def draw(fixed: dict):
        for _ in range(draws):
            values = {q.name: fixed.get(q.name, rng.choice(q.choices)) for q in space.params}
            config = QG.space.validate({"template": template, **values})
            if not QG.violations(p, config):
                return config
        return None

    chosen = [draw({})] + [draw({key: value}) for key in keys for value in space[key].choices]
    default = QG.templates[template].default(p) if only is None else None
    first = [QG.template_config(template, default)] if default is not None else []
    return list({c.items: c for c in first + [c for c in chosen if c is not None]}.values())


@pytest.mark.parametrize(
    ("template", "shape"),
    [(t, s) for t in ("decode", "tiled") for s in SHAPES]
    + [("stream", s) for s in STREAM_SHAPES]
    + [("wgmma", s) for s in WGMMA_SHAPES]
    + [("registers", s) for s in REGISTERS_SHAPES],
    ids=str,
)
@pytest.mark.parametrize("fmt", ["mxfp4", "nvfp4"])
@pytest.mark.parametrize("m", TOKENS)
def test_every_template_on_odd_shapes_and_edge_scales(runner, builder, m, shape, fmt, template):
    n, k = shape
    p = problem(M=m, N=n, K=k, format=fmt, inputs="edges")
    configs = spread(p, template)
    for config in configs:
        outcome = evaluate(runner, builder, QG, p, config, timeout_s=TIMEOUT_S)
        assert outcome.status is Status.OK, (p.key(), config.label(), outcome.message)


@pytest.mark.parametrize(("template", "m"), STRUCTURAL_TOKENS, ids=str)
@pytest.mark.parametrize("fmt", ["mxfp4", "nvfp4"])
def test_every_structural_value(runner, builder, m, fmt, template):
    """Every value of each template's structural parameters (``STRUCTURAL_KEYS``) once."""
    n, k = STRUCTURAL_SHAPES[template]
    p = problem(M=m, N=n, K=k, format=fmt, inputs="edges")
    for config in spread(p, template, STRUCTURAL_KEYS[template]):
        outcome = evaluate(runner, builder, QG, p, config, timeout_s=TIMEOUT_S)
        assert outcome.status is Status.OK, (p.key(), config.label(), outcome.message)


# converters, M and the keys whose every value a test covers: consumers need cooperative tiles (M past 64)
CONVERTER_CASES = [("consumers", m, ("BN", "operands")) for m in (100, 256)] + [
    ("decoders", m, ("BN", "operands", "schedule")) for m in (3, 100, 256)
]


@pytest.mark.parametrize("shape", WGMMA_SHAPES, ids=str)
@pytest.mark.parametrize("fmt", ["mxfp4", "nvfp4"])
@pytest.mark.parametrize(("converters", "m", "keys"), CONVERTER_CASES, ids=str)
def test_wgmma_converters_on_odd_shapes(runner, builder, converters, m, keys, fmt, shape):
    """converters = consumers (the consumers decode each step while their wgmma of the step before runs,
    in step through a named barrier) and decoders (a fourth warpgroup decodes each step into the operand
    ring, signalled by the ready and drained mbarriers): each value of ``keys`` once, edge scales."""
    n, k = shape
    p = problem(M=m, N=n, K=k, format=fmt, inputs="edges")
    for config in spread(p, "wgmma", keys, only={"converters": [converters]}):
        outcome = evaluate(runner, builder, QG, p, config, timeout_s=TIMEOUT_S)
        assert outcome.status is Status.OK, (p.key(), config.label(), outcome.message)


# wgmma's split-K takes the TMA epilogue (N % 8 = 0); registers' stores from registers (odd N)
SPLIT_CASES = [("wgmma", s, ("splits", "converters")) for s in SPLIT_SHAPES] + [
    ("registers", s, ("splits", "BW")) for s in REGISTERS_SHAPES
]


@pytest.mark.parametrize(("template", "shape", "keys"), SPLIT_CASES, ids=str)
@pytest.mark.parametrize("fmt", ["mxfp4", "nvfp4"])
@pytest.mark.parametrize("m", [3, 100, 256])
def test_split_k_on_odd_shapes(runner, builder, m, fmt, template, shape, keys):
    """splits > 1 (each tile's K steps over several units, summed through workspace by the last to
    arrive; registers per (tile, consumer) part): each split count and each value of ``keys`` once, edge
    scales, evaluated twice (the arrival counters must be left zero for the next launch)."""
    n, k = shape
    p = problem(M=m, N=n, K=k, format=fmt, inputs="edges")
    for config in spread(p, template, keys, only={"splits": [2, 4, 8]}):
        for _ in range(2):
            outcome = evaluate(runner, builder, QG, p, config, timeout_s=TIMEOUT_S)
            assert outcome.status is Status.OK, (p.key(), config.label(), outcome.message)


@pytest.mark.parametrize("fmt", ["mxfp4", "nvfp4"])
@pytest.mark.parametrize("m", TOKENS)
def test_the_sweep_shapes_at_the_default(runner, builder, m, fmt):
    """The family default, and stream's where it has one."""
    for n, k in ((4096, 4096), (14336, 4096), (4096, 14336)):
        p = problem(M=m, N=n, K=k, format=fmt)
        stream = QG.templates["stream"].default(p)
        for config in [QG.default_config(p)] + ([QG.template_config("stream", stream)] if stream else []):
            outcome = evaluate(runner, builder, QG, p, config, timeout_s=TIMEOUT_S)
            assert outcome.status is Status.OK, (p.key(), config.label(), outcome.message)


def test_sabotaged_sums_and_scales_are_caught(runner, builder):
    p = problem(M=3, N=4099, K=4111, format="mxfp4")
    cluster = QG.config(
        {
            "template": "decode",
            "rows": 16,
            "warps": 4,
            "warps_k": 2,
            "tokens": 8,
            "unroll": 2,
            "splits": 4,
            "second_factor": "branch",
        }
    )
    sums = "tunebox/split_sums.cuh"  # the warps' and the cluster's reduction
    dropped = ("for (int c = 1; c < SPLITS; ++c) v[i] += load_cluster(sums + at + i, c);", "")
    assert_sabotage_caught(runner, builder, QG, p, cluster, *dropped, expect="elements wrong", header=sums)
    warps = ("for (int w = 1; w < WK; ++w) total += sums[w * SUMS + at];", "")
    assert_sabotage_caught(runner, builder, QG, p, cluster, *warps, expect="elements wrong", header=sums)
    edges = problem(M=3, N=4099, K=4111, format="mxfp4", inputs="edges")  # rows of scales 2^73 and 2^2
    predicated = QG.config({**dict(cluster.items), "second_factor": "predicated"})
    second = ("      if (big) {", "      if (false) {")  # the predicated second factor never taken
    assert_sabotage_caught(runner, builder, QG, edges, predicated, *second, expect="elements wrong")
    tail = QG.config({**dict(cluster.items), "splits": 1, "warps_k": 1})
    scale = (": (valid > 0 ? (u32)__ldg(sc) : 0u);", ": 0u;")  # the partial span's mxfp4 scale dropped
    assert_sabotage_caught(runner, builder, QG, p, tail, *scale, expect="elements wrong")
    streamed = problem(M=3, N=4099, K=2560, format="mxfp4")
    stream = QG.template_config("stream", QG.templates["stream"].default(streamed))
    # every mxfp4 block of a span takes the first block's scale
    mapping = ("(NV ? sp * 8 + 2 * t : sp * 4 + t)", "(NV ? sp * 8 + 2 * t : sp * 4)")
    assert_sabotage_caught(runner, builder, QG, streamed, stream, *mapping, expect="elements wrong")


@pytest.mark.parametrize("fmt", ["mxfp4", "nvfp4"])
@pytest.mark.parametrize("m", [16, 256])
def test_variants_time_and_torch_baselines_match(runner, builder, m, fmt):
    pytest.importorskip("torch")
    p = problem(M=m, N=4096, K=4096, format=fmt)
    outcomes = retime_with_baseline(runner, builder, QG, p, QG.default_config(p))
    assert len(outcomes) == 3
    assert outcomes[0].status is Status.OK and len(outcomes[0].samples_ms) >= 10, outcomes[0].message
    for baseline in outcomes[1:]:
        assert baseline.status is Status.OK, baseline.message
        assert baseline.baseline.startswith("torch: ")


@pytest.mark.parametrize(
    ("shape", "fmt", "template"),
    [((256, 4096, 4096), "mxfp4", "registers"), ((3, 4099, 4111), "mxfp4", None), ((16, 14336, 4096), "nvfp4", None)],
    ids=str,
)
@pytest.mark.parametrize("storage", ["bytes", "torch"])
def test_launch_on_caller_tensors(tmp_path, shape, fmt, template, storage):
    """tunebox.launch on a caller's torch tensors (codes as uint8, or in torch's float4_e2m1fn_x2 and
    float8_e8m0fnu / float8_e4m3fn storage), the kernel forced: at 256 x 4096^2 the shipped winner (template
    registers, with its split-K workspace), elsewhere the stored or nearest configuration; D within the
    family's tolerance of the reference."""
    torch = pytest.importorskip("torch")
    from tunebox.families.base import Tolerance
    from tunebox.runtime.launch import Launcher

    m, n, k = shape
    p = problem(M=m, N=n, K=k, format=fmt)
    inputs = QG.make_inputs(p, np.random.default_rng(3))
    want = QG.reference(p, inputs)["d"]
    storage_types = {"values": "float4_e2m1fn_x2", "scales": "float8_e4m3fn" if fmt == "nvfp4" else "float8_e8m0fnu"}
    arrays = {"a": torch.from_numpy(inputs["a"].view(np.int16)).cuda().view(torch.bfloat16)}
    for name in ("values", "scales"):
        codes = torch.from_numpy(inputs[name]).cuda()
        arrays[name] = codes.view(getattr(torch, storage_types[name])) if storage == "torch" else codes
    if fmt == "nvfp4":
        arrays["tensor_scale"] = torch.from_numpy(inputs["tensor_scale"].view(np.float32)).cuda()
    arrays["d"] = torch.empty((m, n), dtype=torch.bfloat16, device="cuda")
    launcher = Launcher(WINNERS, cache_dir=tmp_path / "cubins")
    served = launcher("quant_gemm", arrays, use="tunebox", format=fmt)
    assert served.ran == "kernel", served.explanation
    if template is not None:
        assert served.config["template"] == template and served.source == "exact", served.explanation
    torch.cuda.synchronize()
    got = arrays["d"].cpu().view(torch.int16).numpy().view(np.uint16)
    tolerance: Tolerance = QG.operation.tolerance(p, inputs)
    bf16 = np.float32
    g = (got.astype(np.uint32) << 16).view(bf16)
    w = (want.astype(np.uint32) << 16).view(bf16)
    close = (got == want) | (np.abs(g - w) <= tolerance.atol + tolerance.rtol * np.abs(w))
    assert close.all(), f"{(~close).sum()} of {close.size} elements outside the tolerance"
