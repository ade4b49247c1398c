"""The configurations a search chooses among for one problem.

A space of at most ``limit`` configurations (``LoopSettings.enumerated``) is enumerated and every valid
one is a candidate. A larger one (a conditional space's product grows fast: quant_gemm wgmma's with
split-K and a third converter held 7.0 million, whose enumeration and rule checks outlasted a device
call) is sampled: ``limit`` distinct configurations drawn uniformly, seeded, and the valid ones kept.
Either way the candidates come in the space's iteration order, and the configurations a caller must
keep (the problem's default, stored winners, a resumed sweep's evaluations) join them where valid.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from ..families.base import Problem
from ..families.contract import Family
from ..params import TEMPLATE, Config, Space, TemplateSpaces, Value


def _breaks_none(family: Family[Any], problem: Problem, config: Config) -> bool:
    return not family.violations(problem, config)


def valid_for(family: Family[Any], problem: Problem) -> Callable[[Config], bool]:
    """Whether a configuration breaks none of ``family``'s validity rules for ``problem``."""
    return partial(_breaks_none, family, problem)


def _position_in(space: Space, config: Config) -> int:
    position = 0
    for p in space.params:  # the last parameter varies fastest, as in ``Space.__iter__``
        position = position * len(p.choices) + p.choices.index(config[p.name])
    return position


def _values_in(space: Space, position: int) -> list[tuple[str, Value]]:
    values = []
    for p in reversed(space.params):
        position, digit = divmod(position, len(p.choices))
        values.append((p.name, p.choices[digit]))
    return values


def position_of(space: TemplateSpaces, config: Config) -> int:
    """The position of ``config`` (a configuration of ``space``) in the space's iteration order."""
    before = 0
    for name, own in space.templates:
        if name == config[TEMPLATE]:
            return before + _position_in(own, config)
        before += own.size()
    raise ValueError(f"{config.label()}: its template is not one of {list(space.names())}")


def config_at(space: TemplateSpaces, position: int) -> Config:
    """The configuration at ``position`` of the space's iteration order (templates in declared order),
    found without enumerating those before it."""
    rest = position
    for name, own in space.templates:
        size = own.size()
        if 0 <= rest < size:
            return Config(tuple(sorted((*_values_in(own, rest), (TEMPLATE, name)))))
        rest -= size
    raise IndexError(f"configuration {position} of a space of {space.size()}")


@dataclass(frozen=True)
class Candidates:
    """A problem's candidates: valid configurations in the space's order; ``sampled`` when they come
    from a uniform sample of a space larger than the limit; ``checked``: the configurations drawn and
    checked (all of the space's when not sampled)."""

    configs: tuple[Config, ...]
    sampled: bool
    checked: int


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
        drawn = [(i, config_at(space, i)) for i in indices]
    else:
        drawn = list(enumerate(space))
    chosen = {i: c for i, c in drawn if valid(c)}
    chosen |= {i: c for i, c in _held(space, keep).items() if i not in chosen and valid(c)}
    return Candidates(tuple(chosen[i] for i in sorted(chosen)), sampled, len(drawn))


def among(
    space: TemplateSpaces, recorded: Iterable[Mapping[str, Any]], valid: Callable[[Config], bool]
) -> tuple[Config, ...]:
    """The configurations of ``recorded`` (as logged: plain mappings) that the space holds and ``valid``
    accepts, once each, in the space's order (a replay's candidates, without enumerating the space)."""
    held = _held(space, recorded)
    return tuple(held[i] for i in sorted(held) if valid(held[i]))


def _held(space: TemplateSpaces, recorded: Iterable[Mapping[str, Any]]) -> dict[int, Config]:
    """The configurations of ``recorded`` that the space holds, by their position in it."""
    held = {}
    for values in recorded:
        if space.holds(values):
            config = space.validate(values)
            held[position_of(space, config)] = config
    return held
