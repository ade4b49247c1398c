"""The conformance suite every discovered family and template passes: problems survive their dict
form, every template compiles with NVRTC, every template has valid and invalid configurations, the
hash covers every source (and changes with any of them), and a family outside tunebox joins by an
entry point without touching an engine file."""

from __future__ import annotations

import itertools
import sys
import textwrap
from importlib.metadata import EntryPoint
from pathlib import Path
from types import SimpleNamespace

import pytest

import tunebox.families as families
from tunebox.build.nvrtc import NvrtcBuilder
from tunebox.families.base import Problem
from tunebox.families.contract import Family, Operation
from tunebox.kernels_dir import kernels_dir
from tunebox.params import TemplateSpaces
from tunebox.records import Status
from tunebox.source_graph import cuda_closure
from tunebox.sweep_spec import load_sweep

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
