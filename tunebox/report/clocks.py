"""Report data: the clocks, temperature and power NVML observed while the winners were timed, and
the timings taken while the GPU throttled.

Units: clocks in MHz, temperature in degrees Celsius, power in watts; each a median over the clock
observations of the winner's timing (the record ``winners_frame`` chose), NaN where it has none (a
log recorded before timings carried clocks, or NVML missing on the GPU host).
"""

from __future__ import annotations

import math
import statistics
from typing import TYPE_CHECKING, Any

from ..records import EvalRecord, canonical_json
from .data import ReportInputs, winners_frame

if TYPE_CHECKING:
    import pandas as pd

CLOCK_FIELDS = ("sm_mhz", "mem_mhz", "temperature_c", "power_w")


def _median(record: EvalRecord | None, name: str) -> float:
    clocks = record.timing.clocks if record and record.timing else None
    values = [v for s in clocks.samples if (v := getattr(s, name)) is not None] if clocks else []
    return float(statistics.median(values)) if values else math.nan


def clocks_frame(inputs: ReportInputs) -> pd.DataFrame:
    """One row per problem (the order of ``winners_frame``).

    Columns: name; sm_mhz, mem_mhz, temperature_c, power_w (medians over the winner's timing's
    observations); observed (the problem's timings that carry observations), retaken (batches of
    them measured again because the GPU throttled) and flagged (timings kept though the GPU
    throttled in every batch).
    """
    import pandas as pd

    records = [r for r in inputs.records if r.family == inputs.family]
    rows: list[dict[str, Any]] = []
    for _, winner in winners_frame(inputs).iterrows():
        key = winner["problem_key"]
        chosen = records[int(winner["trial"])] if winner["trial"] >= 0 else None
        observed = [
            r.timing.clocks for r in records if canonical_json(r.problem) == key and r.timing and r.timing.clocks
        ]
        rows.append(
            {
                "name": winner["name"],
                **{name: _median(chosen, name) for name in CLOCK_FIELDS},
                "observed": len(observed),
                "retaken": sum(c.retakes for c in observed),
                "flagged": sum(c.throttled for c in observed),
            }
        )
    return pd.DataFrame(rows, columns=["name", *CLOCK_FIELDS, "observed", "retaken", "flagged"])
