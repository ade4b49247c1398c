"""tunebox: find, keep and serve the fastest correct variant of parameterized CUDA tile kernels.

Three jobs: ``tune`` a sweep, ``lookup``/``launch`` tuned variants at run time, ``report`` results.
Importing ``tunebox`` loads neither Optuna nor matplotlib; ``tune`` and ``report`` import them.
"""

from __future__ import annotations

from functools import cache
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
from .runtime.launch import Launcher, launch
from .runtime.lookup import Lookup, LookupResult

if TYPE_CHECKING:
    from .report import ReportFiles
    from .search.loop import SweepResult

__all__ = [
    "CompileError", "DatabaseError", "DeviceInfo", "DeviceUnavailable", "EvalRecord", "InvalidConfig",
    "InvalidProblem", "Launcher", "Lookup", "LookupResult", "SpaceError", "Status", "TuneboxError",
    "launch", "lookup", "query", "report", "tune",
]


def tune(*args: Any, **kwargs: Any) -> SweepResult:
    """Run or resume a sweep; see ``tunebox.api.tune``."""
    from .api import tune as _tune

    return _tune(*args, **kwargs)


def query(*args: Any, **kwargs: Any) -> LookupResult:
    """Tuned configuration for a problem from the winners database; see ``tunebox.api.query``."""
    from .api import query as _query

    return _query(*args, **kwargs)


def lookup(family: str, problem: dict[str, Any], device: DeviceInfo,
           db: str = "results/winners.sqlite") -> LookupResult:
    """Exact, nearest or default configuration of ``family`` for ``problem`` on ``device``."""
    from .families import get

    fam = get(family)
    return _lookup_in(str(db)).lookup(fam, fam.parse_problem(problem), device)


@cache
def _lookup_in(db: str) -> Lookup:
    """One warm ``Lookup`` per database for the life of the process."""
    return Lookup(db)


def report(*args: Any, **kwargs: Any) -> ReportFiles:
    """Write a sweep's HTML + Markdown report; see ``tunebox.api.report``."""
    from .api import report as _report

    return _report(*args, **kwargs)
