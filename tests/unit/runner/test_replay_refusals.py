"""Honest replay at start (issue 19, item 2): a recording of another family is refused when the replay
backend is made, naming the families it holds; a recording of another device than the one whose
replay the sweep's log holds is refused before the sweep resumes; ``tunebox tune`` with a
wrong-family ``--recording`` exits 2 at once with that message."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from tunebox import api
from tunebox.errors import ReplayMiss
from tunebox.records import DeviceInfo, EvalRecord, Status, Timing
from tunebox.runner.backends import ReplayBackend
from tunebox.store.evallog import EvalLog
from tunebox.sweep_spec import load_sweep

REPO = Path(__file__).resolve().parents[3]
H200 = DeviceInfo("NVIDIA H200", "9.0", "13000", "13.0")
OTHER = DeviceInfo("NVIDIA A100", "8.0", "12080", "12.8")


def record(family: str, device: DeviceInfo = H200) -> EvalRecord:
    return EvalRecord(family, {"n": 1}, {"template": "t"}, Status.OK, timing=Timing((1.0,) * 10), device=device)


def test_a_recording_of_another_family_is_refused_naming_what_it_holds() -> None:
    with pytest.raises(ReplayMiss) as info:
        ReplayBackend(Path("gather.jsonl"), [record("gather")], "tile_copy")
    assert str(info.value).startswith("gather.jsonl is a recording of gather, not of tile_copy:")
    assert "--recording" in str(info.value)
    with pytest.raises(ReplayMiss, match="of the families gather, scatter, not of tile_copy"):
        ReplayBackend(Path("mixed.jsonl"), [record("scatter"), record("gather")], "tile_copy")


def test_a_recording_holding_the_family_is_taken() -> None:
    backend = ReplayBackend(Path("mixed.jsonl"), [record("scatter"), record("gather")], "gather")
    assert backend.device == H200 and backend.replayed


def test_an_empty_recording_is_refused() -> None:
    with pytest.raises(ReplayMiss, match="empty.jsonl holds no recorded evaluations"):
        ReplayBackend(Path("empty.jsonl"), [], "tile_copy")


def test_a_recording_of_another_device_than_expected_is_refused() -> None:
    ReplayBackend(Path("h200.jsonl"), [record("gather")], "gather", expected_device=H200)
    with pytest.raises(ReplayMiss) as info:
        ReplayBackend(Path("h200.jsonl"), [record("gather")], "gather", expected_device=OTHER)
    message = str(info.value)
    assert message.startswith("h200.jsonl was measured on NVIDIA H200 (compute capability 9.0")
    assert "NVIDIA A100 (compute capability 8.0, driver 12080, NVRTC 12.8)" in message and "--results" in message


def test_make_backend_checks_the_sweeps_family(sweep_file: Path) -> None:
    spec = load_sweep(sweep_file)  # a tile_copy sweep
    start = time.monotonic()
    with pytest.raises(ReplayMiss, match="gather.jsonl.gz is a recording of gather, not of tile_copy"):
        api.make_backend(spec, "replay", REPO / "results" / "recordings" / "gather.jsonl.gz")
    assert time.monotonic() - start < 10


def test_a_resumed_replay_keeps_the_device_of_its_log(sweep_file: Path, recording: Path, tmp_path: Path) -> None:
    """The log under results/sweeps/<name>-replay/ holds the H200's replay: replaying another device's
    recording into it is refused before anything is evaluated; the H200's resumes."""
    results = tmp_path / "r"
    first = api.tune(sweep_file, backend="replay", recording=recording, results=results, trials=3)
    log = first.log_path
    logged = len(EvalLog(log).read())
    other = tmp_path / "a100.jsonl"
    EvalLog(other).append_all([replace(r, device=OTHER) for r in EvalLog(recording).read()])
    with pytest.raises(ReplayMiss) as info:
        api.tune(sweep_file, backend="replay", recording=other, results=results, trials=6)
    assert f"{other} was measured on NVIDIA A100" in str(info.value) and str(log) in str(info.value)
    assert len(EvalLog(log).read()) == logged
    api.tune(sweep_file, backend="replay", recording=recording, results=results, trials=6)
    assert len(EvalLog(log).read()) > logged


def test_tune_with_a_wrong_family_recording_exits_2_at_once(tmp_path: Path) -> None:
    recording = REPO / "results" / "recordings" / "gather.jsonl.gz"
    argv = ["tune", str(REPO / "spaces" / "tile_copy.toml"), "--backend", "replay", "--recording", str(recording)]
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "tunebox", *argv, "--results", str(tmp_path / "r"), "--quiet"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 2 and done.stdout == "" and time.monotonic() - start < 30
    assert done.stderr == (
        f"tunebox: error: {recording} is a recording of gather, not of tile_copy: replay a recording of a "
        "tile_copy sweep (--recording; the default is results/recordings/<sweep name>.jsonl.gz), or measure on "
        "a GPU (--backend gpu)\n"
    )
    assert not list((tmp_path / "r").rglob("evals.jsonl")) and not list((tmp_path / "r").rglob("*.sqlite"))
