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

ANNOTATED_PROBLEMS = 12  # a roofline labels each winner with its % of peak up to this many problems
LEGEND_ROWS = 24  # entries per column of the roofline's legend
ROOF_ENTRIES = 5  # its entries that are no problem: both ceilings, the attainable line, winner, baseline


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
        if not failed.empty:
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
        ax.text(bw + limit_gbps * 0.01, y, text, va="center", fontsize=8, bbox={"color": "white", "pad": 1}, zorder=3)
    ax.set_xlim(0, max(limit_gbps, float(gbps.max())) * 1.25)
    ax.invert_yaxis()
    ax.set_xlabel("achieved bandwidth of the winner (GB/s, read + write)")
    ax.set_title("Winner bandwidth vs device copy limit")
    fig.legend(loc="outside lower center", fontsize=8)  # inside, it covered a bar's label
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
    timed = events[(events["status"] == Status.OK.value) & events["tflops"].notna() & events["intensity"].notna()]
    ridge = peak_tflops * 1e3 / limit_gbps  # FLOP/byte where the two ceilings meet
    spots = [ridge, *events["intensity"].dropna()]
    low, high = min(spots) / 4, max(spots) * 4
    groups = list(timed.groupby("problem_key", sort=False))
    columns = math.ceil((len(groups) + ROOF_ENTRIES) / LEGEND_ROWS)  # legend columns beside the axes
    fig = figure(9 + 2.6 * columns, 6)
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    roof(ax, low, high, limit_gbps, peak_tflops)
    labelled = len(groups) <= ANNOTATED_PROBLEMS  # more, and the winners' labels cover each other
    for i, (key, group) in enumerate(groups):
        color = problem_color(i, len(groups))
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
            if not labelled:
                continue
            ax.annotate(
                pct(w["peak_fraction"]),
                (w["intensity"], w["tflops"]),
                textcoords="offset points",
                xytext=(8, -4),
                fontsize=8,
            )
    if timed.empty:
        ax.text(0.5, 0.5, "no timed variant", ha="center", va="center", transform=ax.transAxes)
    winner = "winner (% of bf16 peak)" if labelled else "winner (% of bf16 peak: the Winners table)"
    ax.plot([], [], "*", color="grey", markersize=11, markeredgecolor="black", label=winner)
    ax.plot([], [], "x", color="grey", markersize=7, label="library baseline")
    ax.set_xlim(low, high)
    top = max([peak_tflops, *timed["tflops"]])
    ax.set_ylim(min([limit_gbps * low / 1e3, *timed["tflops"]]) / 2, top * 2)
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
    ax.set_ylabel("achieved rate (TFLOP/s)")
    ax.set_title("Roofline: every variant against the copy limit and the bf16 tensor peak")
    ax.grid(True, which="major", alpha=0.3)
    fig.legend(fontsize=7, loc="outside right upper", ncols=columns)  # over the axes it hid the data
    return save(fig, path)


def problem_color(index: int, count: int) -> tuple[float, ...]:
    """A colour (RGBA) per problem, distinct for any ``count`` (tab10, tab20, then evenly along turbo)."""
    from matplotlib import colormaps

    if count <= 10:
        return tuple(colormaps["tab10"](index))
    if count <= 20:
        return tuple(colormaps["tab20"](index))
    return tuple(colormaps["turbo"](index / (count - 1)))


def plot_speedup(winners: pd.DataFrame, path: Path) -> Path | None:
    """Horizontal bars of the speed-ups, a row per problem (a series never measured left out); None
    (nothing written) when neither was measured."""
    import numpy as np

    both = {"speedup_vs_default": "vs default variant", "speedup_vs_baseline": "vs library baseline"}
    columns = {c: legend for c, legend in both.items() if winners[c].notna().any()}  # a series never measured: none
    data = winners[winners[list(both)].notna().any(axis=1)]
    if data.empty:
        return None
    y = np.arange(len(data))
    width = 0.8 / len(columns)
    fig = figure(8, 1.4 + 0.32 * len(data) * len(columns))  # a row per problem: any number stays readable
    ax = fig.add_subplot()
    for i, (column, legend) in enumerate(columns.items()):
        values = data[column]
        bars = ax.barh(y + (i - (len(columns) - 1) / 2) * width, values.fillna(0.0), width, label=legend)
        ax.bar_label(bars, labels=[fmt(v, ".2f", "×") for v in values], fontsize=8, padding=2)
    ax.axvline(1.0, color="grey", linewidth=0.8)
    ax.set_ylim(len(data) - 0.5, -0.5)  # the first problem on top, as in the tables
    ax.set_title("Speed-up of the winner")
    ax.set_yticks(y, [short(n, 40) for n in data["name"]], fontsize=8)
    ax.set_xlabel("speed-up of the winner (×)")
    ax.set_xlim(0, float(data[list(columns)].max().max()) * 1.2)
    fig.legend(fontsize=8, loc="outside lower center", ncols=len(columns))
    return save(fig, path)
