"""The configurations a search chooses among for one problem.

A space of at most ``limit`` configurations (``LoopSettings.enumerated``) is enumerated and every valid
one is a candidate. A larger one (a conditional space's product grows fast: quant_gemm wgmma's with
split-K and a third converter held 7.0 million, whose enumeration and rule checks outlasted a device
call) is sampled: ``limit`` distinct configurations drawn uniformly, seeded, and the valid ones kept. Either way the
candidates come in the space's iteration order, and the configurations a caller must keep (the
problem's default, stored winners, a resumed sweep's evaluations) join them where valid.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..params import Config, TemplateSpaces


@dataclass(frozen=True)
class Candidates:
    """A problem's candidates: valid configurations in the space's order; ``sampled`` when they come
    from a uniform sample of a space larger than the limit (then ``checked`` of its ``size``
    configurations were checked)."""

    configs: tuple[Config, ...]
    sampled: bool
    checked: int
    size: int


def candidates(
    space: TemplateSpaces,
    valid: Callable[[Config], bool],
    seed: int,
    limit: int,
    keep: Iterable[Mapping[str, Any]] = (),
) -> Candidates:
    """The valid configurations of ``space`` (all of them when it holds at most ``limit``; else
    those among ``limit`` drawn uniformly without replacement by ``seed``), with every configuration
    of ``keep`` that the space holds and ``valid`` accepts. The same arguments give the same result."""
    size = space.size()
    sampled = size > limit
    if sampled:
        indices = sorted(random.Random(seed).sample(range(size), limit))
        drawn = [(i, space.config_at(i)) for i in indices]
    else:
        drawn = list(enumerate(space))
    chosen = {i: c for i, c in drawn if valid(c)}
    for values in keep:
        if space.holds(values):
            config = space.validate(values)
            index = space.index_of(config)
            if index not in chosen and valid(config):
                chosen[index] = config
    return Candidates(tuple(chosen[i] for i in sorted(chosen)), sampled, len(drawn), size)


def among(space: TemplateSpaces, configs: Iterable[Config], valid: Callable[[Config], bool]) -> tuple[Config, ...]:
    """Those of ``configs`` the space holds and ``valid`` accepts, once each, in the space's order
    (a replay's candidates: the recorded configurations, without enumerating the space)."""
    held = {space.index_of(c): c for c in configs if space.holds(c.as_dict())}
    return tuple(held[i] for i in sorted(held) if valid(held[i]))
