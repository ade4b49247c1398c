"""The conformance suite every discovered family and template passes: problems survive their dict
form, every template compiles with NVRTC, every template has valid and invalid configurations, every
named rule of a template (and of the tensor-map validator) is seen holding and breaking, the hash
covers every source (and changes with any of them), and a family outside tunebox joins by an entry
point without touching an engine file."""

from __future__ import annotations

import dataclasses
import itertools
import random
import re
import sys
import textwrap
from importlib.metadata import EntryPoint
from pathlib import Path
from types import SimpleNamespace

import pytest

import tunebox.families as families
from tunebox.build.nvrtc import NvrtcBuilder
from tunebox.families.base import Problem
from tunebox.families.contract import Family, Operation, TemplateConfig
from tunebox.kernels_dir import kernels_dir
from tunebox.params import Space, TemplateSpaces
from tunebox.records import Status
from tunebox.rules import Outcome, recording
from tunebox.source_graph import cuda_closure
from tunebox.sweep_spec import load_sweep
from tunebox.tma import RULE_NAMES, TensorMapRequest
from tunebox.tma import violations as tensor_map_violations

SPACES = Path(__file__).resolve().parents[3] / "spaces"
EXTRA_PROBLEMS = {"faults": [{"n": 1000}]}  # families without a sweep file (test-only)


def problems(name: str) -> list[Problem]:
    """The problems of every sweep file of the family, and its extra ones."""
    family = families.get(name)
    found = [family.parse_problem(data) for data in EXTRA_PROBLEMS.get(name, [])]
    for path in sorted(SPACES.glob("*.toml")):
        spec = load_sweep(path)
        if spec.family is family:
            found += [named.problem for named in spec.problems]
    return found


NAMES = families.names()


def test_every_family_package_is_discovered() -> None:
    packages = {p.name for p in Path(families.__file__).parent.iterdir() if (p / "__init__.py").is_file()}
    assert set(NAMES) == packages
    for name in NAMES:
        assert problems(name), f"{name} has no sweep file and no extra problem"


@pytest.mark.parametrize("name", NAMES)
def test_problems_survive_their_dict_form(name: str) -> None:
    family = families.get(name)
    for problem in problems(name):
        assert family.parse_problem(problem.to_dict()) == problem
        assert family.parse_problem(problem.to_dict()).key() == problem.key()


@pytest.mark.parametrize("name", NAMES)
def test_every_template_has_valid_and_invalid_configurations_and_compiles(name: str, tmp_path: Path) -> None:
    """For each template: a valid configuration for some sweep problem (its default where it has
    one), which NVRTC compiles for sm_90; and a configuration its rules refuse somewhere."""
    family = families.get(name)
    cases, refused = [], set()
    for template_name, space in family.space.templates:
        template = family.templates[template_name]
        found = None
        for problem in problems(name):
            default = template.default(problem)
            configs = itertools.chain(
                [family.template_config(template_name, default)] if default is not None else [],
                TemplateSpaces(((template_name, space),)),
            )
            for config in configs:  # lazily, until both a valid and a refused configuration turned up
                if family.violations(problem, config):
                    refused.add(template_name)
                elif found is None:
                    found = (problem, config)
                if found and template_name in refused:
                    break
            if found and template_name in refused:
                break
        assert found is not None, f"{name}/{template_name}: no valid configuration for any sweep problem"
        cases.append(found)
    if name != "faults":  # the planted faults are valid by design: the harness must catch them
        assert refused == set(family.templates), (
            f"templates whose rules never refuse: {set(family.templates) - refused}"
        )
    builder = NvrtcBuilder("sm_90", cache_dir=tmp_path)
    try:
        results = builder.build([family.render(p, c) for p, c in cases])
    finally:
        builder.close()
    for (_, config), result in zip(cases, results, strict=True):
        if config["template"] == "planted" and config["fault"] == "compile_error":
            continue
        assert result.status is Status.OK, (config.label(), result.log[-500:])


# Problems beyond the sweep files', for the rules that break on none of those: each comment names the
# rules its problem breaks (the problems are valid: the family's operation parses them).
RULE_PROBLEMS: dict[str, list[dict[str, object]]] = {
    "gather": [  # the column form (axis 1): threads_busy, rows_per_block_within_window
        {"dtype": "float32", "rows": 4096, "cols": 64, "count": 1000, "axis": 1, "window": 8},
    ],
    "gather_elements": [  # grid_fits: 2^31 - 1 output rows
        {"dtype": "bfloat16", "rows": 1024, "cols": 64, "tile": [2**31 - 1, 256]},
    ],
    "gemm": [  # M = 2^31: coordinates_32bit (wgmma, padded, persistent), grid_fits (mma: M / BM > 65535)
        {"M": 2**31, "N": 64, "K": 64},
        {"M": 2**14, "N": 8, "K": 2**20 + 1},  # A's copy of 2^31 + 2^14 chunks: pad_chunks_32bit (padded templates)
    ],
    "quant": [
        {"dtype": "bfloat16", "rows": 1, "cols": 64, "format": "mxfp4", "direction": "quantize"},  # threads_busy
        {"dtype": "bfloat16", "rows": 2**20, "cols": 2**20 - 1, "format": "mxfp4", "direction": "dequantize"},  # grid
    ],
    "quant_gemm": [  # M = 2^23: grid_fits; N = 16: warps_along_n_busy; K = 64: splits_within_spans, bk_within_k
        {"M": 2**23, "N": 16, "K": 64, "format": "mxfp4"},
        {"M": 1, "N": 2**31, "K": 64, "format": "mxfp4"},  # coordinates_32bit (wgmma)
    ],
    "ragged3d": [
        # max_len 8: bm_within_max_len; 6 heads: group_divides_heads; 12 x 2 bytes: head_stride_16_bytes
        {
            "dtype": "bfloat16",
            "batch": 4,
            "max_len": 8,
            "heads": 6,
            "depth": 12,
            "direction": "pack",
            "lengths": [8, 3, 0, 5],
        },
        # 1024 x 2^22 rows: grid_fits; about 2^31 packed rows: coordinates_32bit (tma)
        {
            "dtype": "bfloat16",
            "batch": 1024,
            "max_len": 2**22,
            "heads": 1,
            "depth": 64,
            "direction": "pack",
            "lengths": "uniform",
        },
    ],
    "tile_copy": [
        {"dtype": "bfloat16", "src": [2**20, 2**19], "dst": [2**20, 2**19]},  # grid_fits: 2^39 elements
        # coordinates_32bit (tma): boxes start past row 2^31 - 1
        {"dtype": "float32", "src": [2**31 - 1, 256], "dst": [1024, 1024], "origin": [2147483000, 0]},
    ],
    "windows": [
        {"dtype": "float32", "rows": 4, "cols": 4, "window": [2, 2], "step": [1, 1], "op": "sum"},  # block_within_grid
        {"dtype": "float32", "rows": 2**22, "cols": 64, "window": [1, 1], "step": [1, 1], "op": "max"},  # grid_fits
    ],
}
WHOLE = 30_000  # evaluations: a template's whole space for every problem, where that is at most this many
DRAWS = 500  # else as many seeded draws of its space per problem


def configurations(family: Family, template: str, space: Space, seed: str | None) -> list[TemplateConfig]:
    """The template's whole space (iterated as ``TemplateSpaces``) without a seed, else DRAWS seeded
    draws of it."""
    if seed is None:
        return [family.typed(config)[1] for config in TemplateSpaces(((template, space),))]
    rng = random.Random(seed)
    config_type = family.templates[template].config_type
    return [config_type(**{p.name: rng.choice(p.choices) for p in space.params}) for _ in range(DRAWS)]


def unseen(owner: str, declared: tuple[str, ...], seen: set[Outcome]) -> dict[str, set[str]]:
    """The declared rules of ``owner`` never seen holding, never seen breaking, and the rules seen
    that are not declared (all empty when conformant)."""
    held = {rule for who, rule, ok in seen if who == owner and ok}
    broke = {rule for who, rule, ok in seen if who == owner and not ok}
    return {
        "never held": set(declared) - held,
        "never broke": set(declared) - broke,
        "not declared": (held | broke) - set(declared),
    }


@pytest.mark.parametrize("name", NAMES)
def test_every_rule_is_seen_holding_and_breaking(name: str) -> None:
    """Over the family's problems (its sweep files' and RULE_PROBLEMS) and each template's space,
    every rule in the template's ``rule_names`` holds somewhere and breaks somewhere, and every rule
    its ``violations`` requires is declared there."""
    family = families.get(name)
    cases = problems(name) + [family.parse_problem(data) for data in RULE_PROBLEMS.get(name, [])]
    missing = {}
    for template_name, space in family.space.templates:
        template = family.templates[template_name]
        declared = template.rule_names
        assert len(set(declared)) == len(declared), f"{template_name}: a rule declared twice"
        assert all(re.fullmatch(r"[a-z][a-z0-9_]*", rule) for rule in declared), declared
        whole = configurations(family, template_name, space, None) if space.size() * len(cases) <= WHOLE else None
        with recording() as seen:
            for i, problem in enumerate(cases):
                for config in whole or configurations(family, template_name, space, f"{template_name}/{i}"):
                    template.violations(problem, config)
        missing[template_name] = {k: v for k, v in unseen(template_name, declared, seen).items() if v}
    assert not any(missing.values()), f"{name}: {missing}"


def test_every_tensor_map_rule_is_seen_holding_and_breaking() -> None:
    """The tensor-map validator's rules (``tma.RULE_NAMES``), on a valid request and one breaking
    each rule (the templates build requests that only some of them can break)."""
    ok = TensorMapRequest("float32", (64, 64), (256, 4), (8, 8), 256)
    cases = [
        ok,
        dataclasses.replace(ok, dtype="float64"),  # dtype_known
        dataclasses.replace(ok, shape=(64,), strides=(4,), box=(8,)),  # rank_2_to_5
        dataclasses.replace(ok, box=(8,)),  # one_entry_per_dimension
        dataclasses.replace(ok, address=8),  # address_aligned
        dataclasses.replace(ok, shape=(0, 64)),  # shape_extent
        dataclasses.replace(ok, strides=(256, 8)),  # innermost_stride_is_element
        dataclasses.replace(ok, strides=(100, 4)),  # outer_stride
        dataclasses.replace(ok, box=(300, 8)),  # box_extent
        dataclasses.replace(ok, box=(8, 2)),  # box_inner_16_bytes
        dataclasses.replace(ok, element_strides=(9, 1)),  # element_strides_range
        dataclasses.replace(ok, shape=(512, 512), strides=(2048, 4), box=(256, 256)),  # box_bytes
        dataclasses.replace(ok, swizzle="16B"),  # swizzle_known
        dataclasses.replace(ok, swizzle="32B"),  # swizzle_spans_box holds (32 bytes of 32)
        dataclasses.replace(ok, swizzle="32B", box=(8, 16)),  # swizzle_spans_box breaks
        dataclasses.replace(ok, dtype="uint32", oob_fill="nan"),  # oob_fill
        dataclasses.replace(ok, l2_promotion="512B"),  # l2_promotion
    ]
    with recording() as seen:
        for request in cases:
            tensor_map_violations(request)
    missing = {k: v for k, v in unseen("tensor_map", RULE_NAMES, seen).items() if v}
    assert not missing, missing


def test_rules_are_recorded_only_inside_recording() -> None:
    request = TensorMapRequest("float32", (64, 64), (256, 4), (8, 8), 256)
    with recording() as seen:
        tensor_map_violations(request)
    assert ("tensor_map", "dtype_known", True) in seen
    before = set(seen)
    tensor_map_violations(dataclasses.replace(request, dtype="float64"))
    assert seen == before


@pytest.mark.parametrize("name", NAMES)
def test_the_hash_covers_every_source_and_changes_with_any(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    family = families.get(name)
    files = set(family.source_files)
    for template in family.templates.values():
        assert set(cuda_closure((template.kernel,))) <= files
        assert (kernels_dir() / template.kernel).resolve() in files
        assert Path(sys.modules[type(template).__module__].__file__ or "").resolve() in files
    assert Path(sys.modules[type(family.operation).__module__].__file__ or "").resolve() in files
    before = family.source_hash()
    original = Path.read_bytes
    for changed in sorted(files):
        suffix = b"\nCHANGED = 1\n" if changed.suffix == ".py" else b"\n#define CHANGED 1\n"
        monkeypatch.setattr(
            Path, "read_bytes", lambda self, c=changed, x=suffix: original(self) + (x if self == c else b"")
        )
        assert family.source_hash() != before, changed
    monkeypatch.setattr(Path, "read_bytes", original)
    assert family.source_hash() == before


def test_a_family_outside_tunebox_joins_through_an_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "outside_family.py").write_text(
        textwrap.dedent("""
        from tunebox.families.contract import Family
        from tunebox.families.faults.operation import FaultsOperation
        from tunebox.families.faults.planted import PlantedTemplate

        class Copies(FaultsOperation):
            name = "outside_copies"

        FAMILY = Family(Copies(), (PlantedTemplate(),))
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    point = EntryPoint("outside_copies", "outside_family:FAMILY", families.ENTRY_POINT_GROUP)
    monkeypatch.setattr(families, "entry_points", lambda group: [point] if group == families.ENTRY_POINT_GROUP else [])
    families._locations.cache_clear()
    families._load.cache_clear()
    try:
        assert "outside_copies" in families.names()
        family = families.get("outside_copies")
        assert isinstance(family, Family) and family.name == "outside_copies"
        problem = family.parse_problem({"n": 64})
        assert family.violations(problem, family.default_config(problem)) == []
    finally:
        monkeypatch.undo()
        families._locations.cache_clear()
        families._load.cache_clear()
    assert "outside_copies" not in families.names()


def caller_arrays(family: Family, problem: Problem) -> dict[str, SimpleNamespace]:
    """Stand-ins of a caller's arrays (shape and dtype) for ``problem``'s buffers."""
    return {
        b.name: SimpleNamespace(shape=b.shape, dtype=b.dtype) for b in family.buffers(problem) if b.role != "workspace"
    }


LAUNCHABLE = [n for n in NAMES if type(families.get(n).operation).from_arrays is not Operation.from_arrays]


@pytest.mark.parametrize("name", LAUNCHABLE)
def test_caller_arrays_map_to_the_identity_a_sweep_file_gives(name: str) -> None:
    """``tunebox.launch`` on arrays of a tuned problem's shapes (with the problem's other fields as
    options) finds that problem: the caller's problem has the same ``Family.identity``, whatever the
    seeded draws (rates, lengths) or the caller's promise."""
    family = families.get(name)
    for problem in problems(name):
        options = family.launch_options(problem)
        caller = family.problem_from_arrays(caller_arrays(family, problem), **options)
        assert family.identity(caller) == family.identity(problem), problem.key()


def test_the_launchable_families_are_the_nine_with_caller_arrays() -> None:
    assert set(LAUNCHABLE) == {
        "tile_copy",
        "gather",
        "scatter",
        "gather_elements",
        "gemm",
        "windows",
        "ragged3d",
        "quant",
        "quant_gemm",
    }
