"""Composition root: turns names and paths into instances and runs the three user jobs."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from .build.nvrtc import NvrtcBuilder
from .errors import DeviceUnavailable, SpaceError
from .families import get as get_family
from .records import DeviceInfo, EvalRecord
from .report import ReportFiles
from .runner.backends import Backend, GpuBackend, ReplayBackend
from .runner.probe import gpu_status
from .runtime.lookup import LookupResult, shared
from .search.loop import LoopSettings, Sweep
from .search.runs import SweepProgress, SweepResult
from .store.evallog import EvalLog
from .store.lock import SweepLock
from .sweep_spec import SweepSpec, check_problem, load_sweep, search_settings

log = logging.getLogger(__name__)

DEFAULT_RESULTS = Path("results")
DEFAULT_LOOP = LoopSettings()


def default_recording(spec: SweepSpec) -> Path:
    """The recorded GPU sweep shipped beside a sweep file: ``<repo>/results/recordings/<name>.jsonl``."""
    return spec.source.resolve().parent.parent / "results" / "recordings" / f"{spec.name}.jsonl"


def make_backend(spec: SweepSpec, backend: str, recording: Path | None) -> Backend:
    """``gpu``, ``replay`` or ``auto`` (the GPU when the probe finds one, else replay)."""
    _check_backend_name(backend)
    if backend in ("auto", "gpu"):
        available, reason = gpu_status()
        if available:
            return GpuBackend()
        if backend == "gpu":
            raise DeviceUnavailable(f"no usable GPU ({reason}); use --backend replay")
        log.warning("no GPU here (%s): replaying recorded measurements", reason)
    path = recording or default_recording(spec)
    if not path.exists():
        raise DeviceUnavailable(
            f"no GPU and no recording at {path}; record one on a GPU host "
            "(tunebox tune on the GPU, then copy evals.jsonl there)"
        )
    return ReplayBackend(path, EvalLog(path).read(), spec.family.name)  # another family's: ReplayMiss at once


def _check_backend_name(backend: str) -> None:
    if backend not in ("auto", "gpu", "replay"):
        raise SpaceError(f"unknown backend {backend!r}; use auto, gpu or replay")


def _replays(backend: str) -> bool:
    """Whether ``make_backend`` gives the replay backend (known before it starts, so that the sweep's
    lock is taken first; the probe's answer is cached)."""
    _check_backend_name(backend)
    return backend == "replay" or backend == "auto" and not gpu_status()[0]


def tune(
    sweep: Path | SweepSpec,
    *,
    backend: str = "auto",
    recording: Path | None = None,
    results: Path = DEFAULT_RESULTS,
    db: Path | None = None,
    trials: int | None = None,
    seconds: float | None = None,
    strategy: str | None = None,
    listeners: tuple[Callable[[str, EvalRecord], None], ...] = (),
    settings: LoopSettings = DEFAULT_LOOP,
    backend_instance: Backend | None = None,
    progress: Callable[[SweepProgress], None] | None = None,
) -> SweepResult:
    """Run (or resume) a sweep. Evaluations go to ``results/sweeps/<name>[-replay]/``, winners to
    ``db`` (default ``results/winners.sqlite``, or ``results/winners-replay.sqlite`` on the replay
    backend, so replayed winners never mix with measured ones). One sweep per results directory
    at a time: another one running there (its lock ``sweep.lock`` held) makes this one raise
    ``SweepLocked`` at once. ``progress`` is called with the sweep's totals as it goes."""
    spec = sweep if isinstance(sweep, SweepSpec) else load_sweep(sweep)
    overrides = {k: v for k, v in (("trials", trials), ("seconds", seconds), ("strategy", strategy)) if v is not None}
    if overrides:
        settings_now = {**spec.search.__dict__, **overrides}
        spec = replace(spec, search=search_settings(settings_now, str(spec.source)))
    replayed = backend_instance.replayed if backend_instance is not None else _replays(backend)
    out = results / "sweeps" / (spec.name + ("-replay" if replayed else ""))
    with SweepLock(out):
        chosen = backend_instance or make_backend(spec, backend, recording)
        if isinstance(chosen, ReplayBackend):  # a resumed replay continues with its own device's recording
            chosen.check_resume(out / "evals.jsonl")
        builder = NvrtcBuilder(
            _arch(chosen), cache_dir=results / "cache" / "cubin", timeout_s=settings.compile_timeout_s
        )
        try:
            default_db = results / ("winners-replay.sqlite" if chosen.replayed else "winners.sqlite")
            return Sweep(spec, chosen, builder, out, db or default_db, listeners, settings, progress=progress).run()
        finally:
            builder.close()
            chosen.close()


def _arch(backend: Backend) -> str:
    major, minor = backend.device.compute_capability.split(".")
    return f"sm_{major}{minor}"


def query(
    family_name: str,
    problem_data: dict[str, Any],
    *,
    db: str | os.PathLike[str] | None = None,
    device: str | None = None,
    device_info: DeviceInfo | None = None,
) -> LookupResult:
    """The tuned configuration for a problem, answered from the winners database ``db`` (default:
    ``tunebox.runtime.lookup.default_db()``, the ``TUNEBOX_DB`` environment variable or the
    checkout's ``results/winners.sqlite``); a database that does not exist raises DatabaseError.

    Without ``device_info`` the device is taken from the database: the one named ``device``, or the
    only device that holds winners of this family (several need ``device``). Warm (the same
    process, the database unchanged) it takes microseconds.

    The problem is checked first (``sweep_spec.check_problem``): a non-finite number in it (JSON
    ``Infinity`` / ``NaN`` / ``1e999``) raises InvalidProblem saying what to give instead.
    """
    get_family(family_name)  # an unknown family is named as such, before its problem is looked at
    check_problem(family_name, problem_data)
    return shared(db).query(family_name, problem_data, device=device, device_info=device_info)


def report(
    sweep: Path, *, results: Path = DEFAULT_RESULTS, out: Path = Path("reports"), replay: bool = False
) -> ReportFiles:
    """Write the HTML + Markdown report of a sweep's evaluation log (live GPU sweep preferred)."""
    from .report import ReportInputs, build_report

    spec = load_sweep(sweep)
    live = results / "sweeps" / spec.name / "evals.jsonl"
    replayed = results / "sweeps" / f"{spec.name}-replay" / "evals.jsonl"
    path = live if live.exists() and not replay else replayed
    records = tuple(EvalLog(path).read())
    if not records:
        raise SpaceError(f"no evaluations in {path}: run `tunebox tune {sweep}` first")
    names = {p.problem.key(): p.name for p in spec.problems}
    defaults = {p.problem.key(): spec.family.default_config(p.problem).as_dict() for p in spec.problems}
    inputs = ReportInputs(spec.family.name, records, defaults, names)
    return build_report(inputs, out, f"tunebox sweep {spec.name}")
