"""The recorded problems a strategy benchmark replays: each problem's valid configurations with their
recorded median times, the space they come from, and the warm-start seeds the nearest other problems
give (``strategy_benchmark`` runs strategies on them)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import SpaceError
from ..params import Config, TemplateSpaces
from ..records import EvalRecord, Status, canonical_json
from ..store.evallog import EvalLog
from ..store.recordings import shipped_recording
from ..sweep_spec import load_sweep
from .candidates import valid_for
from .warm_start import DEFAULT_LIMIT, Tuned, warm_seeds

Trace = list[float]  # median ms of each distinct configuration evaluated, in order (inf: failed)
StrategyRun = Callable[["ReplayProblem", int, int], Trace]


@dataclass(frozen=True)
class ReplayProblem:
    """One recorded problem: the valid configurations its recording measured, with their times."""

    sweep: str
    name: str
    family: str
    problem: dict[str, Any]
    space: TemplateSpaces
    configs: tuple[Config, ...]  # valid and measured, in the space's order
    times: tuple[float, ...]  # median ms of each (inf where the variant failed)
    valid: int  # configurations of the sweep's space breaking no validity rule, measured or not
    device: str = ""
    warm: tuple[Config, ...] = ()  # warm start's seeds: the nearest other problems' winners (warm_start)

    @property
    def label(self) -> str:
        return f"{self.sweep}/{self.name}"

    @property
    def complete(self) -> bool:
        """Whether the recording measured every valid configuration (an exhaustive recording)."""
        return len(self.configs) == self.valid

    def lookup(self) -> dict[str, float]:
        """Median ms by configuration (canonical JSON)."""
        return {canonical_json(c.as_dict()): t for c, t in zip(self.configs, self.times, strict=True)}


def load_problems(sweep: Path, recording: Path | None = None) -> list[ReplayProblem]:
    """The problems of a sweep file, each restricted to the valid configurations its recording
    (default ``results/recordings/<name>.jsonl.gz`` beside the sweep file's folder) measured in the
    screening phase. A configuration's time is the median of its screening samples."""
    spec = load_sweep(sweep)
    path = recording or shipped_recording(spec.source, spec.name)
    if not path.exists():
        raise SpaceError(
            f"{sweep}: no recording at {path} (record the sweep on a GPU host, or give the folder holding "
            "<sweep name>.jsonl.gz with --recordings)"
        )
    records = EvalLog(path).read()
    others = sorted({r.family for r in records} - {spec.family.name})
    if others:
        raise SpaceError(f"{path} is a recording of {', '.join(others)}, not of {spec.family.name}: give {sweep}'s own")
    problems = []
    for named in spec.problems:
        key = named.problem.key()
        measured: dict[str, EvalRecord] = {}
        for r in records:
            if r.phase == "screen" and r.config and canonical_json(r.problem) == key:
                measured[canonical_json(r.config)] = r
        valid = list(filter(valid_for(spec.family, named.problem), spec.space))  # its count: ``complete``
        configs, times = [], []
        for c in valid:
            record = measured.get(canonical_json(c.as_dict()))
            if record is None:
                continue
            configs.append(c)
            ok = record.status is Status.OK and record.timing is not None
            times.append(record.timing.median_ms if ok and record.timing else math.inf)
        if not any(math.isfinite(t) for t in times):
            raise SpaceError(f"{path}: no valid configuration of {named.name} was measured")
        devices = {r.device.name for r in measured.values() if r.device is not None}
        problems.append(
            ReplayProblem(
                spec.name,
                named.name,
                spec.family.name,
                named.problem.to_dict(),
                spec.space,
                tuple(configs),
                tuple(times),
                len(valid),
                ", ".join(sorted(devices)),
            )
        )
    return problems


def with_warm_seeds(problems: Sequence[ReplayProblem], limit: int = DEFAULT_LIMIT) -> list[ReplayProblem]:
    """The problems, each with ``warm`` set to warm start's seeds leave-one-problem-out: the
    winners (best recorded configuration) of the other problems of its family, nearest first by the
    family's ``distance``, re-validated against the problem's valid configurations
    (``warm_start.warm_seeds``)."""
    from .. import families

    out = []
    for p in problems:
        family = families.get(p.family)
        tuned = [
            Tuned(q.problem, q.configs[min(range(len(q.times)), key=q.times.__getitem__)].as_dict())
            for q in problems
            if q.family == p.family and q.label != p.label
        ]
        seeds = warm_seeds(family, family.parse_problem(p.problem), tuned, p.configs, limit)
        out.append(replace(p, warm=tuple(seeds)))
    return out
