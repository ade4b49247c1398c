"""Sanitized winners on the GPU (issue 19 item 10): the planted shared-memory race passes verification
and is caught by racecheck, the planted out-of-bounds read passes verification and is caught by
memcheck, a good tile_copy variant passes memcheck, racecheck and synccheck; a sweep never stores a
finalist compute-sanitizer reported on, and records why. Needs compute-sanitizer on PATH."""

from __future__ import annotations

import json
import shutil

import pytest
from gpu_jobs import evaluate

from tunebox.api import tune
from tunebox.families import get
from tunebox.families.faults import SANITIZER_FINDS
from tunebox.records import Status
from tunebox.runner.sanitizer import TOOLS, ComputeSanitizer
from tunebox.runner.sanitizer_report import Verdict
from tunebox.search.finalists import SANITIZE
from tunebox.store.evallog import EvalLog
from tunebox.store.winners import WinnersDB

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(shutil.which("compute-sanitizer") is None, reason="compute-sanitizer is not on PATH"),
]
FAULTS = get("faults")
WORDS = FAULTS.parse_problem({"n": 1000003})  # the word past the end lies in mapped pool memory: no fault
SWEEP = """
name = "{name}"
family = "faults"
[search]
strategy = "exhaustive"
finalists = {finalists}
[space]
block = [128, 256]
passes = [1]
fault = {faults}
[[problems]]
name = "words"
n = 1000003
"""


def planted(builder, fault: str):
    config = FAULTS.space.validate({"template": "planted", "block": 256, "passes": 1, "fault": fault})
    return config, builder.build_one(FAULTS.render(WORDS, config))


@pytest.mark.parametrize("fault, marker", [("smem_race", "Race reported"), ("oob_read", "Invalid __global__ read")])
def test_a_planted_fault_verification_accepts_is_caught_by_its_tool(runner, builder, fault, marker):
    config, build = planted(builder, fault)
    assert evaluate(runner, builder, FAULTS, WORDS, config).status is Status.OK  # verification cannot see it
    check = ComputeSanitizer().check(FAULTS, WORDS, config, build, seed=11)
    print(f"\n{fault}: {check.describe()} ({check.seconds:.1f} s)")
    assert check.reported is not None and check.reported.tool == SANITIZER_FINDS[fault], check.describe()
    assert marker in check.describe()


def test_a_good_variant_passes_every_tool(builder):
    family = get("tile_copy")
    problem = family.parse_problem({"dtype": "float32", "src": [1000, 1000], "dst": [1000, 1000]})
    config = family.default_config(problem)
    check = ComputeSanitizer().check(family, problem, config, builder.build_one(family.render(problem, config)), 5)
    print(f"\ntile_copy default: {check.describe()} ({check.seconds:.1f} s)")
    assert [(r.tool, r.verdict) for r in check.runs] == [(t, Verdict.PASSED) for t in TOOLS], check.describe()


def sweep(tmp_path, name: str, faults: list[str]):
    """Every variant (two blocks per fault) a finalist."""
    path = tmp_path / f"{name}.toml"
    path.write_text(SWEEP.format(name=name, faults=json.dumps(faults), finalists=2 * len(faults)))
    result = tune(path, backend="gpu", results=tmp_path / name, sanitize=True)
    records = EvalLog(tmp_path / name / "sweeps" / name / "evals.jsonl").read()
    return result, [r for r in records if r.phase == SANITIZE]


def test_a_sweep_never_stores_a_finalist_the_sanitizer_reported_on(tmp_path):
    result, rejected = sweep(tmp_path, "planted", ["smem_race", "oob_read"])
    assert result.problems[0].winner is None and not result.problems[0].stored
    assert sorted(r.config["fault"] for r in rejected) == ["oob_read", "oob_read", "smem_race", "smem_race"]
    for r in rejected:
        assert r.status is Status.SANITIZER_ERROR and r.message.startswith(SANITIZER_FINDS[r.config["fault"]])
    summary = result.summary()
    print(f"\nsanitize {summary['sanitize_seconds']:.1f} s of {summary['seconds']:.1f} s")
    assert summary["sanitizer_rejected"] == 4 and summary["sanitize_seconds"] > 0

    mixed, rejected = sweep(tmp_path, "mixed", ["none", "smem_race", "oob_read"])
    assert mixed.problems[0].winner.config["fault"] == "none" and mixed.problems[0].stored
    assert all(r.config["fault"] in SANITIZER_FINDS for r in rejected)
    with WinnersDB(tmp_path / "mixed" / "winners.sqlite", read_only=True) as db:
        assert [w.config["fault"] for w in db.all()] == ["none"]
