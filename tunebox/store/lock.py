"""One sweep per results directory at a time: an exclusive ``flock`` on ``<dir>/sweep.lock``.

The lock belongs to the open file, so the kernel drops it when its process ends, however it ends
(a killed sweep never leaves a stale lock). The file itself stays (removing it would let a third
sweep lock a new file while a second one still holds the old one); it names the last holder: pid,
start time and command line, read back when another sweep is refused.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import TuneboxError

LOCK_NAME = "sweep.lock"


class SweepLocked(TuneboxError):
    """Another sweep (another process, or a thread of this one) holds the results directory's sweep lock."""


class SweepLock:
    """The exclusive lock of a sweep's results directory; use as a context manager.

    ``acquire`` never waits: it raises ``SweepLocked`` naming the lock file and the process that
    holds it."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.path = self.directory / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> SweepLock:
        if self._fd is not None:
            return self
        self.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _describe(_read(fd))
            os.close(fd)
            raise SweepLocked(
                f"another sweep is running in {self.directory} (lock {self.path} held by {holder}); "
                "wait for it to finish or stop it, then run this command again (it resumes from the "
                "evaluation log)"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        me = {
            "pid": os.getpid(),
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": " ".join(sys.argv),
        }
        data = (json.dumps(me) + "\n").encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
        return self

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the last descriptor of the open file drops the flock

    def __enter__(self) -> SweepLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read(fd: int) -> dict[str, Any]:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _describe(holder: dict[str, Any]) -> str:
    pid = holder.get("pid")
    if not isinstance(pid, int):
        return "a sweep still starting (in this process or another: its details are not written yet)"
    parts = [f"pid {pid}"]
    if holder.get("started"):
        parts.append(f"since {holder['started']}")
    if holder.get("command"):
        parts.append(f"running `{holder['command']}`")
    return ", ".join(parts)
