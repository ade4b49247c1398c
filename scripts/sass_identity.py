"""Fingerprint the machine code of a sample of a family's variants, to show a refactor of device
sources changes no instruction (issue 14 item 6).

    python scripts/sass_identity.py FAMILY OUT.json RECORDING.jsonl... [--per-template N]

Takes up to N (default 20) recorded (problem, configuration) pairs per template, chosen with a fixed
seed, builds each with NVRTC (sm_90) and disassembles it with ``nvdisasm -c`` (pip package
nvidia-cuda-nvdisasm; ``NVDISASM`` names the binary). The fingerprint of a variant is the sha256 of
its instruction lines without their addresses (CUBIN bytes differ from build to build; the
instructions do not). Run it before and after the change and compare the two files. Some variants'
instructions vary from build to build of the same source (register allocation of tile_copy's
cp_async and windows' separable kernels, seen with one worker too): run "before" twice to see which,
before reading a difference as the change's. ``SASS_WORKERS`` sets the build threads.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from tunebox.build.nvrtc import NvrtcBuilder
from tunebox.families import get
from tunebox.records import Status
from tunebox.store.evallog import EvalLog


def instructions(cubin: bytes, nvdisasm: str) -> str:
    with tempfile.NamedTemporaryFile(suffix=".cubin") as handle:
        handle.write(cubin)
        handle.flush()
        sass = subprocess.run([nvdisasm, "-c", handle.name], capture_output=True, text=True, check=True).stdout
    lines = (line.strip() for line in sass.splitlines())
    return "\n".join(re.sub(r"/\*[0-9a-f]{4,}\*/", "", line).strip() for line in lines if line.startswith("/*"))


def main(family_name: str, out: Path, recordings: list[Path], per_template: int) -> None:
    family = get(family_name)
    pairs = sorted(
        {
            (json.dumps(r.problem, sort_keys=True), json.dumps(r.config, sort_keys=True))
            for path in recordings
            for r in EvalLog(path).read()
            if r.family == family_name and r.config and r.status is Status.OK
        }
    )
    random.Random(0).shuffle(pairs)
    chosen: dict[str, list[tuple[str, str]]] = {}
    for problem, config in pairs:
        group = chosen.setdefault(json.loads(config)["template"], [])
        if len(group) < per_template:
            group.append((problem, config))
    builder = NvrtcBuilder("sm_90", None, workers=int(os.environ.get("SASS_WORKERS", os.cpu_count() or 1)))
    nvdisasm = os.environ.get("NVDISASM", "nvdisasm")
    futures = [
        (
            f"{problem}|{config}",
            builder.submit(family.render(family.parse_problem(json.loads(problem)), family.config(json.loads(config)))),
        )
        for group in chosen.values()
        for problem, config in group
    ]
    prints = {}
    for key, future in futures:
        built = future.result()
        code = instructions(built.cubin, nvdisasm) if built.status is Status.OK else built.status.value
        prints[key] = hashlib.sha256(code.encode()).hexdigest()
    out.write_text(json.dumps(prints, indent=0, sort_keys=True) + "\n")
    print(f"{family_name}: {len(prints)} variants ({', '.join(f'{t} {len(g)}' for t, g in chosen.items())})")


if __name__ == "__main__":
    args = sys.argv[1:]
    count = int(args[args.index("--per-template") + 1]) if "--per-template" in args else 20
    paths = [Path(a) for a in args[2:] if a.endswith(".jsonl")]
    main(args[0], Path(args[1]), paths, count)
