"""The device's measured ceilings, beside the limits tunebox assumes (``limits.py``).

``tunebox ceilings`` times a large device-to-device copy (bytes read plus bytes written per second)
and a large bfloat16 matrix product through torch in a GPU worker, each verified first, and writes
both with the assumed limits that every "fraction of the limit" in the benchmark files divides by.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from .benchmark import versions
from .errors import DeviceUnavailable, InvalidProblem, MeasurementError
from .limits import BF16_TENSOR_TFLOPS, COPY_LIMIT_GBPS
from .records import DeviceInfo, Status, Timing
from .runner import worker
from .runner.gpu_runner import GpuRunner
from .runner.protocol import CeilingsJob, Outcome
from .runner.timing import FINAL

COPY_BYTES = 1 << 30
MATMUL_SIZE = 8192
MIN_COPY_BYTES = 64 << 20  # below this a copy measures launch latency more than bandwidth
MAX_COPY_BYTES = 32 << 30
MATMUL_SIZES = range(1024, 32768 + 1, 64)
SEED = 20261201


@dataclass(frozen=True)
class Ceiling:
    """One measured rate: ``work`` per launch (bytes moved, or floating-point operations) over the
    median of ``timing``'s samples, in ``unit`` (GB/s or TFLOP/s), beside the ``assumed`` limit."""

    name: str
    work: float
    unit: str
    timing: Timing
    verified: str
    assumed: float

    @property
    def rate(self) -> float:
        return self.work / (self.timing.median_ms * 1e-3) / (1e9 if self.unit == "GB/s" else 1e12)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "work": self.work,
            "unit": self.unit,
            "rate": self.rate,
            "median_ms": self.timing.median_ms,
            "noise": self.timing.noise,
            "samples": len(self.timing.samples_ms),
            "verified": self.verified,
            "assumed_limit": self.assumed,
            "fraction_of_assumed": self.rate / self.assumed,
        }


@dataclass(frozen=True)
class Ceilings:
    """Both ceilings of one device, measured in one worker."""

    device: DeviceInfo
    copy: Ceiling
    matmul: Ceiling


def measure(
    copy_bytes: int = COPY_BYTES, matmul_size: int = MATMUL_SIZE, target: Callable[[Connection], None] = worker.main
) -> Ceilings:
    """Measure both ceilings on this host's GPU (``target``: the worker's entry point; tests pass a
    stand-in). Raises InvalidProblem for sizes outside the ranges, DeviceUnavailable without a GPU, and
    MeasurementError when a result fails its verification."""
    if not (isinstance(copy_bytes, int) and MIN_COPY_BYTES <= copy_bytes <= MAX_COPY_BYTES and copy_bytes % 4 == 0):
        raise InvalidProblem(
            f"copy size {copy_bytes!r}: give a multiple of 4 bytes from {MIN_COPY_BYTES} (64 MiB) "
            f"to {MAX_COPY_BYTES} (32 GiB)"
        )
    if not (isinstance(matmul_size, int) and matmul_size in MATMUL_SIZES):
        raise InvalidProblem(
            f"matrix size {matmul_size!r}: give a multiple of 64 from {MATMUL_SIZES.start} to {MATMUL_SIZES.stop - 1}"
        )
    runner = GpuRunner(job_timeout_s=600, target=target)
    try:
        try:
            device = runner.start()
        except DeviceUnavailable as exc:
            raise DeviceUnavailable(
                f"tunebox ceilings measures the GPU of the host it runs on ({exc}); run it on a GPU host"
            ) from exc
        copy, matmul = runner.run(CeilingsJob(copy_bytes, matmul_size, FINAL, SEED))
    finally:
        runner.close()
    return Ceilings(
        device,
        _ceiling(
            "device-to-device copy (cuMemcpyDtoDAsync), bytes read + written",
            2.0 * copy_bytes,
            "GB/s",
            copy,
            COPY_LIMIT_GBPS,
        ),
        _ceiling(
            f"bfloat16 matrix product {matmul_size}^3 through torch.matmul (cuBLAS)",
            2.0 * matmul_size**3,
            "TFLOP/s",
            matmul,
            BF16_TENSOR_TFLOPS,
        ),
    )


def _ceiling(name: str, work: float, unit: str, outcome: Outcome, assumed: float) -> Ceiling:
    if outcome.status is not Status.OK or not outcome.samples_ms:
        raise MeasurementError(f"{name}: {outcome.status.value}: {outcome.message}")
    return Ceiling(name, work, unit, Timing(outcome.samples_ms), outcome.message, assumed)


def write_ceilings(ceilings: Ceilings, out: Path, command: str) -> dict[str, Any]:
    """Write the measurement as JSON to ``out`` (device, date, command, versions, both ceilings)."""
    document = {
        "device": ceilings.device.name,
        "device_info": ceilings.device.__dict__,
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "command": command,
        "versions": versions(),
        "method": "verified first on random data; L2 flushed before every sample; the two timed interleaved in "
        "one worker; medians",
        "ceilings": [ceilings.copy.to_dict(), ceilings.matmul.to_dict()],
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=2) + "\n")
    return document
