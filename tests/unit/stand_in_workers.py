"""Stand-ins for the GPU worker (importable by spawned processes): they speak the worker's protocol
and misbehave on request, so the parent side's isolation can be tested without a GPU."""

from __future__ import annotations

import os
import time

from tunebox.ipc import requests_read_ahead
from tunebox.records import DeviceInfo, Status
from tunebox.runner.protocol import Outcome

DEVICE = DeviceInfo("stand-in", "9.0", "13000", "13.0")


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
