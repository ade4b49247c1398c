"""tunebox: find, keep and serve the fastest correct variant of parameterized CUDA tile kernels.

Three jobs: ``tune`` a sweep, ``lookup``/``launch`` (or ``bind``) tuned variants at run time, ``report``
results.
Importing ``tunebox`` loads neither Optuna nor matplotlib; ``tune`` and ``report`` import them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import (
    CompileError,
    DatabaseError,
    DeviceUnavailable,
    InvalidConfig,
    InvalidProblem,
    SpaceError,
    TuneboxError,
)
from .records import DeviceInfo, EvalRecord, Status
from .report import render as _render  # noqa: F401  the subpackage first: ``report`` below is the function
from .runtime.bound import BoundLaunch
from .runtime.launch import Launcher, bind, launch
from .runtime.lookup import Lookup, LookupResult, default_db, shared

if TYPE_CHECKING:
    from os import PathLike

    import pandas as pd

    from .report import ReportFiles
    from .search.runs import SweepResult

__all__ = [
    "BoundLaunch",
    "CompileError",
    "DatabaseError",
    "DeviceInfo",
    "DeviceUnavailable",
    "EvalRecord",
    "InvalidConfig",
    "InvalidProblem",
    "Launcher",
    "Lookup",
    "LookupResult",
    "SpaceError",
    "Status",
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


def tune(*args: Any, **kwargs: Any) -> SweepResult:
    """Run or resume a sweep; see ``tunebox.api.tune``."""
    from .api import tune as _tune

    return _tune(*args, **kwargs)


def query(
    family: str,
    problem: dict[str, Any],
    *,
    db: str | PathLike[str] | None = None,
    device: str | None = None,
    device_info: DeviceInfo | None = None,
) -> LookupResult:
    """Tuned configuration for a problem from the winners database, the device taken from the database
    unless given; see ``tunebox.api.query``. Microseconds when warm."""
    return shared(db).query(family, problem, device=device, device_info=device_info)


def lookup(
    family: str, problem: dict[str, Any], device: DeviceInfo, db: str | PathLike[str] | None = None
) -> LookupResult:
    """Exact, nearest or default configuration of ``family`` for ``problem`` on ``device``: the fast
    path (microseconds when warm). ``db`` defaults to ``default_db()``: the ``TUNEBOX_DB``
    environment variable, else the checkout's (or installed package's) ``results/winners.sqlite``;
    a database that does not exist raises ``DatabaseError``; a ``device`` that is no ``DeviceInfo``
    raises TypeError."""
    if device is None:  # query's "the database's device": lookup always names one
        raise TypeError("device must be a tunebox.DeviceInfo, not None")
    return shared(db).query(family, problem, device_info=device)


def report(*args: Any, **kwargs: Any) -> ReportFiles:
    """Write a sweep's HTML + Markdown report; see ``tunebox.api.report``."""
    from .api import report as _report

    return _report(*args, **kwargs)


def results(
    source: str | PathLike[str], *, results: str | PathLike[str] | None = None, replay: bool = False
) -> pd.DataFrame:
    """A sweep's evaluations as a pandas DataFrame, one row per evaluation (from a sweep file, an
    evaluation log or a sweep's output directory); see ``tunebox.results_frame.results``."""
    from .results_frame import results as _results

    return _results(source, results=results, replay=replay)
