"""The incremental Gaussian process gives what a fresh factorisation of the same points gives."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from tunebox.search.gaussian_process import JITTER, LENGTH_SCALES, NOISES, GaussianProcess, _extend, matern


def fresh(x: np.ndarray, points: list[int], y: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Grid search and posterior by a full Cholesky factorisation per grid entry (the textbook way)."""
    root = math.sqrt(x.shape[1])
    z = (y - y.mean()) / (y.std() or 1.0)
    p = x[points]
    distance = np.sqrt(((p[:, None, :] - p[None, :, :]) ** 2).sum(-1))
    best = None
    for scale, noise in itertools.product(LENGTH_SCALES, NOISES):
        k = matern(distance, scale * root) + (noise + JITTER) * np.eye(len(points))
        try:
            chol = np.linalg.cholesky(k)
        except np.linalg.LinAlgError:
            continue
        alpha = np.linalg.solve(k, z)
        evidence = -0.5 * float(z @ alpha) - float(np.log(np.diag(chol)).sum())
        if best is None or evidence > best[0]:
            best = (evidence, scale * root, k, alpha)
    assert best is not None
    _, length, k, alpha = best
    cross = matern(np.sqrt(((x[at][:, None, :] - p[None, :, :]) ** 2).sum(-1)), length)
    variance = 1.0 - np.einsum("ij,ij->i", cross, np.linalg.solve(k, cross.T).T)
    return cross @ alpha, np.sqrt(np.maximum(variance, 1e-12))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_a_fresh_factorisation_at_every_size(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.random((60, 4))
    order = [int(i) for i in rng.permutation(60)[:25]]
    gp = GaussianProcess(x)
    for n, index in enumerate(order, start=1):
        gp.observe(index)
        if n < 3:
            continue
        y = np.sin(3 * x[order[:n]].sum(axis=1)) + 0.1 * rng.standard_normal(n)
        fit = gp.fit(y)
        mu, sigma = gp.predict(fit, np.arange(60))
        want_mu, want_sigma = fresh(x, order[:n], y, np.arange(60))
        np.testing.assert_allclose(mu, want_mu, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(sigma, want_sigma, rtol=1e-5, atol=1e-6)


def test_observing_a_point_twice_changes_nothing() -> None:
    gp = GaussianProcess(np.eye(5))
    for i in (0, 3, 0, 3, 1):
        gp.observe(i)
    assert gp.points == [0, 3, 1]


def test_an_extension_that_is_not_positive_definite_drops_the_entry() -> None:
    """[[1, 1], [1, 1 - 1e-3]] has a negative eigenvalue: no Cholesky factor, so no inverse."""
    one = np.array([[1.0]])
    assert _extend(one, np.array([1.0]), 1.0 - 1e-3) is None
    grown = _extend(one, np.array([0.5]), 1.0)
    assert grown is not None
    chol = np.linalg.cholesky(np.array([[1.0, 0.5], [0.5, 1.0]]))
    np.testing.assert_allclose(grown, np.linalg.inv(chol))
