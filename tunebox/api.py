"""Composition root: turns names and paths into instances and runs the three user jobs. Importing it loads
neither Optuna nor matplotlib (a sweep and a report do)."""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from .build.nvrtc import NvrtcBuilder
from .errors import DatabaseError, DeviceUnavailable, SpaceError
from .records import DeviceInfo, EvalRecord
from .report import ReportFiles
from .results_frame import sweep_log
from .runner.backends import Backend, GpuBackend, ReplayBackend
from .runner.paced import PacedReplay
from .runner.probe import gpu_status
from .runner.sanitizer import ComputeSanitizer, Sanitizer
from .runtime.lookup import LookupResult, shared
from .search.loop_settings import LoopSettings
from .search.runs import SweepProgress, SweepResult
from .store.evallog import EvalLog, check_log_family
from .store.lock import SweepLock
from .store.recordings import shipped_recording
from .store.winners import check_before_sweep
from .sweep_spec import SweepSpec, load_sweep, plain_numbers, search_settings

log = logging.getLogger(__name__)

DEFAULT_RESULTS = Path("results")
PathText = str | os.PathLike[str]  # a path as the caller gives it
DEFAULT_LOOP = LoopSettings()
DEFAULT_HEARTBEAT_S = 10  # a shared sweep's worker beats this often (s); silent for 3x that, its trials re-queue


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
    path = recording or shipped_recording(spec.source, spec.name)  # <repo>/results/recordings/<name>.jsonl.gz
    if not path.exists():
        raise DeviceUnavailable(
            f"no GPU and no recording at {path}; record one on a GPU host "
            "(tunebox tune on the GPU, then gzip its evals.jsonl to that path)"
        )
    return ReplayBackend(path, EvalLog(path).read(), spec.family.name)  # another family's: ReplayMiss at once


def _path(path: PathText | None) -> Path | None:
    return None if path is None else Path(path)


def _check_backend_name(backend: str) -> None:
    if backend not in ("auto", "gpu", "replay"):
        raise SpaceError(f"unknown backend {backend!r}; use auto, gpu or replay")


def _replays(backend: str) -> bool:
    """Whether ``make_backend`` gives the replay backend (known before it starts, so that the sweep's
    lock is taken first; the probe's answer is cached)."""
    _check_backend_name(backend)
    return backend == "replay" or backend == "auto" and not gpu_status()[0]


def tune(
    sweep: PathText | SweepSpec,
    *,
    backend: str = "auto",
    recording: PathText | None = None,
    results: PathText = DEFAULT_RESULTS,
    db: PathText | None = None,
    trials: int | None = None,
    seconds: float | None = None,
    strategy: str | None = None,
    listeners: tuple[Callable[[str, EvalRecord], None], ...] = (),
    settings: LoopSettings = DEFAULT_LOOP,
    backend_instance: Backend | None = None,
    progress: Callable[[SweepProgress], None] | None = None,
    storage: str | None = None,
    replay_pace: float | None = None,
    heartbeat_s: int = DEFAULT_HEARTBEAT_S,
    sanitize: bool | None = None,
) -> SweepResult:
    """Run (or resume) a sweep. Evaluations go to ``results/sweeps/<name>[-replay]/``, winners to
    ``db`` (default ``results/winners.sqlite``, or ``results/winners-replay.sqlite`` on the replay
    backend, so replayed winners never mix with measured ones). One sweep per results directory
    at a time: another one running there (its lock ``sweep.lock`` held) makes this one raise
    ``SweepLocked`` at once. ``progress`` is called with the sweep's totals as it goes. ``results`` is
    relative to the working directory (``tunebox.query`` reads ``default_db()``, the checkout's: give it
    the returned ``db_path`` when the sweep ran elsewhere).

    ``trials``, ``seconds`` and ``strategy`` override the sweep file's ``[search]``: ``trials`` variants
    per problem; ``seconds`` one wall-clock budget (s) for the whole sweep, so that problems it does not
    reach get no winner (a second run resumes them).

    ``storage`` (``postgresql://user:password@host/db``): this process is one worker of a sweep shared
    through that database (``tunebox.search.distributed``; needs ``tunebox[distributed]``): the
    evaluation records, the Optuna studies and the winners are there, not in local files, and any
    number of workers, started at any time on any host, share the sweep out. ``heartbeat_s``: a
    worker's running trials are queued again when it has not been heard of for 3 x that.
    ``replay_pace``: on replay, each answer waits that many times its recorded verify + time seconds.
    ``sanitize``: run each problem's finalists under compute-sanitizer (memcheck, racecheck, synccheck)
    before a winner is stored, passing over any it reports on (default off: see ``_sanitizer``)."""
    pace = plain_numbers(replay_pace)
    if pace is not None and not (isinstance(pace, int | float) and math.isfinite(pace) and pace >= 0):
        raise SpaceError(
            f"replay_pace is a finite number of 0 or more (a factor of the recorded seconds), not {pace!r}"
        )
    replay_pace = cast(float | None, pace)
    if progress is not None and not callable(progress):
        raise SpaceError(f"progress is a function of a SweepProgress, not {type(progress).__name__}")
    spec = sweep if isinstance(sweep, SweepSpec) else load_sweep(Path(sweep))
    results, db, recording = Path(results), _path(db), _path(recording)
    given = (("trials", trials), ("seconds", seconds), ("strategy", strategy))
    overrides = {k: plain_numbers(v) for k, v in given if v is not None}  # numpy's numbers too
    if overrides:
        settings_now = {**spec.search.__dict__, **overrides}
        shown = ", ".join(f"{k}={v!r}" for k, v in overrides.items())
        spec = replace(spec, search=search_settings(settings_now, f"tune({shown}) over {spec.source}"))
        if trials is not None and spec.search.strategy == "exhaustive":
            raise SpaceError(
                f"{spec.source}: trials={trials} does not apply to the exhaustive strategy, which evaluates every "
                "valid variant of each problem; give a strategy that samples (--strategy surrogate, tpe or random) "
                "to evaluate that many"
            )
    if storage is not None:
        return _tune_shared(
            spec,
            storage,
            backend,
            recording,
            results,
            db,
            listeners,
            settings,
            backend_instance,
            progress,
            replay_pace,
            heartbeat_s,
            sanitize,
        )
    from .search.loop import Sweep  # Optuna: imported by a sweep, not by ``import tunebox``

    replayed = backend_instance.replayed if backend_instance is not None else _replays(backend)
    out = results / "sweeps" / (spec.name + ("-replay" if replayed else ""))
    with SweepLock(out):
        chosen = backend_instance or _paced(make_backend(spec, backend, recording), replay_pace)
        if isinstance(
            chosen, ReplayBackend | PacedReplay
        ):  # a resumed replay continues with its own device's recording
            chosen.check_resume(out / "evals.jsonl")
        builder = NvrtcBuilder(
            _arch(chosen), cache_dir=results / "cache" / "cubin", timeout_s=settings.compile_timeout_s
        )
        try:
            winners = db or default_winners(results, chosen.replayed)
            sanitizer = _sanitizer(sanitize, chosen)
            return Sweep(
                spec, chosen, builder, out, winners, listeners, settings, progress=progress, sanitizer=sanitizer
            ).run()
        finally:
            builder.close(abandon=True)  # compiles still running are spare asks: unwanted
            chosen.close()


def default_winners(results: Path, replayed: bool) -> Path:
    """Where a sweep stores its winners without ``db``: measured and replayed ones never in one file."""
    return results / ("winners-replay.sqlite" if replayed else "winners.sqlite")


def _sanitizer(sanitize: bool | None, backend: Backend) -> Sanitizer | None:
    """The finalists' compute-sanitizer checks, when asked for (a replay runs nothing to check). Off by
    default: the issue asks for it by default only where it costs under 10% of a sweep, and on the H200
    it cost 75% of a 100-variant tile_copy sweep (``results/benchmarks/sanitizer_cost.json``)."""
    if sanitize and backend.replayed:
        raise SpaceError("--sanitize runs the finalists on a GPU: not with the replay backend (use --no-sanitize)")
    return ComputeSanitizer() if sanitize else None


def _paced(backend: Backend, pace: float | None) -> Backend:
    if pace is None or not isinstance(backend, ReplayBackend):
        return backend
    return PacedReplay(backend, pace)


def _tune_shared(
    spec: SweepSpec,
    storage: str,
    backend: str,
    recording: Path | None,
    results: Path,
    db: Path | None,
    listeners: tuple[Callable[[str, EvalRecord], None], ...],
    settings: LoopSettings,
    backend_instance: Backend | None,
    progress: Callable[[SweepProgress], None] | None,
    replay_pace: float | None,
    heartbeat_s: int,
    sanitize: bool | None,
) -> SweepResult:
    """One worker of a sweep shared through PostgreSQL (no local sweep directory, lock or log). At the
    end the sweep's winners are copied from the database into the local winners database ``db`` (the
    default one otherwise), where ``tunebox query`` and ``tunebox.lookup`` find them."""
    from .search.distributed import DistributedSweep, Heartbeat
    from .store.postgres import is_postgres_url, redacted, storage_error

    if not is_postgres_url(storage):
        shown = redacted(storage)  # a password in another scheme's URL is never printed either
        raise SpaceError(f"--storage takes a PostgreSQL URL (postgresql://user:password@host/db), not {shown!r}")
    if heartbeat_s < 1:
        raise SpaceError(f"the heartbeat interval is whole seconds, at least 1 (got {heartbeat_s})")
    replayed = backend_instance.replayed if backend_instance is not None else _replays(backend)
    local = db or default_winners(results, replayed)
    local.parent.mkdir(parents=True, exist_ok=True)
    check_before_sweep(local, replayed)  # where the winners are copied at the end: checked before any work
    chosen = backend_instance or _paced(make_backend(spec, backend, recording), replay_pace)
    builder = NvrtcBuilder(_arch(chosen), cache_dir=results / "cache" / "cubin", timeout_s=settings.compile_timeout_s)
    try:
        heartbeat = Heartbeat(heartbeat_s, 3 * heartbeat_s)
        sanitizer = _sanitizer(sanitize, chosen)
        sweep = DistributedSweep(
            spec,
            chosen,
            builder,
            storage,
            listeners,
            settings,
            progress=progress,
            heartbeat=heartbeat,
            sanitizer=sanitizer,
        )
        result = sweep.run()
    except Exception as exc:  # the server lost or a right missing: said in one line, the sweep resumable
        if (told := storage_error(storage, exc)) is None:
            raise
        raise told from exc
    finally:
        builder.close(abandon=True)  # compiles still running are spare asks: unwanted
        chosen.close()
    from .records import WinnerKey
    from .store.postgres import PgWinnersDB
    from .store.winners import WinnersDB

    keys = [
        WinnerKey.of(p.winner, spec.family.source_hash(), p.problem.key(), p.problem.dtype)
        for p in result.problems
        if p.winner is not None
    ]
    if keys:
        with PgWinnersDB(storage) as shared, WinnersDB(local) as mine:
            shared.copy_to(mine, keys)
    return replace(result, db_path=local)


def _arch(backend: Backend) -> str:
    major, minor = backend.device.compute_capability.split(".")
    return f"sm_{major}{minor}"


def query(
    family: str,
    problem: dict[str, Any],
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

    The family is checked first, then the problem (``sweep_spec.check_problem``): a non-finite number in
    it (JSON ``Infinity`` / ``NaN`` / ``1e999``) raises InvalidProblem saying what to give instead.
    """
    return shared(db).query(family, problem, device=device, device_info=device_info)


def report(
    sweep: PathText,
    *,
    results: PathText = DEFAULT_RESULTS,
    out: PathText = Path("reports"),
    replay: bool = False,
    db: PathText | None = None,
) -> ReportFiles:
    """Write the HTML + Markdown report of a sweep's evaluation log (live GPU sweep preferred), with the
    coverage of the winners database that sweep stored into (``db``, default the one ``tune`` stores into
    by default), as ``<out>/<sweep's name>.html`` and ``.md``. A sweep shared through PostgreSQL keeps its
    evaluations there, where this does not read them."""
    from .report import ReportInputs, build_report
    from .runtime.coverage import coverage

    spec, results, out = load_sweep(Path(sweep)), Path(results), Path(out)
    path = sweep_log(spec.name, results, replay)
    records = tuple(EvalLog(path).read())
    if not records:
        recorded = shipped_recording(spec.source, spec.name)
        where = "" if recorded.exists() else f" on a GPU host (no recording of it to replay: {recorded})"
        raise SpaceError(
            f"no evaluations in {path}: run `tunebox tune {sweep}` first{where} (a sweep shared through "
            "--storage keeps its evaluations in PostgreSQL, which reports do not read)"
        )
    check_log_family(path, records, spec.family.name)
    names = {p.problem.key(): p.name for p in spec.problems}
    defaults = {p.problem.key(): spec.family.default_config(p.problem).as_dict() for p in spec.problems}
    if db is None:  # where tune stored this log's winners
        db = default_winners(results, replayed=any(r.replayed for r in records))
    elif not Path(db).is_file():  # named: a typo must not report an empty coverage
        raise DatabaseError(f"no winners database at {db}: give the one the sweep stored into (--db), or none")
    db = Path(db)
    covered = tuple(coverage(db, spec.family.name)) if db.is_file() else ()
    inputs = ReportInputs(spec.family.name, records, defaults, names, coverage=covered)
    return build_report(inputs, out, f"tunebox sweep {spec.name}", stem=spec.name)
