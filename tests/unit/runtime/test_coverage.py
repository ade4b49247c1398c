"""tunebox coverage: the problems a winners database covers, current or stale, with the library time."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from tunebox.cli import main
from tunebox.errors import DatabaseError, SpaceError
from tunebox.families import get as get_family
from tunebox.runtime.coverage import coverage
from tunebox.sweep_spec import load_sweep

REPO = Path(__file__).resolve().parents[3]
SHIPPED = REPO / "results" / "winners.sqlite"


def test_the_shipped_database_covers_its_sweeps_with_the_library_time_beside_each() -> None:
    rows = coverage(SHIPPED)
    assert {r.family for r in rows} == {
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
    assert all(r.current and not r.raced and r.ratio is not None for r in rows)
    gemm = [r for r in rows if r.family == "gemm"]
    swept = {
        named.problem.key()
        for name in ("gemm", "gemm_grid")
        for named in load_sweep(REPO / "spaces" / f"{name}.toml").problems
    }
    stored = {get_family("gemm").parse_problem(r.problem).key() for r in gemm}
    assert swept <= stored and max(r.ratio for r in gemm) > 3  # 4099 x 4097 x 4095: 3.21x


def test_a_winner_of_other_sources_is_listed_as_stale(tmp_path: Path) -> None:
    db = tmp_path / "w.sqlite"
    shutil.copy(SHIPPED, db)
    with sqlite3.connect(db) as raw:
        raw.execute("UPDATE winners SET family_hash = 'older' WHERE family = 'windows'")
    raw.close()
    windows = coverage(db, "windows")
    assert windows and not any(r.current for r in windows)


def test_prune_stale_deletes_the_stale_winners_it_lists_and_nothing_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``tunebox coverage --prune-stale``: the winners of older sources go once listed; current ones stay."""
    db = tmp_path / "w.sqlite"
    shutil.copy(SHIPPED, db)
    with sqlite3.connect(db) as raw:
        raw.execute("UPDATE winners SET family_hash = 'older' WHERE family = 'windows'")
    raw.close()
    before = coverage(db)
    stale = [r for r in before if not r.current]
    assert stale and {r.family for r in stale} == {"windows"}
    assert main(["coverage", "--db", str(db), "--prune-stale"]) == 0
    out = capsys.readouterr().out
    assert "[stale" in out and f"pruned {len(stale)} stale winners of windows" in out
    after = coverage(db)
    assert after == [r for r in before if r.current] and all(r.current for r in after)
    assert main(["coverage", "--db", str(db), "--prune-stale"]) == 0  # nothing stale: nothing pruned
    assert "pruned" not in capsys.readouterr().out


def test_bad_arguments_say_what_to_do(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(DatabaseError, match="no winners database at"):
        coverage(tmp_path / "absent.sqlite")
    with pytest.raises(SpaceError, match="unknown family"):
        coverage(SHIPPED, "nope")
    assert main(["coverage", "ragged3d", "--db", str(SHIPPED)]) == 0
    out = capsys.readouterr().out
    assert "2 tuned problems of ragged3d" in out and "torch: " in out and " ms (" in out and "(swept)" in out
