"""SweepLock: one holder per directory, refusals name the lock file and the holder."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tunebox.store.lock import SweepLock, SweepLocked


def test_a_second_holder_is_refused_at_once_naming_the_lock_and_the_holder(tmp_path: Path) -> None:
    directory = tmp_path / "sweeps" / "small"
    with SweepLock(directory) as first:
        assert first.path == directory / "sweep.lock"
        holder = json.loads(first.path.read_text())
        assert holder["pid"] == os.getpid() and holder["started"] and "command" in holder
        with pytest.raises(SweepLocked) as refused:
            SweepLock(directory).acquire()
        message = str(refused.value)
        assert f"another sweep is running in {directory}" in message
        assert f"lock {directory / 'sweep.lock'} held by pid {os.getpid()}, since {holder['started']}" in message
        assert "run this command again" in message
    with SweepLock(directory):  # released on exit; the file stays and is reused
        pass
    assert (directory / "sweep.lock").exists()


def test_a_holder_still_starting_is_named_as_such(tmp_path: Path) -> None:
    lock = SweepLock(tmp_path).acquire()
    (tmp_path / "sweep.lock").write_text("")  # the holder has not written its pid yet
    with pytest.raises(SweepLocked, match="held by a sweep still starting .in this process or another"):
        SweepLock(tmp_path).acquire()
    lock.release()
    lock.release()  # twice is harmless
