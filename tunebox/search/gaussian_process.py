"""A Gaussian process over a fixed set of candidate points, grown one observed point at a time.

Matern 5/2 kernel with one length scale and a constant mean, on standardised targets; the length
scale and the noise are chosen per fit by marginal likelihood over a fixed grid. For every grid
entry the inverse of the kernel matrix's Cholesky factor is kept and extended by one row per new
point (O(n^2) each, where a fresh factorisation costs O(n^3) per entry and fit), and, per length
scale, the covariance of every candidate with each observed point; so a fit over n points costs
O(n^2) per grid entry and a prediction over m candidates O(m n^2).

A grid entry whose kernel matrix stops being positive definite (in floating point) is dropped for
good: every later matrix holds it as a principal submatrix. The largest noise never fails.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

LENGTH_SCALES = (0.1, 0.2, 0.4, 0.8, 1.6)  # in units of the feature cube's diagonal / sqrt(dims)
NOISES = (1e-4, 1e-2, 1e-1)  # variance of the standardised targets
JITTER = 1e-8  # added to every diagonal


def matern(distance: np.ndarray, scale: float) -> np.ndarray:
    """Matern 5/2 covariance (unit variance) of points ``distance`` apart, ``scale`` the length."""
    d = distance * (math.sqrt(5.0) / scale)
    return np.asarray((1.0 + d + d * d / 3.0) * np.exp(-d), dtype=float)


@dataclass(frozen=True)
class Fit:
    """The chosen grid entry: length ``scale``, ``inverse`` of its Cholesky factor (n x n, lower),
    ``alpha`` = K^-1 z over the observed points in order, and the targets' ``mean`` and ``std``."""

    scale: float  # one of LENGTH_SCALES
    inverse: np.ndarray
    alpha: np.ndarray
    mean: float
    std: float


class GaussianProcess:
    """Observed points are indices into ``candidates`` (rows of features), added with ``observe``
    in any order and never removed; ``fit`` takes their targets in that order.

    Contract: ``fit`` and ``predict`` give what a fresh factorisation of the same points gives, up
    to floating-point rounding; candidates never change."""

    def __init__(self, candidates: np.ndarray) -> None:
        self._x = candidates
        self._root = math.sqrt(max(candidates.shape[1], 1))
        self.points: list[int] = []
        self._observed: set[int] = set()
        self._covariance = {s: np.zeros((len(candidates), 16)) for s in LENGTH_SCALES}  # candidates x points
        self._inverse: dict[tuple[float, float], np.ndarray | None] = {
            g: np.zeros((0, 0)) for g in itertools.product(LENGTH_SCALES, NOISES)
        }

    def observe(self, index: int) -> None:
        """Adds candidate ``index`` to the observed points (a no-op if it is one)."""
        if index in self._observed:
            return
        n = len(self.points)
        gap = self._x - self._x[index]
        distance = np.sqrt((gap * gap).sum(axis=1))
        for scale, covariance in self._covariance.items():
            if n == covariance.shape[1]:
                covariance = self._covariance[scale] = np.hstack([covariance, np.zeros_like(covariance)])
            covariance[:, n] = matern(distance, scale * self._root)
        for (scale, noise), inverse in self._inverse.items():
            if inverse is not None:
                k = self._covariance[scale][index, :n]
                self._inverse[scale, noise] = _extend(inverse, k, 1.0 + noise + JITTER)
        self.points.append(index)
        self._observed.add(index)

    def fit(self, targets: np.ndarray) -> Fit:
        """The grid entry of highest marginal likelihood for ``targets`` (one per observed point,
        in order), standardised."""
        mean, std = float(targets.mean()), float(targets.std()) or 1.0
        z = (targets - mean) / std
        best: tuple[float, Fit] | None = None
        for (scale, _), inverse in self._inverse.items():
            if inverse is None:
                continue
            w = inverse @ z
            evidence = -0.5 * float(w @ w) + float(np.log(np.diag(inverse)).sum())  # log det L = -sum log diag L^-1
            if best is None or evidence > best[0]:
                best = (evidence, Fit(scale, inverse, inverse.T @ w, mean, std))
        assert best is not None  # the largest noise always factorises
        return best[1]

    def predict(self, fit: Fit, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and standard deviation (standardised units) at the candidates ``indices``."""
        k = self._covariance[fit.scale][indices, : len(self.points)]
        v = fit.inverse @ k.T
        return k @ fit.alpha, np.sqrt(np.maximum(1.0 - (v * v).sum(axis=0), 1e-12))


def _extend(inverse: np.ndarray, k: np.ndarray, diagonal: float) -> np.ndarray | None:
    """The inverse Cholesky factor of [[K, k], [k^T, diagonal]] from that of K; None if that matrix
    is not positive definite."""
    lower = inverse @ k  # the new row of the Cholesky factor, left of its diagonal
    pivot = diagonal - float(lower @ lower)
    if pivot <= 0.0:
        return None
    root = math.sqrt(pivot)
    n = len(k)
    grown = np.zeros((n + 1, n + 1))
    grown[:n, :n] = inverse
    grown[n, :n] = -(lower @ inverse) / root
    grown[n, n] = 1.0 / root
    return grown
