"""Typed records that cross stage boundaries: statuses, device fingerprints, evaluation results.

Every record is a frozen dataclass with a JSON form (``to_json`` / ``from_json``); nothing is pickled
to disk.
"""

from __future__ import annotations

import enum
import json
import math
import statistics
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, cast


class Status(enum.StrEnum):
    """Outcome of evaluating one variant. Only ``OK`` variants can become winners."""

    OK = "ok"
    INVALID = "invalid"  # rejected by a validity rule, never compiled
    COMPILE_ERROR = "compile_error"
    RESOURCE_ERROR = "resource_error"  # registers, shared memory or launch limits
    RUNTIME_ERROR = "runtime_error"  # kernel fault; the worker that saw it was replaced
    TIMEOUT = "timeout"  # hung kernel or compile, killed
    WRONG_RESULT = "wrong_result"  # verification failed
    HARNESS_ERROR = "harness_error"  # tunebox's own Python failed: the sweep stops, nothing is stored
    SANITIZER_ERROR = "sanitizer_error"  # a finalist compute-sanitizer reported on: never stored


@dataclass(frozen=True)
class DeviceInfo:
    """What identifies the hardware and toolchain a measurement belongs to."""

    name: str
    compute_capability: str  # "9.0"
    driver_version: str  # "13000" as cuDriverGetVersion reports it, or "none"
    nvrtc_version: str  # "13.0"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DeviceInfo:
        return cls(**{k: str(data[k]) for k in ("name", "compute_capability", "driver_version", "nvrtc_version")})

    def describe(self) -> str:
        """One line for messages and reports: the name, then the compute capability and toolchain."""
        return (
            f"{self.name} (compute capability {self.compute_capability}, driver {self.driver_version}, "
            f"NVRTC {self.nvrtc_version})"
        )


# NVML clock-event reasons that make a timing untrustworthy: slowdowns imposed from outside the kernel
# at that moment (the board too hot, an external power brake), which cut the clocks by large factors
# and pass. The software power cap (0x4) is not one: it is the kernel's own steady power draw reaching
# the board's limit, reproducible, so a retake would not remove it (it is recorded in ``reasons``).
# GPU idle (0x1), applications clocks (0x2), sync boost (0x10) and display clocks (0x100) slow no
# running kernel.
THROTTLE_REASONS = {
    0x8: "hardware slowdown",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
}
THROTTLING = sum(THROTTLE_REASONS)


@dataclass(frozen=True)
class ClockSample:
    """One NVML observation of the timing device; a field NVML could not read is None (never guessed)."""

    sm_mhz: int | None
    mem_mhz: int | None
    temperature_c: int | None  # GPU core temperature, degrees Celsius
    power_w: float | None  # board power as NVML reports it (a 1 s average on recent GPUs), watts
    reasons: int | None  # NVML clock-event (throttle) reasons bitmask

    @property
    def throttled(self) -> bool:
        """Whether one of the ``THROTTLING`` reasons was active."""
        return bool((self.reasons or 0) & THROTTLING)


@dataclass(frozen=True)
class Clocks:
    """The observations taken with a timing's samples: before the first round, while each round ran,
    after the last. ``retakes``: throttled batches discarded and measured again before this one;
    ``throttled``: throttling was observed during this batch too (the retakes ran out): its samples
    are kept, flagged."""

    samples: tuple[ClockSample, ...]
    retakes: int = 0
    throttled: bool = False

    def note(self) -> str:
        """'' unless ``throttled``; then which reasons were seen, in words."""
        if not self.throttled:
            return ""
        seen = 0
        for s in self.samples:
            seen |= s.reasons or 0
        names = ", ".join(name for bit, name in THROTTLE_REASONS.items() if seen & bit)
        return f"timed while the GPU throttled ({names}) in all {self.retakes + 1} batches"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Clocks:
        return cls(tuple(ClockSample(**s) for s in data["samples"]), int(data["retakes"]), bool(data["throttled"]))


MIN_SAMPLE_MS = 1e-6  # 1 ns: no measured time is shorter (a CUDA event resolves about 0.5 us)


def check_samples(samples: tuple[float, ...]) -> None:
    """Raise ValueError unless there are samples, each finite and at least ``MIN_SAMPLE_MS``: what a
    log or database read back, or a winner stored, must hold."""
    if not samples or not all(math.isfinite(x) and x >= MIN_SAMPLE_MS for x in samples):
        raise ValueError(f"samples_ms must be finite times of at least {MIN_SAMPLE_MS:g} ms, got {samples[:4]}")


@dataclass(frozen=True)
class Timing:
    """Samples of one timed kernel, in milliseconds, each with the L2 flushed before it; ``clocks``:
    what NVML observed while they were taken (None where NVML is missing, and in older logs)."""

    samples_ms: tuple[float, ...]
    clocks: Clocks | None = None

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples_ms)

    @property
    def noise(self) -> float:
        """Relative standard deviation (stdev / mean) of the samples; 0 with fewer than two."""
        if len(self.samples_ms) < 2:
            return 0.0
        mean = statistics.fmean(self.samples_ms)
        return statistics.stdev(self.samples_ms) / mean if mean > 0 else math.inf

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Timing:
        """Raises ValueError for samples no measurement gives (``check_samples``)."""
        clocks = data.get("clocks")
        samples = tuple(float(x) for x in data["samples_ms"])
        check_samples(samples)
        return cls(samples, Clocks.from_dict(clocks) if clocks else None)


@dataclass(frozen=True)
class KernelMetrics:
    """Resource use of a compiled kernel, read after loading it."""

    registers: int
    shared_bytes: int  # static + dynamic shared memory per block
    local_bytes: int  # > 0 usually means spills


@dataclass(frozen=True)
class EvalRecord:
    """One evaluated variant: the unit of the evaluation log, replay and the winners database."""

    family: str
    problem: dict[str, Any]
    config: dict[str, Any]
    status: Status
    message: str = ""
    timing: Timing | None = None
    metrics: KernelMetrics | None = None
    bytes_moved: int = 0
    flops: int = 0
    device: DeviceInfo | None = None
    replayed: bool = False
    input_seed: int = 0
    baseline: str = ""  # non-empty: this record times a library operation (config is empty)
    phase: str = "screen"  # "screen": every variant; "final": finalists re-timed interleaved
    stage_seconds: dict[str, float] = field(default_factory=dict)  # compile / verify / time

    @property
    def median_ms(self) -> float | None:
        return self.timing.median_ms if self.timing else None

    @property
    def bandwidth_gbps(self) -> float | None:
        """Achieved bandwidth in GB/s (bytes read + written per median time)."""
        ms = self.median_ms
        return self.bytes_moved / (ms * 1e6) if ms else None

    @property
    def tflops(self) -> float | None:
        """Achieved arithmetic rate in TFLOP/s (flops per median time); None without flops."""
        ms = self.median_ms
        return self.flops / (ms * 1e9) if ms and self.flops else None

    def to_json(self) -> str:
        data = asdict(self)
        data["status"] = self.status.value
        return json.dumps(data, sort_keys=True, allow_nan=False)

    @classmethod
    def from_json(cls, line: str) -> EvalRecord:
        """Raises ValueError (or KeyError, TypeError) for a line that is not a valid record."""
        data = json.loads(line)
        for name in ("problem", "config"):
            if not isinstance(data.get(name), dict):
                raise ValueError(f"{name} is not a JSON object")
        timing = data.pop("timing")
        metrics = data.pop("metrics")
        device = data.pop("device")
        return cls(
            status=Status(data.pop("status")),
            timing=Timing.from_dict(timing) if timing else None,
            metrics=KernelMetrics(**metrics) if metrics else None,
            device=DeviceInfo.from_dict(device) if device else None,
            **data,
        )


@dataclass(frozen=True)
class WinnerKey:
    """Everything that changes which variant wins: the winners database's primary key."""

    family: str
    family_hash: str  # hash of the family's Python and device sources
    problem_key: str  # canonical JSON of the problem (sorted keys, no spaces)
    dtype: str
    device_name: str
    compute_capability: str
    nvrtc_version: str
    driver_version: str

    @classmethod
    def of(cls, record: EvalRecord, family_hash: str, problem_key: str, dtype: str) -> WinnerKey:
        if record.device is None:
            raise ValueError("a winner needs the device it was measured on")
        d = record.device
        return cls(
            record.family,
            family_hash,
            problem_key,
            dtype,
            d.name,
            d.compute_capability,
            d.nvrtc_version,
            d.driver_version,
        )


def fastest(records: Iterable[EvalRecord]) -> EvalRecord | None:
    """The OK, timed record of the lowest median (None when there is none)."""
    timed = [r for r in records if r.status is Status.OK and r.timing is not None]
    return min(timed, key=lambda r: cast(Timing, r.timing).median_ms) if timed else None


def canonical_json(data: dict[str, Any]) -> str:
    """The one canonical text form of a problem or config: sorted keys, no whitespace."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False)
