"""Issue 16's serving grid holds at least 60 shapes that no sweep file tunes: a sweep written after the grid
was chosen (coverage_gemm.toml and four others tuned 13 of its shapes) makes a run serve those exact, no
longer a test of serving at untuned shapes."""

from __future__ import annotations

import json
from pathlib import Path

from tunebox.families import get
from tunebox.sweep_spec import load_sweep, parse_problem

REPO = Path(__file__).resolve().parents[2]
UNTUNED_ASKED = 60  # issue 16: "a grid of at least 60 shapes ... that no sweep file tuned"


def test_the_serving_grid_keeps_sixty_shapes_no_sweep_file_tunes() -> None:
    tuned = set()
    for path in sorted((REPO / "spaces").glob("*.toml")):
        spec = load_sweep(path)
        tuned |= {(spec.family.name, spec.family.identity(p.problem)) for p in spec.problems}
    shapes = json.loads((REPO / "results" / "benchmarks" / "serving_grid.json").read_text())["shapes"]
    keys = [(s["family"], get(s["family"]).identity(parse_problem(get(s["family"]), s["problem"]))) for s in shapes]
    assert len(set(keys)) == len(keys)  # no shape twice
    untuned = [k for k in keys if k not in tuned]
    assert len(untuned) >= UNTUNED_ASKED, f"{len(untuned)} of {len(keys)} grid shapes are untuned"
