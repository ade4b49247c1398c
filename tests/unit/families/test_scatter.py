"""scatter without a GPU: the numpy reference (untouched rows stay poison), problem parsing, seeded
unique targets, validity rules, geometry, work, distance, the shipped sweep, and NVRTC compilation of
every dtype x index type x check_bounds x vector width kind."""

from __future__ import annotations

import random
from pathlib import Path

import family_checks
import numpy as np
import pytest
from indexed_reference import arg_members, assert_rows_variant, compile_matrix, reference_of

from tunebox.dtypes import ELEMENT_TYPES, element_type
from tunebox.errors import InvalidConfig, InvalidProblem
from tunebox.families import get
from tunebox.families.base import BufferArg, BufferSpec, ScalarArg
from tunebox.families.scatter import FAMILY, RowsConfig, ScatterProblem, ScatterRows
from tunebox.params import Config
from tunebox.records import Status
from tunebox.sweep_spec import load_sweep

S = FAMILY
ROWS = S.templates["rows"]
assert isinstance(ROWS, ScatterRows)
DTYPES = ("float32", "float16", "bfloat16")
INDEX_DTYPES = ("int32", "int64")
REPO = Path(__file__).resolve().parents[3]
X = ELEMENT_TYPES["float32"].poison  # an untouched float32 element


def problem(dtype: str = "float32", rows: int = 4, cols: int = 3, count: int = 2, **extra) -> ScatterProblem:
    return S.parse_problem({"dtype": dtype, "rows": rows, "cols": cols, "count": count, **extra})


def config(**values) -> Config:
    base = {"template": "rows", "rows_per_block": 4, "threads": 64, "vec_bytes": 16, "check_bounds": "true"}
    return S.config({**base, **values})


def v_rows(p: ScatterProblem, start: int = 1) -> np.ndarray:
    storage = element_type(p.element).storage
    return np.arange(start, start + p.count * p.cols, dtype=np.int64).astype(storage).reshape(p.count, p.cols)


def ref(p: ScatterProblem, v: np.ndarray, idx, mask=None) -> np.ndarray:
    out = reference_of(S, p, ("V", v), idx, mask, "A")
    assert out.shape == (p.rows, p.cols)
    return out


# ---------------------------------------------------------------------------------------------
# numpy reference: valid targets get V's rows; every other element of A stays poison


def test_reference_writes_only_targets() -> None:
    for index_dtype in INDEX_DTYPES:
        p = problem(index_dtype=index_dtype)
        got = ref(p, v_rows(p), [2, 0])  # V = [[1, 2, 3], [4, 5, 6]]
        np.testing.assert_array_equal(got, [[4, 5, 6], [X, X, X], [1, 2, 3], [X, X, X]])


def test_reference_offset() -> None:
    p = problem(count=3, offset=2)
    np.testing.assert_array_equal(ref(p, v_rows(p), [1, -2, -1]), [[4, 5, 6], [7, 8, 9], [X] * 3, [1, 2, 3]])


def test_reference_masked_and_out_of_range_entries_write_nothing() -> None:
    p = problem(count=4, mask=True, mask_rate=0.25)
    got = ref(p, v_rows(p), [3, 1, 2, 0], mask=[1, 0, 1, 1])
    np.testing.assert_array_equal(got, [[10, 11, 12], [X] * 3, [7, 8, 9], [1, 2, 3]])
    # hand-made invalid targets (the seeded inputs have none): -1, N and beyond write nothing
    q = problem(count=4)
    np.testing.assert_array_equal(ref(q, v_rows(q), [-1, 4, 1, 2**31 - 1]), [[X] * 3, [7, 8, 9], [X] * 3, [X] * 3])


@pytest.mark.parametrize("dtype", DTYPES)
def test_reference_poison_of_each_dtype(dtype: str) -> None:
    p = problem(dtype, rows=3, cols=2, count=1)
    got = ref(p, v_rows(p), [1])
    poison = element_type(dtype).poison
    np.testing.assert_array_equal(got, [[poison, poison], [1, 2], [poison, poison]])


def test_reference_matches_definition_on_random_problems() -> None:
    rng = np.random.default_rng(13)
    for _ in range(200):
        mask = bool(rng.integers(2))
        rows = int(rng.integers(1, 12))
        p = problem(
            DTYPES[int(rng.integers(3))],
            rows=rows,
            cols=int(rng.integers(1, 6)),
            count=int(rng.integers(1, rows + 1)),
            index_dtype=INDEX_DTYPES[int(rng.integers(2))],
            offset=int(rng.integers(-5, 6)),
            mask=mask,
            **({"mask_rate": float(rng.random())} if mask else {}),
        )
        inputs = S.make_inputs(p, rng)
        want = np.full((p.rows, p.cols), element_type(p.element).poison, dtype=inputs["V"].dtype)
        for k in range(p.count):
            if not p.mask or inputs["mask"][k]:
                want[int(inputs["idx"][k]) + p.offset] = inputs["V"][k]
        got = S.reference(p, inputs)["A"]
        np.testing.assert_array_equal(got, want, err_msg=str(p))
        assert int((got != element_type(p.element).poison).all(axis=1).sum()) == p.valid_entries


# ---------------------------------------------------------------------------------------------
# seeded inputs


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
def test_make_inputs_unique_targets_and_exact_mask(index_dtype: str) -> None:
    p = problem("bfloat16", rows=3000, cols=5, count=2000, index_dtype=index_dtype, offset=11, mask=True, mask_rate=0.3)
    inputs = S.make_inputs(p, np.random.default_rng(8))
    assert set(inputs) == {"V", "idx", "mask"}
    assert inputs["V"].shape == (2000, 5) and inputs["V"].dtype == np.uint16
    assert inputs["idx"].dtype == np.dtype(index_dtype) and inputs["mask"].dtype == np.uint8
    rows = inputs["idx"].astype(np.int64) + 11
    assert len(np.unique(rows)) == 2000 and ((rows >= 0) & (rows < 3000)).all()
    assert int((inputs["mask"] == 0).sum()) == p.masked_out == 600 and p.valid_entries == 1400


def test_make_inputs_permutation_and_seeding() -> None:
    p = problem("float32", rows=64, cols=2, count=64)
    a, b = (S.make_inputs(p, np.random.default_rng(1)) for _ in range(2))
    c = S.make_inputs(p, np.random.default_rng(2))
    assert set(a) == {"V", "idx"}
    assert sorted(a["idx"].tolist()) == list(range(64))  # K = N: a permutation of the rows
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    assert not np.array_equal(a["idx"], c["idx"])
    assert (S.reference(p, a)["A"] != X).all()  # every row written


def test_make_inputs_huge_rows_is_cheap() -> None:
    """Distinct targets among 2^31 + 100 rows are drawn without an O(N) permutation; an int32 index
    with offset 2^31 reaches every row."""
    p = problem("float16", rows=2**31 + 100, cols=1, count=1000, offset=2**31)
    inputs = S.make_inputs(p, np.random.default_rng(0))
    rows = inputs["idx"].astype(np.int64) + 2**31
    assert inputs["idx"].dtype == np.int32 and len(np.unique(rows)) == 1000
    assert ((rows >= 0) & (rows < 2**31 + 100)).all()


# ---------------------------------------------------------------------------------------------
# parse_problem


def test_parse_problem_defaults_and_round_trip() -> None:
    p = S.parse_problem({"dtype": "float16", "rows": 10, "cols": 3, "count": 10})
    assert p == ScatterProblem("float16", 10, 3, 10)
    assert (p.index_dtype, p.offset, p.mask, p.mask_rate, p.dtype) == ("int32", 0, False, 0.0, "float16")
    assert S.parse_problem(p.to_dict()) == p
    q = problem("bfloat16", rows=10, cols=3, count=4, index_dtype="int64", offset=-(2**40), mask=True, mask_rate=1)
    assert S.parse_problem(q.to_dict()) == q and q.key() != p.key() and type(q.mask_rate) is float
    assert get("scatter") is FAMILY


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"sentinel_rate": 0.1}, "sentinel_rate"),  # gather only
        ({"oob_rate": 0.1}, "oob_rate"),
        ({"padding": "nan"}, "padding"),
        ({"pad_value": 1.0}, "pad_value"),
        ({"count": 5}, "unique"),
        ({"rows": 0}, "rows"),
        ({"cols": 2.5}, "cols"),
        ({"dtype": "float64"}, "float64"),
        ({"index_dtype": "int16"}, "index_dtype"),
        ({"offset": "1"}, "offset"),
        ({"offset": -(2**62)}, "offset"),
        ({"mask": "yes"}, "mask"),
        ({"mask_rate": 0.0}, "mask_rate"),
        ({"mask": True, "mask_rate": -0.5}, "mask_rate"),
        ({"offset": -(2**31) + 3}, "int64"),  # row 3 would be stored as 2^31
        ({"rows": 2**31 + 1, "count": 1}, "int64"),
        ({"rows": 2**31 + 1, "count": 1, "offset": -1}, "int64"),
    ],
    ids=repr,
)
def test_parse_problem_errors(data: dict, fragment: str) -> None:
    base = {"dtype": "float32", "rows": 4, "cols": 4, "count": 4}
    with pytest.raises(InvalidProblem, match=fragment):
        S.parse_problem({**base, **data})


# ---------------------------------------------------------------------------------------------
# validity rules


def test_rules() -> None:
    clean = problem("bfloat16", rows=4096, cols=512, count=4096)
    masked = problem("bfloat16", rows=4096, cols=512, count=4096, mask=True)
    good, unchecked = config(threads=256, rows_per_block=4), config(threads=256, rows_per_block=4, check_bounds="false")
    assert S.violations(clean, unchecked) == [] and S.violations(masked, good) == []
    broken = S.violations(masked, unchecked)
    assert len(broken) == 1 and "check_bounds='false'" in broken[0]
    with pytest.raises(InvalidConfig, match="check_bounds"):
        S.check(masked, unchecked)
    assert "idle" in S.violations(clean, config(threads=512, rows_per_block=4))[0]
    assert "vec_bytes=2" in S.violations(problem("float32"), config(vec_bytes=2))[0]


SHAPES = [(1, 1, 1), (1001, 73, 999), (2**20, 512, 2**20), (7, 2**20, 3), (10**6, 3, 10**6)]


@pytest.mark.parametrize(("dtype", "rows", "cols", "count"), [(d, *shape) for d in DTYPES for shape in SHAPES])
def test_default_config_is_valid(dtype: str, rows: int, cols: int, count: int) -> None:
    for extra in ({}, {"mask": True}):
        p = problem(dtype, rows=rows, cols=cols, count=count, **extra)
        assert S.violations(p, S.default_config(p)) == []


def test_one_template_rows_keeps_the_old_space_and_defaults() -> None:
    """One template, ``rows`` (the one gather has), holding the four parameters of the old flat space,
    and the old default configurations."""
    assert S.space.names() == ("rows",) and S.space.size() == 5 * 4 * 4 * 2
    assert S.space == get("gather").space
    template, typed = S.typed(config(vec_bytes=8))
    assert template is ROWS and typed == RowsConfig(rows_per_block=4, threads=64, vec_bytes=8, check_bounds="true")
    assert S.default_config(problem("bfloat16", rows=4096, cols=512, count=4096)) == config(threads=256)
    assert S.default_config(problem("float32", rows=10, cols=3, count=10)) == config(threads=256, rows_per_block=8)


# ---------------------------------------------------------------------------------------------
# geometry, buffers, args, work, distance, sweep


def test_geometry_buffers_args() -> None:
    p = problem("float16", rows=1001, cols=37, count=999, index_dtype="int64", offset=7)
    cfg = config(rows_per_block=2, threads=128, vec_bytes=4)
    assert S.geometry(p, cfg).grid == (500, 1, 1) and S.geometry(p, cfg).block == (128, 1, 1)
    assert S.buffers(p) == (
        BufferSpec("V", (999, 37), "float16", "input"),
        BufferSpec("idx", (999,), "int64", "input"),
        BufferSpec("A", (1001, 37), "float16", "output"),
    )
    assert S.args(p, cfg) == (
        BufferArg("V", "const unsigned short"),
        BufferArg("idx", "const long long"),
        BufferArg("A", "unsigned short"),
        ScalarArg("i64", 1001, "N"),
        ScalarArg("i64", 37, "D"),
        ScalarArg("i64", 999, "K"),
        ScalarArg("i64", 7, "offset"),
    )
    assert_rows_variant(S.render(p, cfg), "scatter_rows", "unsigned short", "long long", 2, 128, 2, True)
    m = problem(mask=True)
    assert [b.name for b in S.buffers(m)] == ["V", "idx", "mask", "A"]
    assert S.args(m, cfg)[:4] == (
        BufferArg("V", "const unsigned int"),
        BufferArg("idx", "const int"),
        BufferArg("mask", "const unsigned char"),
        BufferArg("A", "unsigned int"),
    )
    assert_rows_variant(S.render(m, cfg), "scatter_rows_masked", "unsigned int", "int", 2, 128, 1, True)
    inputs = S.make_inputs(m, np.random.default_rng(0))
    outputs = S.reference(m, inputs)
    for spec in S.buffers(m):
        array = inputs[spec.name] if spec.role == "input" else outputs[spec.name]
        assert array.shape == spec.shape


@pytest.mark.parametrize(
    "data, buffers",
    [
        ({"dtype": "float16", "index_dtype": "int64"}, ["const unsigned short* V", "const long long* idx"]),
        ({"mask": True}, ["const unsigned int* V", "const int* idx", "const unsigned char* mask"]),
    ],
)
def test_the_kernel_takes_its_arguments_as_one_named_struct(data, buffers) -> None:
    """The ``rows`` template's kernels take ``Cfg::Args``: V, idx, (mask,) A typed by the element and
    index types, then the 64-bit extents and offset, in the old parameter order (the layout is asserted
    in the source, so the compiles below prove it)."""
    p = problem(**data)
    source = S.render(p, config(vec_bytes=4))
    element = "unsigned short" if element_type(p.element).itemsize == 2 else "unsigned int"
    assert arg_members(source) == [
        *buffers,
        f"{element}* A",
        "long long N",
        "long long D",
        "long long K",
        "long long offset",
    ]
    assert "using Args = Args_t;" in source.code


def test_work_and_distance() -> None:
    p = problem("bfloat16", rows=2**20, cols=512, count=2**20)
    assert S.work(p).bytes_moved == 2 * 2**20 * 1024 + 2**20 * 4
    m = problem("bfloat16", rows=2**20, cols=512, count=2**20, mask=True, mask_rate=0.5, index_dtype="int64")
    assert S.work(m).bytes_moved == 2 * 2**19 * 1024 + 2**20 * 9
    assert S.distance(p, p) == 0 and S.distance(p, m) is None
    q = problem("bfloat16", rows=2**18, cols=512, count=2**17, offset=5)
    assert S.distance(p, q) == pytest.approx(2 + 3)
    assert S.distance(p, problem("float32", rows=2**20, cols=512, count=2**20)) is None


def test_shipped_sweep_loads() -> None:
    spec = load_sweep(REPO / "spaces" / "scatter.toml")
    assert spec.family.name == "scatter" and spec.search.strategy == "exhaustive"
    assert {n.name: (n.problem.mask, n.problem.mask_rate, n.problem.index_dtype) for n in spec.problems} == {
        "scatter_bf16_1M_x512_permutation": (False, 0.0, "int32"),
        "scatter_bf16_1M_x512_masked50": (True, 0.5, "int32"),
        "scatter_f32_1M_x64_int64": (False, 0.0, "int64"),
    }
    for named in spec.problems:
        assert sum(1 for c in spec.space if not S.violations(named.problem, c)) >= 40


def test_torch_baseline_matches_reference() -> None:
    torch = pytest.importorskip("torch")
    from tunebox.runner.worker import _signed

    for p in (
        problem("bfloat16", rows=50, cols=6, count=40),
        problem("float32", rows=50, cols=3, count=20, offset=-4),
        problem("float16", rows=50, cols=5, count=40, index_dtype="int64", mask=True, mask_rate=0.5, offset=9),
    ):
        inputs = S.make_inputs(p, np.random.default_rng(0))
        tensors = {k: torch.from_numpy(_signed(v)) for k, v in inputs.items()}
        (baseline,) = S.torch_baselines(p)
        want = torch.from_numpy(_signed(S.reference(p, inputs)["A"]))
        for _ in range(2):  # the second call (a timed one) leaves the same output
            got = baseline.run(tensors)["A"]
            assert torch.equal(got.contiguous().view(want.dtype), want), p


# ---------------------------------------------------------------------------------------------
# compilation under NVRTC (no GPU)


CASES = [
    *((*case, False) for case in compile_matrix(DTYPES, INDEX_DTYPES, shift=1)),
    ("float16", "int64", "true", 16, True),
    ("float32", "int32", "true", 4, True),
]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory):
    picks = []
    for dtype, index_dtype, check, vec_bytes, mask in CASES:
        p = problem(dtype, rows=1001, cols=37 if check == "true" else 64, count=999, index_dtype=index_dtype, mask=mask)
        sub = S.space.restrict({"vec_bytes": [vec_bytes], "check_bounds": [check]})
        candidates = [c for c in sub if not S.violations(p, c)]
        picks.append((p, random.Random(f"{dtype}/{index_dtype}/{check}/{vec_bytes}/{mask}").choice(candidates)))
    return family_checks.compile_cases(S, picks, cache_dir=tmp_path_factory.mktemp("nvrtc"), workers=4)


def test_cases_cover_every_kind() -> None:
    for dtype in DTYPES:
        rows = [c for c in CASES if c[0] == dtype and not c[4]]
        assert {c[3] for c in rows} == {v for v in (2, 4, 8, 16) if v % element_type(dtype).itemsize == 0}
        assert {(c[1], c[2]) for c in rows} == {(i, k) for i in INDEX_DTYPES for k in ("true", "false")}


@pytest.mark.parametrize(
    "index", range(len(CASES)), ids=[f"{d}-{i}-check_{c}-v{v}{'-masked' if m else ''}" for d, i, c, v, m in CASES]
)
def test_variant_compiles(compiled, index: int) -> None:
    (p, cfg), result = compiled[index]
    assert S.violations(p, cfg) == []
    assert result.status is Status.OK, result.log
    assert result.cubin.startswith(b"\x7fELF") and result.registers > 0
    assert result.spill_bytes == 0, (cfg.label(), result.log)
    kernel = "scatter_rows_masked" if p.mask else "scatter_rows"
    assert kernel in result.lowered_name
    assert kernel == ROWS.kernel_name(p)
    et, typed = element_type(p.element), S.typed(cfg)[1]
    assert isinstance(typed, RowsConfig)
    assert_rows_variant(
        result.source,
        kernel,
        et.ctype,
        "int" if p.index_dtype == "int32" else "long long",
        typed.rows_per_block,
        typed.threads,
        typed.vec_bytes // et.itemsize,
        typed.check_bounds == "true",
    )
