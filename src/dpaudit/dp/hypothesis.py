"""Hypothesis-testing view of DP and what it means for membership inference (spec D3–D5).

(ε, δ)-DP holds iff every test of "x" against "x′" (e.g. member vs non-member)
satisfies TPR ≤ e^ε·FPR + δ and TPR ≤ 1 − e^−ε(1 − δ − FPR) (Wasserman & Zhou
2010; Kairouz, Oh, Viswanath 2015), which bounds every MIA's ROC curve.

All functions accept ε = +inf (a non-private model) and return the vacuous
bound there. Small probabilities are handled in log space.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import special

__all__ = [
    "clopper_pearson",
    "dp_tradeoff_curve",
    "empirical_epsilon_lb",
    "epsilon_warnings",
    "max_advantage",
    "max_attack_accuracy",
    "max_posterior",
    "risk_multiplier",
    "roc_inside_dp_region",
    "tpr_bound",
    "tpr_lower_bound",
]

VACUOUS_EPSILON = 8.0
# Building a DataFrame costs ~0.5 ms; most ROC checks find nothing, so copy this.
_EMPTY_VIOLATIONS = pd.DataFrame({
    "index": np.array([], dtype=np.int64), "fpr": np.array([]), "tpr": np.array([]),
    "fpr_ci": np.array([]), "tpr_ci": np.array([]), "bound": np.array([]),
    "excess": np.array([]), "side": np.array([], dtype=object),
})


def risk_multiplier(eps):
    """e^ε: the factor by which any event's probability can grow (D3).

    At ε = 0.1 this is 1.1052 (+10.5%); the slides' "no more than 11%" rounds up.
    """
    out = np.exp(np.asarray(eps, dtype=np.float64))
    return float(out) if out.ndim == 0 else out


def max_posterior(prior, eps):
    """Largest posterior an attacker can reach from ``prior``: posterior odds grow by at
    most e^ε, so e^ε·p/(e^ε·p + 1 − p) = expit(logit p + ε) (D4)."""
    out = special.expit(special.logit(np.asarray(prior, dtype=np.float64))
                        + np.asarray(eps, dtype=np.float64))
    return float(out) if out.ndim == 0 else out


def tpr_bound(fpr, eps, delta=0.0):
    """Highest TPR any test can reach at ``fpr``: min(1, e^ε·FPR + δ, 1 − e^−ε(1 − δ − FPR))."""
    fpr = np.asarray(fpr, dtype=np.float64)
    eps = np.asarray(eps, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        line1 = np.where(fpr > 0, np.exp(eps) * fpr, 0.0) + delta
    line2 = 1.0 - np.exp(-eps) * np.clip(1.0 - delta - fpr, 0.0, None)
    out = np.clip(np.minimum(line1, line2), 0.0, 1.0)
    # With ε = ∞ the point FPR = 0 would otherwise keep the bound δ (inf·0 is avoided above).
    out = np.where(np.isinf(eps), 1.0, out)
    return float(out) if out.ndim == 0 else out


def tpr_lower_bound(fpr, eps, delta=0.0):
    """Lowest TPR any test can have at ``fpr`` (the mirror image of tpr_bound: a test
    far below the diagonal is a good test with its answer flipped)."""
    fpr = np.asarray(fpr, dtype=np.float64)
    out = 1.0 - tpr_bound(1.0 - fpr, eps, delta)
    return out


def dp_tradeoff_curve(eps, delta, fpr_grid):
    """Lowest FNR any test can achieve at each FPR (the (ε,δ) trade-off function)."""
    return 1.0 - tpr_bound(fpr_grid, eps, delta)


def max_advantage(eps, delta=0.0):
    """max(TPR − FPR) = (e^ε − 1 + 2δ)/(e^ε + 1), reached at FPR = (1 − δ)/(e^ε + 1).

    Written as tanh(ε/2) + 2δ·expit(−ε) so large ε gives 1, not inf/inf.
    """
    eps = np.asarray(eps, dtype=np.float64)
    out = np.minimum(1.0, np.tanh(eps / 2.0) + 2.0 * delta * special.expit(-eps))
    return float(out) if out.ndim == 0 else out


def max_attack_accuracy(eps, delta=0.0):
    """Best accuracy on a balanced member/non-member guess: (1 + advantage)/2 =
    (e^ε + δ)/(e^ε + 1)."""
    out = 0.5 * (1.0 + np.asarray(max_advantage(eps, delta)))
    return float(out) if out.ndim == 0 else out


def clopper_pearson(k, n, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Exact two-sided (1 − α) binomial interval for k successes out of n (vectorised)."""
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    # betaincinv is beta.ppf without scipy.stats' argument-checking overhead (~10x
    # faster on short arrays); the edge cases k = 0 and k = n are set explicitly.
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = np.where(k > 0, special.betaincinv(np.maximum(k, 1e-300), n - k + 1.0, alpha / 2.0),
                      0.0)
        hi = np.where(k < n, special.betaincinv(k + 1.0, np.maximum(n - k, 1e-300),
                                                1.0 - alpha / 2.0), 1.0)
    return lo, hi


def _counts(rate, n):
    # ROC rates are counts/n; rounding recovers the counts despite float error.
    return np.clip(np.rint(np.asarray(rate, dtype=np.float64) * n), 0, n)


def _alpha_per_point(alpha, m, correction):
    if correction == "bonferroni":
        return alpha / max(m, 1)
    if correction == "none":
        return alpha
    raise ValueError("correction must be 'bonferroni' or 'none'")


def _eps_lb_from_bounds(tpr_lo, fpr_hi, delta):
    fnr_hi = 1.0 - tpr_lo
    with np.errstate(divide="ignore", invalid="ignore"):
        e1 = np.log(np.clip(tpr_lo - delta, 0.0, None)) - np.log(fpr_hi)
        e2 = np.log(np.clip(1.0 - delta - fpr_hi, 0.0, None)) - np.log(fnr_hi)
    best = np.nanmax(np.concatenate([e1, e2, [0.0]]))
    return float(max(best, 0.0))


def empirical_epsilon_lb(tpr, fpr, n_members: int, n_nonmembers: int, delta: float = 0.0,
                         alpha: float = 0.05, correction: str = "bonferroni") -> float:
    """ε lower bound from attack ROC points, holding with probability ≥ 1 − α.

    max over points of max(ln((TPR_lo − δ)/FPR_hi), ln((1 − δ − FPR_hi)/FNR_hi)), with
    Clopper–Pearson bounds (α/2 to each of TPR and FPR; Bonferroni over points by
    default because the maximum over thresholds is itself a selection). Returns 0
    when no point certifies anything.
    """
    tpr = np.atleast_1d(np.asarray(tpr, dtype=np.float64))
    fpr = np.atleast_1d(np.asarray(fpr, dtype=np.float64))
    a = _alpha_per_point(alpha, tpr.size, correction) / 2.0
    tpr_lo, _ = clopper_pearson(_counts(tpr, n_members), n_members, a)
    _, fpr_hi = clopper_pearson(_counts(fpr, n_nonmembers), n_nonmembers, a)
    return _eps_lb_from_bounds(tpr_lo, fpr_hi, delta)


def roc_inside_dp_region(fpr, tpr, eps, delta, n_members: int, n_nonmembers: int,
                         alpha: float = 0.05, correction: str = "bonferroni") -> dict:
    """Check an empirical attack ROC against the (ε,δ)-DP region, up to sampling error.

    A point violates the region only if even its most favourable Clopper–Pearson
    corner lies outside: TPR_lo > tpr_bound(FPR_hi) (above the region) or
    TPR_hi < tpr_lower_bound(FPR_lo) (below it, i.e. a flipped attack that is too
    good). Both bounds are monotone in FPR, so these are the right corners.
    Confidence 1 − α simultaneously over all points with ``correction='bonferroni'``
    (α/2 each to the TPR and FPR intervals).

    Returns ``inside`` (bool), ``n_points``, ``n_violations``, ``max_excess`` (how far
    the worst point's CP corner lies outside the region, ≤ 0 when inside),
    ``eps_lower_bound`` (empirical_epsilon_lb from the same intervals) and
    ``violations``: a DataFrame (index, fpr, tpr, fpr_ci, tpr_ci, bound, excess, side).
    """
    fpr = np.atleast_1d(np.asarray(fpr, dtype=np.float64))
    tpr = np.atleast_1d(np.asarray(tpr, dtype=np.float64))
    if fpr.shape != tpr.shape:
        raise ValueError("fpr and tpr must have the same shape")
    a = _alpha_per_point(alpha, fpr.size, correction) / 2.0
    tpr_lo, tpr_hi = clopper_pearson(_counts(tpr, n_members), n_members, a)
    fpr_lo, fpr_hi = clopper_pearson(_counts(fpr, n_nonmembers), n_nonmembers, a)
    upper = tpr_bound(fpr_hi, eps, delta)
    lower = tpr_lower_bound(fpr_lo, eps, delta)
    ex_above = tpr_lo - upper
    ex_below = lower - tpr_hi
    excess = np.maximum(ex_above, ex_below)
    # A tiny tolerance keeps float round-off at the region's edge from counting.
    bad = excess > 1e-12
    side = np.where(ex_above >= ex_below, "above", "below")
    violations = _EMPTY_VIOLATIONS.copy() if not bad.any() else pd.DataFrame({
        "index": np.flatnonzero(bad),
        "fpr": fpr[bad],
        "tpr": tpr[bad],
        "fpr_ci": np.where(side[bad] == "above", fpr_hi[bad], fpr_lo[bad]),
        "tpr_ci": np.where(side[bad] == "above", tpr_lo[bad], tpr_hi[bad]),
        "bound": np.where(side[bad] == "above", upper[bad], lower[bad]),
        "excess": excess[bad],
        "side": side[bad],
    })
    return {
        "inside": not bool(bad.any()),
        "n_points": int(fpr.size),
        "n_violations": int(bad.sum()),
        "max_excess": float(excess.max()) if excess.size else float("-inf"),
        "eps_lower_bound": _eps_lb_from_bounds(tpr_lo, fpr_hi, delta),
        "alpha": alpha,
        "violations": violations,
    }


def epsilon_warnings(eps: float, n: int | None = None) -> list[str]:
    """Rules of thumb for a target ε (spec E17, pitfall 2); δ rules live elsewhere.

    Warns when ε > 8 (the MIA bound is vacuous: best accuracy ≥ 0.9997), when the
    model is non-private, and when ε < 1/n (too little budget for most statistics).
    Raises on ε ≤ 0 or NaN.
    """
    eps = float(eps)
    if math.isnan(eps) or eps <= 0:
        raise ValueError(f"target epsilon must be > 0, got {eps}")
    out = []
    if math.isinf(eps):
        out.append("epsilon = inf: non-private model, no DP guarantee")
        return out
    if eps > VACUOUS_EPSILON:
        out.append(
            f"epsilon = {eps:g} > {VACUOUS_EPSILON:g}: the membership-inference bound is vacuous "
            f"(max attack accuracy {max_attack_accuracy(eps):.4f}, "
            f"TPR bound at FPR 1% {tpr_bound(0.01, eps):.4f}); ML usually targets 1-10"
        )
    if n is not None and eps < 1.0 / n:
        out.append(f"epsilon = {eps:g} < 1/n = {1.0 / n:.3g}: too little budget for a useful statistic")
    return out
