"""Tuning on first use: at a problem no sweep tuned, race a few kernel configurations and the library
call on the caller's own inputs, and keep the fastest verified one.

Contract of ``race``: the caller's inputs are read, never written; every entrant writes scratch outputs
that start as the element types' poison (as in a sweep). The reference is the operation's most exact
library form (the last of its baselines) on the same inputs; a kernel counts only when its outputs
agree with it (bit for bit, or within the family's tolerance, computed from the inputs copied to the
host only when the family asks for them). Each entrant then runs ``WARMUPS`` times untimed and is
timed right after, on the caller's stream, the L2 flushed before each sample: ``samples`` each,
medians in ms. (Blocks, not rounds: timed in interleaved rounds on the H200, gemm races' library
calls read 15-50 us above their time in use and kernels won races they lose in use:
results/benchmarks/serving_interleaved_races.json.) The library call is timed in a second block after
the kernels' and keeps the block of the lower median: a race's first block can catch the device
leaving its idle clocks (a 1 x 4096 x 4096 gemm's cuBLAS call read 36.1 us in the first block of a
serving run, 18.0 us in use, and a 18.8 us kernel won the race: results/README.md, session 24).
``budget_s`` bounds the whole race: the reference, each candidate's compile and check, and the timing
every admitted runner will take (estimated from its warm runs: ``RaceBudget``); a candidate that would
pass it is left out and listed, but the first kernel to verify is timed whatever the budget.
Needs torch (the library call and the events).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..cuda_api import pack, steps_launcher
from ..dtypes import element_type
from ..families.base import Problem
from ..families.contract import Family
from ..params import Config
from ..runner.worker import disagreement

FLUSH_BYTES = 256 * 2**20  # larger than any L2 tunebox targets (H200: 60 MiB)
WARMUPS = 3  # untimed runs of each verified entrant before its samples
Steps = Callable[[Config], tuple[Any, ...]]  # the loaded launches of a configuration (Launcher.steps)


@dataclass(frozen=True)
class Entrant:
    """One runner of a race: a kernel configuration, or the library call (``config`` None)."""

    label: str
    config: dict[str, Any] | None
    verdict: str  # "ok", or why it was left out (wrong result, compile error, over budget)
    samples_ms: tuple[float, ...] = ()

    @property
    def median_ms(self) -> float | None:
        return statistics.median(self.samples_ms) if self.samples_ms else None


@dataclass
class RaceBudget:
    """A race's time budget (s, on ``clock``): what has passed since ``started`` plus the timing the
    admitted runners will still take (``reserve``, estimated). ``race`` reserves the library call's
    timing first, as it is timed whatever. The first kernel that verifies is admitted whatever the
    budget, so that a race keeps a kernel where one verifies; after it, a candidate starts only while
    what is left covers the costliest candidate so far, its compile, check and timing (``starts``; a
    start on any budget left let the last check pass a 0.5 s budget by 53 ms on the H200: results/README.md,
    thirtieth session), and is timed only if its timing fits what is left after its check (``admit``)."""

    seconds: float
    started: float
    clock: Callable[[], float] = time.perf_counter
    reserved: float = 0.0
    kernels: int = 0  # kernels admitted to the timing
    costliest: float = 0.0  # s: the most a candidate's compile, check and timing took so far (``spent``)

    def left(self) -> float:
        return self.seconds - (self.clock() - self.started) - self.reserved

    def reserve(self, timing_s: float) -> None:
        self.reserved += timing_s

    def starts(self) -> bool:
        """Whether the next candidate is compiled and checked."""
        return not self.kernels or self.left() > self.costliest

    def spent(self, seconds: float) -> None:
        """A candidate's compile and check took ``seconds`` (plus its timing's estimate, if it verified)."""
        self.costliest = max(self.costliest, seconds)

    def admit(self, timing_s: float) -> bool:
        """Whether a verified kernel whose timing takes ``timing_s`` is timed (then reserved)."""
        if self.kernels and timing_s > self.left():
            return False
        self.reserve(timing_s)
        self.kernels += 1
        return True


def timing_seconds(run_s: float, sample_s: float, samples: int) -> float:
    """Host seconds the timing of a runner takes: ``WARMUPS`` runs, then ``samples`` flushed ones
    (``run_s``: one run and its synchronisation; ``sample_s``: one sample around nothing, its flush,
    events and synchronisation)."""
    return WARMUPS * run_s + samples * (sample_s + run_s)


@dataclass(frozen=True)
class RaceResult:
    """Every entrant, the fastest verified kernel (None if none passed) and the library call; the race's
    seconds, and of them ``setup_s`` before the first candidate (the reference, the tolerance, the
    library call's check, a sample's own cost)."""

    entrants: tuple[Entrant, ...]
    kernel: Entrant | None
    library: Entrant | None
    seconds: float
    setup_s: float = 0.0


def race(
    family: Family[Any],
    problem: Problem,
    tensors: Mapping[str, Any],
    candidates: Sequence[Config],
    steps: Steps,
    stream: int,
    samples: int = 5,
    budget_s: float = 0.5,
) -> RaceResult:
    """Race ``candidates`` and the library call at ``problem`` on ``tensors`` (the caller's torch
    tensors by buffer name) on the stream ``stream`` (see the module doc)."""
    import torch

    budget = RaceBudget(budget_s, time.perf_counter())
    buffers = family.buffers(problem)
    inputs = {b.name: tensors[b.name] for b in buffers if b.role == "input"}
    outputs = [b for b in buffers if b.role == "output"]
    device = next(iter(inputs.values())).device
    # torch's own object for the legacy default stream (0): torch.cuda.ExternalStream(0) is not it, and
    # events recorded there did not bracket the driver's launches on stream 0 (the H200 run timed nothing)
    on = torch.cuda.ExternalStream(stream, device=device) if stream else torch.cuda.default_stream(device)
    with torch.cuda.device(device), torch.cuda.stream(on):
        scratch = {b.name: _poisoned(torch, b.shape, b.dtype, device) for b in outputs}
        baselines = family.torch_baselines(problem)
        expected = baselines[-1].run({k: _bits(torch, v) for k, v in inputs.items()})
        tolerance = family.tolerance(problem, _HostInputs(torch, inputs))
        workspace = {
            b.name: (torch.zeros if b.zeroed else torch.empty)(max(1, b.nbytes), dtype=torch.uint8, device=device)
            for b in buffers
            if b.role == "workspace"
        }
        flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device=device)

        # a sample's own cost: its flush, its events, their synchronisation (the flush alone left the
        # events out, and a serving run's race passed its 0.5 s budget by 1 ms: results/README.md, session 25)
        def empty() -> float:
            return _sample(torch, flush, lambda: None)

        sample_s = _warm_wall(torch, empty, _wall(torch, empty))

        def verdict() -> str:
            torch.cuda.current_stream().synchronize()
            wrong = [
                f"{name}: {why}"
                for name in scratch
                if (why := disagreement(_bits(torch, scratch[name]), _bits(torch, expected[name]), tolerance))
            ]
            return "ok" if not wrong else "wrong result: " + "; ".join(wrong)

        entrants: list[Entrant] = []
        runs: dict[str, Callable[[], object]] = {}
        main = baselines[0]
        if main.into is not None:
            into = main.into
            library_inputs, library_outputs = dict(inputs), dict(scratch)
            runs[main.name] = lambda: into(library_inputs, library_outputs)
            first_s = _wall(torch, runs[main.name])
            entrants.append(Entrant(main.name, None, verdict()))
            # timed twice: before the kernels and after them
            budget.reserve(2 * timing_seconds(_warm_wall(torch, runs[main.name], first_s), sample_s, samples))
        from cuda.core import Stream

        core_stream = Stream.from_handle(stream)
        pointers = {
            **{k: v.data_ptr() for k, v in inputs.items()},
            **{k: v.data_ptr() for k, v in scratch.items()},
            **{k: v.data_ptr() for k, v in workspace.items()},
        }
        past = f"left out: past the {budget_s:g} s budget"
        setup_s = time.perf_counter() - budget.started
        for config in candidates:
            label = config.label()
            if not budget.starts():
                entrants.append(Entrant(label, config.as_dict(), past))
                continue
            begun = time.perf_counter()
            for t in scratch.values():
                _poison(torch, t)
            try:
                launches = steps(config)
                run = steps_launcher(core_stream, [(k, g, pack(a, pointers)) for k, g, a in launches])
                first_s = _wall(torch, run)
            except Exception as exc:  # a candidate that cannot run is left out, with the reason
                budget.spent(time.perf_counter() - begun)
                entrants.append(Entrant(label, config.as_dict(), f"failed: {type(exc).__name__}: {exc}"))
                continue
            checked = verdict()
            if checked == "ok":
                timing = timing_seconds(_warm_wall(torch, run, first_s), sample_s, samples)
                budget.spent(time.perf_counter() - begun + timing)
                checked = "ok" if budget.admit(timing) else f"{past} (checked, not timed)"
            else:
                budget.spent(time.perf_counter() - begun)
            entrants.append(Entrant(label, config.as_dict(), checked))
            runs[label] = run
        # the library call is timed whatever its verdict: it is what the caller would run otherwise
        timed = {e.label: e for e in entrants if e.verdict == "ok" or e.config is None}

        def block(label: str) -> list[float]:  # its untimed runs, then its samples (see the module doc)
            for _ in range(WARMUPS):
                runs[label]()
            return [_sample(torch, flush, runs[label]) for _ in range(samples)]

        collected = timed_blocks(list(timed), main.name, block)
    final = tuple(
        Entrant(e.label, e.config, e.verdict, tuple(collected[e.label])) if e.label in timed else e for e in entrants
    )
    kernels = [e for e in final if e.config is not None and e.median_ms is not None]
    kernel = min(kernels, key=lambda e: e.median_ms or 0.0) if kernels else None
    library = next((e for e in final if e.config is None), None)
    return RaceResult(final, kernel, library, time.perf_counter() - budget.started, setup_s)


def timed_blocks(labels: list[str], library: str, block: Callable[[str], list[float]]) -> dict[str, list[float]]:
    """Each runner's samples (``block(label)``, in ``labels``' order); the ``library`` call, when it is
    among them beside a kernel, timed again after the others, its block of the lower median kept (the
    first of equals)."""
    collected = {label: block(label) for label in labels}
    if library in collected and len(collected) > 1:
        collected[library] = min(collected[library], block(library), key=statistics.median)
    return collected


def _wall(torch: Any, run: Callable[[], object]) -> float:
    """Host seconds of one ``run`` on the current stream, through its synchronisation."""
    begun = time.perf_counter()
    run()
    torch.cuda.current_stream().synchronize()
    return time.perf_counter() - begun


def _warm_wall(torch: Any, run: Callable[[], object], first_s: float) -> float:
    """Host seconds of a warm ``run``: the faster of its first run (``first_s``, which may have loaded
    a module or chosen an algorithm) and one more."""
    return min(first_s, _wall(torch, run))


def _sample(torch: Any, flush: Any, run: Callable[[], object]) -> float:
    """One flushed sample of ``run`` on the current stream, in ms."""
    flush.zero_()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    run()
    stop.record()
    stop.synchronize()
    return float(start.elapsed_time(stop))


_INT = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}


def _bits(torch: Any, tensor: Any) -> Any:
    """A tensor's elements as the signed integer type of their width (uint8 for bytes)."""
    return tensor.view(getattr(torch, _INT[tensor.element_size()]))


def _poisoned(torch: Any, shape: tuple[int, ...], dtype: str, device: Any) -> Any:
    return _poison(torch, torch.empty(shape, dtype=getattr(torch, dtype), device=device))


def _poison(torch: Any, tensor: Any) -> Any:
    """Fill a float tensor with its type's poison bits (a NaN no output ever holds)."""
    name = str(tensor.dtype).removeprefix("torch.")
    if name not in ("float32", "float16", "bfloat16"):
        return tensor.zero_()
    et = element_type(name)
    width = 8 * et.itemsize
    signed = et.poison - (1 << width) if et.poison >= 1 << (width - 1) else et.poison
    _bits(torch, tensor).fill_(signed)
    return tensor


class _HostInputs(Mapping[str, np.ndarray]):
    """The inputs as numpy bits, each copied from the device only when asked for (a family's tolerance
    may read them; data-movement families never do)."""

    def __init__(self, torch: Any, tensors: Mapping[str, Any]) -> None:
        self._torch = torch
        self._tensors = tensors
        self._copied: dict[str, np.ndarray] = {}

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._copied:
            tensor = self._tensors[name]
            bits = _bits(self._torch, tensor).cpu().numpy()
            self._copied[name] = bits.view(np.dtype(f"u{tensor.element_size()}"))
        return self._copied[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tensors)

    def __len__(self) -> int:
        return len(self._tensors)
