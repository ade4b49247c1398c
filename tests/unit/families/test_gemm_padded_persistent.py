"""gemm's template ``padded_persistent`` without a GPU: its rules (unaligned rows only, the direct
epilogue where D's rows are not whole 16-byte chunks, no split-K), the pad_rows prologue and workspace
copies the tensor maps read (A's, B's or both), the configuration and argument structs, NVRTC
compilation for sm_90a with pad_rows in the module (no spills), and its sweep file."""

from __future__ import annotations

import dataclasses
import re
from functools import partial
from pathlib import Path

import family_checks
import pytest

from tunebox.families.gemm import FAMILY
from tunebox.families.kernel_args import ArgStruct
from tunebox.params import Config
from tunebox.records import Status
from tunebox.sweep_spec import load_sweep

G = FAMILY
SPACES = Path(__file__).resolve().parents[3] / "spaces"
# the persistent template's default with the direct epilogue (D's rows at N = 4097 are not 16-byte chunks)
PERSISTENT = G.templates["persistent"].default(G.parse_problem({"M": 4096, "N": 4096, "K": 4096}))
BASE = dataclasses.replace(PERSISTENT, epilogue="direct")
assert_rule = partial(family_checks.assert_rule, G)


def config(**values) -> Config:
    return G.template_config("padded_persistent", dataclasses.replace(BASE, **values))


def problem(**data):
    return G.parse_problem({"M": 511, "N": 4097, "K": 2047, **data})


def test_rules_each_pass_and_fail() -> None:
    aligned = problem(N=4096, K=2048)
    assert any("path 'persistent' does the same" in b for b in G.violations(aligned, config()))
    assert G.violations(problem(), config()) == []
    assert_rule(problem(), config(), config(epilogue="tma"), "use epilogue 'staged' or 'direct'")
    # only A unaligned, D's rows whole chunks: the TMA epilogue applies
    assert G.violations(problem(N=4096), config(epilogue="tma")) == []
    assert_rule(problem(), config(), config(splits=2), "exceed the workspace's 0 slots")
    assert_rule(problem(), config(), config(BM=64), "BM must be 128 or 256")
    # pad_rows counts a copy's 16-byte chunks in 32 bits: 2^31 - 2^14 of them pass, 2^31 + 2^14 do not
    assert G.violations(G.parse_problem({"M": 2**14, "N": 8, "K": 2**20 - 9}), config()) == []
    huge = G.parse_problem({"M": 2**14, "N": 8, "K": 2**20 + 1})
    assert any("pad_rows counts a copy's 16-byte chunks in 32 bits" in b for b in G.violations(huge, config()))
    # the persistent template sends ragged problems here
    persistent = G.template_config("persistent", BASE)
    assert any("use path 'padded_persistent'" in b for b in G.violations(problem(), persistent))


def test_the_copies_and_the_tensor_maps_that_read_them() -> None:
    """lda 2047 and ldb 4097 are both unaligned: one pad_rows launch (gridDim.y = 2) copies both into
    rows of 2048 and 4104, and the tensor maps read the copies; with only B unaligned, A is read in place."""
    p = problem()
    assert [(b.name, b.shape) for b in G.buffers(p) if b.role == "workspace"] == [
        ("A_padded", (511, 2048)),
        ("B_padded", (2047, 4104)),
    ]
    (pad,) = G.prologue(p, config())
    assert pad.kernel == "pad_rows" and pad.geometry.grid[1] == 2
    assert [a.name for a in pad.args if a.name.endswith("padded")] == ["A_padded", "B_padded"]
    a_map, b_map, d, *_ = G.args(p, config())
    assert (a_map.name, a_map.buffer, a_map.request.strides) == ("a_map", "A_padded", (4096, 2))
    assert (b_map.name, b_map.buffer, b_map.request.strides) == ("b_map", "B_padded", (8208, 2))
    assert (a_map.request.shape, b_map.request.shape) == ((511, 2047), (2047, 4097))  # zero-filled past them
    assert d.name == "D"
    only_b = problem(K=2048)
    (pad,) = G.prologue(only_b, config())
    assert pad.geometry.grid[1] == 1 and [a.name for a in pad.args[:2]] == ["B", "B_padded"]
    a_map, b_map, *_ = G.args(only_b, config())
    assert (a_map.buffer, a_map.request.strides, b_map.buffer) == ("A", (4096, 2), "B_padded")
    render = G.render(only_b, config())
    assert render.helpers == ("pad_rows<Cfg>",)
    struct = render.code[render.code.rindex("struct Cfg {") :]
    found = dict(re.findall(r"static constexpr \w+ (\w+) = (\w+);", struct))
    assert {k: found[k] for k in ("PAD_A", "PAD_B", "PAD_THREADS", "TMA_EPILOGUE")} == {
        "PAD_A": "false",
        "PAD_B": "true",
        "PAD_THREADS": "256",
        "TMA_EPILOGUE": "false",
    }
    layout = ArgStruct.of("Args_t", G.args(p, config()))
    assert [m.name for m in layout.members][:3] == ["a_map", "b_map", "D"]


def test_the_persistent_template_is_unchanged_on_aligned_problems() -> None:
    """No prologue, helpers or workspace copies: its maps read A and B in place."""
    p = problem(N=4096, K=2048)
    persistent = G.template_config("persistent", BASE)
    assert G.prologue(p, persistent) == () and G.render(p, persistent).helpers == ()
    a_map, b_map, *_ = G.args(p, persistent)
    assert (a_map.buffer, b_map.buffer) == ("A", "B")


@pytest.fixture(scope="module")
def compiled():
    cases = [
        (problem(), config()),
        (problem(), config(schedule="pingpong", BM=64, BN=128, stages=6, raster="n")),
        (problem(K=2048), config(BM=256, BN=128, group=16)),  # B copied
        (problem(N=4096, out_dtype="float32", relu=True), config(epilogue="tma")),  # A copied, TMA epilogue
        (G.parse_problem({"M": 1, "N": 1, "K": 1}), config()),
    ]
    return family_checks.compile_cases(G, cases)


def test_variants_compile_with_pad_rows(compiled) -> None:
    """sm_90a, 168 registers, no spill; the module holds pad_rows too (its symbol found)."""
    for (p, c), result in compiled:
        assert G.violations(p, c) == []
        assert result.status is Status.OK, (c.label(), result.log[-2000:])
        assert result.registers == 168 and result.spill_bytes == 0, (c.label(), result.log)
        assert len(result.helper_symbols) == 1 and "pad_rows" in result.helper_symbols[0]


def test_its_sweep_offers_both_templates_on_every_problem() -> None:
    """spaces/gemm_ragged.toml: every problem has unaligned rows, and valid variants of both templates."""
    spec = load_sweep(SPACES / "gemm_ragged.toml")
    assert spec.space.names() == ("padded", "padded_persistent")
    for n in spec.problems:
        assert n.problem.unaligned()
        valid = {c["template"] for c in spec.space if not G.violations(n.problem, c)}
        assert valid == {"padded", "padded_persistent"}, n.name
