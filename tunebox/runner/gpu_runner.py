"""Parent side of the GPU worker: start it, send jobs, enforce timeouts, replace it after faults.

The sweep process never touches CUDA. A hung job is killed after its timeout (the worker's whole
process group), a sticky CUDA error or a death replaces the worker, and a fresh worker must pass
its canary before it is given work. Workers are also recycled every ``recycle_after`` jobs.

Jobs may be queued ahead (``submit``, then ``next_reply`` in order), so the worker starts the next
job while the sweep does its bookkeeping; jobs queued behind one that killed the worker are sent
again to its replacement.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import signal
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, cast, overload

from ..errors import DeviceUnavailable
from ..records import DeviceInfo, Status
from . import worker
from .probe import unavailable_reason
from .protocol import CeilingsJob, EvaluateJob, Outcome, PrepareJob, RetimeJob, failed_reply

log = logging.getLogger(__name__)


class GpuRunner:
    def __init__(
        self,
        job_timeout_s: float = 60.0,
        start_timeout_s: float = 180.0,
        recycle_after: int = 500,
        target: Callable[[Connection], None] = worker.main,
    ) -> None:
        """``target`` is the worker's entry point (``worker.main``; tests pass stand-ins)."""
        self.target = target
        self.job_timeout_s = job_timeout_s
        self.start_timeout_s = start_timeout_s
        self.recycle_after = recycle_after
        self._ctx = mp.get_context("spawn")
        self._proc: Any = None
        self._conn: Any = None
        self._jobs = 0
        self._queued: deque[tuple[Any, float]] = deque()  # (job, timeout s) sent, reply not yet read
        self.replacements = 0

    def start(self) -> DeviceInfo:
        """Start a worker and wait for its canary; raises DeviceUnavailable if it cannot."""
        parent, child = self._ctx.Pipe()
        self._proc = self._ctx.Process(target=self.target, args=(child,), daemon=True, name="tunebox-gpu-worker")
        self._proc.start()
        child.close()
        self._conn, self._jobs = parent, 0
        if not parent.poll(self.start_timeout_s):
            self._kill()
            raise DeviceUnavailable(f"the GPU worker did not start within {self.start_timeout_s:.0f} s")
        try:
            kind, payload = parent.recv()
        except EOFError:
            kind, payload = "failed", "the GPU worker exited during start-up"
        if kind != "ready":
            self._kill()
            raise DeviceUnavailable(f"no usable GPU: {unavailable_reason(str(payload))}")
        return cast(DeviceInfo, payload)  # the worker's ("ready", DeviceInfo)

    @overload
    def run(self, job: EvaluateJob | PrepareJob, timeout_s: float | None = None) -> Outcome: ...

    @overload
    def run(self, job: RetimeJob | CeilingsJob, timeout_s: float | None = None) -> list[Outcome]: ...

    @overload
    def run(self, job: object, timeout_s: float | None = None) -> Outcome | list[Outcome]: ...

    def run(self, job: object, timeout_s: float | None = None) -> Outcome | list[Outcome]:
        """Send one job and wait for its reply (an Outcome or a list of them); nothing may be queued."""
        if self._queued:
            raise RuntimeError("GpuRunner.run with jobs queued: read their replies first")
        self.submit(job, timeout_s)
        return self.next_reply()

    def submit(self, job: Any, timeout_s: float | None = None) -> None:
        """Queue a job behind those already sent; ``timeout_s`` counts from when its turn comes."""
        if self._proc is None or not self._proc.is_alive():
            self._replace(reason="" if self._proc is None else "worker died")
        elif not self._queued and self._jobs >= self.recycle_after:
            self._replace(reason="recycle")
        self._queued.append((job, self.job_timeout_s if timeout_s is None else timeout_s))
        self._send(job)

    def next_reply(self) -> Outcome | list[Outcome]:
        """The reply to the oldest queued job; a hang, death or sticky error replaces the worker
        and re-sends the jobs queued behind it."""
        _, timeout = self._queued[0]
        if not self._conn.poll(timeout):
            return self._lost(
                f"job exceeded {timeout:.0f} s",
                Outcome(Status.TIMEOUT, f"killed after {timeout:.0f} s without an answer", fatal=True),
            )
        try:
            reply: Outcome | list[Outcome] = self._conn.recv()  # what the worker answers a job
        except (EOFError, OSError):
            return self._lost(
                "worker died", Outcome(Status.RUNTIME_ERROR, "the GPU worker died during the job", fatal=True)
            )
        if reply.fatal if isinstance(reply, Outcome) else any(o.fatal for o in reply):
            return self._lost("sticky CUDA error", reply)
        self._queued.popleft()
        return reply

    def _lost(self, reason: str, reply: Outcome | list[Outcome]) -> Outcome | list[Outcome]:
        job, _ = self._queued.popleft()
        self._replace(reason=reason)
        return failed_reply(job, reply) if isinstance(reply, Outcome) else reply

    def _send(self, job: Any) -> None:
        self._jobs += 1
        self._conn.send(job)

    def close(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            try:
                self._conn.send(None)
                self._proc.join(5)
            except (OSError, BrokenPipeError):
                pass
        self._kill()

    def _replace(self, reason: str) -> None:
        if reason:
            log.info("replacing the GPU worker: %s", reason)
            self.replacements += 1
        self._kill()
        self.start()
        for job, _ in self._queued:
            self._send(job)

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.is_alive():
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                proc.kill()
        proc.join(10)
        if self._conn is not None:
            self._conn.close()
