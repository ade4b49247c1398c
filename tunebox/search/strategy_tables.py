"""A strategy benchmark's summaries and outputs: per problem and strategy (evaluations to target,
ratios, curves), aggregated over problems, its provenance, a Markdown table and the best-found plot."""

from __future__ import annotations

import math
import os
import platform
import statistics
import subprocess
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from .benchmark_strategies import DEFAULT_STRATEGY, SURROGATE_VARIANTS, WARM_STRATEGY
from .methodology import INTERVAL_LEVEL, TARGET_FRACTION, StrategyResult, geomean, geomean_interval, target_of
from .replay_problems import ReplayProblem
from .strategy_selection import leave_one_out, warm_start_gain


def _quantiles(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)
    q = statistics.quantiles(ordered, n=4, method="inclusive") if len(ordered) > 1 else [ordered[0]] * 3
    return {"min": ordered[0], "q1": q[0], "median": q[1], "q3": q[2], "max": ordered[-1]}


def _round(x: float, digits: int = 5) -> float:
    return float(f"{x:.{digits}g}") if math.isfinite(x) else x


def summarise(problem: ReplayProblem, result: StrategyResult, budget: int) -> dict[str, Any]:
    """A strategy's figures on a problem (see the module's docstring)."""
    target = target_of(problem.times)
    expected = target.random_expectation
    if result.error or not result.evaluations:
        return {"strategy": result.strategy, "error": result.error or "no run", "seconds": result.seconds}
    counted = [e if e is not None else budget for e in result.evaluations]
    mean = statistics.fmean(counted)
    spread = statistics.stdev(counted) if len(counted) > 1 else 0.0
    length = max(len(c) for c in result.curves)
    best_mean, reached = [], []
    for k in range(length):
        at_k = [c[min(k, len(c) - 1)] for c in result.curves]
        finite = [x for x in at_k if math.isfinite(x)]
        best_mean.append(_round(statistics.fmean(finite)) if len(finite) == len(at_k) else None)
        reached.append(_round(sum(x <= target.target for x in at_k) / len(at_k), 4))
    return {
        "strategy": result.strategy,
        "seeds": len(counted),
        "evaluations_to_target": counted,
        "mean": _round(mean),
        "std": _round(spread),
        **{k: _round(v) for k, v in _quantiles(counted).items()},
        "censored": sum(e is None for e in result.evaluations),
        # seeds that stopped short of the budget without reaching the target (a strategy that ends
        # on its own, or a Kernel Tuner run stopped for looping on configurations it had seen)
        "stopped_short": sum(
            e is None and len(c) < budget for e, c in zip(result.evaluations, result.curves, strict=True)
        ),
        "ratio_to_random": _round(mean / expected),
        "within_random_expectation": _round(sum(c <= expected for c in counted) / len(counted), 4),
        "seconds": round(result.seconds, 3),
        "curve": {"best_mean_ms": best_mean, "reached_fraction": reached},
    }


def selection(per_problem: Sequence[Mapping[str, Any]], chosen: Sequence[str]) -> dict[str, Any]:
    """The leave-one-problem-out check of the default's settings and warm start's gain, where the
    strategies they need ran."""
    out: dict[str, Any] = {}
    candidates = [DEFAULT_STRATEGY, *SURROGATE_VARIANTS]
    if all(c in chosen for c in candidates):
        out["leave_one_out"] = leave_one_out(per_problem, candidates)
    if DEFAULT_STRATEGY in chosen and WARM_STRATEGY in chosen:
        out["warm_start"] = warm_start_gain(per_problem, DEFAULT_STRATEGY, WARM_STRATEGY)
    return out


def aggregate(per_problem: Sequence[Mapping[str, Any]], names: Sequence[str]) -> list[dict[str, Any]]:
    """Per strategy: the geometric mean of its ratios over the complete problems and over all, the
    interval its seeds leave the complete one (``geomean_interval``), and the mean fraction of seeds
    within random's expectation; sorted by the complete geomean."""
    rows = []
    for name in names:
        ratios: dict[str, list[float]] = {"complete": [], "all": []}
        seeds: list[tuple[Sequence[float], float]] = []  # the complete problems' evaluations, expectation
        within: list[float] = []
        failed = []
        for p in per_problem:
            s = next(s for s in p["strategies"] if s["strategy"] == name)
            if "error" in s:
                failed.append(p["problem"])
                continue
            ratios["all"].append(s["ratio_to_random"])
            within.append(s["within_random_expectation"])
            if p["complete"]:
                ratios["complete"].append(s["ratio_to_random"])
                seeds.append((s["evaluations_to_target"], p["random_expectation"]))
        rows.append(
            {
                "strategy": name,
                "geomean_ratio_complete": _or_none(geomean(ratios["complete"])),
                "geomean_ratio_complete_interval": [_or_none(x) for x in geomean_interval(seeds)],
                "geomean_ratio_all": _or_none(geomean(ratios["all"])),
                "problems_complete": len(ratios["complete"]),
                "problems_all": len(ratios["all"]),
                "mean_within_random_expectation": _or_none(statistics.fmean(within) if within else math.nan),
                "failed_on": failed,
            }
        )
    return sorted(rows, key=lambda r: (r["geomean_ratio_complete"] is None, r["geomean_ratio_complete"] or 0.0))


def _or_none(x: float, digits: int = 4) -> float | None:
    return _round(x, digits) if math.isfinite(x) else None


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def provenance(command: str, root: Path | None = None) -> dict[str, Any]:
    """The command, date, versions and code the benchmark ran with."""
    commit = None
    if root is not None:
        try:
            head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
            dirty = subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"],
                cwd=root,
                capture_output=True,
                text=True,
                timeout=10,
            )
            if head.returncode == 0:
                commit = head.stdout.strip() + (" (with uncommitted changes)" if dirty.stdout.strip() else "")
        except (OSError, subprocess.SubprocessError):
            pass
    packages = ("tunebox", "optuna", "numpy", "kernel_tuner", "scipy", "scikit-learn", "matplotlib")
    return {
        "command": command,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit,
        "host": {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count()},
        "versions": {p: v for p in packages if (v := _version(p)) is not None},
    }


def table(doc: Mapping[str, Any]) -> str:
    """The aggregate as a Markdown table."""
    lines = [
        f"| strategy | geomean ratio (complete problems) | its {INTERVAL_LEVEL:.0%} interval over seeds "
        "| geomean ratio (all) | seeds within random's expectation |",
        "|---|---:|---:|---:|---:|",
    ]

    def cell(x: float | None, form: str) -> str:
        return "-" if x is None else format(x, form)

    for row in doc["aggregate"]:
        failed = f" (failed on {len(row['failed_on'])})" if row["failed_on"] else ""
        low, high = row.get("geomean_ratio_complete_interval", (None, None))
        interval = "-" if low is None or high is None else f"{low:.2f}-{high:.2f}"
        lines.append(
            f"| {row['strategy']}{failed} | {cell(row['geomean_ratio_complete'], '.2f')} | {interval} "
            f"| {cell(row['geomean_ratio_all'], '.2f')} | {cell(row['mean_within_random_expectation'], '.0%')} |"
        )
    if "leave_one_out" in doc:
        loo = doc["leave_one_out"]
        lines.append(
            f"| {DEFAULT_STRATEGY}, settings chosen leave-one-problem-out | "
            f"{cell(loo['geomean_ratio_complete'], '.2f')} | - | {cell(loo['geomean_ratio_all'], '.2f')} | - |"
        )
    if "warm_start" in doc:
        warm = doc["warm_start"]
        lines.append(
            f"\nwarm start: mean evaluations to target with / without, geometric mean "
            f"{cell(warm['geomean_warm_over_cold_seeded'], '.2f')} over the {warm['problems_seeded']} problems "
            f"with warm seeds, {cell(warm['geomean_warm_over_cold_all'], '.2f')} over all"
        )
    return "\n".join(lines)


def plot(doc: Mapping[str, Any], path: Path) -> Path:
    """Best found versus evaluations, per problem: the mean over seeds of (best - optimum) / (median -
    optimum), the target at 0.05, random's expectation as a vertical line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    problems = doc["problems"]
    cols = 4
    rows = math.ceil((len(problems) + 1) / cols)  # and a panel of the aggregate
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    names = [s["strategy"] for s in problems[0]["strategies"]] if problems else []
    cmap = plt.get_cmap("tab20")
    colors = {name: cmap(i % 20) for i, name in enumerate(names)}
    for ax, p in zip(axes.flat, problems, strict=False):
        span = p["median_ms"] - p["optimum_ms"]
        for s in p["strategies"]:
            if "curve" not in s:
                continue
            ys = [
                max((y - p["optimum_ms"]) / span, 1e-4) if y is not None and span > 0 else math.nan
                for y in s["curve"]["best_mean_ms"]
            ]
            style = "-" if s["strategy"].startswith(("tunebox:", "optuna:")) else "--"
            width = 2.2 if s["strategy"] in (DEFAULT_STRATEGY, WARM_STRATEGY, "tunebox:random") else 1.1
            ax.plot(range(1, len(ys) + 1), ys, style, color=colors[s["strategy"]], lw=width, label=s["strategy"])
        ax.axhline(TARGET_FRACTION, color="k", lw=0.8, ls=":")
        ax.axvline(p["random_expectation"], color="grey", lw=0.8, ls=":")
        ax.set_yscale("log")
        ax.set_title(f"{p['problem']}{'' if p['complete'] else ' (partial)'}", fontsize=8)
        ax.set_xlabel("evaluations", fontsize=7)
        ax.set_ylabel("(best - opt) / (median - opt)", fontsize=7)
        ax.tick_params(labelsize=7)
    spare = list(axes.flat)[len(problems) :]
    rows_ = [r for r in doc["aggregate"] if r["geomean_ratio_complete"] is not None]
    if spare and rows_:
        ax = spare.pop(0)
        ax.barh(
            [r["strategy"] for r in rows_],
            [r["geomean_ratio_complete"] for r in rows_],
            color=[colors.get(r["strategy"], "grey") for r in rows_],
        )
        ax.axvline(1.0, color="k", lw=0.8, ls=":")
        ax.invert_yaxis()
        ax.set_title("geomean ratio to random, complete problems", fontsize=8)
        ax.tick_params(labelsize=6)
    for ax in spare:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(5, max(1, len(labels))), fontsize=8)
    fig.suptitle("Best found vs evaluations (mean over seeds; dotted: the target, random's expectation)", fontsize=10)
    fig.tight_layout(rect=(0, 0.06 + 0.01 * math.ceil(len(labels) / 5), 1, 0.97))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
