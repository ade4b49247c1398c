"""Learn each family's race portfolio from the recorded sweeps (issue 16, tuned on first use).

    python scripts/portfolio.py OUT.json RECORDING.jsonl.gz... [--keep FAMILY]...   (OUT: results/portfolios.json)

For every recorded problem, the configurations whose verified median is within ``WITHIN`` of the
problem's best "cover" it; a greedy set cover then picks, per family, the fewest configurations that
cover every problem (ties: the configuration with the lower summed slowdown). The file lists them in
the order picked, with the problems each covers, and is read by ``tunebox.runtime.first_use.portfolio``.
``--keep FAMILY`` leaves that family's portfolio as OUT has it (a portfolio measured to serve shapes
outside the recordings better than the one learned now; results/README says which and why).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

from tunebox.records import Status, canonical_json
from tunebox.store.evallog import EvalLog

WITHIN = 0.03  # a configuration covers a problem when it is at most 3% slower than the problem's best


def learn(recordings: list[Path]) -> dict[str, dict[str, object]]:
    medians: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for path in recordings:
        for r in EvalLog(path).read():
            if r.status is Status.OK and r.timing and r.config and r.phase == "screen":
                problem, config = canonical_json(r.problem), canonical_json(r.config)
                old = medians[r.family][problem].get(config)
                medians[r.family][problem][config] = min(r.timing.median_ms, old or r.timing.median_ms)
    families: dict[str, dict[str, object]] = {}
    for family, problems in sorted(medians.items()):
        slowdown = {(p, c): ms / min(times.values()) - 1 for p, times in problems.items() for c, ms in times.items()}
        uncovered, picked = set(problems), []
        while uncovered:
            configs = {c for (p, c) in slowdown if p in uncovered}
            covers = {c: {p for p in uncovered if slowdown.get((p, c), 1.0) <= WITHIN} for c in configs}
            best = max(configs, key=lambda c: (len(covers[c]), -sum(slowdown.get((p, c), 1.0) for p in uncovered), c))
            picked.append({"config": json.loads(best), "covers": sorted(covers[best])})
            uncovered -= covers[best]
        families[family] = {"configs": [p["config"] for p in picked], "covers": [p["covers"] for p in picked]}
        print(f"{family}: {len(picked)} configurations cover {len(problems)} problems within {WITHIN:.0%}")
    return families


def main(argv: list[str]) -> None:
    out, rest = Path(argv[0]), argv[1:]
    keep = {rest[i + 1] for i, a in enumerate(rest) if a == "--keep"}
    logs = [Path(a) for i, a in enumerate(rest) if a != "--keep" and (i == 0 or rest[i - 1] != "--keep")]
    families = learn(logs)
    if keep:
        kept = json.loads(out.read_text())["families"]
        families.update({family: kept[family] for family in sorted(keep)})
        for family in sorted(keep):  # the learned line above is not what is written for it
            print(f"{family}: kept as {out} has it ({len(kept[family]['configs'])} configurations)")
    options = "".join(f" --keep {family}" for family in sorted(keep))
    doc = {
        "about": f"per family, the fewest configurations within {WITHIN:.0%} of every recorded problem's best",
        "command": f"python scripts/portfolio.py results/portfolios.json results/recordings/*.jsonl.gz{options}",
        "families": families,
    }
    out.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
