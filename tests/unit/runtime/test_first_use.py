"""Tuned on first use, the parts that need no GPU: which configurations race, the portfolio file, and
how a race's result is kept (its own database, the library time beside it) and answered."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tunebox.families import get
from tunebox.records import DeviceInfo
from tunebox.runtime.first_use import MAX_CANDIDATES, answer_of, candidates, keep, portfolio
from tunebox.runtime.lookup import Lookup, LookupResult
from tunebox.runtime.race import Entrant, RaceResult

DEVICE = DeviceInfo("NVIDIA H200", "9.0", "13000", "13.0")
GATHER = get("gather")
PROBLEM = GATHER.parse_problem({"dtype": "bfloat16", "rows": 5000, "cols": 256, "count": 3000, "valid_promise": False})
ROWS = {"template": "rows", "rows_per_block": 4, "threads": 128, "vec_bytes": 16, "check_bounds": "true"}
ANSWER = LookupResult("gather", PROBLEM.key(), ROWS, "nearest", "{}", 0.2, False, "nearest tuned problem")


def test_candidates_start_with_the_answer_keep_only_valid_distinct_configs_and_stop_at_the_cap() -> None:
    unchecked = {**ROWS, "check_bounds": "false"}  # invalid without the caller's promise
    idle = {**ROWS, "threads": 512}  # more threads per row than the row has vectors
    others = [ROWS, unchecked, {"template": "rows"}, idle, *({**ROWS, "threads": t} for t in (64, 256))]
    chosen = candidates(GATHER, PROBLEM, ANSWER, others)
    assert [c.as_dict() for c in chosen] == [ROWS, {**ROWS, "threads": 64}]
    many = [{**ROWS, "threads": t, "vec_bytes": v} for t in (64, 128) for v in (2, 4, 8, 16)]
    assert len(candidates(GATHER, PROBLEM, ANSWER, many)) == MAX_CANDIDATES


def test_the_portfolio_file_is_read_beside_the_database_and_a_bad_one_is_ignored(tmp_path: Path) -> None:
    db = tmp_path / "winners.sqlite"
    assert portfolio(db, "gather") == []
    (tmp_path / "portfolios.json").write_text(json.dumps({"families": {"gather": {"configs": [ROWS, 3]}}}))
    assert portfolio(db, "gather") == [ROWS] and portfolio(db, "gemm") == []
    (tmp_path / "portfolios.json").write_text("{not json")
    assert portfolio(db, "gather") == []


def test_the_shipped_portfolio_holds_valid_configurations_of_every_launchable_family() -> None:
    shipped = Path(__file__).resolve().parents[3] / "results" / "winners.sqlite"
    for name in ("tile_copy", "gather", "scatter", "gather_elements", "gemm", "windows", "ragged3d"):
        configs = portfolio(shipped, name)
        assert configs, name
        for values in configs:
            get(name).config(values)


def result(kernel_ms: float | None, library_ms: float) -> RaceResult:
    library = Entrant("torch: index_select", None, "ok", (library_ms,) * 3)
    entrants = [library, Entrant("slow", {**ROWS, "threads": 64}, "wrong result: out: 3 of 9 elements")]
    kernel = None
    if kernel_ms is not None:
        kernel = Entrant("rows", ROWS, "ok", (kernel_ms, kernel_ms * 1.1, kernel_ms * 0.9))
        entrants.append(kernel)
    return RaceResult(tuple(entrants), kernel, library, 0.3)


def test_a_raced_kernel_is_kept_with_the_library_time_and_found_again(tmp_path: Path) -> None:
    path = tmp_path / "cache" / "raced.sqlite"
    assert keep(path, GATHER, PROBLEM, DEVICE, result(0.1, 0.25), GATHER.work(PROBLEM))
    answer = answer_of(ANSWER, result(0.1, 0.25), PROBLEM.key())
    assert (answer.source, answer.config, answer.median_ms, answer.library_ms) == ("raced", ROWS, 0.1, 0.25)
    assert answer.beats_library and "wrong result" in answer.explanation
    again = Lookup(path).lookup(GATHER, PROBLEM, DEVICE)
    assert (again.source, again.config, again.library, again.library_ms) == ("exact", ROWS, "torch: index_select", 0.25)
    assert not keep(path, GATHER, PROBLEM, DEVICE, result(0.2, 0.25), GATHER.work(PROBLEM))  # slower: not kept


def test_a_library_call_outside_the_tolerance_is_still_the_time_to_beat(tmp_path: Path) -> None:
    """cuBLAS's reduced-precision result can miss the family's tolerance: the library is timed all the
    same, and a faster verified kernel is served and kept with that time."""
    wrong = Entrant("torch: index_select", None, "wrong result: out: 9 of 9 elements", (0.25,) * 3)
    kernel = Entrant("rows", ROWS, "ok", (0.1,) * 3)
    raced = RaceResult((wrong, kernel), kernel, wrong, 0.2)
    answer = answer_of(ANSWER, raced, PROBLEM.key())
    assert answer.beats_library and answer.library_ms == 0.25
    path = tmp_path / "raced.sqlite"
    assert keep(path, GATHER, PROBLEM, DEVICE, raced, GATHER.work(PROBLEM))
    assert Lookup(path).lookup(GATHER, PROBLEM, DEVICE).library_ms == 0.25


def test_without_a_passing_kernel_the_answer_keeps_its_config_and_learns_the_library_time(tmp_path: Path) -> None:
    lost = answer_of(ANSWER, result(None, 0.25), PROBLEM.key())
    assert (lost.source, lost.config, lost.library_ms, lost.beats_library) == ("nearest", ROWS, 0.25, False)
    assert not keep(tmp_path / "raced.sqlite", GATHER, PROBLEM, DEVICE, result(None, 0.25), GATHER.work(PROBLEM))


def test_an_unknown_policy_is_refused() -> None:
    from tunebox.errors import InvalidProblem
    from tunebox.runtime.launch import Launcher

    with pytest.raises(InvalidProblem, match="tune must be one of"):
        Launcher(Path("absent.sqlite"), tune="always")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "option, fragment",
    [
        ({"race_samples": 0}, "race_samples must be a whole number of 1 or more, got 0"),
        ({"race_samples": 2.5}, "race_samples must be a whole number"),
        ({"race_samples": True}, "race_samples must be a whole number"),
        ({"race_budget_s": -1}, "race_budget_s must be a positive number of seconds, got -1"),
        ({"race_budget_s": float("nan")}, "race_budget_s must be a positive number of seconds, got nan"),
    ],
)
def test_a_race_that_cannot_run_is_refused_when_the_launcher_is_made(option: dict, fragment: str) -> None:
    """A negative budget was accepted and every first-use race ended before its first candidate."""
    from tunebox.errors import InvalidProblem
    from tunebox.runtime.launch import Launcher

    with pytest.raises(InvalidProblem, match=fragment):
        Launcher(Path("absent.sqlite"), tune="first_call", **option)
