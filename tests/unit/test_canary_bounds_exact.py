"""The faster canary estimators (dpaudit.dp.canary_bounds) against their previous implementations.

Each oracle below is the implementation the module had before it was made faster (commit 903e698
of dpaudit/dp/canary_bounds.py), copied verbatim up to names. Tolerance: none, the new results must
be the same floats (``==`` on every value, dtypes included).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import optimize, special

from dpaudit.dp import canary_bounds as cb
from dpaudit.dp.hypothesis import clopper_pearson_upper, epsilon_from_rate_bounds
from dpaudit.dp.mechanisms import gaussian_delta, gaussian_sigma_analytic
from dpaudit.dp.tradeoff import ClaimedCurve, pure_tradeoff

# ------------------------------------------------------------------ oracles (previous implementation)


def _old_one_run_p_value(m: int, r: int, v: int, eps: float, delta: float) -> float:
    if v == 0:
        return 1.0
    q = special.expit(float(eps))
    beta = float(cb._binom_sf(v - 1, r, q)[0])
    if delta == 0.0:
        return min(beta, 1.0)
    i = np.arange(1, v + 1)
    tails = cb._binom_sf(v - i - 1, r, q)
    slack = float(np.max((tails - beta) / i))
    return min(beta + 2.0 * m * delta * slack, 1.0)


def _old_largest_rejected(reject_gap, lo: float = 0.0) -> float:
    if reject_gap(lo) <= 0:
        return lo
    hi = max(1.0, 2.0 * lo)
    while reject_gap(hi) > 0:
        if hi >= cb._EPS_SEARCH_LIMIT:
            return cb._EPS_SEARCH_LIMIT
        lo, hi = hi, 2.0 * hi
    return float(optimize.brentq(reject_gap, lo, hi, xtol=1e-6))


def _old_one_run_epsilon(m: int, r: int, v: int, alpha: float, delta: float) -> float:
    if v == 0 or _old_one_run_p_value(m, r, v, 0.0, 0.0) > alpha:
        return 0.0
    return _old_largest_rejected(lambda eps: alpha - _old_one_run_p_value(m, r, v, eps, delta))


def _old_gaussian_mu(eps: float, delta: float) -> float:
    if delta <= 0.0:
        return math.inf
    if eps <= 0.0:
        return 0.0
    return 1.0 / gaussian_sigma_analytic(1.0, eps, delta)


def _old_one_run_fdp_epsilon(m: int, r: int, v: int, alpha: float, delta: float) -> float:
    if v == 0:
        return 0.0
    return _old_largest_rejected(lambda eps: cb.one_run_fdp_rejects(m, r, v, alpha, _old_gaussian_mu(eps, delta)))


def _old_candidate_thresholds(scores: np.ndarray, per_tail: int | None, *, presorted: bool = False) -> np.ndarray:
    if per_tail is None:
        return np.unique(scores)
    per_tail = int(per_tail)
    ordered = np.asarray(scores) if presorted else np.sort(scores)
    m = ordered.size
    ranks = np.unique(np.round(np.geomspace(1, max(m / 2, 1), per_tail)).astype(np.int64))
    ranks = ranks[(ranks >= 1) & (ranks <= m)]
    return np.unique(np.concatenate([ordered[m - ranks], ordered[np.minimum(ranks, m - 1)]]))


def _old_curve_gaps(curve, fpr_ub, fnr_ub):
    direct = np.asarray(curve.fnr(fpr_ub)) - fnr_ub
    mirror = np.asarray(curve.fnr(fnr_ub)) - fpr_ub
    return np.maximum(direct, mirror), mirror > direct


def _old_claim_curve_test(scores, included, curve, *, alpha: float, delta: float = 0.0, per_tail=40):
    # the thresholds and counts come from cb._threshold_counts, whose candidate_thresholds is checked
    # against the previous one in test_candidate_thresholds_are_the_previous_ones
    c = cb._threshold_counts(scores, included, per_tail, alpha, "the claim-curve test", "trials")
    thresholds, k, per, n_pos, n_neg = c.thresholds, c.thresholds.size, c.per_bound, c.n_pos, c.n_neg
    fp, fn, fpr_ub, fnr_ub = c.fp, c.fn, c.fpr_upper, c.fnr_upper
    gaps, _ = _old_curve_gaps(curve, fpr_ub, fnr_ub)
    levels = np.full(k, np.nan)
    top = np.full(k, 0.5)
    reject_top, _ = _old_curve_gaps(curve, np.atleast_1d(clopper_pearson_upper(fp, n_neg, top)),
                                    np.atleast_1d(clopper_pearson_upper(fn, n_pos, top)))
    live = reject_top > 0
    if live.any():
        lo = np.full(int(live.sum()), math.log(1e-300))
        hi = np.full(int(live.sum()), math.log(0.5))
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            g, _ = _old_curve_gaps(curve, np.atleast_1d(clopper_pearson_upper(fp[live], n_neg, np.exp(mid))),
                                   np.atleast_1d(clopper_pearson_upper(fn[live], n_pos, np.exp(mid))))
            hi = np.where(g > 0, mid, hi)
            lo = np.where(g > 0, lo, mid)
        levels[live] = np.exp(hi)
    adjusted = np.where(np.isnan(levels), 1.0, np.minimum(2 * k * levels, 1.0))
    worst = int(np.lexsort((-gaps, adjusted))[0])
    _, mirrored = _old_curve_gaps(curve, fpr_ub[worst:worst + 1], fnr_ub[worst:worst + 1])
    rejected = bool(gaps.max() > 0)
    p_value = float(adjusted[worst])
    if rejected:
        p_value = min(p_value, alpha)
    else:
        p_value = max(p_value, np.nextafter(alpha, 1.0))
    claimed = float(curve.fnr(fnr_ub[worst]) if mirrored[0] else curve.fnr(fpr_ub[worst]))
    terms = epsilon_from_rate_bounds(1.0 - fnr_ub, fpr_ub, 1.0 - fpr_ub, fnr_ub, delta)
    perfect_fpr = clopper_pearson_upper(0, n_neg, per)
    perfect_fnr = clopper_pearson_upper(0, n_pos, per)
    ceiling = float(np.max(epsilon_from_rate_bounds(1.0 - perfect_fnr, perfect_fpr, 1.0 - perfect_fpr,
                                                    perfect_fnr, delta)))
    return cb.ClaimCurveTest(rejected=rejected, p_value=p_value, worst_fpr_upper=float(fpr_ub[worst]),
                             worst_fnr_upper=float(fnr_ub[worst]), worst_claimed_fnr=claimed,
                             worst_mirrored=bool(mirrored[0]), worst_threshold=float(thresholds[worst]),
                             epsilon=max(float(np.max(terms)), 0.0), ceiling=max(ceiling, 0.0), thresholds=int(k),
                             included=int(n_pos), excluded=int(n_neg), alpha=alpha, delta=delta)


# ------------------------------------------------------------------ inputs


def _same(new, old) -> None:
    """Bit for bit: the same float (NaN included) and the same type."""
    assert type(new) is type(old), (new, old)
    assert np.array_equal(np.float64(new).view(np.int64), np.float64(old).view(np.int64)), (new, old)


def _gaussian_profile_curve(sigma: float, points=()) -> ClaimedCurve:
    """A tabulated-profile curve (the accountant's kind, ``_profile_fnr``) of a Gaussian mechanism."""
    eps = np.linspace(0.0, 40.0, 20001)
    return ClaimedCurve(profile_eps=eps, profile_delta=np.asarray(gaussian_delta(sigma, eps)), points=tuple(points))


CURVES = {
    "pure": lambda: pure_tradeoff(1.0),
    "gdp": lambda: ClaimedCurve(gaussian_mu=0.8),
    "profile": lambda: _gaussian_profile_curve(2.0, points=[(1.5, 1e-5)]),
}


def _scores(m: int, shift: float, seed: int, ties: bool = False) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    included = rng.random(m) < 0.5
    scores = rng.standard_normal(m) + shift * included
    return (np.round(scores, 1) if ties else scores), included


# ------------------------------------------------------------------ the comparisons


@pytest.mark.parametrize("m", [10, 1000, 20000])
@pytest.mark.parametrize("delta", [0.0, 1e-9, 1e-5, 0.01])
def test_one_run_p_value_is_the_previous_one(m, delta):
    rng = np.random.default_rng(m)
    for r in sorted({1, 2, min(64, m), min(65, m), min(200, m), m}):
        for v in sorted({0, 1, r // 2, (3 * r) // 4, max(r - 1, 0), r, *rng.integers(0, r + 1, 3).tolist()}):
            for eps in (0.0, 0.3, 1.0, 2.7, 6.0, 20.0, 64.0, float(rng.uniform(0, 10))):
                _same(cb.one_run_p_value(m, r, v, eps, delta), _old_one_run_p_value(m, r, v, eps, delta))


@pytest.mark.parametrize(("m", "alpha", "delta"), [(100, 0.05, 1e-5), (1000, 0.05 / 26, 6.2e-4),
                                                   (20000, 0.05 / 26, 1.25e-7), (20000, 0.2, 1e-3)])
def test_one_run_bounds_are_the_previous_ones(m, alpha, delta):
    # the Steinke and f-DP bounds at the counts one_run_audit meets: perfect guessing (its ceilings),
    # near-perfect, middling and chance
    for r in sorted({10, 100, min(1000, m), m}):
        for v in sorted({0, r // 2, (2 * r) // 3, (9 * r) // 10, r - 1, r}):
            _same(cb.one_run_epsilon(m, r, v, alpha, delta), _old_one_run_epsilon(m, r, v, alpha, delta))
            _same(cb.one_run_fdp_epsilon(m, r, v, alpha, delta), _old_one_run_fdp_epsilon(m, r, v, alpha, delta))
    _same(cb.one_run_epsilon(m, 10, 10, alpha, 0.0), _old_one_run_epsilon(m, 10, 10, alpha, 0.0))


def test_largest_rejected_is_the_previous_search():
    # the search limit, a root past 1, a root below 1, nothing rejected, and a start above 0
    for gap, lo in [(lambda e: 1.0, 0.0), (lambda e: 5.3 - e, 0.0), (lambda e: 0.2 - e * e, 0.0),
                    (lambda e: -1.0, 0.0), (lambda e: 9.0 - e, 3.0), (lambda e: math.exp(-e) - 0.01, 0.0)]:
        _same(cb._largest_rejected(gap, lo), _old_largest_rejected(gap, lo))


@pytest.mark.parametrize("per_tail", [None, 1, 5, 40, 300])
def test_candidate_thresholds_are_the_previous_ones(per_tail):
    for m in (1, 2, 3, 10, 999, 5000):
        for ties in (False, True):
            scores, _ = _scores(m, 0.0, m, ties)
            for presorted in (False, True):
                given = np.sort(scores) if presorted else scores
                new = cb.candidate_thresholds(given, per_tail, presorted=presorted)
                old = _old_candidate_thresholds(given, per_tail, presorted=presorted)
                assert new.dtype == old.dtype and np.array_equal(new, old)


@pytest.mark.parametrize("curve", sorted(CURVES))
@pytest.mark.parametrize(("m", "shift", "per_tail"), [(200, 0.0, 40), (2000, 1.5, 40), (2000, 4.0, 10),
                                                      (5000, 0.8, 40), (300, 2.0, None)])
def test_claim_curve_test_is_the_previous_one(curve, m, shift, per_tail):
    # rejected and not, mirrored and not; δ = 0 (pure) and δ > 0
    claimed = CURVES[curve]()
    for seed, ties in ((0, False), (1, True)):
        scores, included = _scores(m, shift, seed, ties)
        for delta in (0.0, 1e-5):
            new = cb.claim_curve_test(scores, included, claimed, alpha=0.05, delta=delta, per_tail=per_tail)
            old = _old_claim_curve_test(scores, included, claimed, alpha=0.05, delta=delta, per_tail=per_tail)
            for field in dataclasses.fields(old):
                _same(getattr(new, field.name), getattr(old, field.name))


def test_one_run_audit_repeats_itself_with_warm_caches():
    # the memo caches (_cached_bound, _gaussian_mu, threshold_ranks) return what a cold call computes
    scores, included = _scores(3000, 1.0, 4)
    first = cb.one_run_audit(scores, included, alpha=0.05, delta=1e-5, method="fdp")
    cb._cached_bound.cache_clear()
    cb._gaussian_mu.cache_clear()
    assert cb.one_run_audit(scores, included, alpha=0.05, delta=1e-5, method="fdp") == first
