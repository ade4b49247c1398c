"""The device's two ceilings, measured inside the GPU worker: a device-to-device copy (the memory
system's limit, bytes read plus bytes written) and a bfloat16 matrix product through torch (the
tensor cores' rate as the library a user would call reaches it). Both are verified before they are
timed, on random data, with the L2 cache flushed before every sample."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..cuda_api import checked
from ..records import Status
from .protocol import CeilingsJob, Outcome

if TYPE_CHECKING:
    from .gpu_session import GpuSession

MATMUL_MAX_ERROR = 1e-2  # ||C - ref|| / ||ref|| allowed for bf16 operands and output (float32 reference)

Verified = tuple[Callable[[], None], str] | Outcome  # (launch, how it was checked), or why it cannot run


def measure_ceilings(session: GpuSession, job: CeilingsJob) -> list[Outcome]:
    """The copy's outcome, then the product's: samples (ms) and how each was verified, or why not."""
    checks = [
        _verified_copy(session, job.copy_bytes, job.input_seed),
        _verified_matmul(session, job.matmul_size, job.input_seed),
    ]
    runnable = [c for c in checks if isinstance(c, tuple)]
    timed = iter(session.time_interleaved([launch for launch, _ in runnable], job.bench) if runnable else [])
    return [Outcome(Status.OK, c[1], samples_ms=next(timed)) if isinstance(c, tuple) else c for c in checks]


def _verified_copy(session: GpuSession, nbytes: int, seed: int) -> Verified:
    """cuMemcpyDtoDAsync of ``nbytes`` random bytes into a poisoned buffer, compared word for word."""
    words = nbytes // 4
    source = session.upload(np.random.default_rng(seed).integers(0, 2**32, words, dtype=np.uint32))
    target = session.device.allocate(nbytes, stream=session.stream)
    session.fill(target, 0xFFFFFFFF, 4, words)

    def launch() -> None:
        checked(session.driver.cuMemcpyDtoDAsync(int(target.handle), int(source.handle), nbytes, session.stream.handle))

    launch()
    count, first = session.mismatches(target, source, words, 4)
    if count:
        return Outcome(Status.WRONG_RESULT, f"copy: {count} of {words} words differ from the source, first at {first}")
    return launch, "bit for bit"


def _verified_matmul(session: GpuSession, size: int, seed: int) -> Verified:
    """torch.matmul of two random bf16 ``size`` x ``size`` matrices into a NaN-poisoned output,
    within MATMUL_MAX_ERROR of their float32 product."""
    try:
        import torch
    except ImportError:
        return Outcome(Status.INVALID, "torch is not installed: no matrix product ceiling")
    stream = torch.cuda.ExternalStream(int(session.stream.handle))
    with torch.cuda.stream(stream):
        generator = torch.Generator(device="cuda").manual_seed(seed)
        a, b = (torch.randn(size, size, device="cuda", dtype=torch.bfloat16, generator=generator) for _ in range(2))
        c = torch.full((size, size), float("nan"), device="cuda", dtype=torch.bfloat16)
        torch.matmul(a, b, out=c)
        reference = a.float() @ b.float()
        error = float((c.float() - reference).norm() / reference.norm())
    if not error <= MATMUL_MAX_ERROR:  # NaN (an unwritten output) fails too
        return Outcome(
            Status.WRONG_RESULT,
            f"matmul: relative error {error:.2e} against the float32 product (allowed {MATMUL_MAX_ERROR:g})",
        )
    del reference

    def launch() -> None:
        with torch.cuda.stream(stream):
            torch.matmul(a, b, out=c)

    return launch, f"relative error {error:.2e} against the float32 product"
