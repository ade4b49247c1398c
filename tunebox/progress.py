"""The sweep's progress line for the ``tunebox`` command (stderr): problem i/n, variants done of the
budget, rate, best and time left, rewritten in place on a terminal."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from .search.runs import SweepProgress


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds // 60:.0f} min {seconds % 60:02.0f} s"
    return f"{seconds // 3600:.0f} h {seconds % 3600 // 60:02.0f} min"


def describe(p: SweepProgress) -> str:
    """One progress line: problem i/n, variants done/budget (the problem's, the sweep's), rate, best, time left."""
    rate = f"{p.rate:.1f} variants/s" if p.rate else "- variants/s"
    best = f"best {p.best_ms:.4f} ms" if p.best_ms is not None else "best -"
    left = p.seconds_left
    return (
        f"[{p.index}/{p.problems} {p.problem}] {p.done}/{p.budget} variants (sweep {p.sweep_done}/"
        f"{'~' if p.sweep_estimated else ''}{p.sweep_budget}), {rate}, {best}, "
        f"{'~' + _duration(left) if left is not None else '?'} left"
    )


class Progress:
    """The sweep's live line on stderr (see ``describe``). On a terminal it is rewritten in place with
    ``\\r`` (at most ten times a second); otherwise a line every ``interval`` seconds, and one as each
    problem starts and ends. Quiet or not, ``budgets`` keeps each started problem's budget of variants,
    by name, as its start announced it."""

    def __init__(
        self,
        quiet: bool = False,
        stream: TextIO | None = None,
        interval: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.quiet = quiet
        self._stream = stream
        self.interval = interval
        self.clock = clock
        self._last = float("-inf")
        self._width = 0  # of the line on the terminal, while one is shown
        self.budgets: dict[str, int] = {}

    @property
    def stream(self) -> TextIO:
        return self._stream or sys.stderr

    def __call__(self, p: SweepProgress) -> None:
        if p.record is None:  # a problem starts
            self.budgets[p.problem] = p.budget
        if self.quiet:
            return
        tty = self.stream.isatty()
        now = self.clock()
        edge = p.record is None or p.done >= p.budget  # a problem starts or ends
        if now - self._last < (0.1 if tty else self.interval) and not edge:
            return
        self._last = now
        line = describe(p)
        if tty:
            self.stream.write("\r" + line.ljust(self._width))
            self._width = len(line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def end(self) -> None:
        """End the live line on a terminal (nothing otherwise)."""
        if self._width:
            self.stream.write("\n")
            self.stream.flush()
            self._width = 0
