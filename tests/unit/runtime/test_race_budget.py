"""The first-use race's time budget (``race.RaceBudget``): it counts what passed and what the admitted
runners' timing will take, so a race ends near its budget however many candidates it was given.
The race itself runs on the GPU (tests/gpu/test_launch_gpu.py)."""

from __future__ import annotations

from fake_clock import Clock

from tunebox.runtime.race import WARMUPS, RaceBudget, timing_seconds


def test_timing_seconds_counts_the_warm_runs_and_the_flushed_samples():
    assert timing_seconds(0.002, 0.0001, 5) == WARMUPS * 0.002 + 5 * 0.0021


def test_reserved_timing_and_passed_time_share_the_budget():
    clock = Clock(100.0)
    budget = RaceBudget(0.5, clock(), clock)
    budget.reserve(0.1)  # the library call's timing, reserved first
    clock.now += 0.2  # the reference and a first candidate's compile and check
    assert budget.open() and abs(budget.left() - 0.2) < 1e-9
    assert budget.fits(0.19) and not budget.fits(0.21)
    budget.reserve(0.15)
    clock.now += 0.05
    assert not budget.open()  # 0.25 passed + 0.25 reserved: no further candidate starts


def test_a_race_admits_candidates_until_the_budget_is_spoken_for():
    """The loop ``race`` runs: each candidate costs its compile and check, then its timing is reserved
    if it fits; the race's total (passed plus reserved) never passes the budget by more than the last
    candidate's check."""
    clock = Clock(100.0)
    budget = RaceBudget(0.5, clock(), clock)
    budget.reserve(timing_seconds(0.001, 0.0001, 5))
    admitted = 0
    for _ in range(100):
        if not budget.open():
            break
        clock.now += 0.03  # compile (a warm cache) and check
        timing = timing_seconds(0.004, 0.0001, 5)
        if budget.fits(timing):
            budget.reserve(timing)
            admitted += 1
    total = (clock.now - budget.started) + budget.reserved
    assert 5 <= admitted < 100 and total <= 0.5 + 0.03
