"""Messages between the sweep process and its GPU worker (pickled over a private pipe only)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import HarnessError
from ..families.base import Arg, KernelLaunch, LaunchGeometry, Problem
from ..families.contract import Family
from ..params import Config
from ..records import Clocks, KernelMetrics, Status
from .timing import BenchConfig

if TYPE_CHECKING:
    from ..build.nvrtc import BuildResult

LaunchIdentity = tuple[LaunchGeometry, tuple[Arg, ...], tuple[KernelLaunch, ...]]


@dataclass(frozen=True)
class Variant:
    """A compiled variant ready to launch: the prologue's launches (``kernel`` the lowered helper
    symbol), then the main kernel."""

    cubin: bytes
    symbol: str  # lowered (mangled) kernel name
    geometry: LaunchGeometry
    args: tuple[Arg, ...]
    prologue: tuple[KernelLaunch, ...] = ()

    @property
    def launches(self) -> tuple[KernelLaunch, ...]:
        """Every launch of one run, in stream order: the prologue, then the main kernel."""
        return (*self.prologue, KernelLaunch(self.symbol, self.geometry, self.args))

    @property
    def launch_identity(self) -> LaunchIdentity:
        """Everything but the binary that decides what a run does (identical runs are timed once)."""
        return self.geometry, self.args, self.prologue


def variant_of(family: Family[Any], problem: Problem, config: Config, build: BuildResult) -> Variant:
    """The launchable form of a compiled variant of ``family`` for ``problem``."""
    # a prologue step names its helper kernel; the source instantiates it (``pad_rows<Cfg>``)
    symbols = {
        expression.partition("<")[0]: symbol
        for expression, symbol in zip(build.source.helpers, build.helper_symbols, strict=True)
    }
    prologue = tuple(
        KernelLaunch(symbols[step.kernel], step.geometry, step.args) for step in family.prologue(problem, config)
    )
    return Variant(
        build.cubin, build.lowered_name, family.geometry(problem, config), family.args(problem, config), prologue
    )


@dataclass(frozen=True)
class PrepareJob:
    """Make a problem's seeded inputs and reference on the device ahead of its first variant, so the
    worker builds them while the sweep is still choosing and compiling variants."""

    family: str
    problem: dict[str, Any]
    input_seed: int


@dataclass(frozen=True)
class EvaluateJob:
    """Verify one variant against the reference, then time it (if ``time`` is set). With
    ``cutoff_ms``, a ``PROBE`` first: a variant whose verification launch and probe sample are both
    slower (ms) keeps those two samples as its measurement."""

    family: str
    problem: dict[str, Any]
    variant: Variant
    bench: BenchConfig
    input_seed: int
    time: bool = True
    cutoff_ms: float | None = None


@dataclass(frozen=True)
class RetimeJob:
    """Time several verified variants of one problem, interleaved sample by sample; with
    ``with_baseline`` the family's torch baseline is verified and joins the rotation (its outcome
    comes last). The variants' samples decide when ``bench``'s rule stops the rounds; a baseline
    leaves them once the rule holds for its own samples (its noise is recorded as measured)."""

    family: str
    problem: dict[str, Any]
    variants: tuple[Variant, ...]
    bench: BenchConfig
    input_seed: int
    with_baseline: bool = True


@dataclass(frozen=True)
class CeilingsJob:
    """Measure the device's two ceilings: a device-to-device copy of ``copy_bytes`` (verified bit for
    bit) and a bfloat16 product of two ``matmul_size`` square matrices through torch (checked against
    a float32 product), timed interleaved under ``bench``. Answered with two outcomes in that order."""

    copy_bytes: int
    matmul_size: int
    bench: BenchConfig
    input_seed: int


def failed_reply(job: Any, outcome: Outcome) -> Outcome | list[Outcome]:
    """The reply to ``job`` when it failed as a whole: ``outcome``, once per measurement for the jobs
    answered with a list (a re-timing: each variant, then the baseline; the ceilings: two)."""
    if isinstance(job, RetimeJob):
        return [outcome] * (len(job.variants) + job.with_baseline)
    if isinstance(job, CeilingsJob):
        return [outcome] * 2
    return outcome


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
    clocks: Clocks | None = None  # observed while ``samples_ms`` were taken (None without NVML)


def harness_checked(outcome: Outcome) -> Outcome:
    """``outcome``, unless tunebox's own Python failed producing it: then HarnessError (the sweep stops at
    once with the traceback, and nothing is logged or stored)."""
    if outcome.status is Status.HARNESS_ERROR:
        raise HarnessError(outcome.message)
    return outcome
