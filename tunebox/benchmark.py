"""Benchmark files: a live GPU sweep's winners side by side with the library baseline.

Each case takes the winner and the baseline from the same interleaved finalist re-timing (same
worker, same inputs, L2 flushed before every sample), so the ratio compares like with like. Where a
family has several torch equivalents, ``baseline`` and ``ratio`` are the fastest one's and
``baselines`` lists every one with its own ratio.
"""

from __future__ import annotations

import json
import platform
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from .errors import SpaceError
from .limits import BF16_MEASURED_TFLOPS, BF16_TENSOR_TFLOPS, COPY_LIMIT_GBPS
from .records import EvalRecord, Status, canonical_json, fastest
from .store.evallog import EvalLog
from .sweep_spec import SweepSpec, load_sweep

PACKAGES = ("cuda-core", "cuda-bindings", "nvidia-cuda-nvrtc", "numpy", "optuna", "torch")


def versions() -> dict[str, str]:
    """The Python and package versions a measurement file records."""

    def version(package: str) -> str:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return "not installed"

    return {"python": platform.python_version(), **{p: version(p) for p in PACKAGES}}


def benchmark(sweeps: list[Path], results: Path, command: str) -> dict[str, Any]:
    """One benchmark document of the finalists of live sweeps (raises SpaceError for replayed or
    missing logs, and for sweeps measured on different devices)."""
    cases: list[dict[str, Any]] = []
    devices = set()
    for sweep in sweeps:
        spec = load_sweep(sweep)
        log = results / "sweeps" / spec.name / "evals.jsonl"
        records = EvalLog(log).read()
        if not records or any(r.replayed for r in records):
            raise SpaceError(f"{log}: a benchmark needs a live GPU sweep (not replayed, not empty)")
        devices |= {r.device for r in records}
        cases += _cases(spec, records, log)
    if len(devices) != 1:
        raise SpaceError(f"the sweeps were measured on {len(devices)} devices; benchmark one device at a time")
    device = devices.pop()
    return {
        "device": device.name if device else "unknown",
        "device_info": device.__dict__ if device else None,
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "command": command,
        "versions": versions(),
        "method": "winner and baseline re-timed interleaved in one worker on the same inputs; L2 flushed "
        "before every sample; medians; verified first (bit for bit, or within the family's tolerance "
        "for arithmetic families)",
        "copy_limit_gbps": COPY_LIMIT_GBPS,
        "bf16_tensor_tflops": BF16_TENSOR_TFLOPS,
        "bf16_measured_tflops": BF16_MEASURED_TFLOPS,
        "cases": cases,
    }


def _cases(spec: SweepSpec, records: list[EvalRecord], log: Path) -> list[dict[str, Any]]:
    cases = []
    for named in spec.problems:
        final = [r for r in records if r.phase == "final" and canonical_json(r.problem) == named.problem.key()]
        winner = fastest([r for r in final if not r.baseline])
        baseline = fastest([r for r in final if r.baseline])
        if winner is None or winner.timing is None:
            raise SpaceError(f"{named.name}: no re-timed winner in {log}")
        ms = winner.timing.median_ms
        case: dict[str, Any] = {
            "name": named.name,
            "family": spec.family.name,
            "problem": named.problem.to_dict(),
            "config": winner.config,
            "tunebox_ms": ms,
            "tunebox_noise": winner.timing.noise,
            "tunebox_gbps": winner.bandwidth_gbps,
            "fraction_of_limit": (winner.bandwidth_gbps or 0.0) / COPY_LIMIT_GBPS,
            "samples": len(winner.timing.samples_ms),
            "baseline": baseline.baseline if baseline else None,
            "baseline_ms": baseline.timing.median_ms if baseline and baseline.timing else None,
        }
        case["ratio"] = case["baseline_ms"] / ms if case["baseline_ms"] else None
        case["baseline_fraction_of_limit"] = (
            baseline.bandwidth_gbps / COPY_LIMIT_GBPS if baseline and baseline.bandwidth_gbps else None
        )
        case["baselines"] = [
            {"name": r.baseline, "ms": r.timing.median_ms, "ratio": r.timing.median_ms / ms}
            for r in final
            if r.baseline and r.status is Status.OK and r.timing
        ]
        case["rejected_baselines"] = [
            {"name": r.baseline, "status": r.status.value, "message": r.message}
            for r in final
            if r.baseline and r.status is not Status.OK
        ]
        if winner.tflops:  # arithmetic families: the rate, its share of the tensor-core peak and the measured ceiling
            case["tunebox_tflops"] = winner.tflops
            case["fraction_of_tensor_peak"] = winner.tflops / BF16_TENSOR_TFLOPS
            case["fraction_of_measured_ceiling"] = winner.tflops / BF16_MEASURED_TFLOPS
            case["baseline_tflops"] = baseline.tflops if baseline else None
        cases.append(case)
    return cases


def write_benchmark(sweeps: list[Path], results: Path, out: Path, command: str) -> dict[str, Any]:
    document = benchmark(sweeps, results, command)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=2) + "\n")
    return document
