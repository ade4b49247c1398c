"""The first-use race's time budget (``race.RaceBudget``): it counts what passed and what the admitted
runners' timing will take, so a race ends near its budget however many candidates it was given, and
keeps a kernel where one verifies; the library call keeps the steadier of its two blocks. The race
itself runs on the GPU (tests/gpu/test_launch_gpu.py)."""

from __future__ import annotations

from fake_clock import Clock

from tunebox.runtime.race import WARMUPS, RaceBudget, timed_blocks, timing_seconds


def test_timing_seconds_counts_the_warm_runs_and_the_flushed_samples():
    assert timing_seconds(0.002, 0.0001, 5) == WARMUPS * 0.002 + 5 * 0.0021


def test_reserved_timing_and_passed_time_share_the_budget():
    clock = Clock(100.0)
    budget = RaceBudget(0.5, clock(), clock)
    budget.reserve(0.1)  # the library call's timing, reserved first
    clock.now += 0.2  # the reference and a first candidate's compile and check
    assert budget.admit(0.15) and abs(budget.left() - 0.05) < 1e-9
    assert budget.starts() and not budget.admit(0.06) and budget.admit(0.04)
    clock.now += 0.005
    assert budget.starts()  # 5 ms left, no candidate's cost known
    budget.spent(0.03)  # the next one's compile and check
    assert not budget.starts() and budget.kernels == 2


def test_the_first_kernel_that_verifies_is_timed_whatever_the_budget():
    """A large problem's reference and library timing can spend the whole budget: the race still
    checks candidates until one verifies and times it, and stops there."""
    clock = Clock(100.0)
    budget = RaceBudget(0.5, clock(), clock)
    budget.reserve(0.2)
    clock.now += 0.6  # the reference and the tolerance alone
    assert budget.starts()  # no kernel yet: a candidate is checked (it fails to verify: not admitted)
    assert budget.starts() and budget.admit(0.3)  # the next one verifies: timed
    assert not budget.starts()


def test_a_race_admits_candidates_until_the_budget_is_spoken_for():
    """The loop ``race`` runs: each candidate costs its compile and check, then its timing is reserved
    if it fits; a candidate starts only while what is left covers the costliest one so far, so candidates
    of like cost never take the race's total (passed plus reserved) past the budget."""
    for check_s in (0.03, 0.053, 0.11):
        clock = Clock(100.0)
        budget = RaceBudget(0.5, clock(), clock)
        budget.reserve(timing_seconds(0.001, 0.0001, 5))
        timing = timing_seconds(0.004, 0.0001, 5)
        for _ in range(100):
            if not budget.starts():
                break
            clock.now += check_s  # compile (a warm cache) and check
            budget.spent(check_s + timing)
            budget.admit(timing)
        total = (clock.now - budget.started) + budget.reserved
        assert 3 <= budget.kernels < 100 and total <= 0.5, (check_s, total)


def test_a_costlier_candidate_than_any_before_passes_the_budget_by_its_excess_only():
    """What a candidate will cost is known only from those before it: one twice as costly as the rest,
    started with just enough left for them, passes the budget by the difference."""
    clock = Clock(100.0)
    budget = RaceBudget(0.5, clock(), clock)
    budget.admit(0.0)  # a first kernel
    budget.spent(0.05)
    clock.now += 0.44  # 0.06 left
    assert budget.starts()
    clock.now += 0.1
    budget.spent(0.1)
    assert not budget.starts() and clock.now - budget.started <= 0.5 + (0.1 - 0.05) + 1e-9


def test_the_library_is_timed_again_after_the_kernels_and_keeps_its_steadier_block():
    """The library call's first block, slowed (the device leaving idle clocks), does not hand a slower
    kernel the race: the library is timed again after the kernels and its lower median stands."""
    script = {"torch": [[36.1, 35.8, 18.2, 36.4, 30.0], [18.0, 18.1, 17.9, 18.3, 18.0]], "k1": [[18.8] * 5]}
    calls: list[str] = []

    def block(label: str) -> list[float]:
        calls.append(label)
        return script[label].pop(0)

    collected = timed_blocks(["torch", "k1"], "torch", block)
    assert calls == ["torch", "k1", "torch"]
    assert collected == {"torch": [18.0, 18.1, 17.9, 18.3, 18.0], "k1": [18.8] * 5}
    steady = {"torch": [[17.0] * 5, [17.5] * 5], "k1": [[18.8] * 5]}
    assert timed_blocks(["torch", "k1"], "torch", lambda label: steady[label].pop(0))["torch"] == [17.0] * 5
    # no kernel timed (none verified): the library's one block, nothing to compare it with
    assert timed_blocks(["torch"], "torch", lambda label: [20.0]) == {"torch": [20.0]}
