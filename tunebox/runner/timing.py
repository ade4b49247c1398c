"""How many timed launches a measurement takes (the stopping rule), separate from how it times.

A measurement takes samples in rounds of ``min_samples``; each sample is one launch between two CUDA
events with the L2 cache flushed before it. It stops after a round once the relative standard
deviation is at most ``max_noise`` and at least ``min_gpu_seconds`` of kernel time were measured,
or when ``max_samples`` or ``max_seconds`` of wall time are reached (then the noise is recorded as
it is). Warm-up launches (``warmup``) are never timed.

A sweep's screening has a cut-off (a multiple of the problem's best median so far). The variant's
verification launch is then timed as a sample is (flushed, behind the timing gate): at or under the
cut-off, the variant is timed in full; over ``FIRST_LAUNCH_CUT`` times the cut-off, that one sample is
its measurement; between, a ``PROBE`` (one more flushed sample) follows, and a variant whose probe
sample is slower than the cut-off too keeps both samples as its measurement. A cut variant is not
timed further.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..records import Timing


@dataclass(frozen=True)
class BenchConfig:
    min_samples: int = 10
    max_samples: int = 200
    max_noise: float = 0.01  # relative stdev
    min_gpu_seconds: float = 0.0
    max_seconds: float = 2.0  # wall-clock cap per measurement
    warmup: int = 1

    def __post_init__(self) -> None:
        if self.min_samples < 1 or self.max_samples < self.min_samples:
            raise ValueError("need 1 <= min_samples <= max_samples")

    def done(self, samples_ms: list[float], elapsed_s: float) -> bool:
        """Whether to stop after a round that brought the samples to ``samples_ms``."""
        if len(samples_ms) >= self.max_samples or elapsed_s >= self.max_seconds:
            return True
        if len(samples_ms) < self.min_samples:
            return False
        quiet = Timing(tuple(samples_ms)).noise <= self.max_noise
        return quiet and sum(samples_ms) / 1e3 >= self.min_gpu_seconds


SCREEN = BenchConfig()
"""Every variant: quick, at least 10 flushed samples."""

PROBE = BenchConfig(min_samples=1, max_samples=1, warmup=0)
"""A screened variant's next sample when its verification launch was over the cut-off but within
``FIRST_LAUNCH_CUT`` times it (the verification launch before it is the warm-up): two flushed launches
both over the cut-off cut a variant. One sample, not three: on the H200 the probes of slow variants were
most of a sweep's timing (results/README.md, thirteenth session), and a variant within the cut-off runs
over it twice in a row only under a disturbance the full timing would not survive either."""

FIRST_LAUNCH_CUT = 2.0
"""A screened variant whose verification launch took more than this multiple of the cut-off is cut on
that one sample (a variant three times the best so far; a first launch runs from cold instruction and
constant caches, so it reads, if anything, slower than the variant runs: the margin keeps that bias
from cutting a contender)."""

FINAL = BenchConfig(min_samples=20, max_samples=500, max_noise=0.005, min_gpu_seconds=0.05, max_seconds=5.0)
"""Finalists, re-timed interleaved before a winner is declared (nvbench-like rule)."""
