"""tunebox: find, keep and serve the fastest correct variant of parameterized CUDA tile kernels.

Three jobs: ``tune`` a sweep, ``lookup``/``launch`` (or ``bind``) tuned variants at run time, ``report``
results.
Importing ``tunebox`` loads neither Optuna nor matplotlib; ``tune`` and ``report`` import them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .api import query, report, tune  # ``report`` the function: api loads the subpackage of that name first
from .errors import (
    CompileError,
    DatabaseError,
    DeviceUnavailable,
    HarnessError,
    InvalidConfig,
    InvalidProblem,
    MeasurementError,
    ReplayMiss,
    SpaceError,
    TuneboxError,
)
from .records import DeviceInfo, EvalRecord, Status
from .report import ReportFiles
from .results_frame import results
from .runtime.bound import BoundLaunch
from .runtime.launch import Launcher, bind, launch
from .runtime.lookup import Lookup, LookupResult, check_device_info, default_db, shared
from .runtime.serving import Served
from .search.runs import ProblemOutcome, SweepProgress, SweepResult
from .store.lock import SweepLocked

if TYPE_CHECKING:
    from os import PathLike

__all__ = [
    "BoundLaunch",
    "CompileError",
    "DatabaseError",
    "DeviceInfo",
    "DeviceUnavailable",
    "EvalRecord",
    "HarnessError",
    "InvalidConfig",
    "InvalidProblem",
    "Launcher",
    "Lookup",
    "LookupResult",
    "MeasurementError",
    "ProblemOutcome",
    "ReplayMiss",
    "ReportFiles",
    "Served",
    "SpaceError",
    "Status",
    "SweepLocked",
    "SweepProgress",
    "SweepResult",
    "TuneboxError",
    "bind",
    "default_db",
    "launch",
    "lookup",
    "query",
    "report",
    "results",
    "tune",
]


def lookup(
    family: str, problem: dict[str, Any], device: DeviceInfo, db: str | PathLike[str] | None = None
) -> LookupResult:
    """Exact, nearest or default configuration of ``family`` for ``problem`` on ``device``: the fast
    path (microseconds when warm). ``db`` defaults to ``default_db()``: the ``TUNEBOX_DB``
    environment variable, else the checkout's (or installed package's) ``results/winners.sqlite``;
    a database that does not exist raises ``DatabaseError``; a ``device`` that is no ``DeviceInfo``
    raises TypeError."""
    check_device_info("device", device)  # None too: query's "the database's device", which lookup never takes
    return shared(db).query(family, problem, device_info=device)
