"""Named validity rules: what a template's ``violations`` (and the tensor-map validator) checks.

A check collects its rules in a ``Rules``: each ``require`` names a rule (snake_case, unique within
its owner), says whether it holds and why not (a message, or a callable where the message costs more
than formatting a few numbers: called only when the rule breaks), and returns whether it held, so
that a rule another one depends on can gate it. ``broken`` lists the broken rules' messages in the
order they were required (a TMA template adds its tensor maps' there, from ``tma.violations``, whose
own ``Rules`` has the owner ``tensor_map``).

``recording()`` observes every ``require`` evaluated inside it as (owner, rule, held): the
conformance test shows each rule both holding and breaking. Outside it a ``Rules`` costs one check
per rule.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from .limits import MAX_SHARED_BYTES

Outcome = tuple[str, str, bool]  # (owner, rule, held)

_RECORDING: ContextVar[set[Outcome] | None] = ContextVar("tunebox_rules_recording", default=None)


class Rules:
    """The outcomes of one check of ``owner``'s rules (a template's name, or ``tensor_map``)."""

    __slots__ = ("owner", "broken", "_seen")

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.broken: list[str] = []
        self._seen = _RECORDING.get()

    def require(self, rule: str, ok: bool, why: str | Callable[[], str]) -> bool:
        """Rule ``rule`` holds when ``ok``; else ``why`` (or what it returns) joins ``broken``."""
        if self._seen is not None:
            self._seen.add((self.owner, rule, ok))
        if not ok:
            self.broken.append(why if isinstance(why, str) else why())
        return ok


@contextmanager
def recording() -> Iterator[set[Outcome]]:
    """The set of (owner, rule, held) of every rule required inside the block (this context only)."""
    seen: set[Outcome] = set()
    token = _RECORDING.set(seen)
    try:
        yield seen
    finally:
        _RECORDING.reset(token)


def whole_elements(rules: Rules, vec_bytes: int, size: int) -> bool:
    """The rule ``vec_bytes_whole_elements`` (templates moving ``vec_bytes`` vectors): a vector holds
    whole ``size``-byte elements. Returns whether it held."""
    return rules.require(
        "vec_bytes_whole_elements",
        vec_bytes % size == 0,
        f"vec_bytes={vec_bytes} is not a multiple of the {size}-byte element",
    )


def shared_memory_fits(rules: Rules, shared_bytes: int, remedy: str = "") -> bool:
    """The rule ``shared_memory_fits``: a block's dynamic shared memory within what one block may opt
    in to (``remedy``, when given, ends the message). Returns whether it held."""
    return rules.require(
        "shared_memory_fits",
        shared_bytes <= MAX_SHARED_BYTES,
        f"{shared_bytes} bytes of shared memory exceed the {MAX_SHARED_BYTES} a block may have" + remedy,
    )
