"""gather_elements without a GPU: numpy reference on hand-computed cases (2-D index tiles with a mask
and a padding value, 1-D tiles broadcast), problem parsing, seeded inputs and their invalid-entry
counts, validity rules, geometry, work, and NVRTC compilation (to CUBIN, sm_90) of every dtype x
index type x mask x broadcast x check_bounds kind."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from tunebox.build.nvrtc import NvrtcBuilder
from tunebox.dtypes import element_type
from tunebox.errors import InvalidConfig, InvalidProblem
from tunebox.families import get
from tunebox.families.gather_elements import FAMILY, ElementGatherProblem, ElementsConfig
from tunebox.families.indexed import index_type
from tunebox.records import Status
from tunebox.sweep_spec import load_sweep

G = FAMILY
A = np.arange(1, 13, dtype=np.uint32).reshape(3, 4)  # [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]
MINUS_ONE = 0xBF800000  # -1.0f


def problem(**extra) -> ElementGatherProblem:
    return G.parse_problem({"dtype": "float32", "rows": 3, "cols": 4, "tile": [2, 2], **extra})


def test_registered() -> None:
    assert get("gather_elements") is FAMILY and FAMILY.space.names() == ("elements",)
    assert FAMILY.space.template("elements") == ElementsConfig.space()
    with pytest.raises(InvalidConfig, match="names its template"):
        G.config({"threads": 64, "elems_per_thread": 2, "check_bounds": "true"})


def test_reference_two_d_tiles_with_mask_and_padding_value() -> None:
    """cuTile's ``gather(arr, (ri, ci); mask, padding_value=-1)``: masked out, a -1 row and a column past D pad."""
    p = problem(mask=True, padding="value", pad_value=-1.0)
    ri = np.array([[0, 2], [-1, 1]], dtype=np.int32)
    ci = np.array([[3, 0], [1, 4]], dtype=np.int32)
    mask = np.array([[1, 0], [1, 1]], dtype=np.uint8)
    out = G.reference(p, {"A": A, "ri": ri, "ci": ci, "mask": mask})["out"]
    np.testing.assert_array_equal(out, [[4, MINUS_ONE], [MINUS_ONE, MINUS_ONE]])


def test_reference_broadcast_one_d_tiles() -> None:
    """``gather(arr, (rows[:, None], cols[None, :]))``: every (row, column) pair; row -1 and column 4 pad."""
    p = problem(tile=[3, 3], broadcast=True)
    out = G.reference(p, {"A": A, "ri": np.array([2, -1, 0], np.int64), "ci": np.array([1, 4, 3], np.int64)})["out"]
    np.testing.assert_array_equal(out, [[10, 0, 12], [0, 0, 0], [2, 0, 4]])


def test_reference_repeated_indices() -> None:
    p = problem(tile=[1, 4])
    out = G.reference(p, {"A": A, "ri": np.full((1, 4), 1, np.int32), "ci": np.array([[2, 2, 0, 2]], np.int32)})
    np.testing.assert_array_equal(out["out"], [[7, 7, 5, 7]])


RATES = [(0.0, 0.0, 0.0), (0.3, 0.2, 0.1), (0.5, 0.5, 0.0), (1.0, 0.0, 0.0)]


@pytest.mark.parametrize("broadcast, rates", [(b, r) for b in (False, True) for r in RATES if not (b and r[2])])
def test_seeded_inputs_match_the_counted_invalid_entries(broadcast: bool, rates) -> None:
    sentinel, oob, masked = rates
    extra = {"mask": True, "mask_rate": masked} if masked else {}
    p = G.parse_problem(
        {
            "dtype": "bfloat16",
            "rows": 50,
            "cols": 70,
            "tile": [31, 37],
            "broadcast": broadcast,
            "sentinel_rate": sentinel,
            "oob_rate": oob,
            "index_dtype": "int64",
            **extra,
        }
    )
    inputs = G.make_inputs(p, np.random.default_rng(5))
    out = G.reference(p, inputs)["out"]
    assert int((out != p.pad_bits).sum()) == p.valid_elements  # data bits are never zero
    if not broadcast and sentinel and oob:  # both dimensions get sentinels and indices past their end
        for name, extent in (("ri", 50), ("ci", 70)):
            assert (inputs[name] == -1).any() and (inputs[name] >= extent).any()
    again = G.make_inputs(p, np.random.default_rng(5))
    assert all(np.array_equal(inputs[k], again[k]) for k in inputs)


def test_buffers_and_args() -> None:
    p = problem(tile=[5, 6], broadcast=True, index_dtype="int64")
    shapes = {b.name: b.shape for b in G.buffers(p)}
    assert shapes == {"A": (3, 4), "ri": (5,), "ci": (6,), "out": (5, 6)}
    m = problem(mask=True)
    assert [b.name for b in G.buffers(m)] == ["A", "ri", "ci", "mask", "out"]
    names = [a.name for a in G.args(m, G.default_config(m))]
    assert names == ["A", "ri", "ci", "mask", "out", "N", "D", "R", "C", "pad"]


@pytest.mark.parametrize(
    "data, members",
    [
        (
            {"dtype": "float32"},
            "const unsigned int* A; const int* ri; const int* ci; unsigned int* out; long long N; "
            "long long D; long long R; long long C; unsigned int pad;",
        ),
        (
            {"dtype": "bfloat16", "index_dtype": "int64", "mask": True},
            "const unsigned short* A; const long long* ri; const long long* ci; const unsigned char* mask; "
            "unsigned short* out; long long N; long long D; long long R; long long C; unsigned short pad;",
        ),
    ],
    ids=["gather_elements", "gather_elements_masked"],
)
def test_rendered_source_holds_the_argument_struct(data, members) -> None:
    """Each kernel takes ``Cfg::Args``: the struct of the template's args, members in the old parameter order."""
    p = problem(**data)
    code = G.render(p, G.default_config(p)).code
    body = code[
        code.index("struct Args_t {") + len("struct Args_t {") : code.index("};", code.index("struct Args_t {"))
    ]
    assert " ".join(body.split()) == members
    assert "using Args = Args_t;" in code[code.rindex("struct Cfg {") :]


def test_work_counts_reads_of_valid_elements_only() -> None:
    p = G.parse_problem({"dtype": "float16", "rows": 10, "cols": 10, "tile": [10, 10], "sentinel_rate": 0.25})
    assert p.valid_elements == 75
    assert G.work(p).bytes_moved == (100 + 75) * 2 + 2 * 100 * 4


@pytest.mark.parametrize(
    "data, message",
    [
        ({"tile": [2]}, "tile must be"),
        ({"tile": [0, 3]}, "tile must be"),
        ({"tile": "2x2"}, "tile must be"),
        ({"broadcast": True, "mask": True}, "mask needs 2-D"),
        ({"mask_rate": 0.5}, "only with mask"),
        ({"sentinel_rate": 0.7, "oob_rate": 0.5}, "must not exceed 1"),
        ({"sentinel_rate": 2}, "in \\[0, 1\\]"),
        ({"axis": 1}, "unknown problem key"),
        ({"pad_value": 3.0}, "pad_value"),
        ({"padding": "ones"}, "unknown padding"),
        ({"rows": 2**31 + 1, "cols": 1}, "use index_dtype = 'int64'"),
        ({"rows": 2**31, "cols": 1, "oob_rate": 0.1}, "use index_dtype = 'int64'"),
        ({"rows": 2**21, "cols": 2**20}, "too many"),
    ],
)
def test_bad_problems_say_what_to_do(data, message) -> None:
    with pytest.raises(InvalidProblem, match=message):
        problem(**data)


def test_index_ranges_that_fit_pass() -> None:
    assert problem(rows=2**31, cols=1).rows == 2**31  # index 2^31 - 1 fits int32
    assert problem(rows=2**31, cols=1, oob_rate=0.1, index_dtype="int64").oob_rate == 0.1


def test_rules_each_pass_and_fail() -> None:
    p = problem(tile=[4, 100], sentinel_rate=0.1)
    ok = G.config({"template": "elements", "threads": 64, "elems_per_thread": 2, "check_bounds": "true"})
    assert G.violations(p, ok) == []
    assert "check_bounds='false'" in G.violations(p, G.config({**ok.as_dict(), "check_bounds": "false"}))[0]
    assert G.violations(problem(tile=[4, 100]), G.config({**ok.as_dict(), "check_bounds": "false"})) == []
    idle = G.config({"template": "elements", "threads": 256, "elems_per_thread": 2, "check_bounds": "true"})
    assert "threads exceed" in G.violations(p, idle)[0]  # 100 elements at 2 per thread keep 64 busy
    many = problem(rows=1, cols=1, tile=[2**31, 1])
    assert "grid limit" in " ".join(G.violations(many, G.config({**ok.as_dict(), "elems_per_thread": 1})))


def test_geometry_covers_every_output_element() -> None:
    p = problem(tile=[7, 1000])
    cfg = G.config({"template": "elements", "threads": 128, "elems_per_thread": 4, "check_bounds": "true"})
    geo = G.geometry(p, cfg)
    assert geo.grid == (7 * 2, 1, 1) and geo.block == (128, 1, 1) and geo.shared_bytes == 0
    assert G.default_config(p) == G.config(
        {"template": "elements", "threads": 256, "elems_per_thread": 4, "check_bounds": "true"}
    )
    assert G.default_config(problem(tile=[7, 100]))["threads"] == 64  # 100 elements at 4 per thread: one warp
    assert G.violations(p, G.default_config(p)) == []


def test_distance() -> None:
    a, b = problem(tile=[4, 8]), problem(tile=[8, 8])
    assert G.distance(a, b) == 1.0 and G.distance(a, problem(tile=[4, 8], broadcast=True)) is None


KINDS = list(itertools.product(("float32", "float16", "bfloat16"), ("int32", "int64"), (False, True), (False, True)))


@pytest.fixture(scope="module")
def compiled():
    sources, cases = [], []
    for dtype, index_dtype, broadcast, mask in KINDS:
        if broadcast and mask:
            continue
        p = G.parse_problem(
            {
                "dtype": dtype,
                "rows": 100,
                "cols": 100,
                "tile": [33, 1000],
                "index_dtype": index_dtype,
                "broadcast": broadcast,
                "mask": mask,
            }
        )
        for threads, per_thread, check in (("64", 1, "true"), ("512", 8, "false"), ("256", 4, "true")):
            cfg = G.config(
                {"template": "elements", "threads": int(threads), "elems_per_thread": per_thread, "check_bounds": check}
            )
            cases.append((p, cfg))
            sources.append(G.render(p, cfg))
    builder = NvrtcBuilder("sm_90")
    try:
        return list(zip(cases, builder.build(sources), strict=True))
    finally:
        builder.close()


def test_every_kind_compiles(compiled) -> None:
    assert len(compiled) == 3 * 2 * 3 * 3
    for (p, cfg), result in compiled:
        assert result.status is Status.OK, result.log
        assert result.cubin.startswith(b"\x7fELF") and result.spill_bytes == 0, (cfg.label(), result.log)
        kernel = "gather_elements" + ("_masked" if p.mask else "")
        assert result.source.name_expression == f"{kernel}<Cfg>"
        struct = result.source.code[result.source.code.rindex("struct Cfg {") :]
        for member in (
            f"using E = {element_type(p.element).ctype};",
            f"using I = {index_type(p.index_dtype).ctype};",
            f"static constexpr int THREADS = {cfg['threads']};",
            f"static constexpr int EPT = {cfg['elems_per_thread']};",
            f"static constexpr bool CHECK = {cfg['check_bounds']};",
            f"static constexpr bool BCAST = {str(p.broadcast).lower()};",
        ):
            assert member in struct, (member, struct)


def test_shipped_sweep_loads() -> None:
    spec = load_sweep(Path(__file__).resolve().parents[3] / "spaces" / "gather_elements.toml")
    assert spec.family is G and spec.search.strategy == "exhaustive" and spec.space.names() == ("elements",)
    assert spec.space.size() == G.space.size() == 32  # the whole space: every variant is evaluated
    problems = [n.problem for n in spec.problems]
    assert all(isinstance(p, ElementGatherProblem) for p in problems)
    kinds = {(p.broadcast, p.mask, p.all_valid) for p in problems if isinstance(p, ElementGatherProblem)}
    assert kinds == {(False, False, True), (False, True, False), (True, False, False)}
    for p in problems:
        assert isinstance(p, ElementGatherProblem)
        assert G.violations(p, G.default_config(p)) == []
        assert len([c for c in spec.space if not G.violations(p, c)]) >= 8
