"""Lookup: exact, nearest (re-validated for the new problem), default, missing database, imports."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tunebox.errors import DatabaseError, InvalidProblem
from tunebox.families.base import Arg, BufferSpec, KernelSource, LaunchGeometry, Problem, Work
from tunebox.families.contract import Family, KernelTemplate, Operation, TemplateConfig, choice
from tunebox.records import DeviceInfo, EvalRecord, Status, Timing, WinnerKey
from tunebox.runtime.lookup import Lookup, LookupResult
from tunebox.store.winners import WinnersDB

DEVICE = DeviceInfo("NVIDIA H200", "9.0", "13000", "13.0")


@dataclass(frozen=True)
class ToyProblem(Problem):
    n: int

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n}

    @property
    def dtype(self) -> str:
        return "float32"


@dataclass(frozen=True)
class ToyConfig(TemplateConfig):
    BLOCK: int = choice(64, 128, 256)


class ToyOperation(Operation[ToyProblem]):
    """An operation of one size; only the lookup-facing methods work."""

    name = "toy"
    fields = {"n": "a positive size"}

    def parse(self, data: Mapping[str, Any]) -> ToyProblem:
        n = data.get("n")
        if type(n) is not int or n <= 0:
            raise InvalidProblem(f"n must be a positive int, got {n!r}")
        return ToyProblem(n)

    def distance(self, a: ToyProblem, b: ToyProblem) -> float | None:
        return abs(math.log2(a.n / b.n))

    def buffers(self, problem: ToyProblem) -> tuple[BufferSpec, ...]:
        raise NotImplementedError

    def make_inputs(self, problem: ToyProblem, rng: np.random.Generator) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def reference(self, problem: ToyProblem, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def work(self, problem: ToyProblem) -> Work:
        raise NotImplementedError


class ToyTemplate(KernelTemplate[ToyProblem, ToyConfig]):
    """One parameter and one validity rule."""

    name = "blocks"
    config_type = ToyConfig
    kernel = "faults/faults.cu"

    def default(self, problem: ToyProblem) -> ToyConfig:
        return ToyConfig(BLOCK=64)

    def violations(self, problem: ToyProblem, config: ToyConfig) -> list[str]:
        return [] if problem.n >= config.BLOCK else [f"BLOCK={config.BLOCK} > n={problem.n}"]

    def render(self, problem: ToyProblem, config: ToyConfig) -> KernelSource:
        raise NotImplementedError

    def geometry(self, problem: ToyProblem, config: ToyConfig) -> LaunchGeometry:
        raise NotImplementedError

    def args(self, problem: ToyProblem, config: ToyConfig) -> tuple[Arg, ...]:
        raise NotImplementedError


def blocks(block: int) -> dict[str, Any]:
    return {"BLOCK": block, "template": "blocks"}


FAMILY = Family(ToyOperation(), (ToyTemplate(),))


def put(
    db: WinnersDB,
    n: int,
    block: int,
    median: float = 1.1,
    device: DeviceInfo = DEVICE,
    replayed: bool = False,
    family_hash: str | None = None,
) -> None:
    rec = EvalRecord(
        "toy",
        {"n": n},
        blocks(block),
        Status.OK,
        timing=Timing((median * 0.9, median, median * 1.1)),
        device=device,
        replayed=replayed,
    )
    key = WinnerKey.of(rec, family_hash or FAMILY.source_hash(), ToyProblem(n).key(), "float32")
    assert db.put(key, rec)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "winners.sqlite"


def test_exact_match(db_path: Path) -> None:
    with WinnersDB(db_path) as db:
        put(db, 1024, 256, median=0.5, replayed=True)
        put(db, 2048, 128)
    with Lookup(db_path) as lookup:
        result = lookup.lookup(FAMILY, ToyProblem(1024), DEVICE)
    assert result == LookupResult(
        "toy", '{"n":1024}', blocks(256), "exact", '{"n":1024}', pytest.approx(0.5), True, result.explanation
    )
    assert result.explanation.startswith("exact match tuned on NVIDIA H200 (replayed recording")


def test_exact_requires_every_key_field(db_path: Path) -> None:
    """A winner from another driver is only a distance-0 'nearest', never 'exact'."""
    with WinnersDB(db_path) as db:
        put(db, 1024, 256, device=dataclasses.replace(DEVICE, driver_version="12000"))
    result = Lookup(db_path).lookup(FAMILY, ToyProblem(1024), DEVICE)
    assert (result.source, result.config, result.matched_problem_key) == ("nearest", blocks(256), '{"n":1024}')


def test_nearest_picks_the_closer_problem(db_path: Path) -> None:
    with WinnersDB(db_path) as db:
        put(db, 128, 128)
        put(db, 1024, 256)
    result = Lookup(db_path).lookup(FAMILY, ToyProblem(256), DEVICE)
    assert (result.source, result.config, result.matched_problem_key) == ("nearest", blocks(128), '{"n":128}')
    assert "nearest" in result.explanation and '{"n":128}' in result.explanation


def test_nearest_skips_a_config_invalid_for_the_new_problem(db_path: Path) -> None:
    with WinnersDB(db_path) as db:
        put(db, 128, 128)  # closest to n=100, but BLOCK=128 > 100 breaks the rule here
        put(db, 512, 64)
    result = Lookup(db_path).lookup(FAMILY, ToyProblem(100), DEVICE)
    assert (result.source, result.config, result.matched_problem_key) == ("nearest", blocks(64), '{"n":512}')


def test_nearest_ignores_other_devices_and_sources(db_path: Path) -> None:
    with WinnersDB(db_path) as db:
        put(db, 256, 256, device=DeviceInfo("NVIDIA A100", "8.0", "13000", "13.0"))
        put(db, 256, 128, family_hash="0123456789abcdef")
    result = Lookup(db_path).lookup(FAMILY, ToyProblem(256), DEVICE)
    assert (result.source, result.config, result.matched_problem_key) == ("default", blocks(64), None)
    # the default says why the winner stored for these very shapes is not served (one on this device)
    assert "; 1 of its winners there were tuned on other sources of toy, changed since" in result.explanation


def test_a_race_takes_the_winners_of_the_nearest_problems_first(db_path: Path) -> None:
    """``Lookup.winners``: stored problems by distance to the new one (the order a race's candidates
    take them, not the database's key order), each problem's faster winner first."""
    with WinnersDB(db_path) as db:
        put(db, 8192, 64, median=0.2)
        put(db, 256, 128, median=3.0)
        put(db, 128, 256, median=0.1)
        put(db, 256, 64, median=1.0, device=dataclasses.replace(DEVICE, driver_version="12000"))
    near = [(w.key.problem_key, w.config["BLOCK"]) for w in Lookup(db_path).winners(FAMILY, DEVICE, ToyProblem(300))]
    assert near == [('{"n":256}', 64), ('{"n":256}', 128), ('{"n":128}', 256), ('{"n":8192}', 64)]


def test_default_when_nothing_valid(db_path: Path) -> None:
    with WinnersDB(db_path) as db:
        put(db, 256, 256)
    result = Lookup(db_path).lookup(FAMILY, ToyProblem(64), DEVICE)
    assert (result.source, result.config, result.median_ms, result.replayed) == ("default", blocks(64), None, False)
    assert result.explanation.startswith("family default")


def test_a_missing_database_is_an_error_naming_it(tmp_path: Path) -> None:
    """A typo in a path never silently answers family defaults."""
    path = tmp_path / "absent.sqlite"
    with pytest.raises(DatabaseError, match=f"no winners database at {path}.*TUNEBOX_DB.*tunebox tune"):
        Lookup(path).lookup(FAMILY, ToyProblem(4096), DEVICE)
    assert not path.exists()


def test_damaged_database_is_loud(tmp_path: Path) -> None:
    path = tmp_path / "winners.sqlite"
    path.write_bytes(b"garbage" * 1000)
    with pytest.raises(DatabaseError):
        Lookup(path).lookup(FAMILY, ToyProblem(4096), DEVICE)


def test_answers_are_cached_and_copies_until_the_database_changes(db_path: Path) -> None:
    with WinnersDB(db_path) as db:
        put(db, 1024, 256)
    lookup = Lookup(db_path)
    first = lookup.lookup(FAMILY, ToyProblem(1024), DEVICE)
    first.config["BLOCK"] = 999  # a caller mutating its answer does not poison the cache
    assert lookup.lookup(FAMILY, ToyProblem(1024), DEVICE).config == blocks(256)
    with WinnersDB(db_path) as db:
        put(db, 1024, 128, median=0.1)  # a better winner appears: the same Lookup sees it
    assert lookup.lookup(FAMILY, ToyProblem(1024), DEVICE).config == blocks(128)


def test_lookup_module_imports_no_optuna_or_matplotlib() -> None:
    code = "import tunebox.runtime.lookup, sys; assert 'optuna' not in sys.modules and 'matplotlib' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[3])


def test_top_level_lookup_is_warm_and_answers_from_the_shipped_winners():
    import tunebox
    from tunebox.runtime.lookup import Lookup, shared

    repo = Path(__file__).resolve().parents[3]
    db = str(repo / "results" / "winners.sqlite")
    device = DeviceInfo("NVIDIA H200", "9.0", "13000", "13.0")
    problem = {"dtype": "float32", "src": [16384, 16384], "dst": [16384, 16384]}
    first = tunebox.lookup("tile_copy", problem, device, db)
    assert first.source == "exact" and first == tunebox.lookup("tile_copy", problem, device, db)
    assert isinstance(shared(db), Lookup) and shared(db) is shared(db)


@pytest.mark.parametrize(
    ("name", "caller"),
    [
        (  # a caller's indices: no rates, no promise (the tuned problem drew 10% sentinels)
            "gather",
            {"dtype": "bfloat16", "rows": 1048576, "cols": 512, "count": 1048576, "valid_promise": False},
        ),
        (  # a caller's own lengths (the tuned problem drew them uniformly)
            "ragged3d",
            {"dtype": "bfloat16", "batch": 64, "max_len": 4096, "heads": 8, "depth": 128, "direction": "unpack"},
        ),
    ],
)
def test_caller_problems_find_the_winner_of_their_shapes_with_its_library_time(name: str, caller: dict) -> None:
    """A problem as tunebox.launch builds it from arrays is answered by the shipped winner of the same
    shapes (exact), with the library call's time measured beside it."""
    import tunebox

    repo = Path(__file__).resolve().parents[3]
    if name == "ragged3d":
        caller = {**caller, "lengths": [1 + i * 61 for i in range(64)]}
    device = DeviceInfo("NVIDIA H200", "9.0", "13000", "13.0")
    answer = tunebox.lookup(name, caller, device, str(repo / "results" / "winners.sqlite"))
    assert answer.source == "exact" and "drawn otherwise" in answer.explanation, answer
    assert answer.library and answer.library_ms and answer.median_ms, answer
    assert answer.beats_library == (answer.median_ms < answer.library_ms)
    if name == "gather":  # the unchecked winner of the all-valid draw is not valid without a promise
        assert answer.config["check_bounds"] == "true"


def test_a_changed_template_voids_its_winners(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A winner stored before a change to the template's Python (its ``render``, say) is never
    served as exact: the family's hash covers the template's module."""
    with WinnersDB(db_path) as db:
        put(db, 1024, 256)
    assert Lookup(db_path).lookup(FAMILY, ToyProblem(1024), DEVICE).source == "exact"
    module = Path(__file__).resolve()  # ToyTemplate's module
    assert module in FAMILY.source_files
    original = Path.read_bytes
    monkeypatch.setattr(
        Path, "read_bytes", lambda self: original(self) + (b"\nRENDER_CHANGED = 1\n" if self == module else b"")
    )
    result = Lookup(db_path).lookup(FAMILY, ToyProblem(1024), DEVICE)
    assert result.source == "default", result
