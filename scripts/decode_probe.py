"""Decode variants of gemm's template ``decode`` beside cuBLAS, with B in L2 or not (issue 20): on the
GPU host,

    python scripts/decode_probe.py OUT.json

times, as ``decode_floor.py`` times (events, median of 50, the GPU kept busy while the host enqueues),
with no flush (what of B the L2 kept from the previous sample stays: all of a 32 MiB B) and with a read
of twice the L2 before each sample:
torch.matmul, B.sum (a pure read of B) and each of ``CONFIGS`` served through ``tunebox.launch`` (the
configuration stored as the winner of a scratch database), verified once against the float64 product
within 1% + 0.1. Shapes 16 x 4096 x 4096, 16 x 14336 x 4096, 16 x 1024 x 4096 and 64 x 4096 x 4096
(there 32 tokens a block where a configuration names 16). A row per shape: the copy-limit bound of
reading B (``bound_us``), the library calls' and each configuration's medians (us)."""

from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
from decode_floor import timed_us  # scripts/, beside this one

from tunebox.families import get
from tunebox.families.gemm import DecodeConfig
from tunebox.limits import COPY_LIMIT_GBPS
from tunebox.params import Config
from tunebox.records import EvalRecord, Status, Timing, WinnerKey
from tunebox.runtime.arrays import device_array
from tunebox.runtime.launch import Launcher
from tunebox.store.winners import WinnersDB

GEMM = get("gemm")
SHAPES = ((16, 4096, 4096), (16, 14336, 4096), (16, 1024, 4096), (64, 4096, 4096))
CONFIGS = (  # DecodeConfig's fields in their order
    (64, 16, 64, 2, 4, 4, "128B", 8, "cp_async"),
    (64, 16, 64, 1, 4, 4, "128B", 8, "tma"),
    (64, 16, 64, 1, 4, 6, "128B", 4, "tma"),
    (64, 16, 128, 1, 4, 6, "128B", 2, "tma"),
    (128, 16, 64, 2, 4, 8, "128B", 4, "tma"),
    (128, 16, 128, 2, 4, 4, "128B", 2, "tma"),
    (256, 16, 64, 4, 2, 6, "128B", 8, "tma"),
    (64, 16, 256, 1, 8, 3, "128B", 2, "tma"),
)


def config_for(m: int, values: tuple[Any, ...]) -> Config:
    """The configuration of ``values``, with 32 tokens a block at M = 64."""
    config = DecodeConfig(*values)
    return GEMM.template_config("decode", dataclasses.replace(config, tokens=32) if m == 64 else config)


def serving(config: Config, a: Any, b: Any, d: Any) -> Any:
    """A call of ``tunebox.launch`` that serves ``config`` (stored as the winner of a scratch database)."""
    folder = Path(tempfile.mkdtemp())
    launcher = Launcher(folder / "winners.sqlite", cache_dir=Path("/tmp/cubins"))
    problem = GEMM.problem_from_arrays({"A": device_array(a), "B": device_array(b), "D": device_array(d)})
    record = EvalRecord(
        "gemm", problem.to_dict(), config.as_dict(), Status.OK, timing=Timing((1.0,)), device=launcher.device_info()
    )
    with WinnersDB(folder / "winners.sqlite") as db:
        db.put(WinnerKey.of(record, GEMM.source_hash(), problem.key(), problem.dtype), record)
    return lambda: launcher("gemm", {"A": a, "B": b, "D": d}, use="tunebox")


def main(out: Path) -> None:
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    buffer = torch.empty(2 * l2 // 4, dtype=torch.float32, device="cuda")
    flushes = {"none": lambda: None, "read": lambda: buffer.sum()}
    rows = []
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        row: dict[str, Any] = {"shape": [m, n, k], "bound_us": k * n * 2 / COPY_LIMIT_GBPS * 1e-3}
        for name, flush in flushes.items():
            row[f"matmul_{name}"] = timed_us(lambda a=a, b=b, d=d: torch.matmul(a, b, out=d), flush)
            row[f"sum_B_{name}"] = timed_us(lambda b=b: b.sum(dtype=torch.float32), flush)
        want = a.double() @ b.double()
        for values in CONFIGS:
            config = config_for(m, values)
            problem = GEMM.problem_from_arrays({"A": device_array(a), "B": device_array(b), "D": device_array(d)})
            if GEMM.violations(problem, config):
                continue
            run = serving(config, a, b, d)
            run()
            torch.cuda.synchronize()
            ok = bool(((d.double() - want).abs() <= 1e-2 * want.abs() + 0.1).all())
            row[config.label()] = {"ok": ok, **{name: timed_us(run, flush) for name, flush in flushes.items()}}
        rows.append(row)
        print(json.dumps(row), flush=True)
    out.write_text(
        json.dumps({"command": f"python scripts/decode_probe.py {out}", "method": __doc__, "rows": rows}, indent=1)
        + "\n"
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
