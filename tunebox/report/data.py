"""Report data: one family's evaluation log computed into pandas frames (no plotting, no files).

Units: times in milliseconds, bandwidth in GB/s (1e9 bytes per second, bytes read + written), speed-ups
as time ratios (> 1 means the tuned winner is faster). Missing values are NaN. Problems appear in the
order of their first evaluation; ``trial`` is a record's 0-based position in the family's log.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..limits import COPY_LIMIT_GBPS
from ..records import DeviceInfo, EvalRecord, Status, canonical_json

if TYPE_CHECKING:
    import pandas as pd

NO_VALID = "no valid variant"


@dataclass(frozen=True)
class ReportInputs:
    """Everything a report is computed from.

    ``records``: the family's evaluation log in evaluation order (records of other families are
    ignored). ``default_configs``: problem key (``canonical_json(problem)``) -> the family's untuned
    default config. ``problem_names``: problem key -> display name; unnamed problems are shown as
    ``k=v`` pairs. ``copy_limit_gbps``: the device's copy bandwidth (read + write) in GB/s.
    """

    family: str
    records: tuple[EvalRecord, ...]
    default_configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    problem_names: dict[str, str] = field(default_factory=dict)
    copy_limit_gbps: float = COPY_LIMIT_GBPS

    def __post_init__(self) -> None:
        if not self.copy_limit_gbps > 0:
            raise ValueError(f"copy_limit_gbps must be positive, got {self.copy_limit_gbps}")


def label(values: Mapping[str, Any]) -> str:
    """Compact ``k=v`` form of a config or problem, keys sorted, space separated."""
    return " ".join(f"{k}={values[k]}" for k in sorted(values))


def _describe(device: DeviceInfo | None) -> str:
    if device is None:
        return ""
    return (f"{device.name} (compute capability {device.compute_capability}, "
            f"driver {device.driver_version}, NVRTC {device.nvrtc_version})")


def _nan(value: float | None) -> float:
    return math.nan if value is None else float(value)


def evaluations_frame(inputs: ReportInputs) -> pd.DataFrame:
    """One row per record of the family, in evaluation order.

    Columns: trial, problem_key, name, status (``Status`` value), median_ms, noise (relative stdev),
    bandwidth_gbps, replayed, baseline ("" for tuned variants), phase ("screen" for every variant,
    "final" for the finalists' interleaved re-timing), config (``k=v``), config_key
    (canonical JSON), message, device ("" when unknown). Raises ValueError when there is no record.
    """
    import pandas as pd

    records = [r for r in inputs.records if r.family == inputs.family]
    if not records:
        raise ValueError(f"no evaluations to report: run a sweep first "
                         f"(no record of family {inputs.family!r})")
    rows = []
    for trial, rec in enumerate(records):
        key = canonical_json(rec.problem)
        rows.append({
            "trial": trial,
            "problem_key": key,
            "name": inputs.problem_names.get(key) or label(rec.problem),
            "status": rec.status.value,
            "median_ms": _nan(rec.median_ms),
            "noise": rec.timing.noise if rec.timing else math.nan,
            "bandwidth_gbps": _nan(rec.bandwidth_gbps),
            "replayed": rec.replayed,
            "baseline": rec.baseline,
            "phase": rec.phase,
            "config": label(rec.config),
            "config_key": canonical_json(rec.config),
            "message": rec.message,
            "device": _describe(rec.device),
        })
    return pd.DataFrame(rows)


def _timed_ok(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[(frame["status"] == Status.OK.value) & frame["median_ms"].notna()]


def winners_frame(inputs: ReportInputs) -> pd.DataFrame:
    """One row per problem: its winner (the fastest OK finalist re-timing, else the fastest OK
    screened variant) and how it compares.

    Columns: problem_key, name, config (``k=v``, or ``NO_VALID`` when no variant is OK), trial,
    median_ms, bandwidth_gbps, copy_fraction (bandwidth / copy limit), default_ms (fastest OK
    record of the default config), speedup_vs_default (default_ms / median_ms), baseline (name of
    the fastest OK baseline, "" if none), baseline_ms, speedup_vs_baseline (baseline_ms /
    median_ms), variants (tuned variants evaluated) and one count column per ``Status`` value.
    """
    import pandas as pd

    events = evaluations_frame(inputs)
    rows = []
    for key, group in events.groupby("problem_key", sort=False):
        variants = group[(group["baseline"] == "") & (group["phase"] == "screen")]
        ok = _timed_ok(variants)
        finals = _timed_ok(group[(group["baseline"] == "") & (group["phase"] == "final")])
        baselines = _timed_ok(group[group["baseline"] != ""])
        counts = variants["status"].value_counts()
        row: dict[str, Any] = {"problem_key": key, "name": group["name"].iloc[0], "config": NO_VALID,
                               "trial": -1, "median_ms": math.nan, "bandwidth_gbps": math.nan,
                               "copy_fraction": math.nan, "default_ms": math.nan,
                               "speedup_vs_default": math.nan, "baseline": "",
                               "baseline_ms": math.nan, "speedup_vs_baseline": math.nan}
        if not baselines.empty:
            fastest = baselines.loc[baselines["median_ms"].idxmin()]
            row.update(baseline=fastest["baseline"], baseline_ms=fastest["median_ms"])
        if not ok.empty:
            pool = finals if not finals.empty else ok
            best = pool.loc[pool["median_ms"].idxmin()]
            default = inputs.default_configs.get(str(key))
            if default is not None:
                row["default_ms"] = ok.loc[ok["config_key"] == canonical_json(default), "median_ms"].min()
            row.update(config=best["config"], trial=int(best["trial"]), median_ms=best["median_ms"],
                       bandwidth_gbps=best["bandwidth_gbps"],
                       copy_fraction=best["bandwidth_gbps"] / inputs.copy_limit_gbps,
                       speedup_vs_default=row["default_ms"] / best["median_ms"],
                       speedup_vs_baseline=row["baseline_ms"] / best["median_ms"])
        row["variants"] = len(variants)
        row.update({s.value: int(counts.get(s.value, 0)) for s in Status})
        rows.append(row)
    return pd.DataFrame(rows)


def status_frame(inputs: ReportInputs) -> pd.DataFrame:
    """Counts of tuned variants per problem and status (statuses in ``Status`` order, zeros omitted).

    Columns: problem_key, name, status, count, example (the first non-empty message, "" if none).
    Baseline records are not variants and are not counted.
    """
    import pandas as pd

    events = evaluations_frame(inputs)
    variants = events[(events["baseline"] == "") & (events["phase"] == "screen")]
    rows = []
    for key, group in variants.groupby("problem_key", sort=False):
        for status in Status:
            selected = group[group["status"] == status.value]
            if selected.empty:
                continue
            messages = selected["message"][selected["message"] != ""]
            rows.append({"problem_key": key, "name": group["name"].iloc[0], "status": status.value,
                         "count": len(selected), "example": messages.iloc[0] if len(messages) else ""})
    return pd.DataFrame(rows, columns=["problem_key", "name", "status", "count", "example"])


def history_frame(inputs: ReportInputs) -> pd.DataFrame:
    """The optimization history of tuned variants, one row per variant in evaluation order.

    Columns: problem_key, name, trial (position in the log), problem_trial (0-based position among
    the problem's variants), status, median_ms (NaN unless OK) and best_ms (fastest OK median so
    far for the problem, NaN before the first OK variant).
    """
    events = evaluations_frame(inputs)
    screened = (events["baseline"] == "") & (events["phase"] == "screen")
    history = events.loc[screened, ["problem_key", "name", "trial", "status"]].copy()
    history["problem_trial"] = history.groupby("problem_key", sort=False).cumcount()
    history["median_ms"] = events["median_ms"].where(events["status"] == Status.OK.value)
    history["best_ms"] = history.groupby("problem_key", sort=False)["median_ms"].cummin()
    history["best_ms"] = history.groupby("problem_key", sort=False)["best_ms"].ffill()
    columns = ["problem_key", "name", "trial", "problem_trial", "status", "median_ms", "best_ms"]
    return history[columns].reset_index(drop=True)
