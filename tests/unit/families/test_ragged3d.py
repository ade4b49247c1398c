"""ragged3d without a GPU: numpy reference on hand-computed packs and unpacks (empty sequences,
length 1, length exactly BM and Lmax), problem parsing (explicit and uniform lengths), validity
rules of both templates, geometry, work, the shipped sweeps, NVRTC compilation (to CUBIN, sm_90) of
every dtype x direction x vector width and of the TMA template's kinds (swizzle, group, batched
copies), each kernel's argument struct (members in order, layout proven by NVRTC), the kernel's
check of the shared memory it is given, and a numpy emulation of the TMA template's copies through
the tensor maps the family requests (RaggedTMA3DTile's clipping trick: which elements each copy
reads and writes)"""

from __future__ import annotations

import ctypes
import dataclasses
import re
import struct
from pathlib import Path
from types import SimpleNamespace

import family_checks
import numpy as np
import pytest
from family_checks import assert_rule

from tunebox import cuda_api
from tunebox.errors import InvalidConfig, InvalidProblem
from tunebox.families import get
from tunebox.families.base import BufferArg, KernelSource, ScalarArg, TensorMapArg
from tunebox.families.ragged3d import FAMILY, RaggedProblem, TmaConfig, VectorConfig, tma_layout
from tunebox.families.ragged3d import tma as ragged3d_tma
from tunebox.params import Config
from tunebox.records import Status
from tunebox.sweep_spec import load_sweep
from tunebox.tma import DATA_TYPES, SWIZZLE_BYTES, TensorMapRequest

R = FAMILY
REPO = Path(__file__).resolve().parents[3]


def problem(direction: str = "pack", lengths=(2, 0, 4), **extra) -> RaggedProblem:
    data = {
        "dtype": "float32",
        "batch": len(lengths),
        "max_len": 4,
        "heads": 2,
        "depth": 3,
        "direction": direction,
        "lengths": list(lengths),
        **extra,
    }
    return R.parse_problem(data)


def vector(**values) -> Config:
    return R.config({"template": "vector", "BM": 16, "threads": 64, "vec_bytes": 8, **values})


def tma(**values) -> Config:
    base = {"template": "tma", "BM": 16, "group": 1, "BN": 0, "swizzle": "none", "tma_blocks_per_op": 0}
    return R.config({**base, **values})


def typed_tma(p: RaggedProblem, config: Config) -> TmaConfig:
    """``config`` as the tma template's dataclass (what ``tma_layout``'s functions take)."""
    template, typed = R.typed(config)
    assert template.name == "tma" and isinstance(typed, TmaConfig)
    return typed


def members(source: KernelSource) -> dict[str, str]:
    """The named configuration struct a rendered variant instantiates its kernel with (less the alias
    ``Args`` of the argument struct: ``arg_members``)."""
    text = source.code[source.code.rindex("struct Cfg {") :]
    found = dict(re.findall(r"static constexpr \w+ (\w+) = (\w+);", text))
    found.update(re.findall(r"using (\w+) = ([\w ]+);", text))
    assert found.pop("Args") == "Args_t"
    return found


def arg_members(source: KernelSource) -> list[str]:
    """The members of the argument struct ``Args_t`` a rendered variant's kernel takes, in order, as
    declared ("type name")."""
    found = re.search(r"struct Args_t \{\n(.*?)\n\};", source.code, re.S)
    assert found, "the rendered source defines no struct Args_t"
    return [line.strip().rstrip(";") for line in found.group(1).splitlines()]


def padded_arange(p: RaggedProblem) -> np.ndarray:
    return (np.arange(np.prod(p.padded_shape), dtype=np.uint32) + 1).reshape(p.padded_shape)


def test_registered() -> None:
    assert get("ragged3d") is FAMILY and R.space.names() == ("vector", "tma")
    assert [f.name for f in dataclasses.fields(VectorConfig)] == ["BM", "threads", "vec_bytes"]
    assert [f.name for f in dataclasses.fields(TmaConfig)] == ["BM", "group", "BN", "swizzle", "tma_blocks_per_op"]


@pytest.mark.parametrize(
    "template, foreign",
    [
        ("vector", {"group": 2}),
        ("vector", {"BN": 64}),
        ("vector", {"swizzle": "32B"}),
        ("vector", {"tma_blocks_per_op": 1}),
        ("tma", {"threads": 128}),
        ("tma", {"vec_bytes": 16}),
        ("tma", {"transport": "tma"}),
    ],
)
def test_templates_hold_only_their_own_parameters(template, foreign) -> None:
    """The old flat space's fixed values (vector: group=1, BN=0, ...; tma: threads=64, vec_bytes=16) are
    gone with it: a parameter of the other template is unknown."""
    own = (vector() if template == "vector" else tma()).as_dict()
    with pytest.raises(InvalidConfig, match="unknown parameter"):
        R.config({**own, **foreign})


def test_pack_by_hand() -> None:
    """Sequence 0 keeps positions 0-1, sequence 1 is empty, sequence 2 keeps all four."""
    p = problem()
    x = padded_arange(p)
    out = R.reference(p, {"x": x, "offsets": p.offsets})["out"]
    assert out.shape == (6, 2, 3) and list(p.offsets) == [0, 2, 2, 6]
    np.testing.assert_array_equal(out[:2], x[0, :2])
    np.testing.assert_array_equal(out[2:], x[2])


def test_unpack_by_hand_zero_fills_past_each_length() -> None:
    p = problem("unpack")
    ragged = (np.arange(6 * 6, dtype=np.uint32) + 1).reshape(6, 2, 3)
    out = R.reference(p, {"ragged": ragged, "offsets": p.offsets})["out"]
    assert out.shape == (3, 4, 2, 3)
    np.testing.assert_array_equal(out[0, :2], ragged[:2])
    assert not out[0, 2:].any() and not out[1].any()
    np.testing.assert_array_equal(out[2], ragged[2:])


def test_pack_then_unpack_round_trips() -> None:
    p = problem(lengths=(1, 4, 0, 3))
    x = padded_arange(p)
    packed = R.reference(p, {"x": x, "offsets": p.offsets})["out"]
    back = R.reference(problem("unpack", lengths=(1, 4, 0, 3)), {"ragged": packed, "offsets": p.offsets})["out"]
    mask = np.arange(4)[None, :] < np.array(p.lengths)[:, None]
    np.testing.assert_array_equal(back[mask], x[mask])
    assert not back[~mask].any()


def test_all_empty_packs_to_nothing() -> None:
    p = problem(lengths=(0, 0))
    out = R.reference(p, R.make_inputs(p, np.random.default_rng(0)))["out"]
    assert out.shape == (0, 2, 3) and p.total == 0


def test_uniform_lengths_are_fixed_by_the_problem() -> None:
    data = {
        "dtype": "bfloat16",
        "batch": 64,
        "max_len": 4096,
        "heads": 8,
        "depth": 128,
        "direction": "pack",
        "lengths": "uniform",
    }
    a, b = R.parse_problem(data), R.parse_problem(data)
    assert a.lengths == b.lengths and len(a.lengths) == 64 and all(1 <= n <= 4096 for n in a.lengths)
    assert a.to_dict() == {**data, "lengths_seed": 0} and R.parse_problem(a.to_dict()) == a
    other = R.parse_problem({**data, "lengths_seed": 1})
    assert other.lengths != a.lengths
    assert R.work(a).bytes_moved == 2 * a.total * 8 * 128 * 2 + 65 * 8


def test_inputs_and_buffers() -> None:
    p = problem("unpack")
    inputs = R.make_inputs(p, np.random.default_rng(3))
    assert inputs["ragged"].shape == (6, 2, 3) and inputs["offsets"].dtype == np.int64
    assert [(b.name, b.shape, b.role) for b in R.buffers(p)] == [
        ("ragged", (6, 2, 3), "input"),
        ("offsets", (4,), "input"),
        ("out", (3, 4, 2, 3), "output"),
    ]


@pytest.mark.parametrize(
    "data, message",
    [
        ({"direction": "both"}, "direction"),
        ({"lengths": [1, 2], "batch": 3}, "lengths must be"),
        ({"lengths": [1, 2, 5]}, "lengths must be"),
        ({"lengths": [1, -1, 0]}, "lengths must be"),
        ({"lengths_seed": 3}, "only with lengths = 'uniform'"),
        ({"heads": 0}, "positive integer"),
        ({"max_len": 2**20, "heads": 2**20, "depth": 2**10}, "too many"),
        ({"group": 2}, "unknown problem key"),
    ],
)
def test_bad_problems_say_what_to_do(data, message) -> None:
    with pytest.raises(InvalidProblem, match=message):
        problem(**data)


def test_rules_each_pass_and_fail() -> None:
    p = problem(lengths=(3, 1000), max_len=1000)
    ok = vector()
    assert R.violations(p, ok) == [] and R.violations(p, R.default_config(p)) == []
    assert R.default_config(p) == vector(BM=128, threads=128, vec_bytes=16)  # 192 vectors of 16 bytes
    assert "threads would idle" in R.violations(p, R.config({**ok.as_dict(), "threads": 512}))[0]
    assert "exceeds max_len" in R.violations(problem(), R.config({**ok.as_dict(), "BM": 8}))[0]
    assert R.violations(problem(), R.config({**ok.as_dict(), "BM": 4})) == []
    many = problem(lengths=(1,), max_len=2**31)
    assert "grid limit" in R.violations(many, R.config({**ok.as_dict(), "BM": 1}))[0]
    assert R.violations(many, R.config({**ok.as_dict(), "BM": 2})) == []


def test_geometry() -> None:
    p = problem(lengths=(3, 1000), max_len=1000)
    geo = R.geometry(p, vector(threads=128, vec_bytes=16))
    assert geo.grid == (2 * 63, 1, 1) and geo.block == (128, 1, 1)


def test_distance() -> None:
    a, b = problem(lengths=(2, 2)), problem(lengths=(4, 4))
    assert a and R.distance(a, b) == pytest.approx(1.0)
    assert R.distance(a, problem("unpack", lengths=(2, 2))) is None


def test_shipped_sweep_loads() -> None:
    """Both templates, every valid variant: the search picks between vector and tma per problem."""
    spec = load_sweep(REPO / "spaces" / "ragged3d.toml")
    assert spec.family.name == "ragged3d" and {n.problem.direction for n in spec.problems} == {"pack", "unpack"}
    for named in spec.problems:
        assert named.problem.padded_shape == (64, 4096, 8, 128)
        valid = [c for c in spec.space if not R.violations(named.problem, c)]
        assert sum(c["template"] == "vector" for c in valid) == 92
        tma_valid = [c for c in valid if c["template"] == "tma"]
        assert len(tma_valid) >= 100 and {c["swizzle"] for c in tma_valid} == set(SWIZZLE_BYTES)
        assert {c["group"] for c in tma_valid} == {1, 2, 4, 8} and {c["tma_blocks_per_op"] for c in tma_valid} >= {0, 1}


@pytest.fixture(scope="module")
def compiled():
    cases = []
    for dtype in ("float32", "float16", "bfloat16"):
        for direction in ("pack", "unpack"):
            p = R.parse_problem(
                {
                    "dtype": dtype,
                    "batch": 3,
                    "max_len": 300,
                    "heads": 3,
                    "depth": 7,
                    "direction": direction,
                    "lengths": [0, 1, 300],
                }
            )
            for values in (
                {"BM": 1, "threads": 64, "vec_bytes": 16},
                {"BM": 128, "threads": 512, "vec_bytes": 4},
                {"BM": 16, "threads": 128, "vec_bytes": 8},
            ):
                cases.append((p, vector(**values)))
    return family_checks.compile_cases(R, cases)


def test_every_kind_compiles(compiled) -> None:
    assert len(compiled) == 18
    for (p, config), result in compiled:
        assert result.status is Status.OK, result.log
        assert result.spill_bytes == 0 and result.source.name_expression == "ragged3d<Cfg>"
        width = int(config["vec_bytes"]) // (4 if p.element == "float32" else 2)
        e = "unsigned int" if p.element == "float32" else "unsigned short"
        assert members(result.source) == {
            "E": e,
            "BM": str(config["BM"]),
            "THREADS": str(config["threads"]),
            "VEC": str(width),
            "PACK": str(p.direction == "pack").lower(),
        }
        source = "x" if p.direction == "pack" else "ragged"  # the layout itself: NVRTC's static_asserts
        assert arg_members(result.source) == [f"const {e}* {source}", f"{e}* out", *VECTOR_ARGS[2:]]


VECTOR_ARGS = [
    "const unsigned short* x",
    "unsigned short* out",
    "const long long* offsets",
    "long long Lmax",
    "long long row",
]
TMA_ARGS = [
    "tb::TensorMap src_map",
    "tb::TensorMap dst_map",
    "const long long* offsets",
    "long long Lmax",
    "long long depth",
    "long long M",
    "long long tiles",
    "long long column_blocks",
]


@pytest.mark.parametrize("direction", ["pack", "unpack"])
def test_each_kernel_takes_its_arguments_as_one_named_struct(direction) -> None:
    """``struct Args_t`` holds the template's arguments in ``args``' order, by name (the vector kernel's
    source is named by its buffer, x or ragged), aliased ``Cfg::Args``; the kernels take it as their one
    ``__grid_constant__`` parameter (compiled above with the static_asserts of its layout)."""
    p = R.parse_problem({**BF16.to_dict(), "direction": direction})
    source = "x" if direction == "pack" else "ragged"
    vector_args = [f"const unsigned short* {source}", *VECTOR_ARGS[1:]]
    for config, want in ((vector(), vector_args), (tma(), TMA_ARGS)):
        rendered = R.render(p, config)
        assert arg_members(rendered) == want, config.label()
        assert [a.name for a in R.args(p, config)] == [m.rsplit(" ", 1)[1] for m in want]
        assert "using Args = Args_t;" in rendered.code[rendered.code.rindex("struct Cfg {") :]
    assert "ragged3d(const __grid_constant__ typename Cfg::Args a)" in R.render(p, vector()).code
    assert "ragged3d_tma(const __grid_constant__ typename Cfg::Args a)" in R.render(p, tma()).code


# ---------------------------------------------------------------------------------------------
# template tma: rules, tensor maps and arguments, emulated copies, compilation

BF16 = R.parse_problem(
    {
        "dtype": "bfloat16",
        "batch": 3,
        "max_len": 300,
        "heads": 8,
        "depth": 128,
        "direction": "pack",
        "lengths": [0, 1, 300],
    }
)


def big(direction: str = "pack", **data) -> RaggedProblem:
    """One sequence of ``max_len`` float32 rows (no memory is allocated: rules only)."""
    values = {"dtype": "float32", "batch": 1, "heads": 1, "depth": 4096, "direction": direction, **data}
    return R.parse_problem({**values, "lengths": [values["max_len"]]})


def test_rule_tma_group_divides_the_heads() -> None:
    six = R.parse_problem({**BF16.to_dict(), "heads": 6})
    assert_rule(R, six, tma(group=2), tma(group=4), "group=4 heads per block must divide the H=6 heads")


def test_rule_tma_heads_are_16_byte_multiples() -> None:
    ok = R.parse_problem({**BF16.to_dict(), "depth": 8})  # 16 bytes
    bad = R.parse_problem({**BF16.to_dict(), "depth": 12})  # 24 bytes
    assert R.violations(ok, tma()) == []
    assert R.violations(bad, tma()) == [
        "TMA strides are 16-byte multiples: a head of D=12 elements is 24 bytes; use template 'vector'"
    ]
    assert R.violations(bad, vector()) == []


def test_rule_tma_batched_copies_need_swizzle_none() -> None:
    assert_rule(
        R, BF16, tma(tma_blocks_per_op=2), tma(tma_blocks_per_op=2, swizzle="64B"), "only swizzle='none' allows"
    )


def test_rule_tma_column_blocks_are_whole_chunks() -> None:
    # 128-byte swizzle of bfloat16: chunks of 64 columns
    assert_rule(R, BF16, tma(swizzle="128B", BN=64), tma(swizzle="128B", BN=32), "multiple of the chunk of G=64")
    assert_rule(R, BF16, tma(BN=64), tma(BN=128), "covers all of D=128 in one column block: set BN=0")
    assert_rule(R, BF16, tma(BN=16, tma_blocks_per_op=2), tma(BN=16, tma_blocks_per_op=4), "exceeds the 2 chunks")
    narrow = R.parse_problem({**BF16.to_dict(), "depth": 24})  # 3 chunks of 8
    assert_rule(R, narrow, tma(tma_blocks_per_op=2), tma(tma_blocks_per_op=4), "exceeds the 3 chunks")


def test_rule_tma_shared_memory() -> None:
    """128 rows x 8 heads x 128 bfloat16 columns (256 KiB) do not fit; 4 heads (128 KiB) do."""
    assert tma_layout.layout(BF16, typed_tma(BF16, tma(BM=128, group=4))).shared_bytes == 128 + 16 * 8192 + 8
    assert_rule(R, BF16, tma(BM=128, group=4), tma(BM=128, group=8), "bytes of shared memory")


def test_rule_tma_coordinates_are_32_bit() -> None:
    """pack: the merged (row, head group) dimension of out's clipping map, (total + 1) x H / group - 1;
    unpack: the row coordinate of ragged's plain map, up to total; both <= 2^31 - 1."""
    p = R.parse_problem(
        {
            "dtype": "float32",
            "batch": 1,
            "max_len": 2**28,
            "heads": 8,
            "depth": 8,
            "direction": "pack",
            "lengths": [2**28],
        }
    )
    assert_rule(R, p, tma(BM=128, group=2), tma(BM=128, group=1), "signed 32-bit")
    unpack = {"dtype": "float32", "batch": 1, "max_len": 2**31, "heads": 1, "depth": 8, "direction": "unpack"}
    assert R.violations(R.parse_problem({**unpack, "lengths": [2**31 - 1]}), tma(BM=128)) == []
    broken = R.violations(R.parse_problem({**unpack, "lengths": [2**31]}), tma(BM=128))
    assert any("signed 32-bit: the rows of ragged's map" in b for b in broken), broken


def test_rule_tma_grid_limit() -> None:
    p = big(max_len=2**24)  # 2^24 rows of 4096 columns in blocks of 16 columns: 256 blocks per row
    assert_rule(R, p, tma(BM=4, BN=16), tma(BM=2, BN=16), "grid limit")


def test_rule_tma_tensor_maps_pass_the_driver_rules() -> None:
    """The plain map of the padded tensor (pack's x, unpack's out) has a stride of Lmax rows: below 2^40
    bytes (16 KiB rows)."""
    cfg = tma(BM=128, BN=256)

    def two(direction: str, max_len: int) -> RaggedProblem:
        return R.parse_problem(
            {
                "dtype": "float32",
                "batch": 2,
                "max_len": max_len,
                "heads": 1,
                "depth": 4096,
                "direction": direction,
                "lengths": [max_len, 1],
            }
        )

    for direction, padded in (("pack", "x"), ("unpack", "out")):
        assert R.violations(two(direction, 2**25), cfg) == []
        broken = R.violations(two(direction, 2**26), cfg)
        assert broken and all(b.startswith(f"tensor map of {padded}: strides[0]") for b in broken), broken


def test_rule_tma_bm_within_max_len() -> None:
    assert_rule(R, problem(depth=4), tma(BM=4), tma(BM=8), "exceeds max_len")


def test_the_rules_see_the_offset_address(monkeypatch) -> None:
    """The stand-in address is offset like the real one: a misaligned offset breaks the driver's rule."""
    good = tma_layout.tensor_maps(BF16, typed_tma(BF16, tma()))
    assert all(m.offset_bytes % 16 == 0 for m in good) and R.violations(BF16, tma()) == []
    moved = tuple(dataclasses.replace(m, offset_bytes=m.offset_bytes - 8) for m in good)
    monkeypatch.setattr(ragged3d_tma, "tensor_maps", lambda p, c: moved)
    assert any("is not 16-byte aligned" in b for b in R.violations(BF16, tma()))


def test_pack_encodes_at_the_buffer_address_plus_the_offset(monkeypatch) -> None:
    """Into the argument struct the kernel takes (each map 128 bytes at a 64-byte multiple): the map
    encoded on its buffer's address plus ``offset_bytes`` (a stand-in encoder writes that address)."""
    kept = []

    def encode(request: TensorMapRequest) -> SimpleNamespace:
        kept.append(ctypes.create_string_buffer(struct.pack("<Q", request.address) + bytes(120), 128))
        return SimpleNamespace(getPtr=lambda: ctypes.addressof(kept[-1]))

    monkeypatch.setattr(cuda_api, "encode", encode)
    request = TensorMapRequest("float32", (4, 8), (32, 4), (4, 4), 0)
    maps = (TensorMapArg("a", request, -4096, "src_map"), TensorMapArg("b", request, 0, "dst_map"))
    packed = cuda_api.pack(maps, {"a": 0x7F0000010000, "b": 0x7F0000020000})
    assert len(packed.data) == 256
    assert struct.unpack_from("<Q", packed.data, 0)[0] == 0x7F0000010000 - 4096
    assert struct.unpack_from("<Q", packed.data, 128)[0] == 0x7F0000020000


def test_tma_tensor_maps_and_arguments() -> None:
    """bfloat16, H = 8, D = 128 (256-byte heads, 4 KiB rows), total = 301, B x Lmax = 900."""
    row, head = 8 * 128 * 2, 128 * 2
    # pack, group 1, 128-byte swizzle (chunks of 64 columns): the plain map of x (B, Lmax, H, D), the
    # rank-3 clipping map of out
    src, dst, offsets, *scalars = R.args(BF16, tma(BM=16, swizzle="128B"))
    assert src == TensorMapArg(
        "x",
        TensorMapRequest("bfloat16", (3, 300, 8, 128), (300 * row, row, head, 2), (1, 16, 1, 64), 0, "128B"),
        0,
        "src_map",
    )
    assert dst == TensorMapArg(
        "out",
        TensorMapRequest("bfloat16", (8 * 302, 16, 128), (head, row, 2), (1, 16, 64), 0, "128B"),
        -16 * row,
        "dst_map",
    )
    assert offsets == BufferArg("offsets", "const long long")
    names = ("Lmax", "depth", "M", "tiles", "column_blocks")
    assert scalars == [ScalarArg("i64", v, n) for v, n in zip((300, 128, 8, 19, 1), names, strict=True)]
    # unpack, group 2, batches of 4 chunks of 8 columns, BN = 64 (2 column blocks): rank 5 plain maps of
    # ragged (1, total, H, D) and out (B, Lmax, H, D)
    unpack = R.parse_problem({**BF16.to_dict(), "direction": "unpack"})
    src, dst, _, *scalars = R.args(unpack, tma(BM=32, group=2, BN=64, tma_blocks_per_op=4))
    assert src == TensorMapArg(
        "ragged",
        TensorMapRequest("bfloat16", (1, 16, 301, 8, 8), (row, 16, row, head, 2), (1, 4, 32, 2, 8), 0, "none"),
        0,
        "src_map",
    )
    assert dst == TensorMapArg(
        "out",
        TensorMapRequest("bfloat16", (3, 16, 300, 8, 8), (300 * row, 16, row, head, 2), (1, 4, 32, 2, 8), 0, "none"),
        0,
        "dst_map",
    )
    assert scalars == [ScalarArg("i64", v, n) for v, n in zip((300, 128, 4, 10, 2), names, strict=True)]
    # unpack, group 4, no batching: the plain map (B, Lmax, H, D), boxes of (1, BM, group, G)
    _, dst, *_ = R.args(unpack, tma(BM=8, group=4, swizzle="64B"))
    assert dst == TensorMapArg(
        "out",
        TensorMapRequest("bfloat16", (3, 300, 8, 128), (300 * row, row, head, 2), (1, 8, 4, 32), 0, "64B"),
        0,
        "dst_map",
    )
    for p, cfg in ((BF16, tma(BM=16, swizzle="128B")), (unpack, tma(BM=32, group=2, BN=64, tma_blocks_per_op=4))):
        assert R.violations(p, cfg) == []


def test_tma_geometry_and_template() -> None:
    cfg = tma(BM=32, group=2, BN=64, tma_blocks_per_op=4)
    geo = R.geometry(BF16, cfg)
    # 3 sequences x 10 tiles x 4 head groups x 2 column blocks; one warp; 128 B slack + 2 slots of 4 x 16 x 2 x 32
    assert geo.grid == (3 * 10 * 4 * 2, 1, 1) and geo.block == (32, 1, 1)
    assert geo.shared_bytes == 128 + 2 * 4 * 16 * 2 * 32 + 8
    source = R.render(BF16, cfg)
    assert source.name_expression == "ragged3d_tma<Cfg>"
    assert members(source) == {
        "E": "unsigned short",
        "BM": "32",
        "GROUP": "2",
        "SPAN": "0",
        "G": "8",
        "CHUNKS": "8",
        "PER_OP": "4",
        "BATCHED": "true",
        "PACK": "true",
        "SHARED_BYTES": str(geo.shared_bytes),
    }
    # BN = 0 with batches of 4: D = 40 has 5 chunks, rounded up to 8 slots of whole copies
    narrow = R.parse_problem({**BF16.to_dict(), "depth": 40, "direction": "unpack"})
    lay = tma_layout.layout(narrow, typed_tma(narrow, tma(tma_blocks_per_op=4)))
    assert (lay.chunks, lay.ops, lay.column_blocks) == (8, 2, 1)
    assert members(R.render(narrow, tma(swizzle="32B"))) == {
        "E": "unsigned short",
        "BM": "16",
        "GROUP": "1",
        "SPAN": "32",
        "G": "16",
        "CHUNKS": "3",
        "PER_OP": "1",
        "BATCHED": "false",
        "PACK": "false",
        "SHARED_BYTES": str(256 + 3 * 512 + 8),
    }


# A numpy emulation of ragged3d_tma.cu: the block decomposition and the coordinates of every copy are the
# kernel's (mirrored here); each copy goes through the TensorMapRequest the family asks for, on a buffer
# at virtual address 0 (the map at offset_bytes). A box element is in bounds when every coordinate lies
# inside its dimension; a load fills the others with zero, a store skips them. The swizzle is a bijection
# that loads and stores of the same box apply alike, and keeps every row of a box within its own bytes
# (unpack's zeros): shared memory is emulated unswizzled.


def box_elements(arg: TensorMapArg, coords: list[int], nbytes: int) -> tuple[np.ndarray, np.ndarray]:
    """(in bounds, element index into the buffer) of every box element, in shared-memory order (innermost
    fastest) of a copy at ``coords`` (innermost first); asserts that in-bounds elements lie in the buffer."""
    req = arg.request
    size = DATA_TYPES[req.dtype][0]
    at = np.indices(req.box).reshape(len(req.box), -1) + np.array(coords[::-1])[:, None]  # outermost first
    inside = ((at >= 0) & (at < np.array(req.shape)[:, None])).all(axis=0)
    byte = arg.offset_bytes + (at * np.array(req.strides)[:, None]).sum(axis=0)
    assert (byte[inside] >= 0).all() and (byte[inside] + size <= nbytes).all() and not (byte % size).any()
    return inside, byte // size


def clip_coords(lay, bm: int, group: int, col: int, chunk: int, dyn: int, first: int, m_count: int, m: int):
    return [
        0 if lay.batched else col,
        *([0] if group > 1 else []),
        bm - dyn,
        *([chunk] if lay.batched else []),
        (first + dyn) * m_count + m,
    ]


def plain_coords(lay, group: int, col: int, chunk: int, m: int, row: int, b: int):
    return [0 if lay.batched else col, m * group, row, *([chunk] if lay.batched else []), b]


def emulate(p: RaggedProblem, config: Config, source: np.ndarray):
    """(out, writes per out element, reads per source element) of the kernel on ``source``."""
    src, dst, _, *scalars = R.args(p, config)
    lmax, depth, m_count, tiles, column_blocks = (s.value for s in scalars)
    lay = tma_layout.layout(p, typed_tma(p, config))
    bm, group, pack = int(config["BM"]), int(config["group"]), p.direction == "pack"
    out_shape = p.ragged_shape if pack else p.padded_shape
    size = source.itemsize
    flat = source.reshape(-1)
    out = np.full(int(np.prod(out_shape)), 0xDEAD, dtype=source.dtype)
    writes, reads = np.zeros(out.size, np.int64), np.zeros(flat.size, np.int64)
    box, slot = lay.box_bytes // size, lay.slot_bytes // size
    assert box <= slot and lay.shared_bytes >= lay.ops * lay.slot_bytes + 8
    for block in range(R.geometry(p, config).grid[0]):
        j, rest = block % column_blocks, block // column_blocks
        m, rest = rest % m_count, rest // m_count
        l0, b = rest % tiles * bm, rest // tiles
        start, length = int(p.offsets[b]), p.lengths[b]
        dyn = min(length - l0, bm) if l0 < length else 0
        if pack and dyn == 0:
            continue
        first_chunk = j * lay.chunks
        ops = -(-min(lay.chunks, -(-(depth - first_chunk * lay.chunk) // lay.chunk)) // lay.per_op)
        shared = np.full(lay.ops * slot, 0xBEEF, dtype=source.dtype)
        for k in range(ops if dyn else 0):
            chunk = first_chunk + k * lay.per_op
            coords = plain_coords(lay, group, chunk * lay.chunk, chunk, m, *((l0, b) if pack else (start + l0, 0)))
            inside, at = box_elements(src, coords, flat.nbytes)
            shared[k * slot : k * slot + box] = np.where(inside, flat[np.where(inside, at, 0)] if flat.size else 0, 0)
            np.add.at(reads, at[inside], 1)
        if not pack:  # the rows of every chunk's box from dyn on become zeros
            chunk_elements, row_elements = lay.chunk * group * bm, lay.chunk * group
            for k in range(ops * lay.per_op):
                base = k // lay.per_op * slot + k % lay.per_op * chunk_elements
                shared[base + dyn * row_elements : base + chunk_elements] = 0
        for k in range(ops):
            chunk = first_chunk + k * lay.per_op
            coords = (
                clip_coords(lay, bm, group, chunk * lay.chunk, chunk, dyn, start + l0, m_count, m)
                if pack
                else plain_coords(lay, group, chunk * lay.chunk, chunk, m, l0, b)
            )
            inside, at = box_elements(dst, coords, out.nbytes)
            out[at[inside]] = shared[k * slot : k * slot + box][inside]
            np.add.at(writes, at[inside], 1)
    return out.reshape(out_shape), writes.reshape(out_shape), reads.reshape(source.shape)


EMULATED = [(dtype, direction) for dtype in ("bfloat16", "float32") for direction in ("pack", "unpack")]


def emulated_configs(p: RaggedProblem) -> list[Config]:
    """Every valid tma config with BM 4 or 8 (tiles shorter and longer than some sequences)."""
    sub = R.space.restrict({"template": ["tma"], "BM": [4, 8]})
    return [c for c in sub if not R.violations(p, c)]


@pytest.mark.parametrize("dtype, direction", EMULATED)
def test_emulated_tma_copies_write_every_output_once(dtype, direction) -> None:
    """D = 40 is 2.5 chunks of 128-byte bfloat16 swizzle and 5 unswizzled chunks: partial chunks, a
    batched copy past n_blocks, BN = 16 and 32 leaving partial column blocks. Every source element is read
    (pack: at most once, and no tile wholly past a sequence's end is read)."""
    p = R.parse_problem(
        {
            "dtype": dtype,
            "batch": 5,
            "max_len": 11,
            "heads": 4,
            "depth": 40,
            "direction": direction,
            "lengths": [0, 4, 11, 8, 1],
        }
    )
    inputs = R.make_inputs(p, np.random.default_rng(1))
    source = inputs["x" if direction == "pack" else "ragged"]
    want = R.reference(p, inputs)["out"]
    configs = emulated_configs(p)
    kinds = {(c["swizzle"], c["group"], c["BN"], c["tma_blocks_per_op"]) for c in configs}
    assert {k[0] for k in kinds} == set(SWIZZLE_BYTES) and {k[1] for k in kinds} == {1, 2, 4}
    assert {k[3] for k in kinds} >= {0, 1, 2, 4} and {k[2] for k in kinds} >= {0, 16, 32}
    inside = np.arange(11)[None, :] < np.array(p.lengths)[:, None]  # (B, Lmax) positions inside a sequence
    for config in configs:
        out, writes, reads = emulate(p, config, source)
        assert (writes == 1).all(), (config.label(), np.argwhere(writes != 1)[:4])
        np.testing.assert_array_equal(out, want, err_msg=config.label())
        if direction == "pack":
            tile_read = np.arange(11)[None, :] // int(config["BM"]) * int(config["BM"]) < np.array(p.lengths)[:, None]
            assert (reads[inside] == 1).all() and reads.max() == 1 and not reads[~tile_read].any(), config.label()
        else:
            assert (reads >= 1).all(), config.label()


def test_a_clipped_store_writes_exactly_the_tiles_rows_inside_the_sequence() -> None:
    """One tile (sequence 1 at rows 3.., l0 = 8, head group 1 of 2, BM = 8) stored through out's clipping
    map with every dyn in 0..BM: exactly rows 3 + 8 .. 3 + 8 + dyn - 1 of heads 2 and 3, all columns."""
    p = R.parse_problem(
        {
            "dtype": "bfloat16",
            "batch": 3,
            "max_len": 16,
            "heads": 4,
            "depth": 24,
            "direction": "pack",
            "lengths": [3, 16, 5],
        }
    )
    for cfg in (tma(BM=8, group=2), tma(BM=8, group=2, tma_blocks_per_op=2), tma(BM=8, group=1, swizzle="64B")):
        lay = tma_layout.layout(p, typed_tma(p, cfg))
        _, dst, *_ = R.args(p, cfg)
        group = int(cfg["group"])
        for dyn in range(9):
            written = np.zeros(p.ragged_shape, bool)
            for m in range(2 // group, 4 // group):  # the head groups holding heads 2 and 3
                for k in range(lay.ops):
                    chunk = k * lay.per_op
                    inside, at = box_elements(
                        dst,
                        clip_coords(lay, 8, group, chunk * lay.chunk, chunk, dyn, 3 + 8, 4 // group, m),
                        written.size * 2,
                    )
                    written.reshape(-1)[at[inside]] = True
            expected = np.zeros(p.ragged_shape, bool)
            expected[11 : 11 + dyn, 2:4, :] = True
            np.testing.assert_array_equal(written, expected, err_msg=f"{cfg.label()} dyn={dyn}")


def _tma_compile_cases() -> list[tuple[RaggedProblem, Config]]:
    """bfloat16 and float32 x pack and unpack x (every swizzle mode, unbatched, groups 1, 2, 4 in turn;
    swizzle none with 1 and 4 chunks per copy, groups 1 and 2)."""
    cases = []
    for dtype in ("bfloat16", "float32"):
        for direction in ("pack", "unpack"):
            p = R.parse_problem(
                {
                    "dtype": dtype,
                    "batch": 3,
                    "max_len": 300,
                    "heads": 8,
                    "depth": 72,
                    "direction": direction,
                    "lengths": [0, 1, 300],
                }
            )
            for n, swizzle in enumerate(SWIZZLE_BYTES):
                cases.append((p, tma(BM=(16, 64, 128, 8)[n], group=(1, 2, 4, 2)[n], swizzle=swizzle)))
            cases += [(p, tma(BM=32, group=1, tma_blocks_per_op=1)), (p, tma(BM=16, group=2, tma_blocks_per_op=4))]
    return cases


@pytest.fixture(scope="module")
def tma_compiled():
    return family_checks.compile_cases(R, _tma_compile_cases())


def test_every_tma_kind_compiles(tma_compiled) -> None:
    kinds = set()
    for (p, cfg), result in tma_compiled:
        assert R.violations(p, cfg) == [], cfg.label()
        assert result.status is Status.OK, result.log
        assert result.spill_bytes == 0 and result.registers > 0
        assert result.source.name_expression == "ragged3d_tma<Cfg>"
        assert members(result.source)["PACK"] == str(p.direction == "pack").lower()
        assert arg_members(result.source) == TMA_ARGS
        # the copies take the maps' addresses in the __grid_constant__ parameter: a copy of a map into a
        # local (passed by value) would need a stack frame (304 bytes, seen with NVRTC 13)
        assert "0 bytes stack frame" in result.log, result.log
        kinds.add((p.element, p.direction, cfg["swizzle"], cfg["group"], cfg["tma_blocks_per_op"]))
    assert len(kinds) == 24
    assert {k[2] for k in kinds} == set(SWIZZLE_BYTES) and {k[3] for k in kinds} == {1, 2, 4}
    assert {k[4] for k in kinds} == {0, 1, 4}


def test_tma_kernel_refuses_older_devices() -> None:
    ((_, result),) = family_checks.compile_cases(R, [(BF16, tma())], arch="sm_80", workers=1)
    assert result.status is Status.COMPILE_ERROR and "needs sm_90" in result.log


def test_tma_kernel_checks_its_tile_fits_the_shared_memory_it_is_given() -> None:
    """The kernel's compile-time layout against SHARED_BYTES (TmaLayout.shared_bytes): one byte short
    fails to compile, so the two formulas cannot drift apart."""
    cfg = tma(BM=32, group=2, swizzle="128B")
    source = R.render(BF16, cfg)
    shared = R.geometry(BF16, cfg).shared_bytes
    line = f"static constexpr int SHARED_BYTES = {shared};"
    short = dataclasses.replace(source, code=source.code.replace(line, line.replace(str(shared), str(shared - 1))))
    assert short.code != source.code

    class Short:
        @staticmethod
        def render(p: RaggedProblem, c: Config) -> KernelSource:
            return short if c is cfg else R.render(p, c)

    (_, fits), (_, short_result) = family_checks.compile_cases(Short, [(BF16, tma()), (BF16, cfg)], workers=1)
    assert fits.status is Status.OK, fits.log
    assert short_result.status is Status.COMPILE_ERROR and "does not fit the dynamic shared memory" in short_result.log
