"""Rewrite a recorded evaluation log from flat configurations to template configurations (issue 14).

Before issue 14 a configuration assigned every parameter of one flat space, the kernel's transport
or path among them (``transport`` / ``path``); now it names its ``template`` and holds that
template's own parameters only. The measurements are of the same kernels, so a recording keeps its
records: each configuration is projected onto its template (the selector's value names it; a family
of one template takes that one). A configuration the new space does not hold is an error (a template
lost a value), never dropped. Records that the projection makes identical (parameters a template
ignores) keep the first, as the sweep would have timed that binary once.

    python scripts/migrate_recording.py results/recordings/<sweep>.jsonl [...]
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

from tunebox.families import get
from tunebox.params import TEMPLATE
from tunebox.records import EvalRecord, canonical_json

SELECTORS = ("transport", "path", "scheme")  # scheme: windows (direct, separable)


def migrate(config: dict, family_name: str) -> dict:
    if not config or TEMPLATE in config:
        return config
    family = get(family_name)
    names = family.space.names()
    selector = next((s for s in SELECTORS if s in config), None)
    template = config[selector] if selector else names[0]
    if selector is None and len(names) != 1:
        raise SystemExit(f"{family_name}: {config} names no template and the family has {names}")
    own = {p.name for p in family.space.template(template).params}
    new = {TEMPLATE: template, **{k: v for k, v in config.items() if k in own}}
    if not family.space.holds(new):
        raise SystemExit(f"{family_name}: {config} -> {new} is not in the new space")
    return new


def main(paths: list[str]) -> None:
    for name in paths:
        path = Path(name)
        kept, seen, merged = [], set(), 0
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            if "tunebox_evallog" in json.loads(line):  # the log's header line stays as it is
                kept.append(line)
                continue
            record = EvalRecord.from_json(line)
            record = replace(record, config=migrate(record.config, record.family))
            key = (
                record.family,
                canonical_json(record.problem),
                canonical_json(record.config),
                record.phase,
                record.baseline,
            )
            if record.config and key in seen:
                merged += 1
                continue
            seen.add(key)
            kept.append(record.to_json())
        path.write_text("\n".join(kept) + "\n")
        print(f"{path}: {len(kept)} records, {merged} merged into an identical configuration")


if __name__ == "__main__":
    main(sys.argv[1:])
