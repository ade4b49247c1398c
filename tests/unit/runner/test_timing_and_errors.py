"""The stopping rule of a measurement, and the classification of CUDA errors (no GPU needed)."""

from __future__ import annotations

import pytest

from tunebox.records import Status, Timing
from tunebox.runner.cuda_errors import classify
from tunebox.runner.timing import FINAL, PROBE, SCREEN, BenchConfig


def test_at_least_ten_samples_before_any_stop_but_the_caps():
    quiet = [1.0] * 9
    assert not SCREEN.done(quiet, elapsed_s=0.01)
    assert SCREEN.done([1.0] * 10, elapsed_s=0.01)
    assert SCREEN.done([1.0] * 3, elapsed_s=SCREEN.max_seconds)  # the wall-clock cap wins


def test_noisy_samples_continue_until_quiet_or_capped():
    noisy = [1.0, 1.2] * 5
    assert Timing(tuple(noisy)).noise > SCREEN.max_noise
    assert not SCREEN.done(noisy, elapsed_s=0.1)
    assert SCREEN.done(noisy * 20, elapsed_s=0.1)  # max_samples reached: stop with the noise as it is


def test_final_rule_needs_low_noise_and_gpu_time():
    short = [0.01] * 40  # quiet, but only 0.4 ms of kernel time
    assert not FINAL.done(short, elapsed_s=0.1)
    assert FINAL.done([1.0] * 50, elapsed_s=0.1)  # 50 ms of kernel time at zero noise


def test_a_measurement_of_no_samples_is_refused():
    with pytest.raises(ValueError):
        BenchConfig(min_samples=0)
    with pytest.raises(ValueError):
        BenchConfig(min_samples=5, max_samples=4)
    assert PROBE.done([9.0], elapsed_s=0.0)  # the probe is one sample, however it reads


@pytest.mark.parametrize(
    "message, status, sticky",
    [
        ("CUDAError: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered", Status.RUNTIME_ERROR, True),
        ("CUDA_ERROR_MISALIGNED_ADDRESS", Status.RUNTIME_ERROR, True),
        ("unspecified launch failure", Status.RUNTIME_ERROR, True),
        ("RuntimeError: CUDA call failed: <CUresult.CUDA_ERROR_INVALID_VALUE: 1>", Status.RESOURCE_ERROR, False),
        ("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", Status.RESOURCE_ERROR, False),
        ("something nobody has seen", Status.RUNTIME_ERROR, True),
    ],
)
def test_classify(message, status, sticky):
    assert classify(RuntimeError(message)) == (status, sticky)
