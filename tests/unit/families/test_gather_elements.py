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
from tunebox.errors import InvalidProblem
from tunebox.families import get
from tunebox.families.gather_elements import ElementGatherProblem, GatherElements
from tunebox.records import Status
from tunebox.sweep_spec import load_sweep

G = GatherElements()
A = np.arange(1, 13, dtype=np.uint32).reshape(3, 4)  # [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]
MINUS_ONE = 0xBF800000  # -1.0f


def problem(**extra) -> ElementGatherProblem:
    return G.parse_problem({"dtype": "float32", "rows": 3, "cols": 4, "tile": [2, 2], **extra})


def test_registered() -> None:
    assert get("gather_elements") is get("gather_elements") and isinstance(get("gather_elements"), GatherElements)


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
    p = G.parse_problem({"dtype": "bfloat16", "rows": 50, "cols": 70, "tile": [31, 37], "broadcast": broadcast,
                         "sentinel_rate": sentinel, "oob_rate": oob, "index_dtype": "int64", **extra})
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
    assert [getattr(a, "name", None) for a in G.args(m, G.default_config(m))][:5] == ["A", "ri", "ci", "mask", "out"]


def test_work_counts_reads_of_valid_elements_only() -> None:
    p = G.parse_problem({"dtype": "float16", "rows": 10, "cols": 10, "tile": [10, 10], "sentinel_rate": 0.25})
    assert p.valid_elements == 75
    assert G.work(p).bytes_moved == (100 + 75) * 2 + 2 * 100 * 4


@pytest.mark.parametrize("data, message", [
    ({"tile": [2]}, "tile must be"), ({"tile": [0, 3]}, "tile must be"), ({"tile": "2x2"}, "tile must be"),
    ({"broadcast": True, "mask": True}, "mask needs 2-D"), ({"mask_rate": 0.5}, "only with mask"),
    ({"sentinel_rate": 0.7, "oob_rate": 0.5}, "must not exceed 1"), ({"sentinel_rate": 2}, "in \\[0, 1\\]"),
    ({"axis": 1}, "unknown problem key"), ({"pad_value": 3.0}, "pad_value"), ({"padding": "ones"}, "unknown padding"),
    ({"rows": 2**31 + 1, "cols": 1}, "use index_dtype = 'int64'"),
    ({"rows": 2**31, "cols": 1, "oob_rate": 0.1}, "use index_dtype = 'int64'"),
    ({"rows": 2**21, "cols": 2**20}, "too many"),
])
def test_bad_problems_say_what_to_do(data, message) -> None:
    with pytest.raises(InvalidProblem, match=message):
        problem(**data)


def test_index_ranges_that_fit_pass() -> None:
    assert problem(rows=2**31, cols=1).rows == 2**31  # index 2^31 - 1 fits int32
    assert problem(rows=2**31, cols=1, oob_rate=0.1, index_dtype="int64").oob_rate == 0.1


def test_rules_each_pass_and_fail() -> None:
    p = problem(tile=[4, 100], sentinel_rate=0.1)
    ok = G.config({"threads": 64, "elems_per_thread": 2, "check_bounds": "true"})
    assert G.violations(p, ok) == []
    assert "check_bounds='false'" in G.violations(p, G.config({**ok.as_dict(), "check_bounds": "false"}))[0]
    assert G.violations(problem(tile=[4, 100]), G.config({**ok.as_dict(), "check_bounds": "false"})) == []
    idle = G.config({"threads": 256, "elems_per_thread": 2, "check_bounds": "true"})
    assert "threads exceed" in G.violations(p, idle)[0]  # 100 elements at 2 per thread keep 64 busy
    many = problem(rows=1, cols=1, tile=[2**31, 1])
    assert "grid limit" in " ".join(G.violations(many, G.config({**ok.as_dict(), "elems_per_thread": 1})))


def test_geometry_covers_every_output_element() -> None:
    p = problem(tile=[7, 1000])
    cfg = G.config({"threads": 128, "elems_per_thread": 4, "check_bounds": "true"})
    geo = G.geometry(p, cfg)
    assert geo.grid == (7 * 2, 1, 1) and geo.block == (128, 1, 1) and geo.shared_bytes == 0
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
        p = G.parse_problem({"dtype": dtype, "rows": 100, "cols": 100, "tile": [33, 1000], "index_dtype": index_dtype,
                             "broadcast": broadcast, "mask": mask})
        for threads, per_thread, check in (("64", 1, "true"), ("512", 8, "false"), ("256", 4, "true")):
            cfg = G.config({"threads": int(threads), "elems_per_thread": per_thread, "check_bounds": check})
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
        assert result.source.name_expression.startswith(f"{kernel}<{element_type(p.element).ctype}, ")
        assert result.source.name_expression.endswith(f", {cfg['check_bounds']}, {str(p.broadcast).lower()}>")


def test_shipped_sweep_loads() -> None:
    spec = load_sweep(Path(__file__).resolve().parents[3] / "spaces" / "gather_elements.toml")
    assert spec.family.name == "gather_elements" and spec.search.strategy == "exhaustive"
    kinds = {(n.problem.broadcast, n.problem.mask, n.problem.all_valid) for n in spec.problems}
    assert kinds == {(False, False, True), (False, True, False), (True, False, False)}
    for named in spec.problems:
        assert G.violations(named.problem, G.default_config(named.problem)) == []
        assert sum(1 for c in spec.space if not G.violations(named.problem, c)) >= 8
