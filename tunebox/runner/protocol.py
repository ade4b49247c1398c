"""Messages between the sweep process and its GPU worker (pickled over a private pipe only)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..families.base import Arg, LaunchGeometry
from ..records import KernelMetrics, Status
from .timing import BenchConfig


@dataclass(frozen=True)
class Variant:
    """A compiled variant ready to launch."""

    cubin: bytes
    symbol: str  # lowered (mangled) kernel name
    geometry: LaunchGeometry
    args: tuple[Arg, ...]


@dataclass(frozen=True)
class EvaluateJob:
    """Verify one variant against the reference, then time it (if ``time`` is set)."""

    family: str
    problem: dict[str, Any]
    variant: Variant
    bench: BenchConfig
    input_seed: int
    time: bool = True


@dataclass(frozen=True)
class RetimeJob:
    """Time several verified variants of one problem, interleaved sample by sample; with
    ``with_baseline`` the family's torch baseline is verified and joins the rotation (its outcome
    comes last)."""

    family: str
    problem: dict[str, Any]
    variants: tuple[Variant, ...]
    bench: BenchConfig
    input_seed: int
    with_baseline: bool = True


@dataclass(frozen=True)
class Outcome:
    """What the worker measured for one variant (or the baseline)."""

    status: Status
    message: str = ""
    samples_ms: tuple[float, ...] = ()
    metrics: KernelMetrics | None = None
    fatal: bool = False  # the worker's CUDA context is unusable: it exits after replying
    stage_seconds: dict[str, float] = field(default_factory=dict)
    baseline: str = ""
