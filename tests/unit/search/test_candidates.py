"""search/candidates.py: a small space enumerated, a large one sampled (seeded, uniform, in the space's
order), the configurations a caller keeps joining where valid; a replay's candidates without
enumeration; positions in a space's iteration order (the sweep loop's use: test_sweep_pipeline.py)."""

from __future__ import annotations

import pytest

from tunebox.params import TEMPLATE, Config, Param, Space, TemplateSpaces
from tunebox.search.candidates import among, candidates, config_at, position_of

SPACES = TemplateSpaces(
    (
        ("wide", Space(tuple(Param(f"p{i}", tuple(range(10))) for i in range(4)))),  # 10,000
        ("narrow", Space((Param("BM", (1, 2, 4)),))),
    )
)


def test_a_configuration_is_found_by_its_position_and_the_position_by_it() -> None:
    """``config_at`` and ``position_of`` agree with the iteration order across templates; a position
    outside the space raises."""
    configs = list(SPACES)
    assert [config_at(SPACES, i) for i in range(SPACES.size())] == configs
    assert [position_of(SPACES, c) for c in configs] == list(range(SPACES.size()))
    for outside in (-1, SPACES.size()):
        with pytest.raises(IndexError, match=f"configuration {outside} of a space of {SPACES.size()}"):
            config_at(SPACES, outside)


def even(config: Config) -> bool:
    """A stand-in rule: half the configurations break it."""
    return sum(v for k, v in config.items if k != TEMPLATE) % 2 == 0


def test_a_space_within_the_limit_is_enumerated() -> None:
    chosen = candidates(SPACES, even, seed=0, limit=SPACES.size())
    assert not chosen.sampled and chosen.checked == SPACES.size()
    assert list(chosen.configs) == [c for c in SPACES if even(c)]


def test_a_larger_space_is_sampled_uniformly_and_the_same_for_a_seed() -> None:
    chosen = candidates(SPACES, even, seed=3, limit=2_000)
    assert chosen.sampled and chosen.checked == 2_000
    assert all(even(c) for c in chosen.configs) and 800 < len(chosen.configs) < 1_200  # half of 2,000
    positions = [position_of(SPACES, c) for c in chosen.configs]
    assert positions == sorted(set(positions))  # distinct, in the space's order
    assert sum(p < 5_000 for p in positions) / len(positions) > 0.4  # not one end of the space
    assert candidates(SPACES, even, seed=3, limit=2_000) == chosen
    assert candidates(SPACES, even, seed=4, limit=2_000).configs != chosen.configs


def test_kept_configurations_join_a_sample_where_valid() -> None:
    wanted = {TEMPLATE: "wide", "p0": 9, "p1": 9, "p2": 9, "p3": 1}  # valid (28)
    broken = {**wanted, "p3": 2}  # breaks the rule
    foreign = {**wanted, "p3": 11}  # outside the space
    chosen = candidates(SPACES, even, seed=0, limit=10, keep=[wanted, broken, foreign, wanted])
    assert SPACES.validate(wanted) in chosen.configs
    assert SPACES.validate(broken) not in chosen.configs and len(set(chosen.configs)) == len(chosen.configs)


def test_a_replays_candidates_are_its_recorded_ones_in_the_space_order() -> None:
    recorded = [config_at(SPACES, i).as_dict() for i in (10_002, 7, 8, 7, 10_001)]
    foreign = {TEMPLATE: "narrow", "BM": 3}  # a value the space does not hold
    assert among(SPACES, [*recorded, foreign], even) == tuple(config_at(SPACES, i) for i in (8, 10_001, 10_002))
