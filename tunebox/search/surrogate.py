"""A Gaussian-process surrogate over the valid configurations' own features: tunebox's default search.

Each valid configuration becomes a point in the unit cube: a numeric parameter whose values are all
positive by the log2 of its value (tile sizes, threads, vector widths and stages act by ratios), any
other by its position in its declared domain, both scaled to [0, 1] over the domain; parameters of
the same name share a coordinate across templates, and the template is one more coordinate per
template (one-hot). With ``ratios``, every pair of log-scaled parameters of a template adds their
sum and difference (bytes per block, rows per thread: what sets a kernel's shape), scaled to [0, 1].

The model is a Gaussian process (Matern 5/2, one length scale, constant mean) on the standardised
normal scores of the measured times' ranks (``SurrogateOptions.answers``; the log-times as an
option); its length scale and noise are picked by marginal likelihood from a small
grid, searched at every answer while answers are few and whenever they grew by 10% later; between,
and across a search that keeps the pair, the posterior grows by a row per answer instead of being
factorised again (``_Posterior``: a median ask of 0.8 ms at up to 300 answers over 2,346 configurations,
2.2 ms at up to 600 over 7,150, on a 2-core CPU, ``results/benchmarks/surrogate_speed.json``). A
proposal maximises expected improvement over the valid configurations not yet evaluated (divided by
a compile's cost where the compile cache does not hold the configuration and holds others), so every
proposal is valid and new.
Before the model: the seeded configurations (warm start: past winners, the family default) in the
order given, then a space-filling design (the first at random, each next one the farthest from all
those so far) until ``initial`` configurations were given (seeded and resumed ones included) and two
succeeded. Failed evaluations are modelled as slower than the slowest success. Asks between two answers share one
fit and never repeat (a batch for the compile pipeline): each later ask of a batch takes the highest
expected improvement after lowering it around the batch's earlier picks by the model's correlation
(local penalisation), so a batch spreads instead of clustering, at one model evaluation per batch.

Deterministic per seed: the only randomness is the first design point and the choice among exact
ties, both drawn from ``numpy.random.default_rng(seed)``.
"""

from __future__ import annotations

import functools
import itertools
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ..params import TEMPLATE, Config, TemplateSpaces, Value
from ..records import EvalRecord, Status, canonical_json
from .ask import Ask

LENGTH_SCALES = (0.1, 0.2, 0.4, 0.8, 1.6)  # in units of the feature cube's diagonal / sqrt(dims)
NOISES = (1e-4, 1e-2, 1e-1)  # variance of the standardised answer
JITTER = 1e-8  # added to the noise: the kernel matrix of coinciding features still factorises
GRID_EVERY_UNTIL = 30  # answers up to which every fit searches the (length scale, noise) grid
GRID_GROWTH = 1.1  # later, the grid is searched again once the answers grew by this factor
ANSWERS = ("log", "ranks")  # SurrogateOptions.answers


@dataclass(frozen=True)
class SurrogateOptions:
    """The strategy's settings (the defaults chosen on the strategy benchmark; its
    ``leave_one_out`` section checks the choice problem by problem).

    ``initial``: configurations given before the model proposes (at least 1; seeded and resumed
    ones count, the design fills the rest; the model also waits for two successes); ``ratios``:
    add the pairwise sum and difference features of log-scaled parameters; ``xi``: expected
    improvement's margin, in standard deviations of the modelled answers; ``answers``: what the model
    fits, "log" (the log-times) or "ranks" (the normal scores of the times' ranks: only their order
    counts, so a few very slow variants do not flatten the differences among the fast ones);
    ``build_cost``: what a configuration whose CUBIN must be compiled costs the sweep, in evaluations of
    a built one (the model proposes by expected improvement per cost; on the H200 a compile takes 0.7
    CPU s, a sixteenth of it on the host's 16 cores, beside ~25 ms of device time: about 3)."""

    initial: int = 2
    ratios: bool = True
    xi: float = 0.0
    answers: str = "ranks"
    build_cost: float = 3.0

    def __post_init__(self) -> None:
        if self.initial < 1:
            raise ValueError(f"initial must be at least 1, got {self.initial}")
        if not self.build_cost >= 1.0:
            raise ValueError(f"build_cost must be at least 1, got {self.build_cost}")
        if self.answers not in ANSWERS:
            raise ValueError(f"answers must be one of {ANSWERS}, got {self.answers!r}")


def _numeric(values: Sequence[Value]) -> bool:
    return all(isinstance(v, int | float) and not isinstance(v, bool) and v > 0 for v in values)


def features(space: TemplateSpaces, configs: Sequence[Config], ratios: bool = True) -> np.ndarray:
    """The configurations as rows of a matrix in [0, 1] (see the module docstring); constant
    columns dropped. Contract: one row per config, in order; equal configs give equal rows."""
    names = space.names()
    domains: dict[str, list[Value]] = {}
    for _, s in space.templates:
        for p in s.params:
            domains.setdefault(p.name, [])
            domains[p.name] += [v for v in p.choices if v not in domains[p.name]]
    logs = {n: _numeric(d) for n, d in domains.items()}

    def coordinate(name: str, value: Value) -> float:
        domain = domains[name]
        if logs[name]:
            lo, hi = (math.log2(float(min(domain))), math.log2(float(max(domain))))
            return (math.log2(float(value)) - lo) / (hi - lo) if hi > lo else 0.0
        return domain.index(value) / (len(domain) - 1) if len(domain) > 1 else 0.0

    pairs = [(a, b) for a, b in itertools.combinations(sorted(domains), 2) if logs[a] and logs[b]] if ratios else []
    rows = []
    for config in configs:
        values = config.as_dict()
        template = values[TEMPLATE]
        row = [1.0 if template == t else 0.0 for t in names] if len(names) > 1 else []
        own = {n: coordinate(n, v) for n, v in values.items() if n != TEMPLATE}
        row += [own.get(n, 0.0) for n in sorted(domains)]
        for a, b in pairs:
            both = a in own and b in own
            row += [(own[a] + own[b]) / 2 if both else 0.0, (own[a] - own[b] + 1) / 2 if both else 0.0]
        rows.append(row)
    if not rows:
        return np.zeros((0, 0))
    x = np.asarray(rows, dtype=float)
    return x[:, x.max(axis=0) > x.min(axis=0)]


def _squared_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    squared = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * (a @ b.T)
    return np.asarray(np.maximum(squared, 0.0), dtype=float)


def _matern(squared: np.ndarray, scale: float) -> np.ndarray:
    """Matern 5/2 of squared distances at length ``scale``."""
    d = np.sqrt(squared) * (math.sqrt(5.0) / scale)
    return np.asarray((1.0 + d + d * d / 3.0) * np.exp(-d), dtype=float)


def _forward(chol: np.ndarray, z: np.ndarray) -> np.ndarray:
    """chol^-1 z for lower-triangular ``chol``, by forward substitution (O(n^2); an inverse is O(n^3))."""
    w = np.empty(len(z))
    for i in range(len(z)):
        w[i] = (z[i] - chol[i, :i] @ w[:i]) / chol[i, i]
    return w


def _fit_at(squared: np.ndarray, z: np.ndarray, scale: float, noise: float) -> tuple[float, np.ndarray] | None:
    """(log marginal likelihood, Cholesky factor) at one (length scale, noise); None when the kernel
    matrix does not factorise."""
    k = _matern(squared, scale) + (noise + JITTER) * np.eye(len(z))
    try:
        chol = np.linalg.cholesky(k)
    except np.linalg.LinAlgError:
        return None
    w = _forward(chol, z)
    return -0.5 * float(w @ w) - float(np.log(np.diag(chol)).sum()), chol


def _fit(x: np.ndarray, z: np.ndarray, dims: int) -> tuple[float, float, np.ndarray]:
    """(length scale, noise, Cholesky factor) of the grid's pair of highest marginal likelihood for
    standardised answers ``z`` at features ``x`` (the grid's largest noise always factorises)."""
    squared = _squared_distances(x, x)
    root = math.sqrt(max(dims, 1))
    best: tuple[float, float, float, np.ndarray] | None = None
    for s, noise in itertools.product(LENGTH_SCALES, NOISES):
        fitted = _fit_at(squared, z, s * root, noise)
        if fitted is not None and (best is None or fitted[0] > best[0]):
            best = (fitted[0], s * root, noise, fitted[1])
    assert best is not None, "the largest noise makes the kernel matrix positive definite"
    return best[1], best[2], best[3]


class _Columns:
    """The Matern kernel between every configuration (rows of ``x``) and each answered one, at one
    length scale: a column is computed once per answer and scale, so an ask between two refits at
    the same scale costs one new column, not a matrix of every configuration against every answer."""

    def __init__(self, x: np.ndarray) -> None:
        self.x = x
        self.norms = (x * x).sum(1)
        self.scale = 0.0
        self.columns: dict[int, np.ndarray] = {}

    def column(self, i: int, scale: float) -> np.ndarray:
        """Kernel values of every configuration against configuration ``i``."""
        if scale != self.scale:
            self.scale, self.columns = scale, {}
        if i not in self.columns:
            squared = np.maximum(self.norms + self.norms[i] - 2.0 * (self.x @ self.x[i]), 0.0)
            self.columns[i] = _matern(squared, scale)
        return self.columns[i]

    def matrix(self, told: Sequence[int], scale: float) -> np.ndarray:
        """Configurations x ``told``."""
        return np.stack([self.column(i, scale) for i in told], axis=1)


class _Posterior:
    """The process's kernel terms given the answered configurations ``told`` (in the order added), at one
    (length scale, noise): ``inverse`` is the inverse of the kernel matrix's Cholesky factor (noise
    included), ``v`` = inverse @ K(told, every configuration), ``v2`` the column sums of v * v. The
    posterior mean of every configuration is v.T @ (inverse @ z) and its variance 1 - v2, for any
    standardised answers z. An answer added at the same pair extends all three by a row: O(n^2 + nN)
    for n answers and N configurations, where refactorising costs O(n^3 + n^2 N). The rows live in
    arrays of doubling capacity, so a row is written in place, not the whole matrix copied."""

    def __init__(self, columns: _Columns, told: Sequence[int], scale: float, noise: float, chol: np.ndarray):
        self.scale, self.noise, self.told = scale, noise, list(told)
        n, capacity = len(self.told), max(2 * len(self.told), 16)
        self._inverse = np.zeros((capacity, capacity))
        inverse = np.linalg.inv(chol)  # the one inversion: a grid search that keeps the pair needs none
        self._inverse[:n, :n] = inverse
        self._v = np.zeros((capacity, len(columns.x)))
        self._v[:n] = inverse @ columns.matrix(told, scale).T
        self.v2 = (self.v * self.v).sum(axis=0)

    @property
    def inverse(self) -> np.ndarray:
        n = len(self.told)
        return self._inverse[:n, :n]

    @property
    def v(self) -> np.ndarray:
        return self._v[: len(self.told)]

    def extend(self, columns: _Columns, i: int) -> bool:
        """Add configuration ``i`` (one rank-one step of the Cholesky factor); False, and nothing
        changed, when its new pivot is not positive (the caller refits)."""
        column = columns.column(i, self.scale)
        known = self.inverse @ column[self.told]
        pivot = 1.0 + self.noise + JITTER - float(known @ known)
        if pivot <= 0.0:
            return False
        d = math.sqrt(pivot)
        n = len(self.told)
        if n == len(self._v):  # full: double the capacity
            grown = np.zeros((2 * n, 2 * n))
            grown[:n, :n] = self.inverse
            self._inverse = grown
            self._v = np.vstack([self._v, np.zeros_like(self._v)])
        row = (column - known @ self.v) / d
        self._inverse[n, :n] = -(known @ self.inverse) / d
        self._inverse[n, n] = 1.0 / d
        self._v[n] = row
        self.told.append(i)
        self.v2 = self.v2 + row * row
        return True

    def expected_improvement(self, z: np.ndarray, best: float, xi: float) -> np.ndarray:
        """Expected improvement below ``best`` (standardised) of every configuration, ``z`` the
        standardised answers of ``told`` in its order."""
        mu = self.v.T @ (self.inverse @ z)
        sigma = np.sqrt(np.maximum(1.0 - self.v2, 1e-12))
        gap = best - mu - xi
        u = gap / sigma
        cdf = 0.5 * (1.0 + np.vectorize(math.erf)(u / math.sqrt(2.0)))
        pdf = np.exp(-0.5 * u * u) / math.sqrt(2.0 * math.pi)
        return np.asarray(gap * cdf + sigma * pdf, dtype=float)


def _penalised(scores: np.ndarray, near: np.ndarray) -> np.ndarray:
    """``scores`` (expected improvement of every configuration) for a later ask before the next
    answer: lowered around the pick by the model's correlation with it (``near``, the kernel's column
    of the pick: local penalisation), to zero at the pick itself, so a batch of asks spreads instead
    of clustering."""
    return np.asarray(scores * (1.0 - near), dtype=float)


def _grid_due(answers: int, last_grid: int) -> bool:
    """Whether the (length scale, noise) grid is searched again at ``answers`` answers, the last search
    having seen ``last_grid``: at every answer up to GRID_EVERY_UNTIL, then whenever the answers grew by
    GRID_GROWTH since (in between, the model refits at the pair chosen last: one factorisation instead
    of the grid's fifteen)."""
    return answers <= GRID_EVERY_UNTIL or answers >= last_grid * GRID_GROWTH


class SurrogateStrategy:
    """Gaussian-process expected improvement over the valid configurations (module docstring).

    Contract: every ``ask`` returns a configuration of ``valid`` not returned before (the seeded
    ones first, in order, those outside ``valid`` skipped), None once all were; the same arguments
    and the same answers give the same proposals. ``history`` (a resumed sweep's log) counts as
    evaluated: never proposed, and modelled. ``built``: configurations whose CUBIN is in the compile
    cache; with any, the model proposes by expected improvement per cost (``SurrogateOptions.build_cost``),
    so a re-run on a warm cache measures what it has built before compiling more."""

    def __init__(
        self,
        space: TemplateSpaces,
        valid: Sequence[Config],
        seed: int,
        history: Iterable[EvalRecord] = (),
        options: SurrogateOptions = SurrogateOptions(),
        seeds: Sequence[Config] = (),
        built: Iterable[Config] = (),
    ) -> None:
        self.configs = list(dict.fromkeys(valid))
        self.options = options
        self._index = {canonical_json(c.as_dict()): i for i, c in enumerate(self.configs)}
        self._built = sorted({i for c in built if (i := self._index.get(canonical_json(c.as_dict()))) is not None})
        self._cost = np.ones(len(self.configs))  # none built (a cold cache, a replay): as without costs
        if self._built:
            self._cost[:] = options.build_cost
            self._cost[self._built] = 1.0
        self._x = features(space, self.configs, options.ratios)
        self._columns = _Columns(self._x)
        self._rng = np.random.default_rng(seed)
        self._posterior: _Posterior | None = None  # the kernel terms of the answers modelled last
        self._known = b""  # those answers (configurations and modelled answers)
        self._grid_at = 0  # answers the last search of the (length scale, noise) grid saw
        # every configuration's expected improvement under the last fit, lowered around each pick since
        self._scores: np.ndarray | None = None
        self._queue: list[int] = []
        self._given: set[int] = set()
        self._times: dict[int, float] = {}  # evaluated: log ms (inf: failed)
        for config in seeds:
            self.seed(config)
        for record in history:
            i = self._index.get(canonical_json(record.config))
            if i is not None:
                self._given.add(i)
                self._times[i] = _log_time(record)

    def seed(self, config: Config) -> None:
        """Propose ``config`` before any other not yet proposed (after earlier seeds); ignored
        when it is not valid or was proposed already."""
        i = self._index.get(canonical_json(config.as_dict()))
        if i is not None and i not in self._given and i not in self._queue:
            self._queue.append(i)

    def ask(self) -> Ask | None:
        while self._queue:
            i = self._queue.pop(0)
            if i not in self._given:
                return self._give(i)
        return self._pick(range(len(self.configs)))

    def ask_built(self) -> Ask | None:
        """Among the configurations built when the strategy began, the one ``ask``'s rule would pick
        (seeds aside): every cost there is 1."""
        return self._pick(self._built)

    def _pick(self, among: Iterable[int]) -> Ask | None:
        left = np.array([i for i in among if i not in self._given], dtype=int)
        if not len(left):
            return None
        finite = {i: t for i, t in self._times.items() if math.isfinite(t)}
        if len(self._given) < self.options.initial or len(finite) < 2:
            return self._give(self._farthest(left))
        return self._give(self._model_pick(left))

    def tell(self, ask: Ask, record: EvalRecord) -> None:
        i = self._index.get(canonical_json(ask.values))
        if i is not None:
            self._times[i] = _log_time(record)

    def _give(self, i: int) -> Ask:
        self._given.add(i)
        return Ask(None, self.configs[i].as_dict())

    def _farthest(self, left: np.ndarray) -> int:
        """A random configuration first, then the one farthest from all given so far."""
        if not self._given or self._x.shape[1] == 0:
            return int(self._rng.choice(left))
        given = self._x[sorted(self._given)]
        cand = self._x[left]
        gaps = ((cand * cand).sum(1)[:, None] + (given * given).sum(1)[None, :] - 2.0 * (cand @ given.T)).min(axis=1)
        return self._tie(left, gaps)

    def _model_pick(self, left: np.ndarray) -> int:
        told = list(self._times)  # in the order answered: the posterior grows by appending
        y = modelled_answers(np.array([self._times[i] for i in told]), self.options.answers)
        known = np.asarray(told).tobytes() + y.tobytes()
        if self._known != known:  # asks between two answers share one fit
            self._known = known
            mean, std = float(y.mean()), float(y.std()) or 1.0
            z = (y - mean) / std
            posterior = self._posterior
            if posterior is None or _grid_due(len(told), self._grid_at):
                scale, noise, chol = _fit(self._x[told], z, self._x.shape[1])
                self._grid_at = len(told)
                # the same pair as before: the posterior is extended, not rebuilt (O(n^2 N))
                if posterior is None or (scale, noise) != (posterior.scale, posterior.noise):
                    posterior = self._posterior = _Posterior(self._columns, told, scale, noise, chol)
            if not self._extended(posterior, told):  # a pivot lost to rounding: factorise afresh
                scale, noise, chol = _fit(self._x[told], z, self._x.shape[1])
                self._posterior, self._grid_at = _Posterior(self._columns, told, scale, noise, chol), len(told)
            assert self._posterior is not None
            self._scores = self._posterior.expected_improvement(z, float(z.min()), self.options.xi)  # the best success
        assert self._scores is not None and self._posterior is not None  # set with the fit
        pick = self._tie(left, self._scores[left] / self._cost[left])
        self._scores = _penalised(self._scores, self._columns.column(pick, self._posterior.scale))
        return pick

    def _extended(self, posterior: _Posterior, told: list[int]) -> bool:
        """Whether ``posterior`` now covers ``told``, the answers it knew being a prefix of them (each
        newer one added at its pair); False when it cannot (the caller refits)."""
        if posterior.told != told[: len(posterior.told)]:
            return False
        return all(posterior.extend(self._columns, i) for i in told[len(posterior.told) :])

    def _tie(self, left: np.ndarray, score: np.ndarray) -> int:
        top = np.flatnonzero(score >= score.max() - 1e-12 * max(1.0, abs(float(score.max()))))
        return int(left[top[0] if len(top) == 1 else self._rng.choice(top)])


@functools.cache
def _normal_scores(n: int) -> np.ndarray:
    """The normal quantiles of (k + 0.5) / n, k < n: the scores of n ranks."""
    normal = statistics.NormalDist()
    return np.array([normal.inv_cdf((k + 0.5) / n) for k in range(n)])


def modelled_answers(log_times: np.ndarray, answers: str) -> np.ndarray:
    """The answers the model fits for ``log_times`` (inf: failed; at least two finite): the log-times,
    or with "ranks" the normal scores of their ranks (equal times share one score); a failure one
    spread (at least 0.1) past the slowest success, so failures model as the slowest."""
    ok = np.isfinite(log_times)
    values = log_times[ok]
    if answers == "ranks":
        order = np.argsort(values, kind="stable")
        n = len(values)
        scores = _normal_scores(n)
        ranked = values[order]
        starts = np.flatnonzero(np.r_[True, ranked[1:] != ranked[:-1]])  # runs of equal times
        shared = np.add.reduceat(scores, starts) / np.diff(np.r_[starts, n])
        values = np.empty(n)
        values[order] = np.repeat(shared, np.diff(np.r_[starts, n]))
    y = np.empty(len(log_times))
    y[ok] = values
    y[~ok] = values.max() + max(float(values.max() - values.min()), 0.1)
    return y


def _log_time(record: EvalRecord) -> float:
    if record.status is Status.OK and record.timing is not None and record.timing.median_ms > 0:
        return math.log(record.timing.median_ms)
    return math.inf
