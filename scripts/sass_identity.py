"""Fingerprint the machine code of a sample of a family's variants, to show a refactor of device
sources changes no instruction (issue 14 item 6).

    python scripts/sass_identity.py FAMILY OUT.json RECORDING.jsonl... [--per-template N] [--space N]
    python scripts/sass_identity.py --compare BEFORE.json [BEFORE_AGAIN.json] AFTER.json

Takes up to N (default 20) recorded (problem, configuration) pairs per template, chosen with a fixed
seed, and with ``--space N`` also N valid configurations per template drawn (seeded) from the family's
whole space on the recordings' problems: recordings hold what sweeps chose, which can leave out whole
regions of a space (tile_copy's 4-byte vectors and padded or swizzled staging, say). Each is built
with NVRTC (sm_90) and disassembled with ``nvdisasm -c`` (pip package nvidia-cuda-nvdisasm;
``NVDISASM`` names the binary). The fingerprint of a variant is the sha256 of its instruction lines
without their addresses (CUBIN bytes differ from build to build; the instructions do not). Run it
before and after the change, then ``--compare``. Some variants' instructions vary from build to build
of the same source: NVRTC's PTX itself varies (tile_copy's vector stores), and so does register
allocation (tile_copy's cp_async and windows' separable kernels, seen with one worker too). So run
"before" twice: ``--compare`` counts a variant whose two "before" prints differ as unstable, not as
changed. ``SASS_WORKERS`` sets the build threads.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tunebox.build.nvrtc import NvrtcBuilder
from tunebox.families import get
from tunebox.params import Config
from tunebox.records import Status
from tunebox.search.candidates import candidates, valid_for
from tunebox.store.evallog import EvalLog


def instructions(cubin: bytes, nvdisasm: str) -> str:
    with tempfile.NamedTemporaryFile(suffix=".cubin") as handle:
        handle.write(cubin)
        handle.flush()
        sass = subprocess.run([nvdisasm, "-c", handle.name], capture_output=True, text=True, check=True).stdout
    lines = (line.strip() for line in sass.splitlines())
    return "\n".join(re.sub(r"/\*[0-9a-f]{4,}\*/", "", line).strip() for line in lines if line.startswith("/*"))


def recorded(family_name: str, recordings: list[Path]) -> list[tuple[str, str]]:
    """The distinct (problem, configuration) pairs the recordings verified, as sorted JSON texts."""
    return sorted(
        {
            (json.dumps(r.problem, sort_keys=True), json.dumps(r.config, sort_keys=True))
            for path in recordings
            for r in EvalLog(path).read()
            if r.family == family_name and r.config and r.status is Status.OK
        }
    )


SPACE_DRAWS = 20_000  # configurations of a template's space checked a problem: all of a smaller space


def from_space(family_name: str, problems: list[str], template: str, count: int) -> list[tuple[str, str]]:
    """``count`` valid configurations of ``template`` (seeded), each on one of ``problems`` in turn, drawn
    among those of a seeded sample of at most SPACE_DRAWS of its space (quant_gemm wgmma's holds millions,
    too many to check through the rules)."""
    family = get(family_name)
    space = family.space.restrict({"template": [template]})
    rng = random.Random(template)
    valid: dict[str, tuple[Config, ...]] = {}  # each problem's valid configurations (a sample of large spaces)
    drawn: list[tuple[str, str]] = []
    for i in range(count):
        problem = problems[i % len(problems)]
        if problem not in valid:
            parsed = family.parse_problem(json.loads(problem))
            valid[problem] = candidates(space, valid_for(family, parsed), 0, SPACE_DRAWS).configs
        if valid[problem]:
            drawn.append((problem, json.dumps(dict(rng.choice(valid[problem]).items), sort_keys=True)))
    return drawn


def fingerprint(family_name: str, out: Path, recordings: list[Path], per_template: int, space: int) -> None:
    family = get(family_name)
    pairs = recorded(family_name, recordings)
    random.Random(0).shuffle(pairs)
    chosen: dict[str, list[tuple[str, str]]] = {}
    for problem, config in pairs:
        group = chosen.setdefault(json.loads(config)["template"], [])
        if len(group) < per_template:
            group.append((problem, config))
    if space:
        problems = sorted({problem for problem, _ in pairs})
        for template in family.templates:
            chosen.setdefault(template, []).extend(from_space(family_name, problems, template, space))
    builder = NvrtcBuilder("sm_90", None, workers=int(os.environ.get("SASS_WORKERS", os.cpu_count() or 1)))
    nvdisasm = os.environ.get("NVDISASM", "nvdisasm")
    if shutil.which(nvdisasm) is None:
        sys.exit(f"{nvdisasm} not found: pip install nvidia-cuda-nvdisasm (or name it with NVDISASM=...)")
    futures = {
        f"{problem}|{config}": builder.submit(
            family.render(family.parse_problem(json.loads(problem)), family.config(json.loads(config)))
        )
        for group in chosen.values()
        for problem, config in group
    }
    prints = {}
    for key, future in futures.items():
        built = future.result()
        code = instructions(built.cubin, nvdisasm) if built.status is Status.OK else built.status.value
        prints[key] = hashlib.sha256(code.encode()).hexdigest()
    out.write_text(json.dumps(prints, indent=0, sort_keys=True) + "\n")
    print(f"{family_name}: {len(prints)} variants ({', '.join(f'{t} {len(g)}' for t, g in chosen.items())})")


def compare(befores: list[Path], after: Path) -> None:
    """Per template: variants identical after, unstable before (the "before" prints differ), changed."""
    runs = [json.loads(path.read_text()) for path in befores]
    now = json.loads(after.read_text())
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for key, print_ in runs[0].items():
        template = json.loads(key.split("|", 1)[1])["template"]
        if any(run.get(key) != print_ for run in runs[1:]):
            counts[template]["unstable before"] += 1
        elif key not in now:
            counts[template]["not built after"] += 1
        else:
            counts[template]["identical" if now[key] == print_ else "changed"] += 1
    for template, counter in sorted(counts.items()):
        print(f"{template}: " + ", ".join(f"{n} {what}" for what, n in sorted(counter.items())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compare", nargs="+", type=Path, metavar="PRINTS", help="BEFORE [BEFORE_AGAIN] AFTER")
    parser.add_argument("--per-template", type=int, default=20)
    parser.add_argument("--space", type=int, default=0)
    parser.add_argument("args", nargs="*", help="FAMILY OUT.json RECORDING.jsonl...")
    ns = parser.parse_args()
    if ns.compare:
        if len(ns.compare) < 2:
            parser.error("--compare takes BEFORE [BEFORE_AGAIN] AFTER")
        compare(ns.compare[:-1], ns.compare[-1])
        return
    if len(ns.args) < 3:
        parser.error("give FAMILY OUT.json RECORDING.jsonl...")
    fingerprint(ns.args[0], Path(ns.args[1]), [Path(a) for a in ns.args[2:]], ns.per_template, ns.space)


if __name__ == "__main__":
    main()
