"""A launch bound to one call's torch tensors (``Launcher.bind``, ``tunebox.bind``), for a loop that launches
on the same tensors again and again.

Binding runs the call once through ``Launcher`` (which plans it and keeps its fast entry, ``fast_path.py``);
each call of the bound launch then reads back only what could have changed under the same tensor objects
(each one's address, shape and contiguity, and torch's current stream where none was named) and runs the
fast entry: no key is built, hashed or looked up. Anything else (a tensor resized, re-pointed or
transposed in place, another current stream, a plan that runs only on its first addresses, a call the
fast path cannot take) goes through the full path, which is always right.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .fast_path import FastEntry, current_stream
from .serving import Served

FullPath = Callable[[], Served]
"""The call bound, through ``Launcher`` (every check, the plan looked up)."""


@dataclass(frozen=True)
class FastSource:
    """Where a bound call's fast entry lives: ``entry()`` the launcher's current one, ``version()`` how often
    the launcher has emptied its fast entries (plans replaced, as by a background race's winner)."""

    entry: Callable[[], FastEntry | None]
    version: Callable[[], int]


class BoundLaunch:
    """Calls the fast entry on ``arrays`` while each tensor keeps the address, shape and contiguity it had
    when bound (and, with no stream named, torch's current stream is still ``stream``); else ``full_path``.
    When ``fast``'s version moves, the next call takes the full path and the entry is fetched again.
    Without ``fast`` (the call has no fast entry): ``full_path`` always."""

    def __init__(
        self,
        arrays: Mapping[str, Any],
        stream: int,
        named_stream: bool,
        full_path: FullPath,
        fast: FastSource | None = None,
    ) -> None:
        self._arrays = dict(arrays)
        self._stream = stream
        self._follow_stream = not named_stream
        self._full_path = full_path
        self._fast = fast
        self._entry = fast.entry() if fast else None
        self._version = fast.version() if fast else 0
        tensors = tuple(self._arrays.values()) if fast else ()  # torch tensors: the call has a fast entry
        self._addresses = tuple(t.data_ptr() for t in tensors)
        self._checks = tuple(zip(tensors, (t.shape for t in tensors), self._addresses, strict=True))
        self._device = tensors[0].get_device() if tensors else -1

    def __call__(self) -> Served:
        """Launch again on the bound tensors; says what ran, as ``tunebox.launch`` does."""
        fast = self._fast
        if fast is None:
            return self._full_path()
        if fast.version() != self._version:  # plans replaced: the full path makes the new entry
            served = self._full_path()
            self._entry, self._version = fast.entry(), fast.version()
            return served
        entry = self._entry
        if entry is not None and self._unchanged() and entry.run(self._arrays, self._stream, self._addresses):
            return entry.served
        return self._full_path()

    def _unchanged(self) -> bool:
        for tensor, shape, address in self._checks:
            if tensor.data_ptr() != address or tensor.shape != shape or not tensor.is_contiguous():
                return False
        return not self._follow_stream or current_stream(sys.modules["torch"], self._device) == self._stream
