"""The parent side of the GPU worker, on CPU stand-ins: timeouts kill and replace, deaths and sticky
errors replace, workers are recycled, a failed canary refuses to start."""

from __future__ import annotations

import time

import pytest
from stand_in_workers import failing_canary, obliging

from tunebox.errors import DeviceUnavailable
from tunebox.families.base import LaunchGeometry
from tunebox.records import Status
from tunebox.runner.gpu_runner import GpuRunner
from tunebox.runner.protocol import RetimeJob, Variant
from tunebox.runner.timing import SCREEN

VARIANT = Variant(b"cubin", "k", LaunchGeometry((1, 1, 1), (32, 1, 1), 0), ())


@pytest.fixture
def runner():
    r = GpuRunner(job_timeout_s=2, start_timeout_s=60, target=obliging)
    r.start()
    yield r
    r.close()


def pid(runner) -> str:
    outcome = runner.run("work")
    assert outcome.status is Status.OK
    return outcome.message


def test_a_hung_job_is_killed_at_its_timeout_and_the_worker_replaced(runner):
    before = pid(runner)
    start = time.monotonic()
    outcome = runner.run("hang")
    assert outcome.status is Status.TIMEOUT and time.monotonic() - start < 15
    assert runner.replacements == 1 and pid(runner) != before


@pytest.mark.parametrize("job, status", [("die", Status.RUNTIME_ERROR), ("sticky", Status.RUNTIME_ERROR)])
def test_death_and_sticky_errors_replace_the_worker(runner, job, status):
    before = pid(runner)
    outcome = runner.run(job)
    assert outcome.status is status and outcome.fatal
    assert runner.replacements == 1 and pid(runner) != before


def test_jobs_queued_behind_a_hang_are_answered_by_the_replacement(runner):
    before = pid(runner)
    for job in ("work", "hang", "work", "work"):
        runner.submit(job)
    replies = [runner.next_reply() for _ in range(4)]
    assert [r.status for r in replies] == [Status.OK, Status.TIMEOUT, Status.OK, Status.OK]
    assert replies[0].message == before != replies[2].message == replies[3].message
    assert runner.replacements == 1


def test_a_large_job_queued_behind_a_slow_one_never_blocks_the_sender(runner):
    runner.submit("slow")
    start = time.monotonic()
    runner.submit("x" * 8_000_000)  # far beyond a pipe's buffer: the worker's reader thread takes it
    assert time.monotonic() - start < 0.5
    assert [runner.next_reply().status for _ in range(2)] == [Status.OK, Status.OK]


def test_run_refuses_while_jobs_are_queued(runner):
    runner.submit("work")
    with pytest.raises(RuntimeError, match="queued"):
        runner.run("work")
    assert runner.next_reply().status is Status.OK


def test_a_lost_retime_answers_every_variant_and_the_baseline(runner):
    """The sweep reads one outcome per variant, then the baseline's: a killed retime still gives them."""
    job = RetimeJob("hang", {}, (VARIANT, VARIANT), SCREEN, 0)
    outcomes = runner.run(job)
    assert [o.status for o in outcomes] == [Status.TIMEOUT] * 3 and runner.replacements == 1


def test_workers_are_recycled():
    r = GpuRunner(job_timeout_s=5, start_timeout_s=60, recycle_after=2, target=obliging)
    r.start()
    try:
        pids = [pid(r) for _ in range(5)]
    finally:
        r.close()
    assert pids[0] == pids[1] != pids[2] == pids[3] != pids[4]


def test_a_failed_canary_refuses_to_start():
    with pytest.raises(DeviceUnavailable, match="canary"):
        GpuRunner(start_timeout_s=60, target=failing_canary).start()
