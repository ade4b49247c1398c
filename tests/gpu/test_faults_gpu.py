"""Planted faults on the GPU: a sweep mixing good and misbehaving variants finishes, records each
fault with the right status, replaces the worker after sticky errors and hangs, never stores a bad
variant, and picks the winner a fault-free sweep picks."""

from __future__ import annotations

import pytest

from tunebox.api import tune
from tunebox.families.faults import EXPECTED_STATUS
from tunebox.runner.backends import GpuBackend
from tunebox.runner.gpu_runner import GpuRunner
from tunebox.store.evallog import EvalLog
from tunebox.store.winners import WinnersDB

pytestmark = pytest.mark.gpu

SWEEP = """
name = "{name}"
family = "faults"
[search]
strategy = "exhaustive"
finalists = 3
[space]
block = [256]
fault = {faults}
[[problems]]
name = "words"
n = 4000037
"""


def sweep(tmp_path, name, faults):
    path = tmp_path / f"{name}.toml"
    path.write_text(SWEEP.format(name=name, faults=faults))
    backend = GpuBackend(GpuRunner(job_timeout_s=10))
    result = tune(path, backend_instance=backend, results=tmp_path / name)
    return result, backend.runner.replacements, EvalLog(tmp_path / name / "sweeps" / name / "evals.jsonl").read()


def test_sweep_survives_planted_faults(tmp_path):
    mixed, replacements, records = sweep(
        tmp_path,
        "mixed",
        '["none", "oob_write", "hang", "wrong_value", '
        '"skip_element", "modify_input", "too_much_shared", '
        '"over_launch_bounds", "compile_error"]',
    )
    screened = [r for r in records if r.phase == "screen"]
    assert len(screened) == 27
    for r in screened:
        assert r.status.value == EXPECTED_STATUS[r.config["fault"]], (r.config, r.message)
    messages = {r.config["fault"]: r.message for r in screened}
    assert "never written" in messages["skip_element"]
    assert "input src was modified" in messages["modify_input"]
    assert "planted compile error" in messages["compile_error"]
    assert replacements == 6  # three sticky faults and three hangs, each followed by a fresh worker + canary

    winner = mixed.problems[0].winner
    assert winner is not None and winner.config == {"block": 256, "passes": 1, "fault": "none", "template": "planted"}
    with WinnersDB(tmp_path / "mixed" / "winners.sqlite", read_only=True) as db:
        assert [w.config["fault"] for w in db.all()] == ["none"]

    clean, clean_replacements, _ = sweep(tmp_path, "clean", '["none"]')
    assert clean_replacements == 0
    assert clean.problems[0].winner.config == winner.config
