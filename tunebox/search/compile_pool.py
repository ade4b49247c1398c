"""Starting the compile pool's threads from a sweep so that Ctrl-C stays the main thread's."""

from __future__ import annotations

import functools
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing import resource_tracker


@functools.cache
def _start_resource_tracker() -> None:
    """Once a process (it probes the tracker through a pipe on every call)."""
    resource_tracker.ensure_running()


@contextmanager
def without_ctrl_c() -> Iterator[None]:
    """Around a call that may start compile threads (the pool starts them on a submit) and the compile
    helper processes they start: those block SIGINT, so Ctrl-C reaches the sweep's main thread alone,
    which stops the sweep with the resume hint, and no helper prints a KeyboardInterrupt traceback.
    multiprocessing's resource tracker is started first: starting it unblocks SIGINT in the thread
    that starts it."""
    _start_resource_tracker()
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
