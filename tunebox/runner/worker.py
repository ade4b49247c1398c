"""The GPU worker process: owns the CUDA context, evaluates jobs sent over a pipe.

Started with the ``spawn`` method by ``GpuRunner``. It answers ``("ready", DeviceInfo)`` once its
canary (the compare kernel on a known input) passed, then one ``Outcome`` (or a list of them for a
``RetimeJob`` or a ``CeilingsJob``) per job. After a sticky CUDA error it replies with ``fatal=True`` and exits.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import importlib.util
import logging
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import HarnessError
from ..families.base import Baseline, Tolerance
from ..ipc import requests_read_ahead
from ..records import Clocks, Status
from .ceiling_runs import measure_ceilings
from .clocks import retake_throttled
from .cuda_errors import classify
from .protocol import CeilingsJob, EvaluateJob, Outcome, PrepareJob, RetimeJob, failed_reply
from .timing import FIRST_LAUNCH_CUT, PROBE, BenchConfig

if TYPE_CHECKING:
    from .gpu_session import GpuSession, ProblemState

log = logging.getLogger(__name__)


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this worker when the sweep process dies (no orphan holds the GPU)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def main(conn: Connection) -> None:
    os.setpgrp()
    _die_with_parent()
    threading.Thread(target=_import_torch, name="torch-import", daemon=True).start()
    try:
        from .gpu_session import GpuSession

        session = GpuSession()
        probe = np.arange(1000, dtype=np.uint32)
        a, b = session.upload(probe), session.upload(probe)
        if session.mismatches(a, b, probe.size, 4) != (0, 2**64 - 1):
            raise RuntimeError("canary: the compare kernel found differences in equal buffers")
    except Exception as exc:  # report any start failure to the parent, then exit
        conn.send(("failed", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", session.info))
    for job in requests_read_ahead(conn):  # the sweep queues the next job while this one runs
        reply = handle(session, job)
        conn.send(reply)
        fatal = reply.fatal if isinstance(reply, Outcome) else any(o.fatal for o in reply)
        if fatal:  # the context is poisoned: exit without running CUDA destructors
            conn.close()
            os._exit(70)


def _import_torch() -> None:
    """Import torch and start its CUDA state from the worker's start on, beside the session's own
    start-up and the first jobs: the finalists' re-timing needs it for the baselines, and both take
    seconds (a missing torch is reported when a baseline is asked for). torch shares this process's
    primary context. Any failure here shows again, with its message, when a baseline asks for torch."""
    with contextlib.suppress(Exception):
        _preload_torch_libraries()
        import torch

        torch.cuda.init()


# torch's own first, as torch loads it (globally), then the libraries its extension module needs
_TORCH_LIBRARIES = (
    "libtorch_global_deps.so",
    "libc10.so",
    "libtorch_cpu.so",
    "libc10_cuda.so",
    "libtorch_cuda.so",
    "libtorch.so",
    "libtorch_python.so",
)


def _preload_torch_libraries() -> None:
    """Load torch's large shared libraries through ctypes, whose ``dlopen`` runs without the GIL, so
    that the import finds them loaded: loading them inside the import holds the GIL (with their static
    initialisers) for up to a second at a time while the worker prepares its first problem beside it (a
    CPU check, a loop timed in 1.2 ms slices beside the import: longest slice 0.34-1.05 s plain, 0.11-0.20 s
    preloaded: results/diagnostics/cpu_checks_s26.json). A library missing or refused is left to the import."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return
    folder = Path(spec.origin).parent / "lib"
    for name in _TORCH_LIBRARIES:
        mode = ctypes.RTLD_GLOBAL if name == "libtorch_global_deps.so" else ctypes.DEFAULT_MODE
        with contextlib.suppress(OSError):
            ctypes.CDLL(str(folder / name), mode=mode)


def handle(session: GpuSession, job: object) -> Outcome | list[Outcome]:
    """The reply to one job on ``session`` (the worker's, or a sanitized run's: ``sanitizer.py``)."""
    try:
        if isinstance(job, EvaluateJob):
            return _evaluate(session, job)
        if isinstance(job, PrepareJob):
            t0 = time.perf_counter()
            session.prepare(job.family, job.problem, job.input_seed)
            return Outcome(Status.OK, stage_seconds={"prepare": time.perf_counter() - t0})
        if isinstance(job, RetimeJob):
            return _retime(session, job)
        if isinstance(job, CeilingsJob):
            return measure_ceilings(session, job)
        return Outcome(Status.RUNTIME_ERROR, f"unknown job {type(job).__name__}")
    except Exception as exc:
        status, sticky = classify(exc)
        log.debug("job failed: %s", traceback.format_exc())
        text = f"{type(exc).__name__}: {exc}"
        outcome = Outcome(status, text[-8000:] if status is Status.HARNESS_ERROR else text[:2000], fatal=sticky)
        return failed_reply(job, outcome)


def _evaluate(session: GpuSession, job: EvaluateJob) -> Outcome:
    stages: dict[str, float] = {}
    t0 = time.perf_counter()
    st = session.prepare(job.family, job.problem, job.input_seed)
    stages["prepare"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    probing = job.time and job.cutoff_ms is not None
    first_ms, first_clocks = 0.0, None
    try:
        launch, metrics = session.launcher(st, job.variant)
        if probing:  # the verification launch is the probe's first sample; a throttled one is flagged
            first_ms, first_clocks = retake_throttled(
                lambda observe: session.verification_launch(st, launch, observe), session.clock_reader, retakes=0
            )
        else:
            session.poison_outputs(st)
            launch()
            session.stream.sync()
    except Exception as exc:
        status, sticky = classify(exc)
        return Outcome(status, f"{type(exc).__name__}: {exc}"[:2000], fatal=sticky)
    problem = session.verify(st)
    stages["verify"] = time.perf_counter() - t0
    if problem:
        return Outcome(Status.WRONG_RESULT, problem, metrics=metrics, stage_seconds=stages)
    if not job.time:
        return Outcome(Status.OK, metrics=metrics, stage_seconds=stages)
    t0 = time.perf_counter()
    probe = _probe(session, launch, first_ms, first_clocks, job.cutoff_ms) if job.cutoff_ms is not None else _Probe()
    if probe.cut:
        stages["time"] = time.perf_counter() - t0
        note = "; ".join(filter(None, (probe.note, _note(probe.clocks))))
        return Outcome(Status.OK, note, probe.samples, metrics, stage_seconds=stages, clocks=probe.clocks)
    # the verification launch was the warm-up
    (samples,), clocks = _timed(session, [launch], dataclasses.replace(job.bench, warmup=0))
    stages["time"] = time.perf_counter() - t0
    note = "; ".join(filter(None, (probe.note, _note(clocks))))
    return Outcome(Status.OK, note, samples, metrics, stage_seconds=stages, clocks=clocks)


@dataclasses.dataclass(frozen=True)
class _Probe:
    """What screening's cut-off made of a variant (``timing.py``): ``cut`` with its measurement
    (``samples`` in ms, ``clocks``), or not; ``note`` says which rule decided where a probe was taken."""

    cut: bool = False
    samples: tuple[float, ...] = ()
    clocks: Clocks | None = None
    note: str = ""


def _probe(
    session: GpuSession, launch: Callable[[], None], first_ms: float, first_clocks: Clocks | None, cutoff_ms: float
) -> _Probe:
    """The cut-off's verdict on a verified variant whose verification launch took ``first_ms`` (the
    clocks seen then: ``first_clocks``)."""
    if first_ms <= cutoff_ms:
        return _Probe()
    if first_ms > FIRST_LAUNCH_CUT * cutoff_ms:
        note = f"cut off on its verification launch ({first_ms:.4g} ms > {FIRST_LAUNCH_CUT:g} x {cutoff_ms:.4g} ms)"
        return _Probe(True, (first_ms,), first_clocks, note)
    (samples,), clocks = _timed(session, [launch], PROBE)
    if min(samples) > cutoff_ms:
        note = (
            f"cut off on its probe ({min(samples):.4g} ms > {cutoff_ms:.4g} ms; verification launch {first_ms:.4g} ms)"
        )
        return _Probe(True, (first_ms, *samples), clocks, note)
    return _Probe(note=f"probed: verification launch {first_ms:.4g} ms > cut-off {cutoff_ms:.4g} ms")


def _timed(
    session: GpuSession, launches: list[Callable[[], None]], bench: BenchConfig, deciding: int | None = None
) -> tuple[list[tuple[float, ...]], Clocks | None]:
    """``session.time_interleaved`` with the device's clocks observed, re-taken while it throttled."""
    return retake_throttled(
        lambda observe: session.time_interleaved(launches, bench, deciding, observe), session.clock_reader
    )


def _note(clocks: Clocks | None) -> str:
    return clocks.note() if clocks else ""


def _retime(session: GpuSession, job: RetimeJob) -> list[Outcome]:
    st = session.prepare(job.family, job.problem, job.input_seed)
    launches = [session.launcher(st, v) for v in job.variants]
    baselines = _torch_baselines(session, st) if job.with_baseline else []
    runnable = [b for b in baselines if isinstance(b, tuple)]
    # the finalists' noise decides when to stop: they choose the winner; the baselines ride along
    timed, clocks = _timed(
        session, [fn for fn, _ in launches] + [fn for _, fn in runnable], job.bench, deciding=len(launches)
    )
    note = _note(clocks)
    outcomes = [Outcome(Status.OK, note, s, m, clocks=clocks) for s, (_, m) in zip(timed, launches, strict=False)]
    samples = iter(timed[len(launches) :])
    for b in baselines:  # in the family's order; one that could not run says why
        timing = Outcome(Status.OK, note, next(samples), baseline=b[0], clocks=clocks) if isinstance(b, tuple) else b
        outcomes.append(timing)
    return outcomes


def _torch_baselines(session: GpuSession, st: ProblemState) -> list[tuple[str, Callable[[], None]] | Outcome]:
    """For each of the family's torch equivalents: (name, launch) once verified, or an Outcome saying
    why not. One Outcome when torch or the family has none."""
    try:
        import torch
    except ImportError:
        return [Outcome(Status.INVALID, "torch is not installed: no baseline")]
    try:
        baselines = st.family.torch_baselines(st.problem)
    except NotImplementedError as exc:
        return [Outcome(Status.INVALID, str(exc))]
    except Exception as exc:
        raise HarnessError.of(exc, f"making the torch baselines of {st.problem.key()}") from exc
    stream = torch.cuda.ExternalStream(int(session.stream.handle))
    with torch.cuda.stream(stream):  # the inputs once, shared by every baseline (none writes them)
        inputs = {k: _on_device(session, st.pristine[k], v) for k, v in st.host_inputs.items()}
        expected = {k: _on_device(session, st.expected[k], v) for k, v in st.expected_host.items()}
    return [_verified(st, stream, inputs, expected, b) for b in baselines]


def _on_device(session: GpuSession, buffer: Any, like: np.ndarray) -> Any:
    """A torch tensor holding the bits of the session's device ``buffer`` (shaped and typed as
    ``like``, viewed through ``_signed``), copied on the device in stream order: no gigabytes
    through the host per re-timing."""
    import torch

    bits = _signed(like)
    tensor = torch.empty(bits.shape, dtype=getattr(torch, bits.dtype.name), device="cuda")
    if bits.nbytes:
        session.copy_to(tensor.data_ptr(), buffer, bits.nbytes)
    return tensor


def _verified(
    st: ProblemState, stream: Any, inputs: dict[str, Any], expected: dict[str, Any], baseline: Baseline
) -> tuple[str, Callable[[], None]] | Outcome:
    """(name, launch) of a torch baseline that reproduces the reference, else a WRONG_RESULT Outcome
    saying how far off it is."""
    import torch

    with torch.cuda.stream(stream):
        outputs = baseline.run(inputs)
    stream.synchronize()
    for name, ref in expected.items():
        got = outputs[name].contiguous().view(ref.dtype)
        wrong = (
            f"shape {tuple(got.shape)} instead of {tuple(ref.shape)}"
            if got.shape != ref.shape
            else disagreement(got, ref, st.tolerance)
        )
        if wrong:
            return Outcome(
                Status.WRONG_RESULT,
                f"{baseline.name}: output {name} differs from the reference: {wrong}",
                baseline=baseline.name,
            )

    def launch() -> None:
        with torch.cuda.stream(stream):
            baseline.run(inputs)

    return baseline.name, launch


def disagreement(got: Any, ref: Any, tolerance: Tolerance | None) -> str:
    """'' when the tensors are bit-identical or (with a family tolerance) float32 / bfloat16 bits
    within it, else how many elements are not (and, with a tolerance, the largest error)."""
    import torch

    if tolerance is None:
        wrong = int((got != ref).sum())
        return f"{wrong} of {ref.numel()} elements" if wrong else ""

    def value(bits: Any) -> Any:  # float32 bits as they are; bfloat16 bits moved to the top half of a float32
        return (
            bits.view(torch.float32) if bits.element_size() == 4 else (bits.to(torch.int32) << 16).view(torch.float32)
        )

    x, y = value(got), value(ref)
    error = (x - y).abs()
    wrong = ~((got == ref) | (error <= tolerance.atol + tolerance.rtol * y.abs()))
    count = int(wrong.sum())
    if not count:
        return ""
    errors = error[wrong]
    nan = int(errors.isnan().sum())
    largest = f"; largest error {float(errors.nan_to_num(nan=0.0).max()):g}" if nan < count else ""
    return (
        f"{count} of {ref.numel()} elements beyond the tolerance (rtol {tolerance.rtol:g}, atol "
        f"{tolerance.atol:g}){largest}" + (f"; {nan} NaN where the reference is not" if nan else "")
    )


def _signed(bits: np.ndarray) -> np.ndarray:
    """A buffer viewed as the integer type of its width that torch handles (torch has no uint16 ops):
    uint8 stays (masks), 2/4/8-byte words become int16/int32/int64 (data bits, indices)."""
    return bits.view({1: np.uint8, 2: np.int16, 4: np.int32, 8: np.int64}[bits.dtype.itemsize])
