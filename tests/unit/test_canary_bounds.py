"""The canary audit's estimators (dpaudit.dp.canary_bounds) against independent oracles."""

from fractions import Fraction
from math import comb

import dp_accounting
import numpy as np
import pytest
from scipy import special

from dpaudit.dp import canary_bounds as cb


def _binomial_tail(r: int, v: int, q: Fraction) -> Fraction:
    """P[Bin(r, q) ≥ v] by exact rational summation (v ≤ 0 gives 1)."""
    return sum((comb(r, j) * q**j * (1 - q) ** (r - j) for j in range(max(v, 0), r + 1)), Fraction(0))


def _brute_force_p_value(m: int, r: int, v: int, q: Fraction, delta: Fraction) -> float:
    # Steinke, Nasr, Jagielski 2023, Thm. 5.2, written out term by term.
    beta = _binomial_tail(r, v, q)
    slack = max((_binomial_tail(r, v - i, q) - beta) / i for i in range(1, v + 1))
    return float(min(beta + 2 * m * delta * slack, Fraction(1)))


@pytest.mark.parametrize(("m", "r", "v"), [(10, 10, 9), (30, 12, 10), (50, 20, 14), (8, 5, 1)])
@pytest.mark.parametrize("delta", [0.0, 1e-3])
def test_one_run_p_value_matches_exact_binomial_sums(m, r, v, delta):
    # q = e^ε/(1 + e^ε) at ε = ln 3 is exactly 3/4; tolerance 1e-12 relative (float64 binomial tails).
    eps = float(np.log(3.0))
    expected = _brute_force_p_value(m, r, v, Fraction(3, 4), Fraction(delta))
    assert cb.one_run_p_value(m, r, v, eps, delta) == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_binomial_tail_is_scipys_binom_sf_bit_for_bit():
    # Oracle: scipy.stats.binom.sf, which the one-run p-value called before (canary_bounds no longer
    # imports scipy.stats); k runs from below the support (−1) to past its top.
    from scipy import stats

    rng = np.random.default_rng(0)
    for n in [1, 2, 7, 100, 5000, 20000]:
        k = np.arange(-1, min(n, 600) + 2)
        for q in [0.5, 0.73, special.expit(rng.uniform(0, 20)), 1.0 - 1e-12, 1.0]:
            np.testing.assert_array_equal(cb._binom_sf(k, n, q), stats.binom.sf(k, n, q))
    assert cb._binom_sf(3, 10, 0.6)[0] == stats.binom.sf(3, 10, 0.6)


@pytest.mark.parametrize(("r", "expected"), [(10, 1.05), (100, 3.49), (1000, 5.78)])
def test_perfect_guessing_certifies_the_formula_values(r, expected):
    # Issue 17: all r guesses right on m = r canaries at 95 %, δ = 1e-5; the values are
    # from solving Thm. 5.2 at p = 0.05 (given to two decimals, hence abs 0.006).
    assert cb.one_run_epsilon(r, r, r, 0.05, 1e-5) == pytest.approx(expected, abs=0.006)


def test_one_run_epsilon_is_where_the_p_value_crosses_the_significance():
    m, r, v, delta = 1000, 200, 170, 1e-5
    eps = cb.one_run_epsilon(m, r, v, 0.05, delta)
    assert eps > 0
    assert cb.one_run_p_value(m, r, v, eps * 0.999, delta) < 0.05 < cb.one_run_p_value(m, r, v, eps * 1.001, delta)


def test_chance_guessing_certifies_nothing():
    assert cb.one_run_epsilon(1000, 100, 50, 0.05, 1e-5) == 0.0
    assert cb.one_run_fdp_epsilon(1000, 100, 50, 0.05, 1e-5) == 0.0


def test_gdp_epsilon_matches_dp_accounting_gaussian():
    # ε(μ, δ) is the ε of the Gaussian mechanism with σ = 1/μ: dp_accounting's inverse
    # calibration must return σ = 1/μ (tolerance 1e-8 relative).
    for mu in (0.3, 1.0, 2.5):
        for delta in (1e-5, 6.2e-4):
            eps = cb.gdp_epsilon(mu, delta)
            assert dp_accounting.get_sigma_gaussian(eps, delta) == pytest.approx(1.0 / mu, rel=1e-8)


def test_gdp_estimate_converges_to_mu_on_exact_gaussian_scores():
    # Scores N(μ, 1) for included and N(0, 1) for excluded canaries: the trade-off is
    # exactly μ-GDP, so the estimate approaches μ from below as m grows (Bonferroni and
    # Clopper–Pearson make it conservative). Tolerances: 0.1 at m = 2·10⁵, never above μ + 0.02.
    rng = np.random.default_rng(7)
    mu = 1.0
    m = 200_000
    included = rng.random(m) < 0.5
    scores = rng.standard_normal(m) + mu * included
    est = cb.gdp_estimate(scores, included, alpha=0.05, delta=1e-5)
    assert mu - 0.1 < est.mu < mu + 0.02
    assert est.epsilon == pytest.approx(cb.gdp_epsilon(est.mu, 1e-5))
    assert est.epsilon <= est.ceiling


def test_candidate_thresholds_are_rank_quantiles_of_the_pooled_scores():
    scores = np.arange(1000.0)
    grid = cb.candidate_thresholds(scores, 5)
    # ranks 1, 5, 22, 106, 500 (rounded geomspace to m/2): the k-th highest score, and the
    # threshold leaving the k lowest below it
    np.testing.assert_array_equal(grid, [1, 5, 22, 106, 500, 894, 978, 995, 999])
    np.testing.assert_array_equal(cb.candidate_thresholds(scores, None), scores)


def test_gdp_estimate_clamps_worse_than_chance_at_zero():
    rng = np.random.default_rng(3)
    included = rng.random(2000) < 0.5
    scores = rng.standard_normal(2000) - 3.0 * included  # included canaries score LOWER
    est = cb.gdp_estimate(scores, included, alpha=0.05, delta=1e-5)
    assert est.mu == 0.0 and est.epsilon == 0.0


def test_ceilings_bound_the_estimates_and_are_reached_by_perfect_separation():
    rng = np.random.default_rng(0)
    included = rng.random(500) < 0.5
    perfect = included.astype(float) + 1e-3 * rng.random(500)
    bound = cb.one_run_audit(perfect, included, alpha=0.05, delta=1e-5)
    assert bound.epsilon == pytest.approx(bound.ceiling) and bound.ceiling <= bound.ceiling_max
    # Every score a threshold: the separating one is among them and reaches the ceiling;
    # the rank grid need not contain it, and stays below.
    gdp = cb.gdp_estimate(perfect, included, alpha=0.05, delta=1e-5, per_tail=None)
    assert gdp.mu == pytest.approx(gdp.mu_ceiling) and gdp.epsilon == pytest.approx(gdp.ceiling)
    grid = cb.gdp_estimate(perfect, included, alpha=0.05, delta=1e-5)
    assert 0 < grid.epsilon <= grid.ceiling and grid.thresholds < gdp.thresholds
    noisy = included + rng.standard_normal(500)
    for method in ("steinke", "fdp"):
        b = cb.one_run_audit(noisy, included, alpha=0.05, delta=1e-5, method=method)
        assert 0 <= b.epsilon <= b.ceiling + 1e-9 and b.ceiling <= b.ceiling_max + 1e-9
        assert b.correct <= b.guesses == b.guesses_top + b.guesses_bottom


def _gdp_llr_scores(rng, m, mu):
    """Canaries of an exactly μ-GDP mechanism: one Gaussian observation each, scored by its
    log-likelihood ratio (monotone in the observation)."""
    included = rng.random(m) < 0.5
    y = rng.standard_normal(m) + mu * included
    return mu * y - mu**2 / 2, included


@pytest.mark.parametrize("method", ["steinke", "fdp"])
def test_one_run_bounds_are_valid_on_a_correct_gaussian_mechanism(method):
    # Validity: 20 independent audits of a mechanism that is exactly μ-GDP, hence
    # (ε(μ, δ), δ)-DP and f-DP for the Gaussian curve. Each certifies a bound above the
    # true ε with probability ≤ 5 %; 20 audits exceed 3 times with probability 0.016,
    # so more than 3 fails the test.
    rng = np.random.default_rng(11)
    mu, delta = 1.0, 1e-5
    true_eps = cb.gdp_epsilon(mu, delta)
    above = 0
    bounds = []
    for _ in range(20):
        scores, included = _gdp_llr_scores(rng, 2000, mu)
        b = cb.one_run_audit(scores, included, alpha=0.05, delta=delta, method=method)
        bounds.append(b.epsilon)
        above += b.epsilon > true_eps
    assert above <= 3, (true_eps, bounds)
    assert max(bounds) > 0  # the audit is not vacuous either


@pytest.mark.parametrize("method", ["steinke", "fdp"])
def test_one_run_bounds_have_power_against_a_leaky_mechanism(method):
    # Power: the mechanism is run with μ = 6 while it claims ε = 1 at δ = 1e-5.
    rng = np.random.default_rng(5)
    scores, included = _gdp_llr_scores(rng, 2000, 6.0)
    b = cb.one_run_audit(scores, included, alpha=0.05, delta=1e-5, method=method)
    assert b.epsilon > 1.0


def test_fdp_recursion_rejects_only_above_the_guessing_rate():
    # At μ = 0 (perfect privacy) the inverse curve is the identity: half the guesses
    # right is what chance gives, and the masses stop at once, far below the guessing rate.
    assert cb.one_run_fdp_rejects(100, 50, 25, 0.05, 0.0) <= 0
    # All 50 right has probability 2⁻⁵⁰ under perfect privacy: rejected even at μ = 0,
    # and at μ = 10 as well, while 25 right is never evidence against μ = 10.
    assert cb.one_run_fdp_rejects(100, 50, 50, 0.05, 0.0) > 0
    assert cb.one_run_fdp_rejects(100, 50, 25, 0.05, 10.0) <= 0
    assert float(special.ndtr(special.ndtri(0.3) - 0.0)) == pytest.approx(0.3)


def test_guesses_curve_saturates_at_its_ceiling_for_perfect_scores():
    included = np.arange(400) % 2 == 0
    curve = cb.guesses_curve(included.astype(float), included, alpha=0.05, delta=1e-5, guess_counts=[10, 100, 200])
    assert list(curve["guesses"]) == [10, 100, 200]
    np.testing.assert_allclose(curve["epsilon"], curve["ceiling"])
    assert curve["ceiling"].is_monotonic_increasing


@pytest.mark.parametrize("bad", [{"alpha": 0.0}, {"alpha": float("nan")}, {"delta": -1e-5}, {"delta": float("nan")}])
def test_estimators_refuse_bad_levels(bad):
    kwargs = {"alpha": 0.05, "delta": 1e-5, **bad}
    with pytest.raises(ValueError):
        cb.one_run_audit(np.arange(10.0), np.arange(10) % 2 == 0, **kwargs)


def test_estimators_refuse_non_finite_scores():
    with pytest.raises(ValueError, match="not finite"):
        cb.gdp_estimate(np.array([0.0, np.nan]), np.array([True, False]), alpha=0.05, delta=1e-5)
