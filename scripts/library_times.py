"""Fill in the library time beside winners stored before the winners database kept it (schema 1 -> 2).

    python scripts/library_times.py DB RECORDING.jsonl...

A sweep re-times its finalists and the library calls (the family's torch baselines) interleaved on the
same inputs, and logs that phase whole. For each winner without a library time, the phase that holds
its own record (same problem, configuration and median) gives the fastest library call that passed
verification; the winner row is rewritten with it through ``WinnersDB.put``'s own checks. Winners whose
phase is not in the recordings are left as they are and listed.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

from tunebox.records import fastest
from tunebox.search.finalists import final_phases
from tunebox.store.evallog import EvalLog
from tunebox.store.winners import WinnersDB


def main(db_path: Path, recordings: list[Path]) -> None:
    history = [r for path in recordings for r in EvalLog(path).read()]
    with WinnersDB(db_path) as db:  # upgrades a version-1 file
        winners = [w for w in db.all() if w.library is None]
    filled = 0
    connection = sqlite3.connect(db_path)
    with connection:
        for w in winners:
            phase = next(
                (
                    phase
                    for phase in final_phases(history, w.key.problem_key)
                    if any(r.config == w.config and r.median_ms == w.median_ms for r in phase)
                ),
                None,
            )
            library = fastest(r for r in phase or [] if r.baseline)
            if library is None:
                print(f"{w.key.family} {w.key.problem_key}: no timed library call in the recordings; left alone")
                continue
            connection.execute(
                "UPDATE winners SET library = ?, library_ms = ? WHERE family = ? AND family_hash = ? "
                "AND problem_key = ? AND device_name = ? AND driver_version = ? AND nvrtc_version = ?",
                (
                    library.baseline,
                    library.median_ms,
                    w.key.family,
                    w.key.family_hash,
                    w.key.problem_key,
                    w.key.device_name,
                    w.key.driver_version,
                    w.key.nvrtc_version,
                ),
            )
            filled += 1
            ratio = library.median_ms / w.median_ms if library.median_ms else float("nan")
            print(f"{w.key.family} {w.key.problem_key[:90]}: {ratio:.2f}x {library.baseline}")
    connection.close()
    print(f"{filled} of {len(winners)} winners without a library time got one")


if __name__ == "__main__":
    main(Path(sys.argv[1]), [Path(p) for p in sys.argv[2:]])
