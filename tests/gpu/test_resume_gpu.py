"""kill -9 of a GPU sweep at an arbitrary moment, then the same command: it resumes, loses no
completed evaluation and repeats none."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tunebox.records import Status, canonical_json
from tunebox.store.evallog import EvalLog

pytestmark = pytest.mark.gpu
REPO = Path(__file__).resolve().parents[2]
SWEEP = """
name = "resume"
family = "tile_copy"
[search]
strategy = "random"
trials = 24
finalists = 2
[space]
template = ["vector"]
BM = [4, 8, 16, 32]
BN = [64, 128, 256]
threads = [128, 256]
vec_bytes = [8, 16]
staging = ["none"]
tiles_per_block = [1]
[[problems]]
name = "pad"
dtype = "bfloat16"
src = [3001, 2999]
dst = [3008, 3008]
"""


def test_kill_minus_nine_then_resume_on_the_gpu(tmp_path):
    sweep = tmp_path / "resume.toml"
    sweep.write_text(SWEEP)
    results = tmp_path / "r"
    command = [
        sys.executable,
        "-m",
        "tunebox",
        "tune",
        str(sweep),
        "--backend",
        "gpu",
        "--results",
        str(results),
        "--quiet",
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    log = results / "sweeps" / "resume" / "evals.jsonl"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and (not log.exists() or log.read_text().count("\n") < 8):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the sweep and its GPU worker
    proc.wait()
    before = [r for r in EvalLog(log).read() if r.phase == "screen"]
    assert 0 < len(before) < 24
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    after = [r for r in EvalLog(log).read() if r.phase == "screen"]
    keys = [canonical_json(r.config) for r in after]
    assert len(keys) == len(set(keys)) == 24
    assert after[: len(before)] == before  # nothing lost or rewritten
    assert all(r.status is Status.OK for r in after)
