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

from dpaudit.dp.hypothesis import max_advantage, max_attack_accuracy
from dpaudit.dp.profile_solver import (
    profile_epsilon_per_row,  # re-exported: its one home is dp/ (floor 1)
)

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
