"""A report's sections as tables of text: the winners, clocks, outcomes, failures and headline lines,
and the number formats they share (pages.py writes them as HTML and Markdown)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..records import Status
from ..runner.clocks import RETAKES
from .data import (
    BASELINE,
    RETIMED,
    SCREENED,
    ReportInputs,
)

if TYPE_CHECKING:
    import pandas as pd

    from ..runtime.coverage import Covered


NOT_LOGGED = (
    "Configurations that break a validity rule are never proposed, compiled or logged, so they are not "
    "counted here; `tunebox space` on the sweep file counts the valid configurations of each problem."
)


@dataclass(frozen=True)
class Table:
    headers: tuple[str, ...]
    numeric: tuple[bool, ...]  # right-aligned columns
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Section:
    title: str
    text: tuple[str, ...] = ()  # paragraphs before the table
    table: Table | None = None


@dataclass(frozen=True)
class Column:
    header: str
    numeric: bool
    cell: Callable[[Mapping[str, Any]], str]


def table_of(columns: list[Column], rows: list[dict[str, Any]]) -> Table:
    return Table(
        tuple(c.header for c in columns),
        tuple(c.numeric for c in columns),
        tuple(tuple(c.cell(r) for c in columns) for r in rows),
    )


def fmt(value: float, spec: str, suffix: str = "") -> str:
    return "—" if math.isnan(value) else f"{value:{spec}}{suffix}"


def pct(value: float) -> str:
    """A fraction as a percentage: one decimal, two significant digits below 1%."""
    if math.isnan(value):
        return "—"
    return f"{value:.1%}" if abs(value) >= 0.01 or value == 0 else f"{value * 100:.2g}%"


def short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def winners_table(winners: pd.DataFrame, arithmetic: bool, templates: bool) -> Table:
    columns = [Column("Problem", False, lambda w: str(w["name"]))]
    if templates:
        columns.append(Column("Template", False, lambda w: str(w["template"]) or "—"))
    columns += [
        Column("Best config", False, lambda w: str(w["config"])),
        Column("Median (ms)", True, lambda w: fmt(w["median_ms"], ".4g")),
    ]
    if arithmetic:
        columns += [
            Column("TFLOP/s", True, lambda w: fmt(w["tflops"], ".4g")),
            Column("% of bf16 peak", True, lambda w: pct(w["peak_fraction"])),
            Column("FLOP/byte", True, lambda w: fmt(w["intensity"], ",.0f")),
        ]
    else:
        columns += [
            Column("GB/s", True, lambda w: fmt(w["bandwidth_gbps"], ",.0f")),
            Column("% of copy limit", True, lambda w: pct(w["copy_fraction"])),
        ]
    columns += [
        Column("× vs default", True, lambda w: fmt(w["speedup_vs_default"], ".2f", "×")),
        Column("× vs baseline", True, lambda w: fmt(w["speedup_vs_baseline"], ".2f", "×")),
        Column("Baseline", False, lambda w: str(w["baseline"]) or "—"),
        Column("Variants", True, lambda w: str(w["variants"])),
        Column("OK", True, lambda w: str(w[Status.OK.value])),
        Column("Failed", True, lambda w: str(w["variants"] - w[Status.OK.value])),
    ]
    return table_of(columns, winners.to_dict("records"))


def count_of(column: str) -> Callable[[Mapping[str, Any]], str]:
    return lambda row: str(row[column])


def outcomes_table(outcomes: pd.DataFrame) -> Table:
    columns = [Column("Status", False, lambda r: str(r["status"]))]
    titles = {SCREENED: "Screened variants", RETIMED: "Finalist re-timings", BASELINE: "Library baselines"}
    for kind in outcomes.columns[1:-1]:
        columns.append(Column(titles.get(kind, kind.capitalize()), True, count_of(kind)))
    columns.append(Column("Total", True, lambda r: str(r["total"])))
    return table_of(columns, outcomes.to_dict("records"))


def clocks_section(clocks: pd.DataFrame) -> Section:
    title = "Clocks while timing"
    if not clocks["observed"].any():
        return Section(
            title, ("No timing here carries clock observations (logged before timings read NVML, or NVML missing).",)
        )
    columns = [
        Column("Problem", False, lambda c: str(c["name"])),
        Column("SM clock (MHz)", True, lambda c: fmt(c["sm_mhz"], ".0f")),
        Column("Memory clock (MHz)", True, lambda c: fmt(c["mem_mhz"], ".0f")),
        Column("Temperature (°C)", True, lambda c: fmt(c["temperature_c"], ".0f")),
        Column("Power (W)", True, lambda c: fmt(c["power_w"], ".0f")),
        Column("Timings observed", True, count_of("observed")),
        Column("Batches re-taken", True, count_of("retaken")),
        Column("Flagged", True, count_of("flagged")),
    ]
    text = (
        "Medians of what NVML observed while each winner was timed. A timed batch during which the GPU throttled "
        f"(thermal or hardware slowdown, power brake) is measured again, up to {RETAKES} times; "
        f"{int(clocks['flagged'].sum())} timing(s) throttled in every batch and were kept, flagged.",
    )
    return Section(title, text, table_of(columns, clocks.to_dict("records")))


def failures_section(status: pd.DataFrame, total: int) -> Section:
    if status.empty:
        return Section("What failed and why", (f"Nothing failed: all {total} evaluation(s) ended ok.", NOT_LOGGED))
    failed = int(status["count"].sum())
    columns = [
        Column("Problem", False, lambda s: str(s["name"])),
        Column("Kind", False, lambda s: str(s["kind"])),
        Column("Status", False, lambda s: str(s["status"])),
        Column("Count", True, lambda s: str(s["count"])),
        Column("Example", False, lambda s: short(str(s["example_config"]), 80) or "—"),
        Column("Example message", False, lambda s: short(str(s["example"]), 240) or "—"),
    ]
    statuses = ", ".join(dict.fromkeys(status["status"]))
    text = (
        f"{failed} of {total} evaluation(s) did not end ok ({statuses}): every one is counted below, "
        "per problem, kind of record and status, with the first one's configuration and message.",
        NOT_LOGGED,
    )
    return Section("What failed and why", text, table_of(columns, status.to_dict("records")))


def headline_of(events: pd.DataFrame, tally: dict[str, int], inputs: ReportInputs) -> tuple[str, ...]:
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
    evaluated = set(events["problem_key"])
    missing = [name for key, name in inputs.problem_names.items() if key not in evaluated]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        counted += (
            f" {len(missing)} of the sweep's {len(inputs.problem_names)} problems have no evaluation yet ({shown}):"
            " the sweep is unfinished, and running `tunebox tune` on its file again resumes it."
        )
    ok = events[(events["kind"] == SCREENED) & (events["status"] == Status.OK.value)]
    retimed = set(events.loc[events["kind"] == RETIMED, "problem_key"])
    partial = sorted({name for key, name in zip(ok["problem_key"], ok["name"], strict=True) if key not in retimed})
    if partial:
        counted += (
            f" {len(partial)} problem(s) searched in part, their finalists not yet re-timed ({', '.join(partial[:5])}"
            f"{' and more' if len(partial) > 5 else ''}): their winners are provisional until the sweep resumes."
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


def coverage_section(family: str, coverage: Sequence[Covered]) -> Section:
    """The problems the winners database answers exactly for ``family`` (``tunebox coverage`` lists the
    same): at other shapes ``tunebox.launch`` runs the nearest problem's winner, a race or the library."""
    title = "Coverage: the problems the winners database answers exactly"
    if not coverage:
        return Section(
            title,
            (
                f"The winners database holds no {family} winner: every launch is served the "
                "family default, a first-use race or the library call.",
            ),
        )
    columns = [
        Column("Problem", False, lambda c: " ".join(f"{k}={v}" for k, v in c["problem"].items())),  # whole: the key
        Column("Device", False, lambda c: str(c["device"])),
        Column("Winner (ms)", True, lambda c: fmt(c["median_ms"], ".4f")),
        Column("Library", False, lambda c: c["library"] or "not timed"),
        Column("Library (ms)", True, lambda c: fmt(c["library_ms"], ".4f") if c["library_ms"] else "-"),
        Column("× library", True, lambda c: fmt(c["ratio"], ".2f", "×") if c["ratio"] else "-"),
        Column("Tuned by", False, lambda c: "first-use race" if c["raced"] else "sweep"),
        Column("Current", False, lambda c: "yes" if c["current"] else "stale: other sources, never exact"),
    ]
    rows = [{**dataclasses.asdict(c), "ratio": c.ratio} for c in coverage]
    stale = sum(not c.current for c in coverage)
    text = (
        f"{len(coverage)} tuned problem(s), {stale} stored under other sources (never answered exactly). "
        "A launch at any other shape runs the nearest problem's winner, re-validated, a first-use race, or the "
        "library call where no tunebox variant is known to beat it.",
    )
    return Section(title, text, table_of(columns, rows))
