"""Launch one variant of a family at a problem a few times, for a profiler to catch (issue 20: what
bounds the persistent gemm at 3000 x 5000 x 1000, why pingpong trails cooperative there).

    ncu --clock-control none --set full -k regex:gemm -s 1 -c 1 -o OUT \\
        python3 scripts/launch_variant.py gemm PROBLEM CONFIG [--times N]

PROBLEM and CONFIG are JSON objects, as the winners database and `tunebox query` hold them. The inputs
are seeded as the serving benchmark seeds them (byte outputs poisoned with 0xAD); workspace starts
zeroed. The variant is not verified here (its sweep and the GPU tests do that). ``variant_launcher`` is
the same set-up for other scripts (flush_effect.py). Needs a GPU and torch.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import torch
from cuda.core import Stream
from serving_benchmark import tensors  # scripts/, beside this one

from tunebox.cuda_api import pack, steps_launcher
from tunebox.families import get
from tunebox.runtime.launch import Launcher


def variant_launcher(family_name: str, problem_json: dict[str, Any], config_json: dict[str, Any]) -> tuple[Any, Any]:
    """(a closure launching the variant on seeded inputs, the buffers it launches on: keep them alive)."""
    family = get(family_name)
    problem = family.parse_problem(problem_json)
    config = family.config(config_json)
    family.check(problem, config)
    arrays, _ = tensors(family, problem, seed=1)
    workspace = {
        b.name: torch.zeros(max(1, b.nbytes), dtype=torch.uint8, device="cuda")
        for b in family.buffers(problem)
        if b.role == "workspace"
    }
    pointers = {name: t.data_ptr() for name, t in {**arrays, **workspace}.items()}
    stream = Stream.from_handle(torch.cuda.current_stream().cuda_stream)
    launches = Launcher().steps(family, problem, config)
    run = steps_launcher(stream, [(kernel, geometry, pack(a, pointers)) for kernel, geometry, a in launches])
    return run, (arrays, workspace)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("family")
    parser.add_argument("problem", type=json.loads)
    parser.add_argument("config", type=json.loads)
    parser.add_argument("--times", type=int, default=3)
    args = parser.parse_args()
    run, _buffers = variant_launcher(args.family, args.problem, args.config)
    for _ in range(args.times):
        run()
    torch.cuda.synchronize()
    print(f"{args.family} {json.dumps(args.problem)} {json.dumps(args.config)}: {args.times} launches")


if __name__ == "__main__":
    main()
