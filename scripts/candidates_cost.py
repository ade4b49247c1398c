"""What a sweep's start costs on a large space, on this machine's CPU: the sampled candidates of
``search/candidates.py`` (LoopSettings.enumerated drawn) against enumerating the space through the rules
(timed on its first ``--enumerate`` configurations and scaled to the whole). Writes JSON.

Usage: python scripts/candidates_cost.py SWEEP.toml PROBLEM_INDEX OUT.json [--enumerate N]"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import time
from pathlib import Path

from tunebox.search.candidates import candidates, valid_for
from tunebox.search.loop_settings import LoopSettings
from tunebox.sweep_spec import load_sweep


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("sweep", type=Path)
    parser.add_argument("problem", type=int)
    parser.add_argument("out", type=Path)
    parser.add_argument("--enumerate", type=int, default=200_000)
    args = parser.parse_args()
    spec = load_sweep(args.sweep)
    named = spec.problems[args.problem]
    valid = valid_for(spec.family, named.problem)
    start = time.perf_counter()
    drawn = candidates(spec.space, valid, seed=1, limit=LoopSettings.enumerated)
    sampled_s = time.perf_counter() - start
    start = time.perf_counter()
    checked = sum(1 for c in itertools.islice(spec.space, args.enumerate) if valid(c))
    part_s = time.perf_counter() - start
    result = {
        "sweep": str(args.sweep),
        "problem": named.name,
        "space": spec.space.size(),
        "sampled": {"drawn": drawn.checked, "valid": len(drawn.configs), "seconds": round(sampled_s, 2)},
        "enumerated": {
            "checked": args.enumerate,
            "valid": checked,
            "seconds": round(part_s, 2),
            "whole_space_seconds_scaled": round(part_s * spec.space.size() / args.enumerate, 1),
        },
        "machine": platform.processor() or platform.machine(),
        "python": platform.python_version(),
    }
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
