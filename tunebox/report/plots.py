"""A report's PNG plots (matplotlib, Agg): the optimization history, the winners' bandwidth or their
roofline, and their speed-ups."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from ..records import Status
from .data import (
    BASELINE,
    NO_VALID,
)

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

from .tables import fmt, pct, short


def figure(width: float, height: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def save(fig: Figure, path: Path) -> Path:
    fig.savefig(path, format="png", dpi=110, metadata={"Software": None})
    return path


def plot_history(history: pd.DataFrame, path: Path) -> Path:
    from matplotlib.ticker import MaxNLocator

    groups = list(history.groupby("problem_key", sort=False))
    ncols = max(1, min(3, len(groups)))
    nrows = max(1, math.ceil(len(groups) / ncols))
    fig = figure(4.5 * ncols, 3.2 * nrows)
    if not groups:
        ax = fig.add_subplot()
        ax.text(0.5, 0.5, "no screened variant", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
    for i, (_, group) in enumerate(groups):
        ax = fig.add_subplot(nrows, ncols, i + 1)
        ax.set_title(short(group["name"].iloc[0], 45), fontsize=9)
        ax.set_xlabel("trial")
        ax.set_ylabel("median time (ms)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ok = group[group["median_ms"].notna()]
        failed = group[group["status"] != Status.OK.value]
        ax.plot(
            failed["problem_trial"],
            [0.03] * len(failed),
            "x",
            color="tab:red",
            markersize=4,
            transform=ax.get_xaxis_transform(),
            label="failed",
        )
        if ok.empty:
            ax.text(0.5, 0.5, NO_VALID, ha="center", va="center", transform=ax.transAxes)
            ax.set_yticks([])
            continue
        ax.plot(ok["problem_trial"], ok["median_ms"], "o", markersize=3, alpha=0.6, label="variant")
        ax.step(group["problem_trial"], group["best_ms"], where="post", color="tab:orange", label="best so far")
        ax.set_yscale("log")
        ax.legend(fontsize=7)
    fig.suptitle("Optimization history")
    return save(fig, path)


def plot_bandwidth(winners: pd.DataFrame, limit_gbps: float, path: Path) -> Path:
    names = [short(n, 40) for n in winners["name"]]
    gbps = winners["bandwidth_gbps"].fillna(0.0)
    fig = figure(8, 1.2 + 0.5 * len(names))
    ax = fig.add_subplot()
    ax.barh(names, gbps, color="tab:blue")
    ax.axvline(limit_gbps, color="tab:red", linestyle="--", label=f"copy limit {limit_gbps:,.0f} GB/s")
    for y, (bw, frac) in enumerate(zip(gbps, winners["copy_fraction"], strict=True)):
        text = NO_VALID if math.isnan(frac) else f"{frac:.0%} of limit"
        ax.text(bw + limit_gbps * 0.01, y, text, va="center", fontsize=8)
    ax.set_xlim(0, max(limit_gbps, float(gbps.max())) * 1.25)
    ax.invert_yaxis()
    ax.set_xlabel("achieved bandwidth of the winner (GB/s, read + write)")
    ax.set_title("Winner bandwidth vs device copy limit")
    ax.legend(loc="lower right", fontsize=8)
    return save(fig, path)


def roof(ax: Axes, low: float, high: float, limit_gbps: float, peak_tflops: float) -> None:
    """Both ceilings over [low, high] FLOP/byte: the copy limit (a slope) and the bf16 peak (flat)."""
    import numpy as np

    x = np.geomspace(low, high, 256)
    memory = x * limit_gbps / 1e3  # GB/s x FLOP/byte = GFLOP/s
    ax.plot(x, memory, "--", color="tab:red", linewidth=1, label=f"copy limit {limit_gbps:,.0f} GB/s × intensity")
    ax.axhline(
        peak_tflops,
        linestyle="--",
        color="tab:purple",
        linewidth=1,
        label=f"bf16 tensor peak {peak_tflops:,.0f} TFLOP/s",
    )
    ax.plot(
        x, np.minimum(memory, peak_tflops), color="black", linewidth=2, alpha=0.35, label="attainable (lower of both)"
    )


def plot_roofline(
    events: pd.DataFrame, winners: pd.DataFrame, limit_gbps: float, peak_tflops: float, path: Path
) -> Path:
    """Every OK variant, baseline and winner at its arithmetic intensity (log-log) under both ceilings."""
    from matplotlib import colormaps

    timed = events[(events["status"] == Status.OK.value) & events["tflops"].notna() & events["intensity"].notna()]
    ridge = peak_tflops * 1e3 / limit_gbps  # FLOP/byte where the two ceilings meet
    spots = [ridge, *events["intensity"].dropna()]
    low, high = min(spots) / 4, max(spots) * 4
    fig = figure(9, 6)
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    roof(ax, low, high, limit_gbps, peak_tflops)
    colors = colormaps["tab10"]
    for i, (key, group) in enumerate(timed.groupby("problem_key", sort=False)):
        color = colors(i % 10)
        variants = group[group["kind"] != BASELINE]
        ax.plot(
            variants["intensity"],
            variants["tflops"],
            "o",
            color=color,
            markersize=3,
            alpha=0.35,
            label=short(str(group["name"].iloc[0]), 40),
        )
        baselines = group[group["kind"] == BASELINE]
        ax.plot(baselines["intensity"], baselines["tflops"], "x", color=color, markersize=7)
        win = winners[(winners["problem_key"] == key) & winners["tflops"].notna()]
        for w in win.to_dict("records"):
            ax.plot([w["intensity"]], [w["tflops"]], "*", color=color, markersize=13, markeredgecolor="black")
            ax.annotate(
                pct(w["peak_fraction"]),
                (w["intensity"], w["tflops"]),
                textcoords="offset points",
                xytext=(8, -4),
                fontsize=8,
            )
    if timed.empty:
        ax.text(0.5, 0.5, "no timed variant", ha="center", va="center", transform=ax.transAxes)
    ax.plot([], [], "*", color="grey", markersize=11, markeredgecolor="black", label="winner (% of bf16 peak)")
    ax.plot([], [], "x", color="grey", markersize=7, label="library baseline")
    ax.set_xlim(low, high)
    top = max([peak_tflops, *timed["tflops"]])
    ax.set_ylim(min([limit_gbps * low / 1e3, *timed["tflops"]]) / 2, top * 2)
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
    ax.set_ylabel("achieved rate (TFLOP/s)")
    ax.set_title("Roofline: every variant against the copy limit and the bf16 tensor peak")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    return save(fig, path)


def plot_speedup(winners: pd.DataFrame, path: Path) -> Path | None:
    """Grouped bars of both speed-ups; None (nothing written) when neither was measured."""
    import numpy as np

    columns = {"speedup_vs_default": "vs default variant", "speedup_vs_baseline": "vs library baseline"}
    data = winners[winners[list(columns)].notna().any(axis=1)]
    if data.empty:
        return None
    x = np.arange(len(data))
    fig = figure(max(6.0, 1.3 * len(data)), 4)
    ax = fig.add_subplot()
    for i, (column, legend) in enumerate(columns.items()):
        values = data[column]
        bars = ax.bar(x + (i - 0.5) * 0.38, values.fillna(0.0), 0.38, label=legend)
        ax.bar_label(bars, labels=[fmt(v, ".2f", "×") for v in values], fontsize=8)
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xlim(-1, len(data))
    ax.set_title("Speed-up of the winner")
    ax.set_xticks(x, [short(n, 25) for n in data["name"]], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("speed-up of the winner (×)")
    ax.legend(fontsize=8)
    return save(fig, path)
