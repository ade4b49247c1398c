"""The command line's one-line messages for errors that are not tunebox's own: a failed file operation
(what failed on which path, and what to do) and input nested past Python's recursion limit."""

from __future__ import annotations

import errno
import os
from pathlib import Path

_NOT_ALLOWED = "give a path this user may read or write, or change its permissions"
_WHAT_TO_DO = {
    errno.EROFS: "give a path on a writable file system",
    errno.EACCES: _NOT_ALLOWED,
    errno.EPERM: _NOT_ALLOWED,
    errno.ENOENT: "check the path",
    errno.ENOSPC: "free some space, then run the same command again",
}


def file_error(exc: OSError) -> str:
    """``<path>: <what failed>; <what to do>`` for a failed file operation (``exc.filename`` set). A path
    through a file (``NotADirectoryError``, or ``FileExistsError`` making a directory) names that file."""
    path = Path(os.fsdecode(exc.filename))
    if exc.errno in (errno.ENOTDIR, errno.EEXIST) and (blocker := _file_in_the_way(path)) is not None:
        return f"{blocker}: a file where a directory is needed; give a directory's path, or move the file"
    what = (exc.strerror or type(exc).__name__).lower()
    return f"{path}: {what}; {_WHAT_TO_DO.get(exc.errno or 0, 'check the path, then run the same command again')}"


def _file_in_the_way(path: Path) -> Path | None:
    """The first existing part of ``path`` (itself last) that is not a directory, if any."""
    for part in (*reversed(path.parents), path):
        if part.exists() and not part.is_dir():
            return part
    return None


def raised_by_json(exc: RecursionError) -> bool:
    """Whether ``exc`` was raised inside the json module (its input nested too deeply)."""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    return str(tb.tb_frame.f_globals.get("__name__", "")).split(".")[0] == "json"
