"""Checking that a mechanism is (ε, δ)-DP on one pair of neighbours (Geambasu's DP lecture: the definitions of (ε, δ)-DP and of the privacy loss).

Two checks:

- ``exact_dp_check``: deterministic, from (log-)probabilities of the outputs
  (finite output sets) or log-densities on a grid (continuous outputs). It
  computes the privacy loss and the hockey-stick divergence both ways.
- ``empirical_dp_check``: black-box, from samples. It tests
  Pr[M(x) ∈ S] ≤ e^ε·Pr[M(x′) ∈ S] + δ for every bin and every threshold set S,
  both directions, and declares a violation only when the Clopper–Pearson lower
  bound of the left side exceeds the upper bound of the right side. With the
  Bonferroni correction over all (event, direction) pairs, a truly DP mechanism
  fails with probability ≤ α. Events are chosen from a separate pilot sample so
  that they do not depend on the samples they are tested on.

Passing either check is evidence for one pair (x, x′), never a proof of DP.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from dpaudit.dp.hypothesis import (
    clopper_pearson_lower,
    clopper_pearson_upper,
    epsilon_from_rate_bounds,
)

__all__ = [
    "DPCheckResult",
    "empirical_dp_check",
    "exact_dp_check",
    "hockey_stick_divergence",
    "privacy_loss",
]


def privacy_loss(log_p, log_q) -> np.ndarray:
    """L(y) = ln(p_x(y)/p_x′(y)) from log-probabilities or log-densities."""
    return np.asarray(log_p, dtype=np.float64) - np.asarray(log_q, dtype=np.float64)


def hockey_stick_divergence(log_p, log_q, eps: float, weights=None) -> float:
    """δ(ε) = Σ_y w(y)·max(0, p(y) − e^ε q(y)): the smallest δ for this direction.

    Computed as p·(1 − e^{ε−L}) on the outputs with L > ε, so no difference of
    two tiny numbers is formed. ``weights`` are quadrature weights when p, q are
    densities on a grid (None for probability vectors).
    """
    log_p = np.asarray(log_p, dtype=np.float64)
    log_q = np.asarray(log_q, dtype=np.float64)
    with np.errstate(invalid="ignore"):  # −inf − −inf: impossible under both, no mass
        loss = log_p - log_q
        mask = loss > eps
    if not mask.any():
        return 0.0
    terms = np.exp(log_p[mask]) * -np.expm1(eps - loss[mask])
    if weights is not None:
        terms = terms * np.broadcast_to(np.asarray(weights, dtype=np.float64), log_p.shape)[mask]
    return float(terms.sum())


def exact_dp_check(log_p, log_q, eps: float, delta: float = 0.0, weights=None,
                   rtol: float = 1e-9) -> dict:
    """Deterministic DP check for one pair of neighbours with known output laws.

    Pure DP (δ = 0): max |L(y)| ≤ ε. Approximate DP: the hockey-stick divergence in
    both directions ≤ δ. ``rtol`` absorbs float round-off (and quadrature error on a
    grid, for which the caller should pass a looser value).
    """
    log_p = np.asarray(log_p, dtype=np.float64)
    log_q = np.asarray(log_q, dtype=np.float64)
    # Outputs impossible under both laws carry no loss (−inf − −inf would be NaN).
    possible = np.isfinite(log_p) | np.isfinite(log_q)
    loss = privacy_loss(log_p[possible], log_q[possible])
    finite = np.isfinite(loss)
    max_abs_loss = float(np.max(np.abs(loss))) if loss.size else 0.0
    d_pq = hockey_stick_divergence(log_p, log_q, eps, weights)
    d_qp = hockey_stick_divergence(log_q, log_p, eps, weights)
    realised = max(d_pq, d_qp)
    if delta == 0:
        passed = bool(finite.all()) and max_abs_loss <= eps * (1 + rtol) + rtol
    else:
        passed = realised <= delta * (1 + rtol)
    return {
        "passed": passed,
        "max_abs_loss": max_abs_loss,
        "delta_realised": realised,
        "delta_forward": d_pq,
        "delta_backward": d_qp,
    }


@dataclass
class DPCheckResult:
    """Outcome of empirical_dp_check.

    ``passed`` is False when some event is a significant violation. ``eps_lower_bound``
    is the largest ε the samples certify at confidence 1 − α (0 if none), i.e. how
    far from DP the worst event is. ``events`` holds every tested (event, direction).
    """

    passed: bool
    eps: float
    delta: float
    n: int
    alpha: float
    n_tests: int
    eps_lower_bound: float
    worst: dict
    events: pd.DataFrame = field(repr=False)


def _sample(mechanism, data, n, rng):
    out = np.asarray(mechanism(data, n, rng))
    if out.shape[0] != n or out.ndim != 1:
        raise ValueError(f"mechanism must return a 1-D array of {n} outputs, got shape {out.shape}")
    return out


def _is_discrete(values, max_support):
    if values.dtype == bool or np.issubdtype(values.dtype, np.integer):
        return np.unique(values).size <= max_support
    return False


def empirical_dp_check(mechanism, x, x_prime, eps: float, delta: float = 0.0,
                       n: int = 100_000, alpha: float = 0.05, rng=None, n_bins: int = 40,
                       pilot: int | None = None, discrete: bool | None = None) -> DPCheckResult:
    """Clopper–Pearson test of (ε, δ)-DP on the neighbours x, x′, both directions.

    ``mechanism(data, size, rng)`` returns a 1-D array of ``size`` independent
    outputs on ``data``; a scalar-valued mechanism is the supported case
    (project vector outputs first; by post-processing that only loses power).

    Events: for discrete outputs (bool/int with ≤ 4·n_bins values) every singleton
    and every threshold set {y ≤ v}, {y > v}; for continuous outputs ``n_bins`` bins
    at quantiles of a pooled pilot sample plus extra edges deep in both tails
    (where Laplace/Gaussian violations live), and the threshold sets at every edge.
    """
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    pilot = pilot if pilot is not None else max(1000, n // 10)
    pilot_x = _sample(mechanism, x, pilot, gen)
    pilot_y = _sample(mechanism, x_prime, pilot, gen)
    pooled = np.concatenate([pilot_x, pilot_y])
    if discrete is None:
        discrete = _is_discrete(pooled, 4 * n_bins)
    sx = _sample(mechanism, x, n, gen)
    sy = _sample(mechanism, x_prime, n, gen)

    if discrete:
        support = np.unique(pooled)
        names, cx, cy = [], [], []
        for v in support:
            names.append(f"y == {v}")
            cx.append(np.count_nonzero(sx == v))
            cy.append(np.count_nonzero(sy == v))
        for v in support[:-1]:
            names += [f"y <= {v}", f"y > {v}"]
            lx, ly = np.count_nonzero(sx <= v), np.count_nonzero(sy <= v)
            cx += [lx, n - lx]
            cy += [ly, n - ly]
        cx, cy = np.asarray(cx, dtype=np.float64), np.asarray(cy, dtype=np.float64)
    else:
        pooled = pooled.astype(np.float64)
        qs = np.r_[np.arange(1, n_bins) / n_bins, [1e-3, 5e-3, 1e-2, 0.99, 0.995, 0.999]]
        edges = np.unique(np.quantile(pooled, np.sort(qs)))
        # Bin counts via searchsorted: bin i is (edges[i-1], edges[i]].
        bx = np.bincount(np.searchsorted(edges, sx, side="left"), minlength=edges.size + 1)
        by = np.bincount(np.searchsorted(edges, sy, side="left"), minlength=edges.size + 1)
        lx, ly = np.cumsum(bx)[:-1], np.cumsum(by)[:-1]  # counts of {y <= edge}
        lo_names = ["-inf"] + [f"{e:.6g}" for e in edges]
        hi_names = [f"{e:.6g}" for e in edges] + ["inf"]
        names = ([f"{a} < y <= {b}" for a, b in zip(lo_names, hi_names, strict=True)]
                 + [f"y <= {e:.6g}" for e in edges] + [f"y > {e:.6g}" for e in edges])
        cx = np.concatenate([bx, lx, n - lx]).astype(np.float64)
        cy = np.concatenate([by, ly, n - ly]).astype(np.float64)

    m = cx.size
    n_tests = 2 * m
    # Each test uses a lower and an upper bound: split its share of α between them.
    a = alpha / n_tests / 2.0
    e_eps = math.exp(eps)
    rows = []
    for direction, cp, cq in (("x vs x'", cx, cy), ("x' vs x", cy, cx)):
        p_lo = np.asarray(clopper_pearson_lower(cp, n, a))
        q_hi = np.asarray(clopper_pearson_upper(cq, n, a))
        excess = p_lo - (e_eps * q_hi + delta)
        # One event per row: only its own DP inequality applies (the complement
        # is a separate event), so the second term gets no evidence.
        eps_lb = epsilon_from_rate_bounds(p_lo, q_hi, np.zeros_like(p_lo), np.ones_like(q_hi), delta)
        rows.append(pd.DataFrame({
            "event": names, "direction": direction, "p_hat": cp / n, "q_hat": cq / n,
            "p_lower": p_lo, "q_upper": q_hi, "excess": excess, "eps_lb": eps_lb,
        }))
    events = pd.concat(rows, ignore_index=True)
    worst = events.loc[int(np.argmax(events["excess"].to_numpy()))].to_dict()
    eps_lower = float(np.nanmax(np.r_[events["eps_lb"].to_numpy(), 0.0]))
    return DPCheckResult(
        passed=bool((events["excess"] <= 0).all()),
        eps=float(eps), delta=float(delta), n=int(n), alpha=float(alpha), n_tests=n_tests,
        eps_lower_bound=max(eps_lower, 0.0), worst=worst, events=events,
    )
