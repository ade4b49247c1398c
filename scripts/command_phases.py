"""A sweep command's wall time in phases (issue 15 item 6: where a throughput_default run's seconds go).

    python scripts/command_phases.py SWEEP.toml RESULTS OUT.json

Runs ``tunebox.api.tune`` on SWEEP on the GPU backend into RESULTS (copy a CUBIN cache into
RESULTS/cache first for a warm run) and writes OUT: the seconds of each phase (imports, the GPU worker's
start, ``Sweep.run``, the compile pool's close, the worker's close, the whole command), the run's
summary (``SweepResult.summary``) and its device answers (seconds since the sweep's start, the worker's
verify + time seconds). ``results/benchmarks/command_phases.json`` gathers such runs. Needs a GPU.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

STARTED = time.perf_counter()


def timed(cls: type, name: str, phases: dict[str, float], key: str) -> None:
    """Wrap ``cls.name`` so that each call adds its seconds to ``phases[key]``."""
    original: Callable[..., Any] = getattr(cls, name)

    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(self, *args, **kwargs)
        finally:
            phases[key] = phases.get(key, 0.0) + time.perf_counter() - start

    setattr(cls, name, wrapper)


def main(sweep: Path, results: Path, out: Path) -> None:
    import tunebox.api as api
    from tunebox.build.nvrtc import NvrtcBuilder
    from tunebox.runner.backends import GpuBackend
    from tunebox.search.loop import Sweep

    phases = {"imports": time.perf_counter() - STARTED}
    timed(GpuBackend, "__init__", phases, "worker_start")
    timed(Sweep, "run", phases, "sweep_run")
    timed(NvrtcBuilder, "close", phases, "builder_close")
    timed(GpuBackend, "close", phases, "worker_close")
    result = api.tune(sweep, backend="gpu", results=results)
    phases["command"] = time.perf_counter() - STARTED
    summary = result.summary()
    out.write_text(json.dumps({"phases": phases, "summary": summary, "answers": result.answers}, indent=1))
    print(json.dumps({"phases": phases, "variants_per_second": summary["variants_per_second"]}))


if __name__ == "__main__":  # the GPU worker and the compile helpers are spawned: they import this file
    main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))
