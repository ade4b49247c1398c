"""One sweep worker process per local GPU: ``tunebox tune SWEEP --storage URL --devices 0,1``.

Each worker is the same command without ``--devices``, started with ``CUDA_VISIBLE_DEVICES`` naming
its one device, so every worker's GPU runner sees device 0 = its GPU; they share the sweep through the
PostgreSQL storage (``distributed.py``). Their output lines are prefixed with the device; the command
ends when every worker has, with the worst exit status.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Sequence

from ..errors import SpaceError


def parse_devices(text: str) -> tuple[int, ...]:
    """``"0,1"`` -> (0, 1): distinct non-negative device indices (raises SpaceError otherwise)."""
    parts = [p.strip() for p in text.split(",")]
    if not parts or not all(p.isdigit() for p in parts) or len(set(parts)) != len(parts):
        raise SpaceError(f"--devices takes distinct GPU indices separated by commas (e.g. 0,1), got {text!r}")
    return tuple(int(p) for p in parts)


def without_devices(argv: Sequence[str]) -> list[str]:
    """``argv`` with its ``--devices X`` (or ``--devices=X``) left out."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--devices":
            skip = True
        elif not arg.startswith("--devices="):
            out.append(arg)
    return out


def run_per_device(argv: Sequence[str], devices: Sequence[int]) -> int:
    """Run ``tunebox`` with ``argv`` (less ``--devices``) once per device, concurrently; the worst exit
    status of the workers."""
    command = [sys.executable, "-m", "tunebox", *without_devices(argv)]
    workers = [
        subprocess.Popen(
            command,
            env={**os.environ, "CUDA_VISIBLE_DEVICES": str(device)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for device in devices
    ]
    lock = threading.Lock()

    def relay(device: int, worker: subprocess.Popen[str]) -> None:
        assert worker.stdout is not None
        for line in worker.stdout:
            with lock:
                print(f"[gpu {device}] {line}", end="", flush=True)

    relays = [threading.Thread(target=relay, args=pair) for pair in zip(devices, workers, strict=True)]
    for thread in relays:
        thread.start()
    try:
        codes = [worker.wait() for worker in workers]
    except KeyboardInterrupt:  # Ctrl-C reached the workers too (same process group): let them stop
        codes = [worker.wait() for worker in workers]
        raise
    finally:
        for thread in relays:
            thread.join()
    return max(codes)
