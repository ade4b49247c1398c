"""The job loop of tunebox's helper processes (GPU worker, compiler), over a private pipe."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import Any


def requests(conn: Connection) -> Iterator[Any]:
    """Jobs from ``conn`` until the other end closes it or sends None."""
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        yield job


def requests_read_ahead(conn: Connection) -> Iterator[Any]:
    """``requests`` with a reader thread that takes each job off the pipe as it arrives, so the
    sender never blocks on a full pipe (and cannot miss its timeout) while this process is busy."""
    jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def pump() -> None:
        for job in requests(conn):
            jobs.put(job)
        jobs.put(None)

    threading.Thread(target=pump, daemon=True, name="tunebox-job-reader").start()
    while (job := jobs.get()) is not None:
        yield job
