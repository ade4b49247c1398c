"""GpuBackend's bookkeeping around problems prepared ahead (a scripted runner, no processes)."""

from __future__ import annotations

from collections import deque

import pytest

from tunebox.families import get as get_family
from tunebox.records import DeviceInfo, Status
from tunebox.runner.backends import GpuBackend
from tunebox.runner.protocol import EvaluateJob, Outcome, PrepareJob, RetimeJob

DEVICE = DeviceInfo("scripted", "9.0", "13000", "13.0")


class ScriptedRunner:
    """Answers each job with the next scripted reply, in order, as the real runner does."""

    def __init__(self, replies: list) -> None:
        self.replies = deque(replies)
        self.jobs: list = []
        self.pending = 0

    def start(self) -> DeviceInfo:
        return DEVICE

    def submit(self, job, timeout_s=None) -> None:
        self.jobs.append(job)
        self.pending += 1

    def next_reply(self):
        assert self.pending, "a reply was read for a job never sent"
        self.pending -= 1
        return self.replies.popleft()

    def run(self, job, timeout_s=None):
        assert not self.pending, "run with replies unread"
        self.submit(job)
        return self.next_reply()

    job_timeout_s = 60.0


@pytest.fixture
def problem():
    family = get_family("tile_copy")
    return family, family.parse_problem({"dtype": "float32", "src": [8, 8], "dst": [8, 8]})


def test_seconds_spent_preparing_ahead_join_the_next_outcome(problem):
    family, p = problem
    runner = ScriptedRunner(
        [
            Outcome(Status.OK, stage_seconds={"prepare": 0.75}),
            Outcome(Status.OK, samples_ms=(1.0,) * 10, stage_seconds={"prepare": 0.0, "time": 0.1}),
            Outcome(Status.OK, samples_ms=(1.0,) * 10, stage_seconds={"time": 0.1}),
        ]
    )
    backend = GpuBackend(runner)
    backend.prepare(family, p, seed=3)
    assert isinstance(runner.jobs[0], PrepareJob) and runner.jobs[0].input_seed == 3
    runner.submit(EvaluateJob("tile_copy", p.to_dict(), None, None, 3))  # what submit sends, variant aside
    runner.submit(EvaluateJob("tile_copy", p.to_dict(), None, None, 3))
    first, second = backend.next_outcome(), backend.next_outcome()
    assert first.stage_seconds == {"prepare": 0.75, "time": 0.1}
    assert second.stage_seconds == {"time": 0.1}  # counted once


def test_a_failed_preparation_is_left_to_the_evaluation_that_follows(problem):
    family, p = problem
    failed = Outcome(Status.RUNTIME_ERROR, "CUDA_ERROR_OUT_OF_MEMORY")
    runner = ScriptedRunner([failed, Outcome(Status.RUNTIME_ERROR, "CUDA_ERROR_OUT_OF_MEMORY (again)")])
    backend = GpuBackend(runner)
    backend.prepare(family, p, seed=3)
    runner.submit(EvaluateJob("tile_copy", p.to_dict(), None, None, 3))
    outcome = backend.next_outcome()
    assert outcome.message.endswith("(again)") and "prepare" not in outcome.stage_seconds


def test_retime_reads_a_preparation_still_unanswered(problem):
    family, p = problem
    runner = ScriptedRunner([Outcome(Status.OK, stage_seconds={"prepare": 0.5}), [Outcome(Status.OK)]])
    backend = GpuBackend(runner)
    backend.prepare(family, p, seed=3)
    assert backend.retime(family, p, [], seed=3) == [Outcome(Status.OK)]
    assert isinstance(runner.jobs[-1], RetimeJob)
