"""Rewrite recorded configurations after a change of a family's configuration space (issue 14).

Flat to template configurations: before issue 14 a configuration assigned every parameter of one flat
space, the kernel's transport or path among them (``transport`` / ``path``); now it names its
``template`` and holds that template's own parameters only. The measurements are of the same kernels,
so a recording keeps its records: each configuration is projected onto its template (the selector's
value names it; a family of one template takes that one). A configuration the new space does not hold
is an error (a template lost a value), never dropped. Records that the projection makes identical
(parameters a template ignores) keep the first, as the sweep would have timed that binary once.

    python scripts/migrate_recording.py results/recordings/<sweep>.jsonl.gz [...]

A new parameter of a template: every configuration of that family's template that lacks NAME gets
VALUE, the value that reproduces what was measured (the form the kernel had before the parameter
existed), in recordings (plain or ``.jsonl.gz``) and in winners databases (``.sqlite``: each row's
configuration and record). VALUE is read as JSON where it parses (numbers), else as a string.
Configurations that already hold NAME are left as they are, so running it twice changes nothing.

    python scripts/migrate_recording.py --add-field FAMILY TEMPLATE NAME VALUE FILE [...]
"""

from __future__ import annotations

import gzip
import json
import sqlite3
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

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


def read_lines(path: Path) -> list[str]:
    """The lines of a recording, plain or gzip-compressed (``.jsonl.gz``)."""
    data = path.read_bytes()
    return (gzip.decompress(data) if path.suffix == ".gz" else data).decode().splitlines()


def write_lines(path: Path, lines: list[str]) -> None:
    data = ("\n".join(lines) + "\n").encode()
    path.write_bytes(gzip.compress(data, 9, mtime=0) if path.suffix == ".gz" else data)


def project(paths: list[str]) -> None:
    for name in paths:
        path = Path(name)
        kept, seen, merged = [], set(), 0
        for line in read_lines(path):
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
        write_lines(path, kept)
        print(f"{path}: {len(kept)} records, {merged} merged into an identical configuration")


def with_field(config: dict, family_name: str, template: str, name: str, value: Any) -> dict:
    """``config`` with ``name`` = ``value`` if it is a configuration of the family's ``template`` that
    lacks ``name``; the result must be in the family's space."""
    if config.get(TEMPLATE) != template or name in config:
        return config
    new = {**config, name: value}
    if not get(family_name).space.holds(new):
        raise SystemExit(f"{family_name}: {new} is not in the space")
    return new


def add_field(family: str, template: str, name: str, value: Any, paths: list[str]) -> None:
    def fixed(record: EvalRecord) -> EvalRecord:
        if record.family != family:
            return record
        return replace(record, config=with_field(record.config, family, template, name, value))

    for file in paths:
        path, changed = Path(file), 0
        if path.suffix == ".sqlite":
            connection = sqlite3.connect(path)
            with connection:
                rows = connection.execute(
                    "SELECT rowid, record_json FROM winners WHERE family = ?", (family,)
                ).fetchall()
                for rowid, record_json in rows:
                    before = EvalRecord.from_json(record_json)
                    record = fixed(before)
                    if record.config != before.config:
                        changed += 1
                        connection.execute(
                            "UPDATE winners SET config_json = ?, record_json = ? WHERE rowid = ?",
                            (json.dumps(record.config, sort_keys=True, allow_nan=False), record.to_json(), rowid),
                        )
            connection.close()
        else:
            lines = []
            for line in read_lines(path):
                if line.strip() and "tunebox_evallog" not in json.loads(line):
                    before = EvalRecord.from_json(line)
                    record = fixed(before)
                    changed += record.config != before.config
                    line = record.to_json() if record.config != before.config else line
                lines.append(line)
            write_lines(path, lines)
        print(f"{path}: {changed} configurations of {family} {template} given {name} = {value!r}")


def main(args: list[str]) -> None:
    if args[:1] == ["--add-field"]:
        if len(args) < 6:
            raise SystemExit("usage: migrate_recording.py --add-field FAMILY TEMPLATE NAME VALUE FILE [...]")
        family, template, name, text = args[1:5]
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text
        add_field(family, template, name, value, args[5:])
    else:
        project(args)


if __name__ == "__main__":
    main(sys.argv[1:])
