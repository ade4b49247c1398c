"""What one compute-sanitizer tool run said about a variant: parsed from the run's text output.

compute-sanitizer prefixes its own lines with ``=========``: a banner (``COMPUTE-SANITIZER``), each
report (``Invalid __global__ read of size 4 bytes``, ``Error: Race reported between Write access
at ... and Read access at ...``, with the place and thread lines below it), racecheck's ``RACECHECK
SUMMARY: 1 hazard displayed (1 error, 0 warnings)`` and every tool's closing ``ERROR SUMMARY: 1
error``. An error counts as a report; racecheck's warnings (hazards the programming model allows in
warp-synchronous code) do not, but their lines are kept.
"""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass

OUTCOME_MARK = "tunebox-sanitized-outcome: "  # the child's line carrying its job's outcome (JSON)
FIRST_LINES = 8  # report lines kept

_PREFIX = "========="
_ERRORS = re.compile(r"ERROR SUMMARY: (\d+) errors?")
_HAZARDS = re.compile(r"RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?, \d+ warnings?\)")


class Verdict(enum.StrEnum):
    PASSED = "passed"
    REPORTED = "reported"  # the tool reported an error: the variant is never stored
    SKIPPED = "skipped"  # the tool could not judge the variant (``lines`` says why)


@dataclass(frozen=True)
class ToolRun:
    """One tool's run: its verdict, the errors it counted, its first report lines (without the
    prefix; when skipped, the reason) and its wall time in seconds."""

    tool: str
    verdict: Verdict
    errors: int = 0
    lines: tuple[str, ...] = ()
    seconds: float = 0.0


def parse(tool: str, output: str, error_exit: bool, seconds: float) -> ToolRun:
    """The run of ``tool`` whose combined stdout and stderr is ``output``; ``error_exit``: the
    process ended with the ``--error-exitcode`` status (an error even if no count can be read)."""
    text = output.splitlines()
    said = [line[len(_PREFIX) :].strip() for line in text if line.startswith(_PREFIX)]
    counts = [int(m.group(1)) for line in said for m in [_ERRORS.search(line) or _HAZARDS.search(line)] if m]
    details = [line for line in said if line and line != "COMPUTE-SANITIZER" and not _ERRORS.search(line)]
    errors = max([*counts, int(error_exit)])
    if errors:
        return ToolRun(tool, Verdict.REPORTED, errors, tuple(details[:FIRST_LINES]), seconds)
    if not counts:
        tail = " / ".join(line.strip() for line in text[-3:] if line.strip()) or "no output"
        return ToolRun(tool, Verdict.SKIPPED, 0, (f"no summary from compute-sanitizer: {tail}",), seconds)
    outcome = next((json.loads(line[len(OUTCOME_MARK) :]) for line in text if line.startswith(OUTCOME_MARK)), None)
    if outcome is None or outcome["status"] != "ok":
        why = f"{outcome['status']}: {outcome['message']}" if outcome else "it ended without an outcome"
        return ToolRun(tool, Verdict.SKIPPED, 0, (f"the sanitized run failed outside any report ({why})",), seconds)
    return ToolRun(tool, Verdict.PASSED, 0, tuple(details[:FIRST_LINES]), seconds)
