"""Classification of CUDA errors raised while evaluating a variant."""

from __future__ import annotations

from ..errors import HarnessError
from ..records import Status

# Errors after which the CUDA context is unusable: the process must be replaced.
STICKY = (
    "ILLEGAL_ADDRESS",
    "LAUNCH_TIMEOUT",
    "HARDWARE_STACK_ERROR",
    "ILLEGAL_INSTRUCTION",
    "MISALIGNED_ADDRESS",
    "INVALID_ADDRESS_SPACE",
    "INVALID_PC",
    "LAUNCH_FAILED",
    "CUDA_ERROR_ASSERT",
    "CONTAINED",
    "MPS_CLIENT_TERMINATED",
    "EXTERNAL_DEVICE",
    "illegal memory access",
    "misaligned address",
    "unspecified launch failure",
    "illegal instruction",
)
# Launch refusals that leave the context usable.
RESOURCE = (
    "INVALID_VALUE",
    "LAUNCH_OUT_OF_RESOURCES",
    "NO_BINARY_FOR_GPU",
    "OUT_OF_MEMORY",
    "too many resources",
    "INVALID_IMAGE",
    "UNSUPPORTED_PTX_VERSION",
)


def classify(exc: BaseException) -> tuple[Status, bool]:
    """(status, sticky) for an exception raised while evaluating a variant: tunebox's own Python
    failing is a harness error (the context is fine); otherwise a CUDA error by its text."""
    if isinstance(exc, HarnessError):
        return Status.HARNESS_ERROR, False
    text = f"{type(exc).__name__}: {exc}"
    if any(s in text for s in STICKY):
        return Status.RUNTIME_ERROR, True
    if any(s in text for s in RESOURCE):
        return Status.RESOURCE_ERROR, False
    return Status.RUNTIME_ERROR, True  # unknown: assume the worst and replace the worker
