"""``tunebox.results``: a sweep's evaluations as a pandas DataFrame, one row per evaluation.

Importing this module is light; pandas loads when a frame is built.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import SpaceError
from .store.recordings import COMPRESSED

if TYPE_CHECKING:
    import pandas as pd

LOG_NAME = "evals.jsonl"


def sweep_log(name: str, results: Path, replay: bool = False) -> Path:
    """The evaluation log of the sweep ``name``: ``<results>/sweeps/<name>/evals.jsonl`` (the live GPU
    sweep) when it exists and ``replay`` is false, else ``<results>/sweeps/<name>-replay/evals.jsonl``."""
    live = results / "sweeps" / name / LOG_NAME
    return live if live.exists() and not replay else results / "sweeps" / f"{name}-replay" / LOG_NAME


def results(
    source: str | os.PathLike[str], *, results: str | os.PathLike[str] | None = None, replay: bool = False
) -> pd.DataFrame:
    """Every evaluation of a sweep as a DataFrame, one row per evaluation, in log order.

    ``source``: a sweep file (``spaces/gemm.toml``: its log is found under ``results``, the live GPU
    sweep preferred unless ``replay``; its problems are named as in the file), an evaluation log
    (``evals.jsonl``, or a recording in ``results/recordings/``), or a sweep's output directory
    (``results/sweeps/<name>/``). ``results`` defaults to the same directory ``tunebox tune`` and
    ``tunebox report`` use.

    Columns: trial, family, problem (the sweep file's name, else ``k=v`` pairs), problem_key, template,
    one column per configuration parameter, status, median_ms, noise, bandwidth_gbps (GB/s), tflops
    (TFLOP/s), intensity (FLOP/byte), flops, bytes_moved, phase ("screen" or "final"), baseline (the
    library call timed, "" for variants), kind, replayed, device, config, config_key, message (see
    ``tunebox.report.results_frame``). Raises ``SpaceError`` when there is no such log.
    """
    from .records import canonical_json
    from .report.data import results_frame
    from .store.evallog import EvalLog, check_log_family

    path = Path(source)
    names: dict[str, str] = {}
    family = None  # a sweep file's: its log must hold that family's records only
    if path.is_dir():
        log = path / LOG_NAME
    elif path.suffix in (".jsonl", ".json") or path.name.endswith(COMPRESSED):
        log = path
    elif path.suffix != ".toml":
        raise SpaceError(
            f"{path}: results() reads a sweep file (.toml), an evaluation log (.jsonl, {COMPRESSED}) or a sweep's "
            "directory (results/sweeps/<name>/)"
        )
    else:
        from .api import DEFAULT_RESULTS
        from .sweep_spec import load_sweep

        spec = load_sweep(path)
        log = sweep_log(spec.name, DEFAULT_RESULTS if results is None else Path(results), replay)
        names = {canonical_json(p.problem.to_dict()): p.name for p in spec.problems}
        family = spec.family.name
    if not log.is_file():
        raise SpaceError(f"no evaluation log at {log}: run `tunebox tune` on the sweep first")
    records = EvalLog(log).read()
    if family is not None:
        check_log_family(log, records, family)
    return results_frame(records, names)
