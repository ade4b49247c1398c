"""The sweep loops' compile queue (``search/compiling.py``): variants go on to the device as their
compiles finish, first done first; one without a compile (asked again while its twin is in flight)
only from the front."""

from __future__ import annotations

import threading
from concurrent.futures import Future

from tunebox.search.compiling import CompileQueue


def done() -> Future:
    future: Future = Future()
    future.set_result(None)
    return future


def test_the_first_done_goes_first_whatever_was_asked_before_it():
    queue: CompileQueue[str] = CompileQueue()
    slow, fast = Future(), done()
    queue.add("slow", slow)
    queue.add("fast", fast)
    first = queue.take_done()
    assert first is not None and first.item == "fast" and len(queue) == 1
    assert queue.take_done() is None  # the slow one is still compiling
    slow.set_result(None)
    last = queue.take_done()
    assert last is not None and last.item == "slow" and len(queue) == 0


def test_an_entry_without_a_compile_goes_only_from_the_front():
    queue: CompileQueue[str] = CompileQueue()
    original = Future()
    queue.add("original", original)
    queue.add("twin", None)
    assert queue.take_done() is None  # the twin waits behind its original
    original.set_result(None)
    assert [queue.take_done().item, queue.take_done().item] == ["original", "twin"]


def test_wait_any_returns_once_a_compile_finishes():
    queue: CompileQueue[str] = CompileQueue()
    running = Future()
    queue.add("a", running)
    threading.Timer(0.05, running.set_result, (None,)).start()
    queue.wait_any()
    assert running.done() and queue.take_done().item == "a"


def test_drain_hands_back_every_entry_in_ask_order():
    queue: CompileQueue[str] = CompileQueue()
    for name in ("a", "b", "c"):
        queue.add(name, Future())
    assert [e.item for e in queue.drain()] == ["a", "b", "c"] and len(queue) == 0
