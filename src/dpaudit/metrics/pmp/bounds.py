"""MIA success bounds of PMP and the choice of ε (Lowy et al. 2024, Lemma 6 and the Discussion).

The balanced-game bounds themselves live in ``dpaudit.dp.hypothesis``
(``max_attack_accuracy``, ``max_advantage``): PMP's Lemma 6 is the same formula
as the DP bound, evaluated at the PMP parameter ε̃ instead of ε.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import special

from dpaudit.contract.delta import check_delta
from dpaudit.dp import mechanisms
from dpaudit.dp.hypothesis import max_advantage, max_attack_accuracy

__all__ = [
    "choose_epsilon",
    "mia_success_bound",
    "mia_success_bound_delta",
    "mip_eta",
    "pmp_advantage_bound",
    "profile_epsilon_per_row",
    "target_pmp_epsilon",
]


def mia_success_bound(eps_pmp):
    """Lemma 6: a practical MIA succeeds with probability ≤ 1/(1 + e^−ε̃) (δ = 0)."""
    return max_attack_accuracy(eps_pmp, 0.0)


def mia_success_bound_delta(eps_pmp, delta: float):
    """(e^ε̃ + δ)/(1 + e^ε̃): the balanced-test bound with δ > 0 (our extension, not in Lowy et al. 2024)."""
    return max_attack_accuracy(eps_pmp, delta)


def pmp_advantage_bound(eps_pmp, delta: float = 0.0):
    """2p − 1 ≤ tanh(ε̃/2) (+ 2δ·σ(−ε̃) with δ > 0)."""
    return max_advantage(eps_pmp, delta)


def mip_eta(eps_pmp):
    """Lemma 13: ε-PMP ⇒ η-MIP (Izzo et al. 2022) with η = (1 − e^−ε)/2."""
    out = -0.5 * np.expm1(-np.asarray(eps_pmp, dtype=np.float64))
    return float(out) if out.ndim == 0 else out


def target_pmp_epsilon(success: float) -> float:
    """ε̃* = ln(p*/(1 − p*)): the PMP level that caps MIA success at p* (0.525 → 0.1001)."""
    success = float(success)
    if not 0.5 <= success < 1.0:
        raise ValueError(f"target MIA success must lie in [0.5, 1), got {success}")
    return float(special.logit(success))


def profile_epsilon_per_row(mu: np.ndarray, delta: float, *, weights: np.ndarray | None = None,
                            tol: float = 1e-10, max_iter: int = 100) -> np.ndarray:
    """Per row i, the smallest ε ≥ 0 with mean_j δ_G(ε; μ_ij) ≤ δ.

    This is the per-target step of Prop. 12 (Lowy et al.) and of Recipe B: each
    row holds the Gaussian-profile parameters of one target's partners. The row
    mean is decreasing in ε, so every row has one root; all rows are solved at
    once by Newton's method on log δ̃(ε) (dδ_G/dε = −e^ε Φ(−μ/2 − ε/μ)),
    safeguarded by a bracket that is bisected whenever a step leaves it. Rows
    with mean δ_G(0) ≤ δ get 0. ``weights`` (rows summing to 1) replace the
    plain mean; zero weight masks a cell. The returned value is the bracket's
    upper end, so δ̃(ε̃) ≤ δ holds at the returned ε̃.
    """
    mu = np.atleast_2d(np.asarray(mu, dtype=np.float64))
    delta = check_delta(delta)
    if weights is None:
        weights = np.full(mu.shape, 1.0 / mu.shape[1])
    log_delta = math.log(delta)

    def log_row_delta(eps_rows, mu_rows, w_rows, with_slope=False):
        e = eps_rows[:, None]
        if not with_slope:
            value = np.sum(w_rows * mechanisms.gaussian_delta(1.0, e, mu_rows), axis=1)
            with np.errstate(divide="ignore"):
                return np.log(value)
        deltas, slope_terms = mechanisms.gaussian_delta_and_slope(e, mu_rows)
        value = np.sum(w_rows * deltas, axis=1)
        with np.errstate(divide="ignore"):
            log_value = np.log(value)
        slope = -np.sum(w_rows * slope_terms, axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            return log_value, slope / value

    n_rows = mu.shape[0]
    out = np.zeros(n_rows)
    rows = np.arange(n_rows)
    mu_a, w_a = mu, weights
    zero = np.zeros(n_rows, dtype=bool)  # rows already private at ε = 0 (found in the first pass)
    # Newton from ε = 0 with an open bracket [lo, hi]; hi stays inf until a step overshoots.
    lo = np.zeros(rows.size)
    hi = np.full(rows.size, np.inf)
    x = np.zeros(rows.size)
    root = np.zeros(rows.size)
    active = np.arange(rows.size)
    for _ in range(max_iter):
        g, slope = log_row_delta(x[active], mu_a[active], w_a[active], with_slope=True)
        g = g - log_delta
        above = g > 0
        if active.size == n_rows and not x.any():
            zero = ~above
        lo[active] = np.where(above, x[active], lo[active])
        hi[active] = np.where(above, hi[active], x[active])
        with np.errstate(divide="ignore", invalid="ignore"):
            step = x[active] - g / slope
        lo_a, hi_a = lo[active], hi[active]
        open_above = ~np.isfinite(hi_a)
        expand = 2.0 * np.maximum(lo_a, 0.5)
        fallback = np.where(open_above, expand, 0.5 * (lo_a + hi_a))
        inside = np.isfinite(step) & (step >= lo_a) & (step <= hi_a)
        # With no upper end yet, a nearly flat log δ̃ (every partner's μ large, δ̃(0) ≈ 1) sends
        # Newton to absurd ε: grow the bracket at most geometrically until a step overshoots.
        new_x = np.where(inside, np.where(open_above, np.minimum(step, expand), step), fallback)
        if np.any(new_x > 1e6):
            raise FloatingPointError("no finite ε bounds the profile: μ is too large")
        # Newton converging from one side never shrinks the bracket, so stop on the step size too.
        done = (np.abs(new_x - x[active]) <= tol * np.maximum(1.0, new_x)) | (np.isfinite(hi_a) & (hi_a - lo_a <= tol * np.maximum(1.0, hi_a)))
        x[active] = new_x
        root[active[done]] = new_x[done]
        active = active[~done]
        if active.size == 0:
            break
    root[active] = hi[active]
    # Nudge the converged root to the feasible side; fall back to the bracket's upper end.
    nudged = root * (1.0 + 10 * tol) + tol
    check = np.flatnonzero(~zero)
    if check.size:
        feasible = log_row_delta(nudged[check], mu_a[check], w_a[check]) <= log_delta
        out[rows[check]] = np.where(feasible, np.minimum(nudged[check], hi[check]), hi[check])
    return out


def choose_epsilon(pmp_of_epsilon: Callable[[float], float], target_pmp: float, *,
                   eps_lo: float = 0.01, eps_hi: float = 100.0, grid_points: int = 9,
                   tol: float = 1e-3) -> dict:
    """CHOOSE-EPS (our operationalisation of Lowy et al. 2024's Discussion: pick ε with ε̃(X) ≤ 0.1): the largest DP ε in [eps_lo, eps_hi] with ε̃(ε) ≤ ε̃*.

    ``pmp_of_epsilon`` maps a DP ε to the PMP parameter on a representative
    parent set (Gaussian: ε → σ → G-PMP; exponential: ε → β → EM-PMP). Bisection
    assumes ε̃ is non-decreasing in ε, so that is checked first on a log grid;
    a violation raises instead of returning a meaningless ε.
    """
    if not 0 < eps_lo < eps_hi:
        raise ValueError(f"need 0 < eps_lo < eps_hi, got {eps_lo}, {eps_hi}")
    grid = np.geomspace(eps_lo, eps_hi, grid_points)
    values = np.array([pmp_of_epsilon(float(e)) for e in grid])
    drops = np.diff(values) < -1e-9 * np.maximum(1.0, np.abs(values[:-1]))
    if drops.any():
        where = int(np.flatnonzero(drops)[0])
        raise ValueError(
            f"PMP parameter is not monotone in epsilon: {values[where]:.6g} at eps={grid[where]:.4g} "
            f"but {values[where + 1]:.6g} at eps={grid[where + 1]:.4g}; bisection would be meaningless"
        )
    result = {"target_pmp": float(target_pmp), "grid_epsilon": grid, "grid_pmp": values,
              "monotone": True}
    if values[0] > target_pmp:
        return result | {"epsilon": math.nan, "eps_pmp": float(values[0]),
                         "status": "target below the PMP of eps_lo"}
    if values[-1] <= target_pmp:
        return result | {"epsilon": float(eps_hi), "eps_pmp": float(values[-1]),
                         "status": "target met at eps_hi (range limit)"}
    k = int(np.flatnonzero(values > target_pmp)[0])
    lo, hi = math.log(grid[k - 1]), math.log(grid[k])
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if pmp_of_epsilon(math.exp(mid)) <= target_pmp:
            lo = mid
        else:
            hi = mid
    eps = math.exp(lo)
    return result | {"epsilon": eps, "eps_pmp": float(pmp_of_epsilon(eps)), "status": "ok"}
