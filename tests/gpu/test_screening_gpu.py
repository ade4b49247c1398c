"""Screening's cut-off on the GPU (``tunebox/runner/timing.py``): the verification launch is timed as a
sample is, so the worker's three verdicts follow from it. A float32 4096^2 transpose (64 MB each side,
tens of microseconds): timed in full under a generous cut-off; cut on its verification launch alone
far over it, that one sample reading like the full measurement's samples; probed in between."""

from __future__ import annotations

import statistics

import pytest
from gpu_jobs import variant

from tunebox.families import get
from tunebox.records import Status
from tunebox.runner.protocol import EvaluateJob, Outcome
from tunebox.runner.timing import FIRST_LAUNCH_CUT, SCREEN

pytestmark = pytest.mark.gpu
FAMILY = get("tile_copy")
PROBLEM = FAMILY.parse_problem({"dtype": "float32", "src": [4096, 4096], "dst": [4096, 4096], "transpose": True})


@pytest.fixture(scope="module")
def job(builder):
    built = variant(builder, FAMILY, PROBLEM, FAMILY.default_config(PROBLEM))

    def make(cutoff_ms: float | None) -> EvaluateJob:
        return EvaluateJob(FAMILY.name, PROBLEM.to_dict(), built, SCREEN, 5, cutoff_ms=cutoff_ms)

    return make


@pytest.fixture(scope="module")
def full(runner, job) -> Outcome:
    outcome = runner.run(job(None))
    assert outcome.status is Status.OK and len(outcome.samples_ms) >= SCREEN.min_samples, outcome.message
    return outcome


def median(outcome: Outcome) -> float:
    return statistics.median(outcome.samples_ms)


def test_within_the_cutoff_a_variant_is_timed_in_full_unprobed(runner, job, full):
    outcome = runner.run(job(100 * median(full)))
    assert outcome.status is Status.OK and len(outcome.samples_ms) >= SCREEN.min_samples
    assert "probed" not in outcome.message and "cut off" not in outcome.message
    assert abs(median(outcome) / median(full) - 1) < 0.1


def test_far_over_the_cutoff_the_verification_launch_is_the_measurement(runner, job, full):
    cutoff = median(full) / (2 * FIRST_LAUNCH_CUT)
    outcome = runner.run(job(cutoff))
    assert outcome.status is Status.OK and len(outcome.samples_ms) == 1, outcome.message
    assert "cut off on its verification launch" in outcome.message
    # flushed like a sample: not faster than the samples are; a cold first launch, not much slower
    (first,) = outcome.samples_ms
    assert 0.9 * min(full.samples_ms) < first < 1.5 * median(full), (first, full.samples_ms)


def test_between_the_probe_decides(runner, job, full):
    """A cut-off of 2/3 of the median: the verification launch (about the median) is over it and
    within FIRST_LAUNCH_CUT times it (4/3 of the median: a first launch no more than a third slow)."""
    outcome = runner.run(job(median(full) / 1.5))
    assert outcome.status is Status.OK, outcome.message
    assert "cut off on its probe" in outcome.message and "verification launch" in outcome.message
    assert len(outcome.samples_ms) == 2
