"""Build a report: the frames of ``data`` (and ``clocks``) made into sections (``tables``), PNG plots
(``plots``) and the HTML and Markdown pages (``pages``), written to one directory.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from .clocks import clocks_frame
from .data import (
    ReportInputs,
    counts,
    evaluations_frame,
    history_frame,
    outcomes_frame,
    status_frame,
    winners_frame,
)
from .pages import Page, ReportFiles, write_html, write_markdown
from .plots import plot_bandwidth, plot_history, plot_roofline, plot_speedup
from .tables import (
    Section,
    clocks_section,
    coverage_section,
    failures_section,
    headline_of,
    outcomes_table,
    winners_table,
)

log = logging.getLogger(__name__)

_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_NO_SPEEDUP = "No speed-up plot: no default variant or library baseline was timed successfully."


def build_report(inputs: ReportInputs, out_dir: Path, title: str, stem: str | None = None) -> ReportFiles:
    """Write ``<stem>.html``, ``<stem>.md`` and the PNG plots ``<stem>_history.png``, then
    ``<stem>_roofline.png`` (arithmetic families: TFLOP/s against the copy limit and the bf16 peak)
    or ``<stem>_bandwidth.png`` (data movement: GB/s against the copy limit), then
    ``<stem>_speedup.png``. ``stem``: the sweep's name (default the family's), so that two sweeps of one
    family write two reports.

    The speed-up plot is left out when no problem has a timed default variant or library baseline;
    a plot this report does not write is removed if a stale one is there. Raises ValueError when there
    are no evaluations or the stem is not a safe file name.
    """
    stem = inputs.family if stem is None else stem
    if not _SAFE_NAME.fullmatch(stem):
        raise ValueError(f"report name {stem!r} is not usable as a file name")
    events = evaluations_frame(inputs)
    winners = winners_frame(inputs)
    out_dir.mkdir(parents=True, exist_ok=True)
    arithmetic = inputs.arithmetic
    rate_plot = (out_dir / f"{stem}_roofline.png", out_dir / f"{stem}_bandwidth.png")
    images = [(plot_history(history_frame(inputs), out_dir / f"{stem}_history.png"), "Optimization history")]
    if arithmetic:
        images.append(
            (
                plot_roofline(events, winners, inputs.copy_limit_gbps, inputs.tensor_peak_tflops, rate_plot[0]),
                "Roofline: every variant at its arithmetic intensity (FLOP/byte) against the copy limit "
                "and the bf16 tensor peak",
            )
        )
    else:
        images.append(
            (
                plot_bandwidth(winners, inputs.copy_limit_gbps, rate_plot[1]),
                "Achieved bandwidth of each winner vs the device copy limit",
            )
        )
    rate_plot[1 if arithmetic else 0].unlink(missing_ok=True)
    speedup = plot_speedup(winners, out_dir / f"{stem}_speedup.png")
    if speedup is None:
        (out_dir / f"{stem}_speedup.png").unlink(missing_ok=True)
    else:
        images.append((speedup, "Speed-up of each winner vs the default variant and the library baseline"))
    note = "" if speedup else _NO_SPEEDUP
    templates = bool((events["template"] != "").any())
    sections = [
        Section("Winners", table=winners_table(winners, arithmetic, templates)),
        clocks_section(clocks_frame(inputs)),
        Section("Outcomes by status", table=outcomes_table(outcomes_frame(inputs))),
        failures_section(status_frame(inputs), len(events)),
        coverage_section(inputs.family, inputs.coverage),
    ]
    headline = headline_of(events, counts(inputs), inputs)
    files = ReportFiles(out_dir / f"{stem}.html", out_dir / f"{stem}.md", tuple(p for p, _ in images))
    page = Page(title, headline, tuple(sections), tuple(images), note)
    write_html(files, page)
    write_markdown(files, page)
    log.info("wrote %s report for %d problem(s): %s", stem, len(winners), ", ".join(str(p) for p in files.all))
    return files
