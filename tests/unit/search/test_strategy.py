"""Strategies draw only from the valid configurations: TPE over the valid-configuration tree (the
template first), random without replacement, exhaustive in order; none repeats or proposes an
invalid configuration, and TPE resumes from logged evaluations."""

from __future__ import annotations

import itertools
import time

from strategy_fixtures import SPACE, VALID, cost, drain, is_valid, record

from tunebox.params import TEMPLATE
from tunebox.records import Status, canonical_json
from tunebox.search.ask import Ask
from tunebox.search.strategy import ExhaustiveStrategy, RandomStrategy, TimedStrategy, TpeStrategy, ValidTree


def test_the_tree_holds_exactly_the_valid_configurations() -> None:
    tree = ValidTree(SPACE, VALID)
    for config in SPACE:
        assert (tree.walk(config.as_dict()) is not None) == is_valid(config)


def test_tpe_proposes_every_valid_configuration_once_and_nothing_else() -> None:
    asked = drain(TpeStrategy(SPACE, VALID, seed=3))
    keys = [canonical_json(v) for v in asked]
    assert len(keys) == len(set(keys)) == len(VALID)
    assert {canonical_json(c.as_dict()) for c in VALID} == set(keys)


def test_tpe_finds_the_optimum_early_on_a_smooth_cost() -> None:
    best = min(VALID, key=lambda c: cost(c.as_dict())).as_dict()
    positions = []
    for seed in range(5):
        strategy = TpeStrategy(SPACE, VALID, seed=seed)
        evaluated = 0
        while (ask := strategy.ask()) is not None and ask.values != best:
            strategy.tell(ask, record(ask.values))
            evaluated += 1
        positions.append(evaluated)
    assert sum(positions) / len(positions) < len(VALID) / 2, positions  # random's expectation


def test_tpe_resumes_without_proposing_logged_configurations() -> None:
    history = [record(c.as_dict()) for c in VALID[:10]] + [record(VALID[10].as_dict(), Status.WRONG_RESULT)]
    strategy = TpeStrategy(SPACE, VALID, seed=0, history=history)
    assert len(strategy.study.trials) == 11
    asked = {canonical_json(v) for v in drain(strategy)}
    assert asked.isdisjoint(canonical_json(r.config) for r in history)
    assert len(asked) == len(VALID) - 11


def test_a_narrowed_decision_gets_a_name_of_its_own() -> None:
    tree = ValidTree(SPACE, VALID)
    ring = tree.root.children["ring"]
    name, dist = tree.distribution("ring", ring)
    assert (name, dist.choices) == ("ring.BM", (1, 2, 4, 8))
    name, dist = tree.distribution("ring", ring.children[2])
    assert (name, dist.choices) == ("ring.stages[1|2]", (1, 2))


def test_seeded_configuration_comes_first() -> None:
    seeded = VALID[-1]
    for strategy in (TpeStrategy(SPACE, VALID, seed=0), RandomStrategy(VALID, seed=0), ExhaustiveStrategy(VALID)):
        strategy.seed(seeded)
        first = strategy.ask()
        assert first is not None and first.values == seeded.as_dict()


def test_random_is_a_seeded_permutation_of_the_valid_configurations() -> None:
    a, b, c = (drain(RandomStrategy(VALID, seed=s)) for s in (1, 1, 2))
    assert a == b != c
    assert sorted(map(canonical_json, a)) == sorted(canonical_json(x.as_dict()) for x in VALID)


def test_an_empty_valid_set_asks_nothing() -> None:
    assert TpeStrategy(SPACE, [], seed=0).ask() is None
    assert RandomStrategy([], seed=0).ask() is None


def test_unrelated_parameters_never_combine() -> None:
    for values in itertools.islice(drain(TpeStrategy(SPACE, VALID, seed=1)), 40):
        assert ("stages" in values) == (values[TEMPLATE] == "ring")
        assert ("vec" in values) == (values[TEMPLATE] == "vector")


def test_a_timed_strategy_adds_its_asks_and_tells_to_the_search_stage() -> None:
    class Slow:
        def seed(self, config):
            pass

        def ask(self):
            time.sleep(0.02)
            return Ask(None, {"x": 1})

        def tell(self, ask, record):
            time.sleep(0.01)

    breakdown = {"search": 0.0}
    timed = TimedStrategy(Slow(), breakdown)
    ask = timed.ask()
    assert ask is not None and ask.values == {"x": 1}
    timed.tell(ask, None)
    assert 0.03 <= breakdown["search"] < 1.0
