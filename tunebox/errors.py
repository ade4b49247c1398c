"""Error hierarchy. Every message says what was wrong and what to do next."""

from __future__ import annotations

import traceback


class TuneboxError(Exception):
    """Base of every error tunebox raises on purpose."""


class SpaceError(TuneboxError):
    """A sweep is malformed or names something that does not exist: its file (TOML), or the search settings
    and options given with it (``tunebox.tune``'s arguments, the command line's)."""


class InvalidProblem(TuneboxError):
    """A problem description is impossible (negative extent, unknown dtype, ...), or so is how it is to be
    served (``tunebox.launch``'s arrays, stream and options, a ``Launcher``'s race settings or policy)."""


class InvalidConfig(TuneboxError):
    """A configuration value lies outside its declared domain, or breaks a validity rule."""


class CompileError(TuneboxError):
    """NVRTC rejected a rendered variant; ``log`` holds the compiler output."""

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log


class DeviceUnavailable(TuneboxError):
    """No usable CUDA device: a sweep can replay a recording instead (``--backend replay``); launching
    and measuring need a GPU host."""


class DatabaseError(TuneboxError):
    """The winners database or an evaluation log is unreadable, tampered or of another schema."""


class MeasurementError(TuneboxError):
    """A measurement could not be taken: its result failed verification, or the device faulted."""


class ReplayMiss(TuneboxError):
    """The replay backend holds no recorded measurement for a requested variant."""


class HarnessError(TuneboxError):
    """tunebox's own Python (a family's reference, inputs or baselines; the engine) raised: a bug to
    fix, not a kernel fault. It keeps the worker, stops the sweep with the traceback, and is never
    stored as a variant's result."""

    @classmethod
    def of(cls, exc: BaseException, doing: str) -> HarnessError:
        text = "".join(traceback.format_exception(exc))
        return cls(f"tunebox's own code failed while {doing} (not a kernel fault):\n{text}")
