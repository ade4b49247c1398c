"""Jobs the GPU tests send to the worker: verify one variant (bit for bit, untimed), or time variants
with the family's torch baseline interleaved."""

from __future__ import annotations

import dataclasses

from tunebox.families.base import KernelSource, Problem
from tunebox.families.contract import Family
from tunebox.params import Config
from tunebox.records import Status
from tunebox.runner.protocol import EvaluateJob, Outcome, RetimeJob, Variant, variant_of
from tunebox.runner.timing import SCREEN


def variant(builder, family: Family, problem: Problem, config: Config, source: KernelSource | None = None) -> Variant:
    build = builder.build_one(source or family.render(problem, config))
    assert build.status is Status.OK, build.log
    return variant_of(family, problem, config, build)


def evaluate(
    runner,
    builder,
    family: Family,
    problem: Problem,
    config: Config,
    source: KernelSource | None = None,
    timeout_s: float | None = None,
) -> Outcome:
    """Verify ``config`` (or ``source``, a sabotaged rendering of it) on ``problem``, untimed."""
    job = EvaluateJob(
        family.name, problem.to_dict(), variant(builder, family, problem, config, source), SCREEN, 1234, time=False
    )
    return runner.run(job, timeout_s=timeout_s)


def retime_with_baseline(runner, builder, family: Family, problem: Problem, config: Config) -> list[Outcome]:
    """The variant's timing, then the torch baseline's (verified against the reference first)."""
    job = RetimeJob(family.name, problem.to_dict(), (variant(builder, family, problem, config),), SCREEN, 7)
    return runner.run(job)


def assert_sabotage_caught(
    runner,
    builder,
    family: Family,
    problem: Problem,
    config: Config,
    find: str,
    replace_with: str,
    expect: str = "never written",
) -> None:
    """A rendering of ``config`` with ``find`` replaced by ``replace_with`` in its source must fail
    verification with ``expect`` in the message, and the untouched rendering must pass."""
    good = family.render(problem, config)
    sabotaged = dataclasses.replace(good, code=good.code.replace(find, replace_with))
    assert sabotaged.code != good.code, f"{find!r} is not in the source"
    outcome = evaluate(runner, builder, family, problem, config, sabotaged)
    assert outcome.status is Status.WRONG_RESULT and expect in outcome.message, outcome.message
    assert evaluate(runner, builder, family, problem, config).status is Status.OK
