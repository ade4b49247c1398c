"""``tunebox space``: each problem's valid count per template, counted by enumeration, or estimated
from a uniform sample where a template's slice is larger than the loop enumerates."""

from __future__ import annotations

from pathlib import Path

from sweep_fixtures import write_sweep

from tunebox.cli import main
from tunebox.space_report import space_report
from tunebox.sweep_spec import load_sweep


def test_the_counts_are_exact_on_a_small_space_and_estimated_on_a_large_one(tmp_path: Path) -> None:
    spec = load_sweep(write_sweep(tmp_path))
    exact = tuple(space_report(spec))
    for named, problem in zip(spec.problems, exact, strict=True):
        truth = sum(not spec.family.violations(named.problem, c) for c in spec.space)
        assert problem.valid == truth and problem.size == spec.space.size() == 288 and not problem.estimated
    estimated = tuple(space_report(spec, limit=144))  # half of each slice drawn
    for truth, guess in zip(exact, estimated, strict=True):
        assert guess.estimated and guess.size == truth.size
        assert abs(guess.valid - truth.valid) <= 0.05 * truth.size  # scaled up from half the space drawn


def test_the_command_prints_each_problem_and_template(tmp_path: Path, capsys) -> None:
    sweep = write_sweep(tmp_path)
    assert main(["space", str(sweep)]) == 0
    out = capsys.readouterr().out
    exact = tuple(space_report(load_sweep(sweep)))
    assert "templates vector" in out and "estimated" not in out
    for problem in exact:
        assert f"  {problem.name}: {problem.valid} valid of {problem.size}" in out
