"""Hypothesis-testing view of DP and what it means for membership inference (Geambasu's DP lecture: the risk multiplier, the Bayesian and the hypothesis-testing readings; Kairouz et al. 2015).

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

from dpaudit.contract.delta import check_delta

__all__ = [
    "two_sided_binomial_p",
    "two_sided_chi2_p",
    "two_sided_hypergeom_p",
    "two_sided_normal_p",
    "clopper_pearson",
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "dp_tradeoff_curve",
    "empirical_epsilon_lb",
    "epsilon_from_counts",
    "epsilon_from_rate_bounds",
    "epsilon_terms_from_counts",
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
    """e^ε: the factor by which any event's probability can grow (the lecture's risk multiplier).

    At ε = 0.1 this is 1.1052 (+10.5%); the slides' "no more than 11%" rounds up.
    """
    out = np.exp(np.asarray(eps, dtype=np.float64))
    return float(out) if out.ndim == 0 else out


def max_posterior(prior, eps):
    """Largest posterior an attacker can reach from ``prior``: posterior odds grow by at
    most e^ε, so e^ε·p/(e^ε·p + 1 − p) = expit(logit p + ε) (the Bayesian reading)."""
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


# ------------------------------------------------------------ Clopper–Pearson
# The one home of the project's binomial intervals and of ε from attack rates:
# the MIA family, the privacy cards and every later family import these.


def check_one_sided_alpha(alpha):
    """A level in (0, 0.5] (float), or an array of them (one level per bound)."""
    levels = np.asarray(alpha, dtype=np.float64)
    # One-sided bounds at α ≥ ½ would no longer bracket the point estimate,
    # which the MIA threshold search relies on.
    if not np.all((levels > 0.0) & (levels <= 0.5)):
        raise ValueError(f"alpha must lie in (0, 0.5], got {alpha}")
    return float(levels) if levels.ndim == 0 else levels


def two_sided_normal_p(z: float) -> float:
    """Two-sided p-value of a standard normal statistic."""
    return float(min(1.0, 2.0 * special.ndtr(-abs(float(z)))))


def two_sided_chi2_p(statistic: float, dof: float) -> float:
    """Two-sided p-value of a χ²_dof statistic (too small or too large)."""
    return float(min(1.0, 2.0 * min(special.chdtr(dof, statistic), special.chdtrc(dof, statistic))))


def two_sided_binomial_p(k: int, n: int, p: float) -> float:
    """Two-sided exact p-value (twice the smaller tail) of k successes in Binomial(n, p)."""
    if n <= 0:
        return 1.0
    lower = float(special.bdtr(k, n, p))
    upper = float(special.bdtrc(k - 1, n, p)) if k > 0 else 1.0
    return float(min(1.0, 2.0 * min(lower, upper)))


def two_sided_hypergeom_p(k: int, population: int, marked: int, drawn: int) -> float:
    """Two-sided exact p-value (twice the smaller tail) of k marked items among ``drawn`` items
    drawn without replacement from ``population`` holding ``marked`` (Fisher's exact test of a
    2 × 2 table given its margins)."""
    from scipy.stats import hypergeom

    law = hypergeom(int(population), int(marked), int(drawn))
    return float(min(1.0, 2.0 * min(law.cdf(int(k)), law.sf(int(k) - 1))))


def _count_arrays(k, n) -> tuple[np.ndarray, np.ndarray]:
    k_arr, n_arr = np.broadcast_arrays(np.asarray(k, np.float64), np.asarray(n, np.float64))
    if np.any(n_arr < 1) or np.any(k_arr < 0) or np.any(k_arr > n_arr):
        raise ValueError("Clopper-Pearson needs integer counts with 0 <= k <= n and n >= 1")
    return k_arr, n_arr


def clopper_pearson_lower(k, n, alpha: float) -> np.ndarray | float:
    """One-sided lower Clopper–Pearson bound p_lo with P(X ≥ k | p_lo) = α.

    X ~ Binomial(n, p); p_lo = 0 when k = 0. Vectorized over k and n.
    """
    alpha = check_one_sided_alpha(alpha)
    k_arr, n_arr = _count_arrays(k, n)
    # betaincinv is beta.ppf without scipy.stats' argument-checking overhead
    # (several times faster); the edge k = 0 is set explicitly.
    safe_k = np.where(k_arr > 0, k_arr, 1.0)
    lo = np.where(k_arr > 0, special.betaincinv(safe_k, n_arr - k_arr + 1.0, alpha), 0.0)
    return float(lo) if lo.ndim == 0 else lo


def clopper_pearson_upper(k, n, alpha: float) -> np.ndarray | float:
    """One-sided upper Clopper–Pearson bound p_hi with P(X ≤ k | p_hi) = α.

    X ~ Binomial(n, p); p_hi = 1 when k = n. Vectorized over k and n.
    """
    alpha = check_one_sided_alpha(alpha)
    k_arr, n_arr = _count_arrays(k, n)
    safe_rest = np.where(k_arr < n_arr, n_arr - k_arr, 1.0)
    # betainccinv(a, b, α) = betaincinv(a, b, 1 − α) without rounding 1 − α (tiny α keeps its digits)
    hi = np.where(k_arr < n_arr, special.betainccinv(k_arr + 1.0, safe_rest, alpha), 1.0)
    return float(hi) if hi.ndim == 0 else hi


def clopper_pearson(k, n, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Exact two-sided (1 − α) binomial interval for k successes out of n (vectorised):
    the one-sided bounds at α/2 each."""
    alpha = float(alpha)
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    lo = np.asarray(clopper_pearson_lower(k, n, alpha / 2.0))
    hi = np.asarray(clopper_pearson_upper(k, n, alpha / 2.0))
    return lo, hi


def _log_ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """ln(num/den), −inf where the numerator is ≤ 0 (that term carries no evidence)."""
    numerator = np.asarray(numerator, np.float64)
    denominator = np.broadcast_to(np.asarray(denominator, np.float64), numerator.shape)
    out = np.full(numerator.shape, -np.inf)
    ok = numerator > 0
    out[ok] = np.log(numerator[ok] / denominator[ok])
    return out


def epsilon_from_rate_bounds(tpr_lo, fpr_hi, tnr_lo, fnr_hi, delta: float) -> np.ndarray:
    """Per point, the larger of the two (ε, δ)-DP inequalities solved for ε:
    max(ln((TPR_lo − δ)/FPR_hi), ln((TNR_lo − δ)/FNR_hi)), unfloored (−inf where
    neither numerator is positive). With valid confidence bounds on the rates this
    is a lower bound on ε (Kairouz et al. 2015; Jagielski et al. 2020)."""
    return np.maximum(_log_ratio(np.asarray(tpr_lo) - delta, fpr_hi),
                      _log_ratio(np.asarray(tnr_lo) - delta, fnr_hi))


def epsilon_terms_from_counts(tp, fp, n_members: int, n_nonmembers: int, delta: float,
                              alpha: float) -> np.ndarray:
    """``epsilon_from_rate_bounds`` with one-sided Clopper–Pearson bounds at level α
    from confusion counts (unfloored, one value per threshold)."""
    tp = np.atleast_1d(np.asarray(tp, np.int64))
    fp = np.atleast_1d(np.asarray(fp, np.int64))
    # TNR/FNR bounds computed directly rather than as 1 − bound, to keep
    # precision when a rate is close to 1.
    return epsilon_from_rate_bounds(
        clopper_pearson_lower(tp, n_members, alpha), clopper_pearson_upper(fp, n_nonmembers, alpha),
        clopper_pearson_lower(n_nonmembers - fp, n_nonmembers, alpha),
        clopper_pearson_upper(n_members - tp, n_members, alpha), delta,
    )


def epsilon_from_counts(
    tp, fp, n_members: int, n_nonmembers: int, *, delta: float, alpha: float = 0.05
) -> np.ndarray | float:
    """Certified ε lower bound at thresholds fixed in advance, from their confusion counts.

    ε_lb = max(ln((TPR_lo − δ)/FPR_hi), ln((TNR_lo − δ)/FNR_hi)), floored at 0,
    with one-sided Clopper–Pearson bounds at level α; a term whose numerator is
    ≤ 0 is ignored. TNR_lo = 1 − FPR_hi and FNR_hi = 1 − TPR_lo, so only two
    bounds are random: the result is a valid lower bound on ε with probability
    ≥ 1 − 2α for a threshold fixed before seeing these counts.
    """
    alpha = check_one_sided_alpha(alpha)
    check_delta(delta, allow_pure=True)  # δ = 0 tests a pure ε-DP claim
    scalar = np.ndim(tp) == 0 and np.ndim(fp) == 0
    eps = np.maximum(epsilon_terms_from_counts(tp, fp, int(n_members), int(n_nonmembers), delta, alpha), 0.0)
    return float(eps[0]) if scalar else eps


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
    """Floored maximum over points; the complementary rates follow from the two bounds."""
    tpr_lo = np.asarray(tpr_lo, np.float64)
    fpr_hi = np.asarray(fpr_hi, np.float64)
    terms = epsilon_from_rate_bounds(tpr_lo, fpr_hi, 1.0 - fpr_hi, 1.0 - tpr_lo, delta)
    return float(max(terms.max(initial=0.0), 0.0))


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
    """Rules of thumb for a target ε (Geambasu's DP lecture: rules of thumb for ε); δ rules live elsewhere.

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
