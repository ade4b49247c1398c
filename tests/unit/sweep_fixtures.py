"""A small tile_copy sweep and a synthetic recording of it, for CPU tests of the sweep loop."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunebox.records import DeviceInfo, EvalRecord, KernelMetrics, Status, Timing
from tunebox.store.evallog import EvalLog
from tunebox.sweep_spec import load_sweep

SWEEP = """
name = "small"
family = "tile_copy"
[search]
strategy = "{strategy}"
trials = {trials}
seed = 3
finalists = 2
[space]
BM = [1, 4, 8, 16]
BN = [64, 128, 256]
threads = [64, 128]
vec_bytes = [4, 8, 16]
bounds = ["checked", "split"]
staging = ["none", "padded"]
tiles_per_block = [1]
template = ["vector"]
[[problems]]
name = "copy"
dtype = "float32"
src = [1000, 1000]
dst = [1000, 1000]
[[problems]]
name = "transpose"
dtype = "bfloat16"
src = [999, 1001]
dst = [1001, 999]
transpose = true
"""

DEVICE = DeviceInfo("NVIDIA H200", "9.0", "13000", "13.0")


def fake_ms(config: dict) -> float:
    """A deterministic timing model with one clear optimum per problem."""
    return (
        1.0
        + abs(config["BM"] - 8) * 0.1
        + abs(config["BN"] - 128) / 640
        + (16 - config["vec_bytes"]) * 0.02
        + (config["bounds"] == "checked") * 0.05
        + (config["threads"] == 64) * 0.03
    )


def write_sweep(tmp_path: Path, strategy: str = "tpe", trials: int = 12) -> Path:
    path = tmp_path / "spaces" / "small.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(SWEEP.format(strategy=strategy, trials=trials))
    return path


def write_recording(sweep: Path, path: Path, status_of=lambda config: Status.OK) -> Path:
    """Every valid configuration of every problem, timed by ``fake_ms`` (status from ``status_of``)."""
    spec = load_sweep(sweep)
    log = EvalLog(path)
    for named in spec.problems:
        work = spec.family.work(named.problem)
        for config in spec.space:
            if spec.family.violations(named.problem, config):
                continue
            values = config.as_dict()
            status = status_of(values)
            ms = fake_ms(values)
            timing = Timing(tuple(ms * (1 + 0.001 * k) for k in range(10))) if status is Status.OK else None
            log.append(
                EvalRecord(
                    "tile_copy",
                    named.problem.to_dict(),
                    values,
                    status,
                    message="" if status is Status.OK else "planted failure",
                    timing=timing,
                    metrics=KernelMetrics(32, 0, 0),
                    bytes_moved=work.bytes_moved,
                    device=DEVICE,
                )
            )
        log.append(
            EvalRecord(
                "tile_copy",
                named.problem.to_dict(),
                {},
                Status.OK,
                timing=Timing((3.0,) * 10),
                bytes_moved=work.bytes_moved,
                device=DEVICE,
                baseline="torch: fake",
                phase="final",
            )
        )
    return path


def replay_argv(sweep: Path, recording: Path, results: Path, *extra: str) -> list[str]:
    """The command line (after ``tunebox``) of a replayed sweep of ``sweep`` into ``results``."""
    return ["tune", str(sweep), "--backend", "replay", "--recording", str(recording), "--results", str(results), *extra]


@pytest.fixture
def sweep_file(tmp_path: Path) -> Path:
    return write_sweep(tmp_path)


@pytest.fixture
def recording(sweep_file: Path, tmp_path: Path) -> Path:
    return write_recording(sweep_file, tmp_path / "recording.jsonl")
