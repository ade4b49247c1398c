"""The sweep loops' variants being compiled (``search/loop.py``, ``search/distributed.py``), in the
order they were asked, each handed on to the device once its compile is done: the earliest asked of
those done goes first, so a slow compile does not hold back those started after it."""

from __future__ import annotations

from collections import deque
from concurrent import futures
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Generic, TypeVar

from ..build.nvrtc import BuildResult

T = TypeVar("T")


@dataclass(frozen=True)
class Compiling(Generic[T]):
    """A variant in the compile pool: the loop's ``item`` for it and its compile (None: nothing to
    compile, a configuration asked again while its twin is in flight)."""

    item: T
    future: Future[BuildResult | None] | None


class CompileQueue(Generic[T]):
    """Variants in ask order with their compiles. ``take_done`` hands on the earliest asked whose
    compile is done; one without a compile only from the front, so after its twin."""

    def __init__(self) -> None:
        self._entries: deque[Compiling[T]] = deque()

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, item: T, future: Future[BuildResult | None] | None) -> None:
        self._entries.append(Compiling(item, future))

    def take_done(self) -> Compiling[T] | None:
        """The earliest asked entry whose compile is done (or the front one without a compile),
        removed; None while every compile is still running."""
        for i, entry in enumerate(self._entries):
            if entry.future.done() if entry.future is not None else i == 0:
                del self._entries[i]
                return entry
        return None

    def wait_any(self) -> None:
        """Blocks until one of the running compiles is done."""
        running = [e.future for e in self._entries if e.future is not None]
        if running:
            futures.wait(running, return_when=futures.FIRST_COMPLETED)

    def drain(self) -> list[Compiling[T]]:
        """Every entry, removed (a sweep past its deadline cancels their compiles)."""
        entries = list(self._entries)
        self._entries.clear()
        return entries
