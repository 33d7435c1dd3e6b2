"""Hypothesis-testing view (Geambasu's DP lecture: risk multiplier, Bayesian and hypothesis-testing readings, rules of thumb) and ROC checks.

Oracles: the lecture's numbers (recomputed), brute-force maximisation over a fine
FPR grid, exact ROC points of randomized response and Laplace mechanisms computed
here from scipy, and Clopper–Pearson bounds from scipy.stats.beta directly.
"""

import math

import numpy as np
import pytest
from scipy import stats

from dpaudit.dp import hypothesis as H


def test_e8_risk_multiplier_terms_of_service():
    # The lecture's risk multiplier: e^0.1 = 1.1052; the slide's 11% is a rounded-up bound.
    assert H.risk_multiplier(0.1) == pytest.approx(1.1052, abs=5e-5)
    assert H.risk_multiplier(0.1) < 1.11


def test_d4_max_posterior():
    assert H.max_posterior(0.5, 1.0) == pytest.approx(0.731, abs=5e-4)
    p, eps = 0.1, 0.7
    assert H.max_posterior(p, eps) == pytest.approx(math.exp(eps) * p / (math.exp(eps) * p + 1 - p))


# Hypothesis-testing reading (Kairouz et al. 2015), recomputed: ε, max accuracy, max advantage, TPR bound at FPR 1%, abs tolerance.
HYPOTHESIS_TABLE = [
    (0.1, 0.525, 0.05, 0.011, 5e-4),
    (1.0, 0.731, 0.462, 0.027, 5e-4),
    (2.0, 0.881, 0.762, 0.074, 5e-4),
    (4.0, 0.982, 0.964, 0.546, 5e-4),
    (8.0, 0.9997, 0.9993, 0.9997, 5e-5),
]


@pytest.mark.parametrize(("eps", "acc", "adv", "tpr", "tol"), HYPOTHESIS_TABLE)
def test_d5_table(eps, acc, adv, tpr, tol):
    assert H.max_attack_accuracy(eps) == pytest.approx(acc, abs=tol)
    assert H.max_advantage(eps) == pytest.approx(adv, abs=tol)
    assert H.tpr_bound(0.01, eps) == pytest.approx(tpr, abs=tol)


@pytest.mark.parametrize(("eps", "delta"), [(0.5, 0.0), (1.0, 1e-3), (3.0, 0.05)])
def test_max_advantage_by_brute_force_over_the_region(eps, delta):
    fpr = np.linspace(0, 1, 2_000_001)
    brute = np.max(H.tpr_bound(fpr, eps, delta) - fpr)
    assert H.max_advantage(eps, delta) == pytest.approx(brute, abs=1e-6)
    assert H.max_attack_accuracy(eps, delta) == pytest.approx(
        (math.exp(eps) + delta) / (math.exp(eps) + 1), rel=1e-12)


def test_tradeoff_curve_inequalities_hold_and_are_tight():
    eps, delta = 1.0, 1e-3
    fpr = np.linspace(0, 1, 10_001)
    fnr = H.dp_tradeoff_curve(eps, delta, fpr)
    e = math.exp(eps)
    assert np.all(fpr + e * fnr >= 1 - delta - 1e-12)
    assert np.all(e * fpr + fnr >= 1 - delta - 1e-12)
    slack = np.minimum(fpr + e * fnr, e * fpr + fnr) - (1 - delta)
    assert np.min(np.abs(slack)) < 1e-12


def test_randomized_response_attains_the_boundary():
    # The RR test "answer is 1" has TPR = e^ε/(1+e^ε), FPR = 1/(1+e^ε): exactly on
    # the boundary and at the max-advantage vertex.
    eps = 1.5
    tpr = math.exp(eps) / (1 + math.exp(eps))
    fpr = 1 / (1 + math.exp(eps))
    assert H.tpr_bound(fpr, eps) == pytest.approx(tpr, rel=1e-12)
    assert tpr - fpr == pytest.approx(H.max_advantage(eps), rel=1e-12)


def test_laplace_roc_lies_inside_the_region():
    # Neyman–Pearson ROC of Lap(0, 1/ε) vs Lap(1, 1/ε) (Δ = 1): thresholds t.
    eps = 1.0
    t = np.linspace(-10, 10, 4001)
    fpr = stats.laplace.sf(t, loc=0, scale=1 / eps)
    tpr = stats.laplace.sf(t, loc=1, scale=1 / eps)
    assert np.all(tpr <= H.tpr_bound(fpr, eps) + 1e-12)
    assert np.all(tpr >= H.tpr_lower_bound(fpr, eps) - 1e-12)


def test_nonprivate_bounds_are_vacuous():
    assert H.tpr_bound(0.0, math.inf) == 1.0
    assert H.max_attack_accuracy(math.inf) == 1.0
    assert H.max_advantage(math.inf) == 1.0
    assert H.max_attack_accuracy(1e4) == 1.0  # no inf/inf


def test_clopper_pearson_against_scipy_beta():
    k = np.array([0, 3, 50, 100])
    lo, hi = H.clopper_pearson(k, 100, 0.05)
    assert lo[0] == 0.0 and hi[-1] == 1.0
    assert np.allclose(lo[1:], stats.beta.ppf(0.025, k[1:], 100 - k[1:] + 1), rtol=1e-10)
    assert np.allclose(hi[:-1], stats.beta.ppf(0.975, k[:-1] + 1, 100 - k[:-1]), rtol=1e-10)


def test_empirical_epsilon_lb_single_point():
    # TPR = 0.5, FPR = 0.01 with 1e6 each: ≈ ln 50 = 3.91 minus sampling slack.
    n = 1_000_000
    lb = H.empirical_epsilon_lb(0.5, 0.01, n, n, delta=0.0, alpha=0.05)
    tpr_lo = stats.beta.ppf(0.0125, 500_000, n - 500_000 + 1)
    fpr_hi = stats.beta.ppf(1 - 0.0125, 10_001, n - 10_000)
    assert lb == pytest.approx(math.log(tpr_lo / fpr_hi), rel=1e-9)
    assert 3.8 < lb < math.log(50)
    assert H.empirical_epsilon_lb([0.5], [0.5], 1000, 1000) == 0.0


def test_roc_inside_dp_region_flags_violating_roc():
    # Hand-made ROC from 10,000 members/non-members; ε = 1 allows TPR ≤ e·FPR.
    n = 10_000
    fpr = np.array([0.0, 0.001, 0.01, 0.1, 0.3, 1.0])
    tpr = np.array([0.0, 0.05, 0.20, 0.40, 0.60, 1.0])
    out = H.roc_inside_dp_region(fpr, tpr, 1.0, 0.0, n, n, alpha=0.05)
    assert not out["inside"]
    # Points 1 (0.05 vs bound 0.0027·…), 2 (0.20 vs 0.027) and 3 (0.40 vs 0.27) violate.
    assert out["violations"]["index"].tolist() == [1, 2, 3]
    assert (out["violations"]["side"] == "above").all()
    assert out["max_excess"] > 0.1
    assert out["eps_lower_bound"] > 1.0


def test_roc_inside_dp_region_passes_compliant_and_borderline_roc():
    n = 10_000
    eps = 1.0
    fpr = np.array([0.0, 0.001, 0.01, 0.1, 0.3, 1.0])
    tpr = np.minimum(H.tpr_bound(fpr, eps), 1.0)  # exactly on the boundary
    tpr = np.round(tpr * n) / n
    out = H.roc_inside_dp_region(fpr, tpr, eps, 0.0, n, n)
    assert out["inside"] and out["n_violations"] == 0 and out["violations"].empty
    # Slightly above the boundary but within sampling error: not a violation.
    tpr2 = tpr.copy()
    tpr2[3] += 0.005  # SE of TPR at 0.27 with n = 1e4 is 0.0044
    assert H.roc_inside_dp_region(fpr, tpr2, eps, 0.0, n, n)["inside"]
    # ε = ∞ allows everything.
    assert H.roc_inside_dp_region([0.0, 0.0], [0.9, 1.0], math.inf, 0.0, n, n)["inside"]


def test_roc_inside_dp_region_flags_flipped_attack_below_region():
    n = 10_000
    out = H.roc_inside_dp_region([0.4], [0.02], 1.0, 0.0, n, n)
    assert not out["inside"]
    assert out["violations"]["side"].tolist() == ["below"]


def test_e17_epsilon_rules_of_thumb():
    assert H.epsilon_warnings(1.0) == []
    assert H.epsilon_warnings(8.0) == []
    (msg,) = H.epsilon_warnings(9.0)
    assert "vacuous" in msg
    assert any("non-private" in m for m in H.epsilon_warnings(math.inf))
    assert any("1/n" in m for m in H.epsilon_warnings(1e-4, n=1000))
    with pytest.raises(ValueError):
        H.epsilon_warnings(0.0)


# --------------------------------------------------------------------------
# One home for the shared statistics (issue 7 §1): the card's DP-region ε lower
# bound and the mia family's certified bound are different statistics (Bonferroni
# over all ROC points vs a threshold chosen on a held-out half), built from the
# same Clopper–Pearson and ε-from-rates functions.


def test_mia_card_and_checker_use_the_shared_functions():
    from dpaudit.dp import checker
    from dpaudit.metrics import mia

    for name in ("clopper_pearson_lower", "clopper_pearson_upper", "epsilon_from_rate_bounds",
                 "epsilon_terms_from_counts", "epsilon_from_counts"):
        assert getattr(mia, name) is getattr(H, name), f"mia.{name} is a copy"
    for name in ("clopper_pearson_lower", "clopper_pearson_upper", "epsilon_from_rate_bounds"):
        assert getattr(checker, name) is getattr(H, name), f"checker.{name} is a copy"
    # the private copies that existed before the consolidation are gone
    assert not hasattr(mia, "_epsilon_terms") and not hasattr(mia, "_log_ratio")
    assert not hasattr(checker, "_cp_lower") and not hasattr(checker, "_cp_upper")


def test_card_bound_equals_the_certified_formula_at_the_card_level():
    # Oracle: the card's bound (two-sided CP at α/2 per rate, i.e. one-sided α/4,
    # no correction) equals the maximum over ROC points of the certified
    # epsilon_from_counts at one-sided level α/4. Tolerance: float round-off only
    # (TNR_lo = 1 − FPR_hi is computed two ways), rel 1e-9.
    from dpaudit.metrics import mia

    rng = np.random.default_rng(7)
    members, nonmembers = rng.normal(0.0, 1.0, 400), rng.normal(1.5, 1.0, 300)
    roc = mia.roc_curve(members, nonmembers)
    alpha = 0.05
    card = H.empirical_epsilon_lb(roc.tpr[1:], roc.fpr[1:], roc.n_members, roc.n_nonmembers,
                                  delta=1e-5, alpha=alpha, correction="none")
    certified = H.epsilon_from_counts(roc.tp[1:], roc.fp[1:], roc.n_members, roc.n_nonmembers,
                                      delta=1e-5, alpha=alpha / 4).max()
    assert card > 0.5
    assert card == pytest.approx(certified, rel=1e-9)


def test_one_sided_bounds_match_scipy_beta_ppf():
    # Oracle: scipy.stats.beta.ppf (the textbook Clopper–Pearson form), rel 1e-10.
    k = np.arange(0, 31)
    lo = H.clopper_pearson_lower(k, 30, 0.025)
    hi = H.clopper_pearson_upper(k, 30, 0.025)
    with np.errstate(all="ignore"):
        lo_ref = np.where(k > 0, stats.beta.ppf(0.025, k, 30 - k + 1), 0.0)
        hi_ref = np.where(k < 30, stats.beta.ppf(0.975, k + 1, 30 - k), 1.0)
    np.testing.assert_allclose(lo, lo_ref, rtol=1e-10, atol=1e-300)
    np.testing.assert_allclose(hi, hi_ref, rtol=1e-10)
    two_lo, two_hi = H.clopper_pearson(k, 30, 0.05)
    np.testing.assert_array_equal(two_lo, lo)
    np.testing.assert_array_equal(two_hi, hi)
    with pytest.raises(ValueError, match="0 <= k <= n"):
        H.clopper_pearson_lower(31, 30, 0.05)
    with pytest.raises(ValueError, match="alpha"):
        H.clopper_pearson_upper(3, 30, 0.7)
