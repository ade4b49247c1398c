"""The job loop of tunebox's helper processes (GPU worker, compiler), over a private pipe."""

from __future__ import annotations

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
