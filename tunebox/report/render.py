"""Render a report: PNG plots (matplotlib, Agg), a self-contained HTML page and a Markdown page.

The HTML embeds every plot as a base64 data URI, so the page still works when moved on its own; the
Markdown references the PNGs by relative path. All text from records is escaped. Both pages end with
the list of files the report wrote.
"""

from __future__ import annotations

import base64
import html
import logging
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..records import Status
from ..runner.clocks import RETAKES
from .clocks import clocks_frame
from .data import (
    BASELINE,
    NO_VALID,
    RETIMED,
    SCREENED,
    ReportInputs,
    counts,
    evaluations_frame,
    history_frame,
    outcomes_frame,
    status_frame,
    winners_frame,
)

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

log = logging.getLogger(__name__)

_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_NO_SPEEDUP = "No speed-up plot: no default variant or library baseline was timed successfully."
_NOT_LOGGED = (
    "Configurations that break a validity rule are never proposed, compiled or logged, so they are not "
    "counted here; `tunebox space` on the sweep file counts the valid configurations of each problem."
)
_CSS = """body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:.92em}
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#f2f2f2}td.num{text-align:right;font-variant-numeric:tabular-nums}
figure{margin:1.5em 0}img{max-width:100%}.headline{font-size:1.05em}.note{color:#666}"""


@dataclass(frozen=True)
class ReportFiles:
    """Paths of the files ``build_report`` wrote."""

    html: Path
    markdown: Path
    images: tuple[Path, ...]

    @property
    def all(self) -> tuple[Path, ...]:
        """Every file written: the HTML page, the Markdown page, then the PNG plots."""
        return (self.html, self.markdown, *self.images)


@dataclass(frozen=True)
class _Table:
    headers: tuple[str, ...]
    numeric: tuple[bool, ...]  # right-aligned columns
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class _Section:
    title: str
    text: tuple[str, ...] = ()  # paragraphs before the table
    table: _Table | None = None


@dataclass(frozen=True)
class _Column:
    header: str
    numeric: bool
    cell: Callable[[Mapping[str, Any]], str]


def _table(columns: list[_Column], rows: list[dict[str, Any]]) -> _Table:
    return _Table(
        tuple(c.header for c in columns),
        tuple(c.numeric for c in columns),
        tuple(tuple(c.cell(r) for c in columns) for r in rows),
    )


def _fmt(value: float, spec: str, suffix: str = "") -> str:
    return "—" if math.isnan(value) else f"{value:{spec}}{suffix}"


def _pct(value: float) -> str:
    """A fraction as a percentage: one decimal, two significant digits below 1%."""
    if math.isnan(value):
        return "—"
    return f"{value:.1%}" if abs(value) >= 0.01 or value == 0 else f"{value * 100:.2g}%"


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _winners_table(winners: pd.DataFrame, arithmetic: bool, templates: bool) -> _Table:
    columns = [_Column("Problem", False, lambda w: str(w["name"]))]
    if templates:
        columns.append(_Column("Template", False, lambda w: str(w["template"]) or "—"))
    columns += [
        _Column("Best config", False, lambda w: str(w["config"])),
        _Column("Median (ms)", True, lambda w: _fmt(w["median_ms"], ".4g")),
    ]
    if arithmetic:
        columns += [
            _Column("TFLOP/s", True, lambda w: _fmt(w["tflops"], ".4g")),
            _Column("% of bf16 peak", True, lambda w: _pct(w["peak_fraction"])),
            _Column("FLOP/byte", True, lambda w: _fmt(w["intensity"], ",.0f")),
        ]
    else:
        columns += [
            _Column("GB/s", True, lambda w: _fmt(w["bandwidth_gbps"], ",.0f")),
            _Column("% of copy limit", True, lambda w: _pct(w["copy_fraction"])),
        ]
    columns += [
        _Column("× vs default", True, lambda w: _fmt(w["speedup_vs_default"], ".2f", "×")),
        _Column("× vs baseline", True, lambda w: _fmt(w["speedup_vs_baseline"], ".2f", "×")),
        _Column("Baseline", False, lambda w: str(w["baseline"]) or "—"),
        _Column("Variants", True, lambda w: str(w["variants"])),
        _Column("OK", True, lambda w: str(w[Status.OK.value])),
        _Column("Failed", True, lambda w: str(w["variants"] - w[Status.OK.value])),
    ]
    return _table(columns, winners.to_dict("records"))


def _count_of(column: str) -> Callable[[Mapping[str, Any]], str]:
    return lambda row: str(row[column])


def _outcomes_table(outcomes: pd.DataFrame) -> _Table:
    columns = [_Column("Status", False, lambda r: str(r["status"]))]
    titles = {SCREENED: "Screened variants", RETIMED: "Finalist re-timings", BASELINE: "Library baselines"}
    for kind in outcomes.columns[1:-1]:
        columns.append(_Column(titles.get(kind, kind.capitalize()), True, _count_of(kind)))
    columns.append(_Column("Total", True, lambda r: str(r["total"])))
    return _table(columns, outcomes.to_dict("records"))


def _clocks_section(clocks: pd.DataFrame) -> _Section:
    title = "Clocks while timing"
    if not clocks["observed"].any():
        return _Section(
            title, ("No timing here carries clock observations (logged before timings read NVML, or NVML missing).",)
        )
    columns = [
        _Column("Problem", False, lambda c: str(c["name"])),
        _Column("SM clock (MHz)", True, lambda c: _fmt(c["sm_mhz"], ".0f")),
        _Column("Memory clock (MHz)", True, lambda c: _fmt(c["mem_mhz"], ".0f")),
        _Column("Temperature (°C)", True, lambda c: _fmt(c["temperature_c"], ".0f")),
        _Column("Power (W)", True, lambda c: _fmt(c["power_w"], ".0f")),
        _Column("Timings observed", True, _count_of("observed")),
        _Column("Batches re-taken", True, _count_of("retaken")),
        _Column("Flagged", True, _count_of("flagged")),
    ]
    text = (
        "Medians of what NVML observed while each winner was timed. A timed batch during which the GPU throttled "
        f"(thermal or hardware slowdown, power brake) is measured again, up to {RETAKES} times; "
        f"{int(clocks['flagged'].sum())} timing(s) throttled in every batch and were kept, flagged.",
    )
    return _Section(title, text, _table(columns, clocks.to_dict("records")))


def _failures_section(status: pd.DataFrame, total: int) -> _Section:
    if status.empty:
        return _Section("What failed and why", (f"Nothing failed: all {total} evaluation(s) ended ok.", _NOT_LOGGED))
    failed = int(status["count"].sum())
    columns = [
        _Column("Problem", False, lambda s: str(s["name"])),
        _Column("Kind", False, lambda s: str(s["kind"])),
        _Column("Status", False, lambda s: str(s["status"])),
        _Column("Count", True, lambda s: str(s["count"])),
        _Column("Example", False, lambda s: _short(str(s["example_config"]), 80) or "—"),
        _Column("Example message", False, lambda s: _short(str(s["example"]), 240) or "—"),
    ]
    statuses = ", ".join(dict.fromkeys(status["status"]))
    text = (
        f"{failed} of {total} evaluation(s) did not end ok ({statuses}): every one is counted below, "
        "per problem, kind of record and status, with the first one's configuration and message.",
        _NOT_LOGGED,
    )
    return _Section("What failed and why", text, _table(columns, status.to_dict("records")))


def _headline(events: pd.DataFrame, tally: dict[str, int], inputs: ReportInputs) -> tuple[str, ...]:
    devices = sorted(d for d in events["device"].unique() if d)
    device = " and ".join(devices) if devices else "an unrecorded device"
    replayed, total = int(events["replayed"].sum()), len(events)
    if replayed == total:
        source = "all measurements were replayed from a recorded GPU sweep, not measured live"
    elif replayed == 0:
        source = "all measurements were taken live"
    else:
        source = f"{replayed} of {total} measurements were replayed from a recording, the rest taken live"
    others = {RETIMED: "finalist re-timing(s)", BASELINE: "library baseline timing(s)"}
    extra = [f"{tally.get(kind, 0)} {words}" for kind, words in others.items()]
    extra += [f"{n} {kind} record(s)" for kind, n in tally.items() if kind not in (*others, "problems", "variants")]
    counted = (
        f"{tally['problems']} problem(s), {tally['variants']} variant(s) evaluated, "
        f"{', '.join(extra)}; {total} evaluation(s) in all."
    )
    if inputs.arithmetic:
        basis = (
            f"Rates in TFLOP/s (the problem's floating-point operations per median time) against the dense "
            f"bf16 tensor-core peak of {inputs.tensor_peak_tflops:,.0f} TFLOP/s. The roofline places every "
            f"variant at its arithmetic intensity (FLOP per byte moved) under both ceilings: the copy limit "
            f"({inputs.copy_limit_gbps:,.0f} GB/s) and the bf16 tensor peak."
        )
    else:
        basis = (
            f"Bandwidth in GB/s (bytes read + written per median time) against the device copy limit of "
            f"{inputs.copy_limit_gbps:,.0f} GB/s."
        )
    return f"Device: {device}; {source}.", counted, basis


def _figure(width: float, height: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Figure, path: Path) -> Path:
    fig.savefig(path, format="png", dpi=110, metadata={"Software": None})
    return path


def _plot_history(history: pd.DataFrame, path: Path) -> Path:
    from matplotlib.ticker import MaxNLocator

    groups = list(history.groupby("problem_key", sort=False))
    ncols = max(1, min(3, len(groups)))
    nrows = max(1, math.ceil(len(groups) / ncols))
    fig = _figure(4.5 * ncols, 3.2 * nrows)
    if not groups:
        ax = fig.add_subplot()
        ax.text(0.5, 0.5, "no screened variant", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
    for i, (_, group) in enumerate(groups):
        ax = fig.add_subplot(nrows, ncols, i + 1)
        ax.set_title(_short(group["name"].iloc[0], 45), fontsize=9)
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
    return _save(fig, path)


def _plot_bandwidth(winners: pd.DataFrame, limit_gbps: float, path: Path) -> Path:
    names = [_short(n, 40) for n in winners["name"]]
    gbps = winners["bandwidth_gbps"].fillna(0.0)
    fig = _figure(8, 1.2 + 0.5 * len(names))
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
    return _save(fig, path)


def _roof(ax: Axes, low: float, high: float, limit_gbps: float, peak_tflops: float) -> None:
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


def _plot_roofline(
    events: pd.DataFrame, winners: pd.DataFrame, limit_gbps: float, peak_tflops: float, path: Path
) -> Path:
    """Every OK variant, baseline and winner at its arithmetic intensity (log-log) under both ceilings."""
    from matplotlib import colormaps

    timed = events[(events["status"] == Status.OK.value) & events["tflops"].notna() & events["intensity"].notna()]
    ridge = peak_tflops * 1e3 / limit_gbps  # FLOP/byte where the two ceilings meet
    spots = [ridge, *events["intensity"].dropna()]
    low, high = min(spots) / 4, max(spots) * 4
    fig = _figure(9, 6)
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    _roof(ax, low, high, limit_gbps, peak_tflops)
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
            label=_short(str(group["name"].iloc[0]), 40),
        )
        baselines = group[group["kind"] == BASELINE]
        ax.plot(baselines["intensity"], baselines["tflops"], "x", color=color, markersize=7)
        win = winners[(winners["problem_key"] == key) & winners["tflops"].notna()]
        for w in win.to_dict("records"):
            ax.plot([w["intensity"]], [w["tflops"]], "*", color=color, markersize=13, markeredgecolor="black")
            ax.annotate(
                _pct(w["peak_fraction"]),
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
    return _save(fig, path)


def _plot_speedup(winners: pd.DataFrame, path: Path) -> Path | None:
    """Grouped bars of both speed-ups; None (nothing written) when neither was measured."""
    import numpy as np

    columns = {"speedup_vs_default": "vs default variant", "speedup_vs_baseline": "vs library baseline"}
    data = winners[winners[list(columns)].notna().any(axis=1)]
    if data.empty:
        return None
    x = np.arange(len(data))
    fig = _figure(max(6.0, 1.3 * len(data)), 4)
    ax = fig.add_subplot()
    for i, (column, legend) in enumerate(columns.items()):
        values = data[column]
        bars = ax.bar(x + (i - 0.5) * 0.38, values.fillna(0.0), 0.38, label=legend)
        ax.bar_label(bars, labels=[_fmt(v, ".2f", "×") for v in values], fontsize=8)
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xlim(-1, len(data))
    ax.set_title("Speed-up of the winner")
    ax.set_xticks(x, [_short(n, 25) for n in data["name"]], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("speed-up of the winner (×)")
    ax.legend(fontsize=8)
    return _save(fig, path)


def _html_table(table: _Table) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in table.headers)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="num">{html.escape(c)}</td>' if num else f"<td>{html.escape(c)}</td>"
            for c, num in zip(row, table.numeric, strict=True)
        )
        + "</tr>\n"
        for row in table.rows
    )
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}</tbody>\n</table>"


def _md_cell(text: str) -> str:
    return html.escape(" ".join(text.split()), quote=False).replace("|", "\\|")


def _md_table(table: _Table) -> str:
    lines = [
        "| " + " | ".join(_md_cell(h) for h in table.headers) + " |",
        "|" + "|".join("---:" if num else "---" for num in table.numeric) + "|",
    ]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in table.rows]
    return "\n".join(lines)


def _html_section(section: _Section) -> str:
    parts = [f"<h2>{html.escape(section.title)}</h2>"]
    parts += [f"<p>{html.escape(text)}</p>" for text in section.text]
    if section.table is not None:
        parts.append(_html_table(section.table))
    return "\n".join(parts)


def _md_section(section: _Section) -> str:
    parts = [f"## {_md_cell(section.title)}", *(_md_cell(text) for text in section.text)]
    if section.table is not None:
        parts.append(_md_table(section.table))
    return "\n\n".join(parts)


def _file_notes(files: ReportFiles, images: list[tuple[Path, str]]) -> list[tuple[str, str]]:
    notes = [
        (files.html.name, "this report as one self-contained page (plots embedded)"),
        (files.markdown.name, "this report in Markdown (plots linked)"),
    ]
    return notes + [(image.name, caption) for image, caption in images]


def _write_html(
    files: ReportFiles,
    title: str,
    headline: tuple[str, ...],
    sections: list[_Section],
    images: list[tuple[Path, str]],
    note: str,
) -> None:
    figures = "\n".join(
        f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,'
        f'{base64.b64encode(image.read_bytes()).decode("ascii")}"><figcaption>{html.escape(caption)}'
        f"</figcaption></figure>"
        for image, caption in images
    )
    body = "\n".join(_html_section(section) for section in sections)
    note_html = f'<p class="note">{html.escape(note)}</p>\n' if note else ""
    head = "\n".join(f'<p class="headline">{html.escape(text)}</p>' for text in headline)
    listed = "\n".join(
        f"<li><code>{html.escape(name)}</code>: {html.escape(what)}</li>" for name, what in _file_notes(files, images)
    )
    files.html.write_text(
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n<style>\n{_CSS}\n</style>\n</head>\n<body>\n"
        f"<h1>{html.escape(title)}</h1>\n{head}\n{body}\n<h2>Plots</h2>\n{figures}\n{note_html}"
        f"<h2>Files written</h2>\n<p>In the report directory:</p>\n<ul>\n{listed}\n</ul>\n</body>\n</html>\n",
        encoding="utf-8",
    )


def _write_markdown(
    files: ReportFiles,
    title: str,
    headline: tuple[str, ...],
    sections: list[_Section],
    images: list[tuple[Path, str]],
    note: str,
) -> None:
    parts = [f"# {_md_cell(title)}", *(_md_cell(text) for text in headline)]
    parts += [_md_section(section) for section in sections]
    parts.append("## Plots\n\n" + "\n\n".join(f"![{caption}]({image.name})" for image, caption in images))
    if note:
        parts.append(f"_{note}_")
    parts.append(
        "## Files written\n\nIn the report directory:\n\n"
        + "\n".join(f"- `{name}`: {_md_cell(what)}" for name, what in _file_notes(files, images))
    )
    files.markdown.write_text("\n\n".join(parts) + "\n", encoding="utf-8")


def build_report(inputs: ReportInputs, out_dir: Path, title: str) -> ReportFiles:
    """Write ``<family>.html``, ``<family>.md`` and the PNG plots ``<family>_history.png``, then
    ``<family>_roofline.png`` (arithmetic families: TFLOP/s against the copy limit and the bf16 peak)
    or ``<family>_bandwidth.png`` (data movement: GB/s against the copy limit), then
    ``<family>_speedup.png``.

    The speed-up plot is left out when no problem has a timed default variant or library baseline;
    a plot this report does not write is removed if a stale one is there. Raises ValueError when there
    are no evaluations or the family name is not a safe file name.
    """
    if not _SAFE_NAME.fullmatch(inputs.family):
        raise ValueError(f"family name {inputs.family!r} is not usable as a file name")
    events = evaluations_frame(inputs)
    winners = winners_frame(inputs)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = inputs.family
    arithmetic = inputs.arithmetic
    rate_plot = (out_dir / f"{stem}_roofline.png", out_dir / f"{stem}_bandwidth.png")
    images = [(_plot_history(history_frame(inputs), out_dir / f"{stem}_history.png"), "Optimization history")]
    if arithmetic:
        images.append(
            (
                _plot_roofline(events, winners, inputs.copy_limit_gbps, inputs.tensor_peak_tflops, rate_plot[0]),
                "Roofline: every variant at its arithmetic intensity (FLOP/byte) against the copy limit "
                "and the bf16 tensor peak",
            )
        )
    else:
        images.append(
            (
                _plot_bandwidth(winners, inputs.copy_limit_gbps, rate_plot[1]),
                "Achieved bandwidth of each winner vs the device copy limit",
            )
        )
    rate_plot[1 if arithmetic else 0].unlink(missing_ok=True)
    speedup = _plot_speedup(winners, out_dir / f"{stem}_speedup.png")
    if speedup is None:
        (out_dir / f"{stem}_speedup.png").unlink(missing_ok=True)
    else:
        images.append((speedup, "Speed-up of each winner vs the default variant and the library baseline"))
    note = "" if speedup else _NO_SPEEDUP
    templates = bool((events["template"] != "").any())
    sections = [
        _Section("Winners", table=_winners_table(winners, arithmetic, templates)),
        _clocks_section(clocks_frame(inputs)),
        _Section("Outcomes by status", table=_outcomes_table(outcomes_frame(inputs))),
        _failures_section(status_frame(inputs), len(events)),
    ]
    headline = _headline(events, counts(inputs), inputs)
    files = ReportFiles(out_dir / f"{stem}.html", out_dir / f"{stem}.md", tuple(p for p, _ in images))
    _write_html(files, title, headline, sections, images, note)
    _write_markdown(files, title, headline, sections, images, note)
    log.info("wrote %s report for %d problem(s): %s", stem, len(winners), ", ".join(str(p) for p in files.all))
    return files
