"""Stand-ins for the GPU worker (importable by spawned processes): they speak the worker's protocol
and misbehave on request, so the parent side's isolation can be tested without a GPU; and a stand-in
for the worker's GPU session, so its job handling can be."""

from __future__ import annotations

import os
import time
from types import SimpleNamespace

from tunebox.ipc import requests_read_ahead
from tunebox.records import DeviceInfo, KernelMetrics, Status
from tunebox.runner.protocol import Outcome

DEVICE = DeviceInfo("stand-in", "9.0", "13000", "13.0")
METRICS = KernelMetrics(32, 0, 0)


def obliging(conn) -> None:
    """Answers ``"hang"`` (or a job of family "hang") by hanging, ``"die"`` by dying, ``"sticky"``
    like a poisoned context, ``"slow"`` after a second, and anything else with OK and its pid (so a
    replacement shows); reads jobs ahead as the GPU worker does."""
    conn.send(("ready", DEVICE))
    for job in requests_read_ahead(conn):
        if job == "slow":
            time.sleep(1)
        if job == "hang" or getattr(job, "family", None) == "hang":
            time.sleep(3600)
        if job == "die":
            os._exit(1)
        if job == "sticky":
            conn.send(Outcome(Status.RUNTIME_ERROR, "CUDA_ERROR_ILLEGAL_ADDRESS", fatal=True))
            os._exit(70)
        conn.send(Outcome(Status.OK, message=str(os.getpid())))


def failing_canary(conn) -> None:
    conn.send(("failed", "canary: the compare kernel found differences in equal buffers"))


def ceiling_answers(conn, copy_status: Status = Status.OK) -> None:
    """Answers a ceilings job with fixed samples: a copy of 0.5 ms (``copy_status`` otherwise) and a
    product of 2 ms, with the verification messages the GPU worker gives."""
    conn.send(("ready", DEVICE))
    for _ in requests_read_ahead(conn):
        copy = (
            Outcome(Status.OK, "bit for bit", samples_ms=(0.5,) * 20)
            if copy_status is Status.OK
            else Outcome(copy_status, "copy: 3 of 268435456 words differ from the source, first at 7")
        )
        conn.send(
            [
                copy,
                Outcome(Status.OK, "relative error 2.00e-03 against the float32 product", samples_ms=(2.0, 2.0, 2.1)),
            ]
        )


class StandInSession:
    """Records what the worker asks of a GPU session; misbehaves as told."""

    def __init__(
        self,
        wrong: str = "",
        launch_error: Exception | None = None,
        prepare_error: Exception | None = None,
        clock_reader=None,
        first_ms: float = 1.0,
    ):
        self.wrong, self.launch_error, self.prepare_error = wrong, launch_error, prepare_error
        self.clock_reader = clock_reader  # a ClockReader, or None as where NVML is missing
        self.first_ms = first_ms
        self.batches = 0
        self.benches: list = []  # the BenchConfig of each timing asked for
        self.launches = 0
        self.stream = SimpleNamespace(sync=lambda: None, handle=0)

    def prepare(self, family, problem, seed):
        if self.prepare_error:
            raise self.prepare_error
        return SimpleNamespace(family=None, problem=problem)

    def launcher(self, st, variant):
        def launch():
            self.launches += 1
            if self.launch_error:
                raise self.launch_error

        return launch, METRICS

    def poison_outputs(self, st):
        pass

    def verification_launch(self, st, launch, observe=lambda: None):
        """The launch, timed at ``first_ms`` (the stand-in's verification launch time, ms); the clocks
        observed before and after."""
        observe()
        launch()
        observe()
        return self.first_ms

    def verify(self, st):
        return self.wrong

    def time_interleaved(self, launches, bench, deciding=None, observe=lambda: None):
        """One round of ``bench.min_samples`` samples of 1, 2, ... ms; the clocks observed before and after."""
        self.deciding = deciding
        self.benches.append(bench)
        self.batches += 1
        observe()
        for fn in launches:
            fn()
        observe()
        return [tuple(1.0 + k for k in range(bench.min_samples)) for _ in launches]
