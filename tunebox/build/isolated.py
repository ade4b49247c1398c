"""Compiles in helper processes that are killed when a compile runs past its timeout.

Each thread of the builder's pool owns one helper (started with ``spawn`` on first use, replaced
after a kill), so compiles stay parallel and a hung NVRTC never blocks the sweep.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
import threading
import time
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnProcess
from typing import TYPE_CHECKING

from ..families.base import KernelSource
from ..ipc import requests
from ..records import Status

if TYPE_CHECKING:
    from .nvrtc import BuildResult

log = logging.getLogger(__name__)

STOP_S = 2.0  # seconds the helpers have, together, to exit once told to stop


def _serve(conn: Connection) -> None:
    from .nvrtc import compile_nvrtc

    for job in requests(conn):
        conn.send(compile_nvrtc(*job))


class IsolatedCompiler:
    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._ctx = mp.get_context("spawn")
        self._local = threading.local()
        self._helpers: list[tuple[SpawnProcess, Connection]] = []
        self._lock = threading.Lock()
        self._closed = False

    def compile(self, source: KernelSource, arch: str, options: list[str]) -> BuildResult:
        from .nvrtc import BuildResult

        conn = self._connection()
        if conn is None:
            return BuildResult(source, arch, Status.COMPILE_ERROR, log="the compile pool was closed")
        try:
            conn.send((source, arch, options))
        except OSError:  # its helper killed by an abandoning close
            self._discard()
            return BuildResult(source, arch, Status.COMPILE_ERROR, log="the compiler process died")
        if conn.poll(self.timeout_s):
            try:
                result: BuildResult = conn.recv()  # what ``_serve`` answers a job
                return result
            except EOFError:
                self._discard()
                return BuildResult(source, arch, Status.COMPILE_ERROR, log="the compiler process died")
        self._discard()
        return BuildResult(source, arch, Status.TIMEOUT, log=f"compile killed after {self.timeout_s:.0f} s")

    def close(self, abandon: bool = False) -> None:
        """Stop every helper; a closed compiler compiles nothing more. All are told at once, then given
        ``STOP_S`` between them to exit; any still running is killed. (Told and joined in turn, a
        throughput_default command on the H200 waited 1.0-1.1 s for its sixteen; 0.1 s this way:
        results/benchmarks/command_phases.json.) With ``abandon`` every helper is killed at once, its
        compile unfinished (its result is not wanted: the caller gets a failed build, never cached)."""
        with self._lock:
            helpers, self._helpers = self._helpers, []
            self._closed = True
        if not abandon:
            for _, conn in helpers:
                with contextlib.suppress(OSError):
                    conn.send(None)
        deadline = time.monotonic() + (0.0 if abandon else STOP_S)
        for proc, _ in helpers:
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join()

    def _connection(self) -> Connection | None:
        """This thread's end of its helper's pipe, a helper started where it has none alive; None once
        the compiler is closed (a helper started while it closed is killed, never left behind)."""
        if self._closed:
            return None
        helper = getattr(self._local, "helper", None)
        if helper is None or not helper[0].is_alive():
            parent, child = self._ctx.Pipe()
            proc = self._ctx.Process(target=_serve, args=(child,), daemon=True, name="tunebox-nvrtc")
            proc.start()
            child.close()
            helper = (proc, parent)
            self._local.helper = helper
            with self._lock:
                closed = self._closed
                if not closed:
                    self._helpers.append(helper)
            if closed:
                self._discard()
                return None
        return helper[1]

    def _discard(self) -> None:
        proc, conn = self._local.helper
        self._local.helper = None
        log.info("killing a compiler process (pid %d)", proc.pid)
        proc.kill()
        proc.join()
        conn.close()
        with self._lock:
            self._helpers = [h for h in self._helpers if h[0] is not proc]
