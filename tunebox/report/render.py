"""Render a report: PNG plots (matplotlib, Agg), a self-contained HTML page and a Markdown page.

The HTML embeds every plot as a base64 data URI, so the page still works when moved on its own; the
Markdown references the PNGs by relative path. All text from records is escaped.
"""

from __future__ import annotations

import base64
import html
import logging
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..records import Status
from .data import NO_VALID, ReportInputs, evaluations_frame, history_frame, status_frame, winners_frame

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

log = logging.getLogger(__name__)

_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_NO_SPEEDUP = "No speed-up plot: no default variant or library baseline was timed successfully."
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


@dataclass(frozen=True)
class _Table:
    headers: tuple[str, ...]
    numeric: tuple[bool, ...]  # right-aligned columns
    rows: tuple[tuple[str, ...], ...]


def _fmt(value: float, spec: str, suffix: str = "") -> str:
    return "—" if math.isnan(value) else f"{value:{spec}}{suffix}"


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _winners_table(winners: pd.DataFrame) -> _Table:
    headers = ("Problem", "Best config", "Median (ms)", "GB/s", "% of copy limit", "× vs default",
               "× vs baseline", "Baseline", "Variants", "OK", "Failed")
    rows = []
    for w in winners.to_dict("records"):
        rows.append((w["name"], w["config"], _fmt(w["median_ms"], ".4g"), _fmt(w["bandwidth_gbps"], ",.0f"),
                     _fmt(w["copy_fraction"], ".1%"), _fmt(w["speedup_vs_default"], ".2f", "×"),
                     _fmt(w["speedup_vs_baseline"], ".2f", "×"), w["baseline"] or "—", str(w["variants"]),
                     str(w[Status.OK.value]), str(w["variants"] - w[Status.OK.value])))
    numeric = (False, False, True, True, True, True, True, False, True, True, True)
    return _Table(headers, numeric, tuple(rows))


def _status_table(status: pd.DataFrame) -> _Table:
    rows = tuple((s["name"], s["status"], str(s["count"]), _short(s["example"], 160) or "—")
                 for s in status.to_dict("records"))
    return _Table(("Problem", "Status", "Count", "Example message"), (False, False, True, False), rows)


def _headline(events: pd.DataFrame) -> str:
    devices = sorted(d for d in events["device"].unique() if d)
    device = " and ".join(devices) if devices else "an unrecorded device"
    replayed, total = int(events["replayed"].sum()), len(events)
    if replayed == total:
        source = "all measurements were replayed from a recorded GPU sweep, not measured live"
    elif replayed == 0:
        source = "all measurements were taken live"
    else:
        source = f"{replayed} of {total} measurements were replayed from a recording, the rest taken live"
    variants = events[events["baseline"] == ""]
    return (f"Device: {device}; {source}. {events['problem_key'].nunique()} problem(s), "
            f"{len(variants)} variant(s) evaluated, {total - len(variants)} library baseline timing(s).")


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
    ncols = min(3, len(groups))
    nrows = math.ceil(len(groups) / ncols)
    fig = _figure(4.5 * ncols, 3.2 * nrows)
    for i, (_, group) in enumerate(groups):
        ax = fig.add_subplot(nrows, ncols, i + 1)
        ax.set_title(_short(group["name"].iloc[0], 45), fontsize=9)
        ax.set_xlabel("trial")
        ax.set_ylabel("median time (ms)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ok = group[group["median_ms"].notna()]
        failed = group[group["status"] != Status.OK.value]
        ax.plot(failed["problem_trial"], [0.03] * len(failed), "x", color="tab:red", markersize=4,
                transform=ax.get_xaxis_transform(), label="failed")
        if ok.empty:
            ax.text(0.5, 0.5, NO_VALID, ha="center", va="center", transform=ax.transAxes)
            ax.set_yticks([])
            continue
        ax.plot(ok["problem_trial"], ok["median_ms"], "o", markersize=3, alpha=0.6, label="variant")
        ax.step(group["problem_trial"], group["best_ms"], where="post", color="tab:orange",
                label="best so far")
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
        "<tr>" + "".join(f'<td class="num">{html.escape(c)}</td>' if num else f"<td>{html.escape(c)}</td>"
                         for c, num in zip(row, table.numeric, strict=True)) + "</tr>\n"
        for row in table.rows)
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}</tbody>\n</table>"


def _md_cell(text: str) -> str:
    return html.escape(" ".join(text.split()), quote=False).replace("|", "\\|")


def _md_table(table: _Table) -> str:
    lines = ["| " + " | ".join(_md_cell(h) for h in table.headers) + " |",
             "|" + "|".join("---:" if num else "---" for num in table.numeric) + "|"]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in table.rows]
    return "\n".join(lines)


def _write_html(path: Path, title: str, headline: str, tables: list[tuple[str, _Table]],
                images: list[tuple[Path, str]], note: str) -> None:
    figures = "\n".join(
        f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,'
        f'{base64.b64encode(image.read_bytes()).decode("ascii")}"><figcaption>{html.escape(caption)}'
        f"</figcaption></figure>" for image, caption in images)
    sections = "\n".join(f"<h2>{html.escape(name)}</h2>\n{_html_table(table)}" for name, table in tables)
    note_html = f'<p class="note">{html.escape(note)}</p>\n' if note else ""
    path.write_text(
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n<style>\n{_CSS}\n</style>\n</head>\n<body>\n"
        f'<h1>{html.escape(title)}</h1>\n<p class="headline">{html.escape(headline)}</p>\n'
        f"{sections}\n<h2>Plots</h2>\n{figures}\n{note_html}</body>\n</html>\n", encoding="utf-8")


def _write_markdown(path: Path, title: str, headline: str, tables: list[tuple[str, _Table]],
                    images: list[tuple[Path, str]], note: str) -> None:
    parts = [f"# {_md_cell(title)}", _md_cell(headline)]
    parts += [f"## {name}\n\n{_md_table(table)}" for name, table in tables]
    parts.append("## Plots\n\n" + "\n\n".join(f"![{caption}]({image.name})" for image, caption in images))
    if note:
        parts.append(f"_{note}_")
    path.write_text("\n\n".join(parts) + "\n", encoding="utf-8")


def build_report(inputs: ReportInputs, out_dir: Path, title: str) -> ReportFiles:
    """Write ``<family>.html``, ``<family>.md`` and ``<family>_{history,bandwidth,speedup}.png``.

    The speed-up plot is left out (and a stale one removed) when no problem has a timed default
    variant or library baseline. Raises ValueError when there are no evaluations or the family name
    is not a safe file name.
    """
    if not _SAFE_NAME.fullmatch(inputs.family):
        raise ValueError(f"family name {inputs.family!r} is not usable as a file name")
    events = evaluations_frame(inputs)
    winners = winners_frame(inputs)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = inputs.family
    images = [(_plot_history(history_frame(inputs), out_dir / f"{stem}_history.png"), "Optimization history"),
              (_plot_bandwidth(winners, inputs.copy_limit_gbps, out_dir / f"{stem}_bandwidth.png"),
               "Achieved bandwidth of each winner vs the device copy limit")]
    speedup = _plot_speedup(winners, out_dir / f"{stem}_speedup.png")
    if speedup is None:
        (out_dir / f"{stem}_speedup.png").unlink(missing_ok=True)
    else:
        images.append((speedup, "Speed-up of each winner vs the default variant and the library baseline"))
    note = "" if speedup else _NO_SPEEDUP
    tables = [("Winners", _winners_table(winners)),
              ("What failed and why", _status_table(status_frame(inputs)))]
    headline = _headline(events)
    files = ReportFiles(out_dir / f"{stem}.html", out_dir / f"{stem}.md", tuple(p for p, _ in images))
    _write_html(files.html, title, headline, tables, images, note)
    _write_markdown(files.markdown, title, headline, tables, images, note)
    log.info("wrote %s report for %d problem(s) to %s", stem, len(winners), out_dir)
    return files
