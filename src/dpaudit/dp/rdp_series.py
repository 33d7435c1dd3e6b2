"""Rényi DP of the Poisson-subsampled Gaussian mechanism, every order at once (numpy).

The accounting check (``dpaudit.dp.accounting_check``) recomputes a published RDP ε from what
the loop ran. The calibration (``dpaudit.dp.accounting``) uses dp_accounting's RDP accountant,
which sums each order's series in a Python loop (~45 ms for its 156 default orders, a fixed cost of
every checked run). This is a second implementation of the same series that shares no code with
it, vectorized over orders and terms:

* integer α (Mironov, Talwar & Zhang 2019, Sec. 3.2): A_α = Σ_{i=0..α} C(α, i) q^i (1 − q)^{α−i}
  exp((i² − i) / 2σ²), summed in log space;
* fractional α (ibid., Sec. 3.3): the two series over the integrals on (−∞, z0] and [z0, ∞),
  z0 = σ² log(1/q − 1) + 1/2, each term carrying log(erfc(·)/2); summed until both series
  decrease and their newest terms fall 30 nats below the running total, the stopping rule
  dp_accounting applies (so the same terms are summed); an order whose series has not stopped
  within ``MAX_TERMS`` terms is excluded (its RDP is +∞), as dp_accounting excludes it;
* RDP(α) = log A_α / (α − 1); q = 1 gives α / 2σ² (the Gaussian mechanism), q = 0 gives 0, σ = 0 ∞.

``epsilon`` converts composed RDP to (ε, δ) by the bound dp_accounting uses (Balle et al. 2020,
"Hypothesis testing interpretations and Rényi DP", Prop. 12), 0 where the KL bound already gives δ.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln, log_ndtr

from dpaudit.contract.delta import check_delta

__all__ = ["MAX_TERMS", "epsilon", "poisson_gaussian_rdp"]

MAX_TERMS = 1000
_TERM_LIMITS = (48, 256, MAX_TERMS)
_STOP_NATS = 30.0


def poisson_gaussian_rdp(noise_multiplier: float, q: float, orders) -> np.ndarray:
    """RDP of one step of the Poisson-subsampled Gaussian (rate ``q``, noise multiplier σ) at every order."""
    sigma, q = float(noise_multiplier), float(q)
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"sampling rate must be in [0, 1], got {q}")
    if not sigma >= 0.0:
        raise ValueError(f"noise multiplier must be ≥ 0, got {sigma}")
    alphas = np.asarray(orders, dtype=np.float64)
    if np.any(alphas <= 1.0):
        raise ValueError(f"RDP orders must be > 1, got {alphas[alphas <= 1.0].tolist()}")
    if q == 0.0:
        return np.zeros(alphas.size)
    if sigma == 0.0:
        return np.full(alphas.size, np.inf)
    if q == 1.0:
        return alphas / (2.0 * sigma * sigma)
    out = np.full(alphas.size, np.inf)
    integral = alphas == np.floor(alphas)
    finite = np.isfinite(alphas)
    if np.any(integral & finite):
        out[integral & finite] = _log_a_integer(q, sigma, alphas[integral & finite])
    if np.any(~integral & finite):
        out[~integral & finite] = _log_a_fractional(q, sigma, alphas[~integral & finite])
    with np.errstate(invalid="ignore"):
        return out / (alphas - 1.0)


def _log_a_integer(q: float, sigma: float, alphas: np.ndarray) -> np.ndarray:
    i = np.arange(int(alphas.max()) + 1, dtype=np.float64)[None, :]
    a = alphas[:, None]
    with np.errstate(invalid="ignore"):
        terms = (gammaln(a + 1.0) - gammaln(i + 1.0) - gammaln(a - i + 1.0) + i * math.log(q)
                 + (a - i) * math.log1p(-q) + (i * i - i) / (2.0 * sigma * sigma))
    terms = np.where(i <= a, terms, -np.inf)
    top = terms.max(axis=1, keepdims=True)
    return (top + np.log(np.exp(terms - top).sum(axis=1, keepdims=True)))[:, 0]


def _log_a_fractional(q: float, sigma: float, alphas: np.ndarray) -> np.ndarray:
    """Most series stop within tens of terms, a few (small σ, α near an integer) need hundreds: the
    terms are computed for the first ``limit`` indices, and again with a larger limit only for the
    orders that have not stopped (the stopping index does not depend on the limit)."""
    out = np.full(alphas.size, np.inf)
    open_ = np.arange(alphas.size)
    for limit in _TERM_LIMITS:
        values, stopped = _fractional_series(q, sigma, alphas[open_], limit)
        out[open_[stopped]] = values[stopped]
        open_ = open_[~stopped]
        if open_.size == 0:
            break
    return out


def _fractional_series(q: float, sigma: float, alphas: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
    i = np.arange(limit, dtype=np.float64)[None, :]
    a = alphas[:, None]
    j = a - i
    z0 = sigma * sigma * math.log(1.0 / q - 1.0) + 0.5
    log_q, log_1mq = math.log(q), math.log1p(-q)
    # gammaln is log|Γ|: the series' coefficients are taken in absolute value (Mironov et al. 2019, Sec. 3.3)
    log_coef = gammaln(a + 1.0) - gammaln(i + 1.0) - gammaln(j + 1.0)
    # the series' erfc(x / √2σ) / 2 is Φ(−x / σ)
    s0 = log_coef + i * log_q + j * log_1mq + (i * i - i) / (2.0 * sigma * sigma) + log_ndtr((z0 - i) / sigma)
    s1 = log_coef + j * log_q + i * log_1mq + (j * j - j) / (2.0 * sigma * sigma) + log_ndtr((j - z0) / sigma)
    total = np.logaddexp(np.logaddexp.accumulate(s0, axis=1), np.logaddexp.accumulate(s1, axis=1))
    falling = np.zeros_like(s0, dtype=bool)
    falling[:, 1:] = (s0[:, 1:] < s0[:, :-1]) & (s1[:, 1:] < s1[:, :-1])
    stop = falling & (np.maximum(s0, s1) < total - _STOP_NATS)
    stopped = stop.any(axis=1)
    return total[np.arange(alphas.size), np.argmax(stop, axis=1)], stopped


def epsilon(orders, rdp, delta: float) -> float:
    """ε at δ from composed RDP at each order (the smallest over orders, never below 0)."""
    alphas = np.asarray(orders, dtype=np.float64)
    r = np.asarray(rdp, dtype=np.float64)
    delta = float(check_delta(delta))
    if np.any(r < 0):
        raise ValueError("composed RDP must be ≥ 0")
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        eps = r + np.log1p(-1.0 / alphas) - np.log(delta * alphas) / (alphas - 1.0)
    eps = np.where(alphas > 1.01, eps, np.inf)
    eps = np.where(delta * delta + np.expm1(-r) > 0.0, 0.0, eps)  # the KL bound: δ ≤ √(1 − e^{−r})
    eps = np.where(np.isnan(eps), np.inf, eps)
    return max(0.0, float(eps.min()))
