"""Report data: evaluation logs computed into pandas frames (no plotting, no files).

Units: times in milliseconds, bandwidth in GB/s (1e9 bytes per second, bytes read + written), arithmetic
rates in TFLOP/s (1e12 floating-point operations per second), arithmetic intensity in FLOP per byte moved,
speed-ups as time ratios (> 1 means the tuned winner is faster). Missing values are NaN. Problems appear
in the order of their first evaluation; ``trial`` is a record's 0-based position in the (family's) log.

A family is *arithmetic* when its records count floating-point operations (``flops > 0``, e.g. gemm):
its rates are TFLOP/s against the dense bf16 tensor-core peak, on a roofline. The others move data: GB/s
against the device copy limit.

Kinds of record: a *screened variant* (``phase == "screen"``, no baseline) is one configuration the
search evaluated; a *finalist re-timing* (``phase == "final"``) times a finalist again, interleaved with
the library baselines; a *library baseline* (``baseline`` set) times the library call a user would make
instead. Only screened variants are counted as variants.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..limits import BF16_TENSOR_TFLOPS, COPY_LIMIT_GBPS
from ..records import DeviceInfo, EvalRecord, Status, canonical_json

if TYPE_CHECKING:
    import pandas as pd

    from ..runtime.coverage import Covered

NO_VALID = "no valid variant"
TEMPLATE = "template"  # the configuration key that names a conditional space's template
SCREENED = "screened variant"
RETIMED = "finalist re-timing"
BASELINE = "library baseline"


@dataclass(frozen=True)
class ReportInputs:
    """Everything a report is computed from.

    ``records``: the family's evaluation log in evaluation order (records of other families are
    ignored). ``default_configs``: problem key (``canonical_json(problem)``) -> the family's untuned
    default config. ``problem_names``: problem key -> display name, for every problem of the sweep
    (those without evaluations are named as missing); unnamed problems are shown as ``k=v`` pairs.
    ``copy_limit_gbps``: the device's copy bandwidth (read + write) in GB/s.
    ``tensor_peak_tflops``: the device's dense bf16 tensor-core peak in TFLOP/s. ``coverage``: the
    family's problems in the winners database the sweep stored into (``tunebox.runtime.coverage``;
    empty: none, or no database).
    """

    family: str
    records: tuple[EvalRecord, ...]
    default_configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    problem_names: dict[str, str] = field(default_factory=dict)
    copy_limit_gbps: float = COPY_LIMIT_GBPS
    tensor_peak_tflops: float = BF16_TENSOR_TFLOPS
    coverage: tuple[Covered, ...] = ()

    def __post_init__(self) -> None:
        for name in ("copy_limit_gbps", "tensor_peak_tflops"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive finite number, got {value!r}")

    @property
    def arithmetic(self) -> bool:
        """Whether the family counts floating-point operations (reported in TFLOP/s on a roofline)."""
        return any(r.flops > 0 for r in self.records if r.family == self.family)


def label(values: Mapping[str, Any]) -> str:
    """Compact ``k=v`` form of a config or problem, keys sorted, space separated."""
    return " ".join(f"{k}={values[k]}" for k in sorted(values))


def config_label(config: Mapping[str, Any]) -> str:
    """``label`` of a configuration without its template (shown in a column of its own)."""
    return label({k: v for k, v in config.items() if k != TEMPLATE})


def kind_of(record: EvalRecord) -> str:
    """``SCREENED``, ``RETIMED`` or ``BASELINE`` (another phase: ``"<phase> phase"``)."""
    if record.baseline:
        return BASELINE
    if record.phase == "screen":
        return SCREENED
    return RETIMED if record.phase == "final" else f"{record.phase} phase"


def describe(device: DeviceInfo | None) -> str:
    """One-line description of a device and its toolchain ("" when unknown)."""
    return "" if device is None else device.describe()


def _nan(value: float | None) -> float:
    return math.nan if value is None else float(value)


def intensity(record: EvalRecord) -> float:
    """Arithmetic intensity in FLOP per byte moved (NaN without flops or bytes)."""
    return record.flops / record.bytes_moved if record.flops > 0 and record.bytes_moved > 0 else math.nan


def measures(record: EvalRecord) -> dict[str, Any]:
    """The measurement columns every frame of evaluations shares (see ``evaluations_frame``)."""
    template = record.config.get(TEMPLATE, "")
    return {
        "template": template if isinstance(template, str) else str(template),
        "status": record.status.value,
        "median_ms": _nan(record.median_ms),
        "noise": record.timing.noise if record.timing else math.nan,
        "bandwidth_gbps": _nan(record.bandwidth_gbps),
        "tflops": _nan(record.tflops),
        "intensity": intensity(record),
        "flops": record.flops,
        "bytes_moved": record.bytes_moved,
        "phase": record.phase,
        "baseline": record.baseline,
        "kind": kind_of(record),
        "replayed": record.replayed,
    }


def evaluations_frame(inputs: ReportInputs) -> pd.DataFrame:
    """One row per record of the family, in evaluation order.

    Columns: trial, problem_key, name, template ("" without one), status (``Status`` value),
    median_ms, noise (relative stdev), bandwidth_gbps, tflops (NaN without flops), intensity
    (FLOP/byte), flops, bytes_moved, phase, baseline ("" for tuned variants), kind (``SCREENED``,
    ``RETIMED`` or ``BASELINE``), replayed, config (``k=v`` without the template), config_key
    (canonical JSON), message, device ("" when unknown). Raises ValueError when there is no record.
    """
    import pandas as pd

    records = [r for r in inputs.records if r.family == inputs.family]
    if not records:
        raise ValueError(f"no evaluations to report: run a sweep first (no record of family {inputs.family!r})")
    rows = []
    for trial, rec in enumerate(records):
        key = canonical_json(rec.problem)
        rows.append(
            {
                "trial": trial,
                "problem_key": key,
                "name": inputs.problem_names.get(key) or label(rec.problem),
                **measures(rec),
                "config": config_label(rec.config),
                "config_key": canonical_json(rec.config),
                "message": rec.message,
                "device": describe(rec.device),
            }
        )
    return pd.DataFrame(rows)


def _timed_ok(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[(frame["status"] == Status.OK.value) & frame["median_ms"].notna()]


def _screened(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["kind"] == SCREENED]


def winners_frame(inputs: ReportInputs) -> pd.DataFrame:
    """One row per problem: its winner (the fastest OK finalist re-timing, else the fastest OK
    screened variant) and how it compares.

    Columns: problem_key, name, template and config (``k=v`` without the template, or ``NO_VALID``
    when no variant is OK), trial, median_ms, bandwidth_gbps, copy_fraction (bandwidth / copy
    limit), tflops, peak_fraction (TFLOP/s / bf16 tensor peak; NaN without flops), intensity
    (FLOP/byte of the problem, NaN without flops), default_ms (the default config's fastest OK
    finalist re-timing where it was a finalist, else its screening), speedup_vs_default (default_ms /
    median_ms), baseline (name of the fastest OK baseline, "" if none), baseline_ms,
    speedup_vs_baseline (baseline_ms / median_ms), variants (screened variants: the same count as the
    report's header) and one count column per ``Status`` value (screened variants only).
    """
    import pandas as pd

    events = evaluations_frame(inputs)
    rows = []
    for key, group in events.groupby("problem_key", sort=False):
        variants = _screened(group)
        ok = _timed_ok(variants)
        finals = _timed_ok(group[group["kind"] == RETIMED])
        baselines = _timed_ok(group[group["kind"] == BASELINE])
        counts = variants["status"].value_counts()
        work = group["intensity"].dropna()
        row: dict[str, Any] = {
            "problem_key": key,
            "name": group["name"].iloc[0],
            "template": "",
            "config": NO_VALID,
            "trial": -1,
            "median_ms": math.nan,
            "bandwidth_gbps": math.nan,
            "copy_fraction": math.nan,
            "tflops": math.nan,
            "peak_fraction": math.nan,
            "intensity": float(work.iloc[0]) if len(work) else math.nan,
            "default_ms": math.nan,
            "speedup_vs_default": math.nan,
            "baseline": "",
            "baseline_ms": math.nan,
            "speedup_vs_baseline": math.nan,
        }
        if not baselines.empty:
            fastest = baselines.loc[baselines["median_ms"].idxmin()]
            row.update(baseline=fastest["baseline"], baseline_ms=fastest["median_ms"])
        if not ok.empty:
            pool = finals if not finals.empty else ok
            best = pool.loc[pool["median_ms"].idxmin()]
            default = inputs.default_configs.get(str(key))
            if default is not None:  # timed as the winner was: its re-timing where it was a finalist
                retimed = finals.loc[finals["config_key"] == canonical_json(default), "median_ms"]
                screened = ok.loc[ok["config_key"] == canonical_json(default), "median_ms"]
                row["default_ms"] = (retimed if not retimed.empty else screened).min()
            row.update(
                template=best["template"],
                config=best["config"],
                trial=int(best["trial"]),
                median_ms=best["median_ms"],
                bandwidth_gbps=best["bandwidth_gbps"],
                copy_fraction=best["bandwidth_gbps"] / inputs.copy_limit_gbps,
                tflops=best["tflops"],
                peak_fraction=best["tflops"] / inputs.tensor_peak_tflops,
                speedup_vs_default=row["default_ms"] / best["median_ms"],
                speedup_vs_baseline=row["baseline_ms"] / best["median_ms"],
            )
        row["variants"] = len(variants)
        row.update({s.value: int(counts.get(s.value, 0)) for s in Status})
        rows.append(row)
    return pd.DataFrame(rows)


def _status_order(present: Iterable[str]) -> list[str]:
    """Statuses in ``Status`` order, then any other value seen, alphabetically."""
    seen = set(present)
    known = [s.value for s in Status if s.value in seen]
    return known + sorted(seen - set(known))


def status_frame(inputs: ReportInputs) -> pd.DataFrame:
    """Every record that did not end ``ok`` (screened variants, finalist re-timings and library
    baselines alike), counted per problem, kind and status, statuses in ``Status`` order.

    Columns: problem_key, name, kind, status, count, example_config (the first such record's
    template and config, or its baseline's name), example (its first non-empty message, "" if none).
    Empty (with these columns) when nothing failed.
    """
    import pandas as pd

    events = evaluations_frame(inputs)
    failed = events[events["status"] != Status.OK.value]
    kinds = list(dict.fromkeys([SCREENED, RETIMED, BASELINE, *events["kind"]]))
    rows = []
    for key, group in failed.groupby("problem_key", sort=False):
        for kind in kinds:
            for status in _status_order(group["status"]):
                selected = group[(group["kind"] == kind) & (group["status"] == status)]
                if selected.empty:
                    continue
                first = selected.iloc[0]
                example_config = first["baseline"] or " ".join(
                    part for part in (first["template"], first["config"]) if part
                )
                messages = selected["message"][selected["message"] != ""]
                rows.append(
                    {
                        "problem_key": key,
                        "name": group["name"].iloc[0],
                        "kind": kind,
                        "status": status,
                        "count": len(selected),
                        "example_config": example_config,
                        "example": messages.iloc[0] if len(messages) else "",
                    }
                )
    return pd.DataFrame(rows, columns=["problem_key", "name", "kind", "status", "count", "example_config", "example"])


def outcomes_frame(inputs: ReportInputs) -> pd.DataFrame:
    """Counts of every status present (``ok`` included), by kind of record.

    Columns: status, then one count column per kind present (``SCREENED``, ``RETIMED``,
    ``BASELINE`` first), then total. One row per status seen, in ``Status`` order.
    """
    import pandas as pd

    events = evaluations_frame(inputs)
    kinds = [k for k in dict.fromkeys([SCREENED, RETIMED, BASELINE, *events["kind"]]) if (events["kind"] == k).any()]
    rows = []
    for status in _status_order(events["status"]):
        selected = events[events["status"] == status]
        row: dict[str, Any] = {"status": status}
        row.update({kind: int((selected["kind"] == kind).sum()) for kind in kinds})
        row["total"] = len(selected)
        rows.append(row)
    return pd.DataFrame(rows, columns=["status", *kinds, "total"])


def history_frame(inputs: ReportInputs) -> pd.DataFrame:
    """The optimization history of screened variants, one row per variant in evaluation order.

    Columns: problem_key, name, trial (position in the log), problem_trial (0-based position among
    the problem's variants), status, median_ms (NaN unless OK) and best_ms (fastest OK median so
    far for the problem, NaN before the first OK variant).
    """
    events = evaluations_frame(inputs)
    screened = events["kind"] == SCREENED
    history = events.loc[screened, ["problem_key", "name", "trial", "status"]].copy()
    history["problem_trial"] = history.groupby("problem_key", sort=False).cumcount()
    history["median_ms"] = events["median_ms"].where(events["status"] == Status.OK.value)
    history["best_ms"] = history.groupby("problem_key", sort=False)["median_ms"].cummin()
    history["best_ms"] = history.groupby("problem_key", sort=False)["best_ms"].ffill()
    columns = ["problem_key", "name", "trial", "problem_trial", "status", "median_ms", "best_ms"]
    return history[columns].reset_index(drop=True)


def counts(inputs: ReportInputs) -> dict[str, int]:
    """Header counts: problems, variants (screened), and every other kind of record present."""
    events = evaluations_frame(inputs)
    kinds = events["kind"].value_counts()
    result = {"problems": int(events["problem_key"].nunique()), "variants": int(kinds.get(SCREENED, 0))}
    result.update({str(kind): int(n) for kind, n in kinds.items() if kind != SCREENED})
    return result


RESULT_COLUMNS = (
    "trial",
    "family",
    "problem",
    "problem_key",
    "template",
    "status",
    "median_ms",
    "noise",
    "bandwidth_gbps",
    "tflops",
    "intensity",
    "flops",
    "bytes_moved",
    "phase",
    "baseline",
    "kind",
    "replayed",
    "device",
    "config",
    "config_key",
    "message",
)


def results_frame(records: Iterable[EvalRecord], problem_names: Mapping[str, str] | None = None) -> pd.DataFrame:
    """The public results table: one row per evaluation, in log order, of every family in ``records``.

    Columns: trial (0-based position in the log), family, problem (display name from
    ``problem_names``, else ``k=v`` pairs), problem_key (canonical JSON), template ("" without one),
    then one column per configuration parameter (missing where a configuration has no such
    parameter: pandas nullable dtypes; a parameter whose name is one of the other columns is called
    ``param_<name>``), then status, median_ms, noise, bandwidth_gbps (GB/s), tflops (TFLOP/s, NaN
    without flops), intensity (FLOP/byte), flops, bytes_moved, phase, baseline, kind, replayed,
    device (device name, "" when unknown), config (``k=v`` without the template), config_key
    (canonical JSON) and message. An empty log gives an empty frame with the fixed columns.
    """
    import pandas as pd

    names = problem_names or {}
    rows: list[dict[str, Any]] = []
    params: dict[str, None] = {}  # parameter names in order of first appearance
    for trial, rec in enumerate(records):
        key = canonical_json(rec.problem)
        row: dict[str, Any] = {
            "trial": trial,
            "family": rec.family,
            "problem": names.get(key) or label(rec.problem),
            "problem_key": key,
            **measures(rec),
            "device": rec.device.name if rec.device else "",
            "config": config_label(rec.config),
            "config_key": canonical_json(rec.config),
            "message": rec.message,
        }
        for name, value in rec.config.items():
            if name != TEMPLATE:
                column = f"param_{name}" if name in RESULT_COLUMNS else name
                params[column] = None
                row[column] = value
        rows.append(row)
    head = list(RESULT_COLUMNS[: RESULT_COLUMNS.index("template") + 1])
    columns = [*head, *params, *RESULT_COLUMNS[len(head) :]]
    frame = pd.DataFrame(rows, columns=columns)
    if params:
        frame[list(params)] = frame[list(params)].convert_dtypes()
    return frame
