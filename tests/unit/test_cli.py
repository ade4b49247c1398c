"""The ``tunebox`` command end to end on the replay backend: tune, query, report, bad input."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tunebox.cli import main

REPO = Path(__file__).resolve().parents[2]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def tuned(sweep_file, recording, tmp_path, capsys):
    results = tmp_path / "r"
    code, out, _ = run(capsys, "tune", str(sweep_file), "--backend", "replay", "--recording", str(recording),
                       "--results", str(results), "--trials", "8", "--quiet")
    assert code == 0
    assert "REPLAYED" in out and "copy:" in out and "transpose:" in out
    return results


def test_query_answers_exact_nearest_and_default(tuned, capsys):
    db = str(tuned / "winners-replay.sqlite")
    exact = {"dtype": "float32", "src": [1000, 1000], "dst": [1000, 1000]}
    code, out, _ = run(capsys, "query", "tile_copy", json.dumps(exact), "--db", db)
    assert code == 0 and json.loads(out)["source"] == "exact"
    near = {"dtype": "float32", "src": [1200, 1000], "dst": [1200, 1000]}
    answer = json.loads(run(capsys, "query", "tile_copy", json.dumps(near), "--db", db)[1])
    assert answer["source"] == "nearest" and answer["replayed"] is True
    other = {"dtype": "float16", "src": [64, 64], "dst": [64, 64]}
    assert json.loads(run(capsys, "query", "tile_copy", json.dumps(other), "--db", db)[1])["source"] == "default"


def test_report_writes_html_with_plots(tuned, sweep_file, tmp_path, capsys):
    code, out, _ = run(capsys, "report", str(sweep_file), "--results", str(tuned), "--out", str(tmp_path / "rep"))
    assert code == 0
    html = (tmp_path / "rep" / "tile_copy.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and "data:image/png;base64," in html and "replayed" in html
    assert (tmp_path / "rep" / "tile_copy.md").exists()


def test_shipped_winners_answer_the_benchmark_problem(capsys):
    problem = {"dtype": "float32", "src": [16384, 16384], "dst": [16384, 16384]}
    code, out, _ = run(capsys, "query", "tile_copy", json.dumps(problem), "--db", str(REPO / "results/winners.sqlite"))
    answer = json.loads(out)
    assert code == 0 and answer["source"] == "exact" and answer["replayed"] is False
    assert "H200" in answer["explanation"]


@pytest.mark.parametrize("argv, fragment", [
    (["query", "no_such_family", "{}"], "unknown family"),
    (["query", "tile_copy", "{not json"], "not valid JSON"),
    (["query", "tile_copy", '{"dtype": "float32", "src": [-4, 4], "dst": [4, 4]}'], "src"),
    (["query", "tile_copy", '{"dtype": "float64", "src": [4, 4], "dst": [4, 4]}'], "unknown dtype"),
    (["tune", "no/such/file.toml", "--backend", "replay"], "no such sweep file"),
])
def test_bad_input_is_one_clear_line(capsys, tmp_path, argv, fragment):
    argv = [*argv, "--db", str(tmp_path / "w.sqlite")] if argv[0] == "query" else argv
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith("tunebox: error:") and fragment in err and err.count("\n") == 1


def test_malformed_sweep_is_rejected_and_nothing_is_stored(tuned, tmp_path, capsys):
    db = tuned / "winners-replay.sqlite"
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    bad = tmp_path / "bad.toml"
    bad.write_text('family = "tile_copy"\n[[problems]]\ndtype = "float32"\nsrc = [1, 1]\ndst = [1, 1]\nsrc_typo = 3\n')
    code, _, err = run(capsys, "tune", str(bad), "--backend", "replay", "--results", str(tuned))
    assert code == 2 and "src_typo" in err
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


def test_families_lists_tunables(capsys):
    code, out, _ = run(capsys, "families")
    assert code == 0 and "tile_copy" in out and "vec_bytes" in out


def test_python_dash_m_entry_point():
    done = subprocess.run([sys.executable, "-m", "tunebox", "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "tune" in done.stdout and "report" in done.stdout
