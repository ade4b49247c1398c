"""Fingerprint what a family's templates produce on the host, to show a refactor of its Python changes no
result (the Python counterpart of sass_identity.py; scripts/rehash_winners.py's reviews cite both).

    python scripts/render_identity.py FAMILY OUT.json [--per-template N]
    python scripts/render_identity.py --compare BEFORE.json AFTER.json

Problems: those of every sweep file of the family (spaces/*.toml). Per problem and template, N (default
150) configurations drawn with a fixed seed from the template's space; per pair the fingerprint of its
violations (the messages) and, where valid, the rendered source, its helpers and entry, the arguments, the
prologue and the geometry. Run it before and after the change (a worktree of the old commit on
PYTHONPATH), then ``--compare``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from pathlib import Path

from tunebox.families import get
from tunebox.sweep_spec import load_sweep

SPACES = Path(__file__).resolve().parents[1] / "spaces"


def fingerprints(family_name: str, per_template: int) -> dict[str, str]:
    family = get(family_name)
    problems = {}
    for path in sorted(SPACES.glob("*.toml")):
        spec = load_sweep(path)
        if spec.family.name == family_name:
            problems.update({n.problem.key(): n.problem for n in spec.problems})
    by_template = {
        name: [family.config({**c.as_dict(), "template": name}) for c in space]
        for name, space in family.space.templates
    }
    rng, out, valid = random.Random(0), {}, dict.fromkeys(by_template, 0)
    for key, problem in sorted(problems.items()):
        for name, configs in by_template.items():
            for config in rng.sample(configs, min(per_template, len(configs))):
                broken = family.violations(problem, config)
                made: dict[str, object] = {"violations": broken}
                if not broken:
                    valid[name] += 1
                    source = family.render(problem, config)
                    made |= {
                        "code": hashlib.sha256(source.code.encode()).hexdigest(),
                        "entry": [source.name_expression, *source.helpers],
                        "args": repr(family.args(problem, config)),
                        "prologue": repr(family.prologue(problem, config)),
                        "geometry": repr(family.geometry(problem, config)),
                    }
                out[f"{key}|{config.label()}"] = hashlib.sha256(json.dumps(made, sort_keys=True).encode()).hexdigest()
    print(f"{family_name}: {len(problems)} problems, {len(out)} pairs; valid per template {valid}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("args", nargs="+")
    parser.add_argument("--per-template", type=int, default=150)
    parser.add_argument("--compare", action="store_true")
    a = parser.parse_args()
    if a.compare:
        before, after = (json.loads(Path(p).read_text()) for p in a.args)
        changed = sorted(k for k in before.keys() & after.keys() if before[k] != after[k])
        print(f"{len(before)} pairs before, {len(after)} after, {len(changed)} changed")
        for key in changed[:20]:
            print("  changed:", key)
        return
    family_name, out = a.args
    Path(out).write_text(json.dumps(fingerprints(family_name, a.per_template)))


if __name__ == "__main__":
    main()
