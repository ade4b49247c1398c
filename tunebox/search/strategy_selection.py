"""Two summaries of the strategy benchmark's table: the leave-one-problem-out check of the default
strategy's settings, and warm start's gain.

Both read the per-problem summaries ``strategy_benchmark.run_benchmark`` makes (a list of problems,
each with ``strategies``: dicts holding ``strategy``, ``mean`` and ``ratio_to_random``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any


def _geomean(values: Sequence[float]) -> float | None:
    return round(math.exp(sum(map(math.log, values)) / len(values)), 4) if values else None


def _ratios(per_problem: Sequence[Mapping[str, Any]], name: str) -> list[float | None]:
    """The strategy's ratio to random on each problem (None where it failed or did not run)."""
    out: list[float | None] = []
    for p in per_problem:
        s = next((s for s in p["strategies"] if s["strategy"] == name), None)
        out.append(None if s is None or "error" in s else float(s["ratio_to_random"]))
    return out


def leave_one_out(per_problem: Sequence[Mapping[str, Any]], candidates: Sequence[str]) -> dict[str, Any]:
    """For each problem, the candidate setting with the lowest geometric-mean ratio over the *other*
    problems (ties: the earlier candidate), and that setting's ratio on the held-out problem; the
    geometric means of the held-out ratios (complete problems, all). A candidate that failed
    anywhere is not chosen. Contract: the held-out problem's own result never influences its
    choice."""
    table = {c: _ratios(per_problem, c) for c in candidates}
    usable = [c for c in candidates if all(r is not None for r in table[c])]
    rows = []
    for i, p in enumerate(per_problem):

        def others(c: str, i: int = i) -> float:
            rest = [r for j, r in enumerate(table[c]) if j != i and r is not None]
            return _geomean(rest) or math.inf

        chosen = min(usable, key=lambda c: (others(c), usable.index(c))) if usable else None
        held = table[chosen][i] if chosen is not None else None
        rows.append({"problem": p["problem"], "complete": p["complete"], "chosen": chosen, "held_out_ratio": held})
    complete = [r["held_out_ratio"] for r in rows if r["complete"] and r["held_out_ratio"] is not None]
    every = [r["held_out_ratio"] for r in rows if r["held_out_ratio"] is not None]
    return {
        "description": (
            "the default's settings tuned leave-one-problem-out: for each problem, the candidate with the "
            "lowest geometric-mean ratio over the other problems, scored on the held-out one (the candidates "
            "and the default's features were designed on these same recordings; this shows what choosing among "
            "them without the held-out problem scores)"
        ),
        "candidates": list(candidates),
        "problems": rows,
        "geomean_ratio_complete": _geomean(complete),
        "geomean_ratio_all": _geomean(every),
    }


def warm_start_gain(per_problem: Sequence[Mapping[str, Any]], cold: str, warm: str) -> dict[str, Any]:
    """Per problem, the mean evaluations to target without (``cold``) and with (``warm``) warm
    start, and their ratio; the geometric mean of that ratio over the problems that had warm seeds
    and over all (below 1: warm start saves evaluations)."""
    rows = []
    for p in per_problem:
        by_name = {s["strategy"]: s for s in p["strategies"]}
        c, w = by_name.get(cold), by_name.get(warm)
        if c is None or w is None or "error" in c or "error" in w:
            continue
        rows.append(
            {
                "problem": p["problem"],
                "warm_seeds": len(p.get("warm_seeds", [])),
                "cold_mean": c["mean"],
                "warm_mean": w["mean"],
                "warm_over_cold": round(w["mean"] / c["mean"], 4),
            }
        )
    seeded = [r["warm_over_cold"] for r in rows if r["warm_seeds"]]
    return {
        "description": (
            "leave-one-problem-out: each problem's search seeded with the winners of the other recorded "
            "problems of its family, nearest first by the family's distance, re-validated (at most 3)"
        ),
        "cold": cold,
        "warm": warm,
        "problems": rows,
        "geomean_warm_over_cold_seeded": _geomean(seeded),
        "geomean_warm_over_cold_all": _geomean([r["warm_over_cold"] for r in rows]),
        "problems_seeded": len(seeded),
    }
