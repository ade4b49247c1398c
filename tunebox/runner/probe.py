"""Does this machine have a usable CUDA device? Asked in a throw-away subprocess, so the calling
process never initialises CUDA (a later fork or a fault cannot poison it)."""

from __future__ import annotations

import subprocess
import sys
from functools import cache

_PROBE = """
from cuda.bindings import driver
(err,) = driver.cuInit(0)
assert int(err) == 0, f"cuInit: {err!r}"
err, n = driver.cuDeviceGetCount()
assert int(err) == 0 and n > 0, f"no visible device ({err!r}, n={n})"
print(n)
"""


@cache
def gpu_status() -> tuple[bool, str]:
    """(available, reason). Never raises."""
    try:
        done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"probe failed: {exc}"
    if done.returncode == 0:
        return True, f"{done.stdout.strip()} CUDA device(s)"
    last = (done.stderr.strip().splitlines() or ["unknown error"])[-1]
    return False, unavailable_reason(last)


def unavailable_reason(error: str) -> str:
    """Why CUDA could not start, in words, from the text of the error it raised."""
    if any(sign in error for sign in ("DynamicLibNotFoundError", "libcuda", "NVIDIA driver library")):
        return "no NVIDIA driver on this machine"
    return error[:200]
