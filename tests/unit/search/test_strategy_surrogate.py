"""The surrogate strategy (the default): only valid, new proposals; the same proposals for the same
seed; warm-start seeds first; tiny spaces; resumes; and warm start's choice of seeds."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
from strategy_fixtures import SPACE, VALID, cost, drain, record

from tunebox.params import TEMPLATE, Config, Param, Space, TemplateSpaces, Value
from tunebox.records import EvalRecord, Status, Timing, canonical_json
from tunebox.search.surrogate import SurrogateOptions, SurrogateStrategy, features, modelled_answers
from tunebox.search.warm_start import Tuned, warm_seeds


def keys(values: list[dict]) -> list[str]:
    return [canonical_json(v) for v in values]


def test_proposes_every_valid_configuration_once_and_nothing_else() -> None:
    asked = keys(drain(SurrogateStrategy(SPACE, VALID, seed=3)))
    assert len(asked) == len(set(asked)) == len(VALID)
    assert set(asked) == {canonical_json(c.as_dict()) for c in VALID}


def test_same_seed_same_proposals_other_seed_other_start() -> None:
    a, b = (drain(SurrogateStrategy(SPACE, VALID, seed=7)) for _ in range(2))
    assert a == b
    firsts = {canonical_json(drain(SurrogateStrategy(SPACE, VALID, seed=s), limit=1)[0]) for s in range(8)}
    assert len(firsts) > 1


def test_warm_start_seeds_come_first_in_order_invalid_ones_skipped() -> None:
    values: dict[str, Value] = {TEMPLATE: "ring", "BM": 1, "stages": 4}
    invalid = Config(tuple(sorted(values.items())))  # stages > BM: invalid
    seeds = [VALID[-1], invalid, VALID[5], VALID[-1]]
    strategy = SurrogateStrategy(SPACE, VALID, seed=0, seeds=seeds)
    asked = drain(strategy, limit=3)
    assert asked[:2] == [VALID[-1].as_dict(), VALID[5].as_dict()]
    assert asked[2] not in (VALID[-1].as_dict(), VALID[5].as_dict())


def test_a_seed_given_later_still_comes_next() -> None:
    strategy = SurrogateStrategy(SPACE, VALID, seed=0)
    drain(strategy, limit=4)
    strategy.seed(VALID[-2])
    ask = strategy.ask()
    assert ask is not None and ask.values == VALID[-2].as_dict()


def test_tiny_spaces() -> None:
    assert SurrogateStrategy(SPACE, [], seed=0).ask() is None
    assert drain(SurrogateStrategy(SPACE, VALID[:1], seed=0)) == [VALID[0].as_dict()]
    two = drain(SurrogateStrategy(SPACE, VALID[:2], seed=0))
    assert sorted(keys(two)) == sorted(canonical_json(c.as_dict()) for c in VALID[:2])
    one_param = TemplateSpaces((("only", Space((Param("x", (1, 2, 3)),))),))
    strategy, asked = SurrogateStrategy(one_param, list(one_param), seed=1), []
    while (ask := strategy.ask()) is not None:
        asked.append(ask.values["x"])
        strategy.tell(ask, EvalRecord("demo", {}, ask.values, Status.OK, timing=Timing((float(ask.values["x"]),))))
    assert sorted(asked) == [1, 2, 3]


def test_failures_and_a_resumed_log() -> None:
    history = [record(c.as_dict()) for c in VALID[:6]] + [record(VALID[6].as_dict(), Status.WRONG_RESULT)]
    strategy = SurrogateStrategy(SPACE, VALID, seed=0, history=history)
    asked = []
    while (ask := strategy.ask()) is not None:
        asked.append(ask.values)
        failed = len(asked) % 3 == 0
        strategy.tell(ask, record(ask.values, Status.RUNTIME_ERROR if failed else Status.OK))
    assert set(keys(asked)).isdisjoint(canonical_json(r.config) for r in history)
    assert len(asked) == len(VALID) - 7


def test_finds_the_optimum_well_before_random_on_a_smooth_cost() -> None:
    best = min(VALID, key=lambda c: cost(c.as_dict())).as_dict()
    positions = []
    for seed in range(5):
        strategy = SurrogateStrategy(SPACE, VALID, seed=seed)
        evaluated = 1
        while (ask := strategy.ask()) is not None and ask.values != best:
            strategy.tell(ask, record(ask.values))
            evaluated += 1
        positions.append(evaluated)
    assert sum(positions) / len(positions) < (len(VALID) + 1) / 2 / 2, positions  # half random's


def test_features_lie_in_the_unit_cube_one_row_per_config() -> None:
    x = features(SPACE, VALID)
    assert x.shape[0] == len(VALID) and x.shape[1] > 0
    assert float(x.min()) >= 0.0 and float(x.max()) <= 1.0
    assert np.array_equal(features(SPACE, VALID[:3]), features(SPACE, VALID)[:3]) or x.shape[1] > 0


def test_options_need_one_initial_point_and_known_answers() -> None:
    with pytest.raises(ValueError):
        SurrogateOptions(initial=0)
    with pytest.raises(ValueError, match="answers must be one of"):
        SurrogateOptions(answers="times")
    with pytest.raises(ValueError, match="build_cost must be at least 1"):
        SurrogateOptions(build_cost=0.5)


def test_a_warm_cache_is_measured_before_more_is_compiled() -> None:
    """A re-run on the cache a first run filled proposes mostly what that run built (a compile costs
    build_cost evaluations); with nothing built, or everything, the proposals are those without costs."""
    first = drain(SurrogateStrategy(SPACE, VALID, seed=3), limit=12)
    built = [c for c in VALID if c.as_dict() in first]
    again = drain(SurrogateStrategy(SPACE, VALID, seed=3, built=built, options=SurrogateOptions(build_cost=1e6)), 12)
    assert sorted(keys(again)) == sorted(keys(first))
    plain = keys(drain(SurrogateStrategy(SPACE, VALID, seed=5), 20))
    assert keys(drain(SurrogateStrategy(SPACE, VALID, seed=5, built=[]), 20)) == plain
    assert keys(drain(SurrogateStrategy(SPACE, VALID, seed=5, built=VALID), 20)) == plain
    # built only where it is slow (every vector variant): the default cost lets the model's better
    # promise through well before an all but infinite one does
    best = canonical_json(min(VALID, key=lambda c: cost(c.as_dict())).as_dict())
    slow = [c for c in VALID if c[TEMPLATE] == "vector"]
    for seed in range(6):
        modest = keys(drain(SurrogateStrategy(SPACE, VALID, seed=seed, built=slow), len(VALID)))
        costly = SurrogateOptions(build_cost=1e6)
        strict = keys(drain(SurrogateStrategy(SPACE, VALID, seed=seed, built=slow, options=costly), len(VALID)))
        assert modest.index(best) < strict.index(best), seed


def test_asked_for_a_built_configuration_it_gives_only_built_ones_each_once() -> None:
    """``ask_built`` draws from what was built when the strategy began, by the model once it has two
    answers; ``ask`` never proposes what it gave; without a built set it has nothing."""
    built = [c for c in VALID if c[TEMPLATE] == "ring"]
    strategy = SurrogateStrategy(SPACE, VALID, seed=2, built=built)
    given: list[dict] = []
    while (ask := strategy.ask_built()) is not None:
        assert ask.values[TEMPLATE] == "ring" and ask.values not in given
        given.append(ask.values)
        strategy.tell(ask, record(ask.values))
        if len(given) % 3 == 0:  # plain asks between: neither kind proposes what the other gave
            plain = strategy.ask()
            assert plain is not None and plain.values not in given
            given.append(plain.values)
            strategy.tell(plain, record(plain.values))
    assert sorted(keys([c.as_dict() for c in built])) == sorted(keys([v for v in given if v[TEMPLATE] == "ring"]))
    assert SurrogateStrategy(SPACE, VALID, seed=2).ask_built() is None


def test_asked_for_a_built_configuration_the_model_picks_the_promising_one() -> None:
    """Told the slow vector corner and the fast ring one, the model's built pick is near the fast one."""
    built = [c for c in VALID if c[TEMPLATE] == "ring"]
    strategy = SurrogateStrategy(SPACE, VALID, seed=1, built=built)
    for values in ({TEMPLATE: "vector", "BM": 1, "BN": 16, "vec": 2}, {TEMPLATE: "ring", "BM": 8, "stages": 4}):
        config = Config(tuple(sorted(values.items())))
        strategy.seed(config)
        ask = strategy.ask()
        assert ask is not None and ask.values == config.as_dict()
        strategy.tell(ask, record(ask.values))
    ask = strategy.ask_built()
    assert ask is not None and ask.values[TEMPLATE] == "ring" and cost(ask.values) <= 2.0


def test_the_modelled_answers_ranks_or_log_times_failures_past_the_slowest() -> None:
    """Ranks: the normal scores of the order (equal times share one, the scale of the times plays no
    part); log: the log-times; a failure one spread past the slowest success either way."""
    logs = np.log(np.array([2.0, 1.0, math.inf, 1000.0, 2.0]))
    ranks = modelled_answers(logs, "ranks")
    assert ranks[1] < ranks[0] == ranks[4] < ranks[3] < ranks[2]
    assert np.isclose(ranks[3] - ranks[1], 2 * 1.1503493803760079)  # the scores of 1 / 8 and 7 / 8
    assert np.array_equal(modelled_answers(np.log(np.array([2.0, 1.0, math.inf, 3.0, 2.0])), "ranks"), ranks)
    assert np.isclose(ranks[2], ranks[3] + (ranks[3] - ranks[1]))
    log = modelled_answers(logs, "log")
    assert np.array_equal(log[[0, 1, 3, 4]], logs[[0, 1, 3, 4]]) and np.isclose(log[2], 2 * math.log(1000.0))


class _Line:
    """A stand-in family: problems are {"n": int, "kind": str}; distance |log2 n - log2 n'| within
    a kind, None across kinds."""

    class _P:
        def __init__(self, data: Mapping[str, Any]) -> None:
            self.n, self.kind = int(data["n"]), str(data["kind"])

        def key(self) -> str:
            return canonical_json({"n": self.n, "kind": self.kind})

    def parse_problem(self, data: Mapping[str, Any]) -> _Line._P:
        return self._P(data)

    def distance(self, a: _Line._P, b: _Line._P) -> float | None:
        return abs(math.log2(a.n / b.n)) if a.kind == b.kind else None


def test_warm_seeds_nearest_first_revalidated_and_limited() -> None:
    family: Any = _Line()
    problem = family.parse_problem({"n": 64, "kind": "a"})
    invalid = {TEMPLATE: "ring", "BM": 1, "stages": 4}
    tuned = [
        Tuned({"n": 1024, "kind": "a"}, VALID[1].as_dict()),
        Tuned({"n": 128, "kind": "a"}, VALID[2].as_dict()),
        Tuned({"n": 64, "kind": "a"}, VALID[3].as_dict()),  # the problem itself: left out
        Tuned({"n": 32, "kind": "a"}, invalid),  # not valid here: skipped
        Tuned({"n": 60, "kind": "b"}, VALID[4].as_dict()),  # incomparable
        Tuned({"n": 256, "kind": "a"}, VALID[2].as_dict()),  # the same winner again
    ]
    assert warm_seeds(family, problem, tuned, VALID) == [VALID[2], VALID[1]]
    assert warm_seeds(family, problem, tuned, VALID, limit=1) == [VALID[2]]
    assert warm_seeds(family, problem, tuned, VALID, incomparable=True) == [VALID[2], VALID[1], VALID[4]]
    assert warm_seeds(family, problem, [], VALID) == []


def test_a_batch_of_asks_spreads_around_its_picks(monkeypatch) -> None:
    """Between two answers, each later ask of a batch is taken after lowering expected improvement
    around the earlier picks: its configurations lie farther apart than the plain top of expected
    improvement's ranking (the same fit, penalisation switched off)."""
    from tunebox.search import surrogate

    def batch() -> list[dict]:
        strategy = SurrogateStrategy(SPACE, VALID, seed=2)
        drain(strategy, limit=6)  # asked and answered one at a time: the model is fitted
        asks = [strategy.ask() for _ in range(6)]  # then six before any answer
        return [a.values for a in asks if a is not None]

    def closest(values: list[dict]) -> float:
        x = features(SPACE, [Config(tuple(sorted(v.items()))) for v in values])
        gaps = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
        return float(gaps[~np.eye(len(values), dtype=bool)].min())

    spread = batch()
    monkeypatch.setattr(surrogate, "_penalised", lambda scores, near: scores)
    plain = batch()
    assert spread[0] == plain[0] and spread != plain
    assert closest(spread) > closest(plain)


def test_asks_in_a_batch_before_their_answers_are_distinct() -> None:
    strategy = SurrogateStrategy(SPACE, VALID, seed=2)
    drain(strategy, limit=4)  # the model is fitted from here on
    batch = [strategy.ask() for _ in range(5)]
    assert all(a is not None for a in batch)
    assert len({canonical_json(a.values) for a in batch if a is not None}) == 5
    for a in batch:
        assert a is not None
        strategy.tell(a, record(a.values))


def test_the_hyperparameter_grid_is_searched_while_answers_are_few_then_on_ten_percent_growth(monkeypatch) -> None:
    """Every fit searches the (length scale, noise) grid up to 30 answers; later only once the answers
    grew by 10% since the last search, the fits between extending the last one by its new answers."""
    from tunebox.search import surrogate

    grids: list[int] = []
    fit = surrogate._fit

    def counting(x, z, dims):
        grids.append(len(z))
        return fit(x, z, dims)

    monkeypatch.setattr(surrogate, "_fit", counting)
    values = [Param("a", tuple(range(1, 9))), Param("b", tuple(range(1, 9)))]
    space = TemplateSpaces((("only", Space(tuple(values))),))
    configs = list(space)
    strategy = SurrogateStrategy(space, configs, seed=0)
    for _ in range(60):
        ask = strategy.ask()
        assert ask is not None
        strategy.tell(ask, EvalRecord("demo", {}, dict(ask.values), Status.OK, timing=Timing((1.0 + ask.values["a"],))))
    assert grids[: grids.index(30) + 1] == list(range(2, 31))  # every answer up to 30
    later = grids[grids.index(30) :]
    assert later == [30, 33, 37, 41, 46, 51, 57]  # each at least 1.1 x the last


def test_a_posterior_extended_answer_by_answer_is_the_one_factorised_at_once() -> None:
    """_Posterior.extend (a row of the Cholesky factor's inverse per answer) gives the posterior mean,
    variance and expected improvement that factorising all the answers at once gives."""
    from tunebox.search import surrogate

    rng = np.random.default_rng(3)
    x = rng.random((200, 4))
    columns = surrogate._Columns(x)
    told = [int(i) for i in rng.choice(200, 40, replace=False)]
    z = rng.standard_normal(40)
    scale, noise = 0.7, 1e-2

    def chol_of(indices: list[int]) -> np.ndarray:
        k = surrogate._matern(surrogate._squared_distances(x[indices], x[indices]), scale)
        return np.linalg.cholesky(k + (noise + surrogate.JITTER) * np.eye(len(indices)))

    at_once = surrogate._Posterior(columns, told, scale, noise, chol_of(told))
    grown = surrogate._Posterior(columns, told[:5], scale, noise, chol_of(told[:5]))
    assert all(grown.extend(columns, i) for i in told[5:])
    assert grown.told == told
    np.testing.assert_allclose(grown.v2, at_once.v2, atol=1e-9)
    np.testing.assert_allclose(grown.v.T @ (grown.inverse @ z), at_once.v.T @ (at_once.inverse @ z), atol=1e-8)
    np.testing.assert_allclose(
        grown.expected_improvement(z, -1.0, 0.0), at_once.expected_improvement(z, -1.0, 0.0), atol=1e-8
    )
