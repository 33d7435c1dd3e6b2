"""DP checkers (Geambasu's DP lecture: the definitions of (ε, δ)-DP and of the privacy loss, its "random row" example).

exact_dp_check is tested against closed forms (Laplace loss = ε·|Δ|/Δ1, the analytic
Gaussian δ(ε) of Balle & Wang computed by dp_accounting-independent code in
mechanisms, the lecture's random-row mechanism's δ = 1/(2n)).

empirical_dp_check must pass correct Laplace, Gaussian, exponential and
randomized-response mechanisms and FAIL each at half the required noise.
Fixed seeds; n = 200,000 samples per side; α = 0.05 with Bonferroni over all
events. Power, measured offline with further seeds at these settings (300 per
case; 100 for the slower exponential mechanism): every half-noise mechanism
failed in all of them and every correct one passed in all, i.e. power and
specificity ≥ 0.99 (≥ 0.97 for the exponential case) at 95% CP confidence
(the weakest case, Gaussian at half σ, violates by δ_true ≈ 0.0105 ≫ 1e-5
and its worst event exceeds the bound by ≈ 0.006 after CP slack). The tests run 3
seeds each.
"""

import math

import numpy as np
import pytest
from scipy import stats

from dpaudit.dp import mechanisms as M
from dpaudit.dp.checker import empirical_dp_check, exact_dp_check, hockey_stick_divergence

EPS = 1.0
N = 200_000
SEEDS = (0, 1, 2)


# ---------------------------------------------------------------- exact checks


def test_exact_check_laplace_density_ratio():
    y = np.linspace(-30, 31, 61_001)
    lp = stats.laplace.logpdf(y, loc=0, scale=1 / EPS)
    lq = stats.laplace.logpdf(y, loc=1, scale=1 / EPS)
    ok = exact_dp_check(lp, lq, EPS)
    assert ok["passed"] and ok["max_abs_loss"] == pytest.approx(EPS, rel=1e-9)
    # Half the noise: loss 2ε.
    lp2 = stats.laplace.logpdf(y, loc=0, scale=0.5 / EPS)
    lq2 = stats.laplace.logpdf(y, loc=1, scale=0.5 / EPS)
    bad = exact_dp_check(lp2, lq2, EPS)
    assert not bad["passed"] and bad["max_abs_loss"] == pytest.approx(2 * EPS, rel=1e-9)


def test_exact_check_exponential_and_randomized_response():
    scores_x = np.r_[1.0, np.zeros(20)]
    scores_y = np.r_[0.0, np.ones(20)]
    lp = M.exponential_mechanism_log_probabilities(scores_x, EPS)
    lq = M.exponential_mechanism_log_probabilities(scores_y, EPS)
    assert exact_dp_check(lp, lq, EPS)["passed"]
    lp2 = M.exponential_mechanism_log_probabilities(scores_x, 2 * EPS)
    lq2 = M.exponential_mechanism_log_probabilities(scores_y, 2 * EPS)
    assert not exact_dp_check(lp2, lq2, EPS)["passed"]
    p = M.randomized_response_truth_probability(EPS)
    rr = exact_dp_check(np.log([p, 1 - p]), np.log([1 - p, p]), EPS)
    assert rr["passed"] and rr["max_abs_loss"] == pytest.approx(EPS, rel=1e-12)


def test_exact_check_gaussian_delta_by_quadrature():
    # Oracle: closed-form δ(ε) (Balle & Wang 2018); quadrature on a fine grid, rtol 1e-5.
    sigma = M.gaussian_sigma_analytic(1.0, EPS, 1e-5)
    y = np.linspace(-40 * sigma, 40 * sigma, 400_001)
    w = np.full_like(y, y[1] - y[0])
    lp = stats.norm.logpdf(y, 0, sigma)
    lq = stats.norm.logpdf(y, 1, sigma)
    res = exact_dp_check(lp, lq, EPS, delta=1e-5, weights=w, rtol=1e-4)
    assert res["delta_realised"] == pytest.approx(1e-5, rel=1e-5)
    assert res["passed"]
    assert res["delta_realised"] == pytest.approx(M.gaussian_delta(sigma, EPS), rel=1e-5)
    half = exact_dp_check(stats.norm.logpdf(y, 0, sigma / 2), stats.norm.logpdf(y, 1, sigma / 2),
                          EPS, delta=1e-5, weights=w, rtol=1e-4)
    assert not half["passed"] and half["delta_realised"] > 0.01


def test_e14_random_row_mechanism_is_delta_only_dp_yet_publishes_a_record():
    # The lecture's example: "with probability ½ output a random row" is (0, 1/(2n))-DP but prints a
    # record half of the time: why δ must be ≪ 1/n.
    n = 8
    x = np.arange(n)                      # rows 0..n−1
    xp = np.r_[n, np.arange(1, n)]        # row 0 replaced by n
    support = np.arange(n + 2)            # outputs: a row value 0..n, or ⊥ = n+1

    def law(data):
        p = np.zeros(support.size)
        p[-1] = 0.5
        for v in data:
            p[v] += 0.5 / n
        return p

    with np.errstate(divide="ignore"):
        lp, lq = np.log(law(x)), np.log(law(xp))
    d = max(hockey_stick_divergence(lp, lq, 0.0), hockey_stick_divergence(lq, lp, 0.0))
    assert d == pytest.approx(1 / (2 * n), rel=1e-12)
    assert exact_dp_check(lp, lq, 0.0, delta=1 / (2 * n))["passed"]
    assert not exact_dp_check(lp, lq, 0.0, delta=0.9 / (2 * n))["passed"]
    assert law(x)[:n].sum() == pytest.approx(0.5)  # a real record, half the time


# ---------------------------------------------------------------- empirical checks


def laplace(scale):
    return lambda d, n, rng: d + rng.laplace(0.0, scale, n)


def gaussian(sigma):
    return lambda d, n, rng: d + rng.normal(0.0, sigma, n)


def rr(flip):
    return lambda d, n, rng: np.where(rng.random(n) < flip, 1 - d, d).astype(np.int64)


def expmech(factor):
    # Half the noise = twice the exponent ε·q/(2Δq).
    return lambda d, n, rng: M.exponential_mechanism(d, factor * EPS, 1.0, rng, size=n)


SIGMA = M.gaussian_sigma_analytic(1.0, EPS, 1e-5)
FLIP = 1 - M.randomized_response_truth_probability(EPS)
EM_X = np.r_[1.0, np.zeros(20)]
EM_Y = np.r_[0.0, np.ones(20)]

CASES = {
    "laplace": (laplace(1 / EPS), laplace(0.5 / EPS), 0.0, 1.0, 0.0),
    "gaussian": (gaussian(SIGMA), gaussian(SIGMA / 2), 0.0, 1.0, 1e-5),
    "randomized_response": (rr(FLIP), rr(FLIP / 2), 1, 0, 0.0),
    "exponential": (expmech(1.0), expmech(2.0), EM_X, EM_Y, 0.0),
}


@pytest.mark.parametrize("name", list(CASES))
def test_empirical_check_passes_correct_mechanism(name):
    good, _, x, xp, delta = CASES[name]
    for seed in SEEDS:
        res = empirical_dp_check(good, x, xp, EPS, delta, n=N, alpha=0.05, rng=seed)
        assert res.passed, (name, seed, res.worst)
        assert res.eps_lower_bound <= EPS


@pytest.mark.parametrize("name", list(CASES))
def test_empirical_check_fails_half_noise(name):
    _, bad, x, xp, delta = CASES[name]
    for seed in SEEDS:
        res = empirical_dp_check(bad, x, xp, EPS, delta, n=N, alpha=0.05, rng=100 + seed)
        assert not res.passed, (name, seed)
        assert res.worst["excess"] > 0
        # Every half-noise case certifies an ε clearly above the claimed one.
        assert res.eps_lower_bound > 1.2 * EPS


def test_empirical_check_result_fields_and_mechanism_contract():
    res = empirical_dp_check(laplace(1.0), 0.0, 1.0, EPS, n=20_000, rng=0)
    assert res.n_tests == len(res.events) and res.n == 20_000
    assert {"event", "direction", "p_hat", "q_hat", "excess"} <= set(res.events.columns)
    assert set(res.events["direction"]) == {"x vs x'", "x' vs x"}
    with pytest.raises(ValueError, match="1-D"):
        empirical_dp_check(lambda d, n, rng: np.zeros((n, 2)), 0.0, 1.0, EPS, n=1000, rng=0)


def test_randomized_response_ratio_is_exactly_e_eps_so_it_calibrates_the_tester():
    p = 1 - FLIP
    assert p / FLIP == pytest.approx(math.exp(EPS), rel=1e-12)


def test_exact_check_ignores_outputs_impossible_under_both():
    with np.errstate(divide="ignore"):
        lp = np.log([0.5, 0.5, 0.0])
    lq = np.array([np.log(0.5), np.log(0.5), -np.inf])
    with np.errstate(divide="ignore"):
        res = exact_dp_check(lp, lq, 0.1)
    assert res["passed"] and res["max_abs_loss"] == 0.0
    # An output possible under one law only is an infinite loss: not pure DP.
    with np.errstate(divide="ignore"):
        bad = exact_dp_check(np.log([0.5, 0.5]), np.log([1.0, 0.0]), 5.0)
    assert not bad["passed"] and bad["delta_realised"] == pytest.approx(0.5)
