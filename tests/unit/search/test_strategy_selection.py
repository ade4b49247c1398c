"""The strategy benchmark's summaries: the leave-one-problem-out choice never sees the held-out
problem; warm start's gain compares the same problems with and without seeds."""

from __future__ import annotations

from typing import Any

import pytest

from tunebox.search.strategy_selection import leave_one_out, warm_start_gain


def problem(name: str, ratios: dict[str, float], complete: bool = True, seeds: int = 0) -> dict[str, Any]:
    return {
        "problem": name,
        "complete": complete,
        "warm_seeds": [{}] * seeds,
        "strategies": [{"strategy": s, "ratio_to_random": r, "mean": r * 10} for s, r in ratios.items()],
    }


def test_the_held_out_problem_does_not_choose_its_setting() -> None:
    # "a" is better on p1 and p2; "b" only on p3, by far. Held out p3, the others choose "a".
    per = [
        problem("p1", {"a": 0.5, "b": 0.6}),
        problem("p2", {"a": 0.5, "b": 0.6}),
        problem("p3", {"a": 0.9, "b": 0.1}),
    ]
    loo = leave_one_out(per, ["a", "b"])
    chosen = {r["problem"]: (r["chosen"], r["held_out_ratio"]) for r in loo["problems"]}
    assert chosen["p3"] == ("a", 0.9)
    assert chosen["p1"][0] == "b"  # held out p1: over p2 and p3, b's geomean (0.24) beats a's (0.67)
    assert loo["geomean_ratio_complete"] == pytest.approx((0.6 * 0.6 * 0.9) ** (1 / 3), abs=1e-4)


def test_a_candidate_that_failed_somewhere_is_not_chosen() -> None:
    per = [problem("p1", {"a": 0.5, "b": 0.1}), problem("p2", {"a": 0.5})]
    per[1]["strategies"].append({"strategy": "b", "error": "boom"})
    loo = leave_one_out(per, ["a", "b"])
    assert {r["chosen"] for r in loo["problems"]} == {"a"}


def test_warm_start_gain_over_seeded_problems() -> None:
    per = [
        problem("p1", {"cold": 1.0, "warm": 0.5}, seeds=2),
        problem("p2", {"cold": 1.0, "warm": 1.0}, seeds=0),
    ]
    gain = warm_start_gain(per, "cold", "warm")
    assert gain["problems_seeded"] == 1
    assert gain["geomean_warm_over_cold_seeded"] == 0.5
    assert gain["geomean_warm_over_cold_all"] == pytest.approx(0.5**0.5, abs=1e-4)


def test_warm_seeds_on_the_recordings_are_the_other_problems_winners() -> None:
    from pathlib import Path

    from tunebox.search.replay_problems import load_problems, with_warm_seeds

    root = Path(__file__).resolve().parents[3]
    problems = with_warm_seeds(load_problems(root / "spaces" / "gemm_wgmma.toml"))
    by_name = {p.name: p for p in problems}
    for p in problems:
        assert all(c in p.configs for c in p.warm)
    other = by_name["cube_8192"]
    winner = other.configs[min(range(len(other.times)), key=other.times.__getitem__)]
    assert by_name["cube_4096"].warm == (winner,)
