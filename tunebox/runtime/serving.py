"""What ``tunebox.launch`` serves at a problem: the tuned kernel, or the library call a user would make
instead (the operation's main torch baseline, writing the caller's outputs in place).

The rule (``use="auto"``): the kernel runs where a tunebox variant is known to beat the library at this
very problem (an exact or raced answer whose winner was timed faster than the library call beside it); the
library call runs everywhere else, when it can: the arrays are torch tensors and the operation's main
baseline has an in-place form (``Baseline.into``). Otherwise the kernel runs, and the answer says why.
``use="tunebox"`` always runs the kernel, ``use="library"`` always the library call (or raises).
Arrays whose addresses are not ``ALIGNMENT``-byte aligned (views from an offset) never reach a kernel:
the library call runs, or the launch is refused with what to pass instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import InvalidProblem
from ..families.base import Baseline, BufferSpec, Problem
from ..families.contract import Family
from .arrays import ALIGNMENT
from .lookup import LookupResult

USES = ("auto", "tunebox", "library")


@dataclass(frozen=True)
class Served:
    """What one launch ran (the tuned kernel or the library call), the lookup behind it, and why."""

    ran: Literal["kernel", "library"]
    lookup: LookupResult
    library: str | None  # the library call that ran (``ran == "library"``)
    explanation: str

    @property
    def source(self) -> str:
        """``library``, or where the kernel's configuration came from (exact, nearest, default)."""
        return "library" if self.ran == "library" else self.lookup.source

    @property
    def config(self) -> dict[str, Any]:
        """The kernel configuration the lookup chose (what ran when ``ran == "kernel"``)."""
        return self.lookup.config


def library_form(family: Family[Any], problem: Problem) -> Baseline | None:
    """The operation's main library call for ``problem`` if it can write the caller's outputs in place."""
    try:
        main = family.torch_baselines(problem)[0]
    except (NotImplementedError, ImportError, IndexError):
        return None
    return main if main.into is not None else None


def check_use(use: str) -> None:
    """A launch's ``use`` is one of ``USES``; else InvalidProblem naming them."""
    if use not in USES:
        raise InvalidProblem(f"use must be one of {USES}, got {use!r}")


def decide(
    answer: LookupResult, library: Baseline | None, torch_arrays: bool, use: str, misaligned: tuple[str, ...] = ()
) -> Served:
    """Kernel or library call for one problem (see the module doc); ``misaligned``: the names of the
    arrays whose addresses no kernel may take."""
    available = library is not None and torch_arrays
    if misaligned:
        where = f"{', '.join(misaligned)} {'is' if len(misaligned) == 1 else 'are'} not {ALIGNMENT}-byte aligned"
        if available and use != "tunebox":
            assert library is not None
            return Served("library", answer, library.name, f"{library.name} ({where}: tunebox's kernels need it)")
        raise InvalidProblem(
            f"{answer.family}: {where} (a view from an offset?); tunebox's kernels read and write {ALIGNMENT}-byte "
            "vectors: pass arrays at aligned addresses (a fresh allocation, or a copy of the view)"
        )
    if use == "library" and not available:
        why = "the arrays are not torch tensors" if not torch_arrays else "the library has no in-place form here"
        raise InvalidProblem(f"{answer.family}: use='library' cannot serve this problem: {why}")
    if use == "tunebox":
        return Served("kernel", answer, None, f"tunebox kernel (asked for): {answer.explanation}")
    if use == "auto" and answer.beats_library:
        how = f"tunebox kernel, faster than {answer.library} here ({answer.median_ms:.4g} < {answer.library_ms:.4g} ms)"
        return Served("kernel", answer, None, f"{how}: {answer.explanation}")
    if available:
        assert library is not None
        why = "asked for" if use == "library" else "no tunebox variant is known to beat it at this problem"
        return Served("library", answer, library.name, f"{library.name} ({why}; lookup: {answer.explanation})")
    why = "the arrays are not torch tensors" if not torch_arrays else "no in-place library form for this problem"
    return Served("kernel", answer, None, f"tunebox kernel ({why}): {answer.explanation}")


def library_call(library: Baseline, buffers: tuple[BufferSpec, ...]) -> Callable[[Mapping[str, Any]], None]:
    """A callable running ``library`` in place on a call's tensors (buffer name -> torch tensor)."""
    assert library.into is not None
    into = library.into
    inputs = tuple(b.name for b in buffers if b.role == "input")
    outputs = tuple(b.name for b in buffers if b.role == "output")

    def run(call: Mapping[str, Any]) -> None:
        into({name: call[name] for name in inputs}, {name: call[name] for name in outputs})

    return run
