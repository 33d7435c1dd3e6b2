"""Mechanisms (Geambasu's DP lecture: basic mechanisms, composite algorithms and their worked examples).

Oracles: scipy.stats distributions and closed forms written here, dp_accounting's
independent analytic-Gaussian code, and the lecture's worked examples, recomputed. Sampling
tests use fixed seeds and tolerances of ≥ 4 standard errors (stated per test).
"""

import math

import dp_accounting
import numpy as np
import pytest
from scipy import stats

from dpaudit.dp import mechanisms as M

N = 200_000


# ---------------------------------------------------------------- Laplace


def test_e7_laplace_moments_tails_and_ks():
    rng = np.random.default_rng(7)
    z = M.laplace_mechanism(np.zeros(N), sensitivity=1.0, eps=1.0, rng=rng)
    # Oracle: Lap(1) from scipy; KS p-value well above 1e-3 at this fixed seed.
    assert stats.kstest(z, stats.laplace(scale=1.0).cdf).pvalue > 1e-3
    # E|z| = b = 1; sd(|z|) = 1, so 4 SE = 4/√N ≈ 0.009.
    assert np.mean(np.abs(z)) == pytest.approx(1.0, abs=4 / math.sqrt(N))
    # sd = b√2; sd of the sample sd ≈ √((kurt+2)/4N)·σ = √(8/4N)·√2 → 4 SE ≈ 0.0127.
    assert np.std(z) == pytest.approx(math.sqrt(2), abs=0.013)
    for t in (1.0, 2.0, 3.0):
        p = math.exp(-t)
        se = math.sqrt(p * (1 - p) / N)
        assert np.mean(np.abs(z) >= t) == pytest.approx(p, abs=4 * se)


def test_e7_plus_minus_seven_slide():
    # "±7": Pr[|z| ≥ 7] = e^−7 ≈ 9.1e-4 at ε = 1, Δ = 1 (the lecture's Laplace example).
    assert math.exp(-7) == pytest.approx(9.1e-4, abs=1e-5)
    assert stats.laplace.sf(7, scale=M.laplace_scale(1, 1)) * 2 == pytest.approx(math.exp(-7))
    # The 99.9% half-width b·ln(1000) ≈ 6.9: under 1% of a count of 1,000, 69% of 10.
    half = M.laplace_scale(1, 1) * math.log(1000)
    assert half == pytest.approx(6.91, abs=0.005)
    assert half / 1000 < 0.01 and half / 10 > 0.5


def test_laplace_scale_and_vector_shape():
    assert M.laplace_scale(2.0, 0.5) == 4.0
    out = M.laplace_mechanism([1.0, 2.0, 3.0], 1.0, 1.0, rng=0)
    assert out.shape == (3,)
    assert np.array_equal(out, M.laplace_mechanism([1.0, 2.0, 3.0], 1.0, 1.0, rng=0))
    with pytest.raises(ValueError, match="epsilon"):
        M.laplace_scale(1.0, 0.0)


# ---------------------------------------------------------------- Gaussian


def test_classical_gaussian_worked_numbers():
    # Classical calibration (Dwork & Roth 2014, Thm A.1): σ/Δ2 = 4.84/ε at δ = 1e-5; at the boundary ε = 1 it is 4.84.
    assert M.gaussian_sigma_classical(1.0, 1.0, 1e-5) == pytest.approx(4.84, abs=0.005)
    assert M.gaussian_sigma_classical(2.0, 0.5, 1e-5) == pytest.approx(4 * 4.8448, rel=1e-4)
    assert M.gaussian_epsilon_classical(4.845, 1e-5) == pytest.approx(1.0, abs=1e-4)


def test_classical_gaussian_refused_above_one_with_pointer():
    # Slide error: the formula is stated without the theorem's ε < 1 condition.
    with pytest.raises(ValueError, match="gaussian_sigma_analytic"):
        M.gaussian_sigma_classical(1.0, 1.5, 1e-5)
    with pytest.raises(ValueError, match="classical"):
        M.gaussian_mechanism(0.0, 1.0, 2.0, 1e-5, rng=0, calibration="classical")
    # The DP-SGD noise multiplier 1.1 gives a per-step 4.40 > 1 (classical calibration unproved): refused.
    with pytest.raises(ValueError, match="4.40"):
        M.gaussian_epsilon_classical(1.1, 1e-5)


def test_classical_gaussian_true_delta_at_eps_1_and_10():
    # Balle & Wang 2018: classical σ at δ = 1e-5 has true δ 4.1e-8 at ε = 1 (valid) and 2.3e-5
    # at ε = 10 (invalid). σ at ε = 10 computed by hand since the function refuses.
    s1 = math.sqrt(2 * math.log(1.25 / 1e-5))
    assert M.gaussian_delta(s1, 1.0) == pytest.approx(4.1e-8, rel=0.02)
    assert M.gaussian_delta(s1 / 10, 10.0) == pytest.approx(2.3e-5, rel=0.02)
    assert M.gaussian_delta(s1 / 10, 10.0) > 1e-5


@pytest.mark.parametrize(("eps", "delta"), [(0.1, 1e-5), (1.0, 1e-5), (4.0, 1e-6), (10.0, 1e-9)])
def test_analytic_gaussian_matches_dp_accounting(eps, delta):
    # Oracle: dp_accounting.get_sigma_gaussian (independent Balle–Wang code), rtol 1e-8.
    ours = M.gaussian_sigma_analytic(1.0, eps, delta)
    ref = dp_accounting.get_sigma_gaussian(eps, delta)
    assert ours == pytest.approx(ref, rel=1e-8)
    assert M.gaussian_sigma_analytic(3.0, eps, delta) == pytest.approx(3 * ref, rel=1e-8)
    assert M.gaussian_epsilon_analytic(ref, delta) == pytest.approx(eps, rel=1e-7)
    assert M.gaussian_epsilon_analytic(ref, delta) == pytest.approx(
        dp_accounting.get_epsilon_gaussian(ref, delta), rel=1e-7)


def test_scalar_gaussian_log_delta_is_the_array_one_bit_for_bit():
    # The root searches use the scalar form; the array form (what the PMP bounds broadcast) is the oracle.
    rng = np.random.default_rng(0)
    eps = np.concatenate([[0.0, 1e-9, 0.5, 1.0, 8.0, 40.0], rng.uniform(0, 30, 300)])
    sigmas = np.concatenate([[1e-3, 0.05, 1.0, 7.0, 300.0], np.exp(rng.uniform(-7, 6, 300))])
    for e, s in zip(np.resize(eps, 2000), np.resize(sigmas, 2000)[::-1], strict=True):
        assert M._gaussian_log_delta_one(e, s) == float(M._gaussian_log_delta(e, s, 1.0)), (e, s)
    with pytest.raises(ValueError):
        M._gaussian_log_delta_one(1.0, -1.0)


def test_analytic_gaussian_is_tighter_than_classical():
    for eps in (0.1, 0.5, 1.0):
        assert M.gaussian_sigma_analytic(1, eps, 1e-5) < M.gaussian_sigma_classical(1, eps, 1e-5)


def test_gaussian_mechanism_noise_sd():
    sigma = M.gaussian_sigma_analytic(1.0, 1.0, 1e-5)
    z = M.gaussian_mechanism(np.zeros(N), 1.0, 1.0, 1e-5, rng=3)
    # sd of the sample sd ≈ σ/√(2N): 4 SE ≈ 0.0063σ.
    assert np.std(z) == pytest.approx(sigma, rel=4 / math.sqrt(2 * N))


# ---------------------------------------------------------------- exponential


def test_exponential_probabilities_log_sum_exp():
    scores = np.array([3.0, 1.0, 0.0, -2.0])
    eps = 0.7
    naive = np.exp(eps * scores / 2) / np.exp(eps * scores / 2).sum()
    assert np.allclose(M.exponential_mechanism_probabilities(scores, eps), naive, rtol=1e-12)
    # Scores of 1e6 would overflow exp(); log-sum-exp must not.
    big = M.exponential_mechanism_probabilities(scores + 1e6, eps)
    assert np.allclose(big, naive, rtol=1e-9)


def test_exponential_gumbel_sampler_matches_probabilities():
    scores = np.array([5.0, 4.0, 2.0, 0.0, 0.0])
    p = M.exponential_mechanism_probabilities(scores, 1.0)
    draws = M.exponential_mechanism(scores, 1.0, rng=11, size=N)
    counts = np.bincount(draws, minlength=scores.size)
    # Chi-square goodness of fit against the exact probabilities; p-value at this seed.
    assert stats.chisquare(counts, N * p).pvalue > 1e-3
    assert isinstance(M.exponential_mechanism(scores, 1.0, rng=0), int)


def test_exponential_ratio_across_neighbours_at_most_e_eps():
    # Exact ratio over the finite output set: random neighbours with |Δq| ≤ 1 per output.
    rng = np.random.default_rng(5)
    eps = 1.3
    worst = 0.0
    for _ in range(2000):
        q = rng.normal(0, 3, size=6)
        q2 = q + rng.uniform(-1, 1, size=6)
        lp = M.exponential_mechanism_log_probabilities(np.stack([q, q2]), eps)
        worst = max(worst, np.max(np.abs(lp[0] - lp[1])))
    assert worst <= eps + 1e-12
    # The bound is approached when one score rises and many others fall.
    k = 200
    q = np.r_[1.0, np.zeros(k)]
    q2 = np.r_[0.0, np.ones(k)]
    lp = M.exponential_mechanism_log_probabilities(np.stack([q, q2]), eps)
    assert lp[0, 0] - lp[1, 0] > 0.98 * eps


def test_e9_utility_theorem_five_colours():
    # The lecture's bounded-sum example (corrected): shortfall 2(ln 5 + 3)/ε = 9.22/ε w.p. ≤ e^−3 = 0.0498; the slide's
    # 7.4/ε used log10 (2(log10 5 + 3) = 7.40).
    shortfall, prob = M.exponential_mechanism_utility_bound(1.0, 5, 3.0)
    assert shortfall == pytest.approx(9.22, abs=0.005)
    assert prob == pytest.approx(0.0498, abs=5e-5)
    assert 2 * (math.log10(5) + 3) == pytest.approx(7.40, abs=0.005)
    assert M.exponential_mechanism_utility_bound(0.5, 5, 3.0)[0] == pytest.approx(18.44, abs=0.01)
    # Empirical tail for a close race (every output within the shortfall except one).
    scores = np.array([20.0, 12.0, 10.5, 5.0, 0.0])
    draws = M.exponential_mechanism(scores, 1.0, rng=9, size=N)
    tail = np.mean(scores[draws] <= scores.max() - shortfall)
    exact = M.exponential_mechanism_probabilities(scores, 1.0)[scores <= 20 - shortfall].sum()
    assert tail == pytest.approx(exact, abs=4 * math.sqrt(exact / N) + 1e-4)
    assert exact <= prob


# ---------------------------------------------------------------- randomized response


def test_randomized_response_exact_ratio_and_debiasing():
    eps = 1.0
    p = M.randomized_response_truth_probability(eps)
    assert p == pytest.approx(math.e / (1 + math.e), rel=1e-15)
    assert p / (1 - p) == pytest.approx(math.e, rel=1e-12)  # ratio exactly e^ε
    truth = np.random.default_rng(1).random(N) < 0.3
    resp = M.randomized_response(truth, eps, rng=2)
    est = M.randomized_response_debias(resp, eps)
    # SE of the debiased estimate: sd(ȳ)·(e^ε+1)/(e^ε−1); 4 SE tolerance.
    ybar = resp.mean()
    se = math.sqrt(ybar * (1 - ybar) / N) * (math.e + 1) / (math.e - 1)
    assert est == pytest.approx(truth.mean(), abs=4 * se)
    assert M.randomized_response_truth_probability(800.0) == 1.0  # no overflow


# ---------------------------------------------------------------- composite

E10_INPUTS = [0, 0, 0, 0, 1, 3, 7, 8, 8, 8]


def test_e10_approximate_bounds_exact_counts_and_threshold():
    out = M.approximate_bounds(E10_INPUTS, 1.0, noise=False)
    # Positive bins [0,1], (1,2], (2,4], (4,8]: counts [5, 0, 1, 4]; negative bins empty.
    assert out["counts"][4:].tolist() == [5, 0, 1, 4]
    assert out["counts"][:4].tolist() == [0, 0, 0, 0]
    # The lecture's approximate-bounds example (corrected): the printed formula is negative; t = −ln(2(1 − c^{1/(m−1)}))/ε
    # with m = 8 reproduces the slide's 3.5; Google's exponent 1/(2·4) gives 3.64.
    assert out["threshold"] == pytest.approx(3.51, abs=0.005)
    assert M.approximate_bounds_threshold(1.0, 0.9, 4, "google") == pytest.approx(3.64, abs=0.005)
    printed = math.log(1 - 0.9 ** (1 / (2 - 1))) / 1.0
    assert printed < 0
    assert (out["lower"], out["upper"]) == (0.0, 8.0)


def test_e10_threshold_confidence_semantics():
    # With Laplace(1/ε) noise, the 5 empty bins all stay below t with probability
    # c^{5/7} = 0.927 (the threshold spends 1 − c^{1/7} per empty bin). 3,000 seeds,
    # binomial SE ≈ 0.0047, 4 SE tolerance.
    hits = 0
    trials = 3000
    rng = np.random.default_rng(10)
    for _ in range(trials):
        out = M.approximate_bounds(E10_INPUTS, 1.0, rng=rng)
        empty = out["counts"] == 0
        hits += bool(np.all(out["noisy_counts"][empty] <= out["threshold"]))
    expected = 0.9 ** (5 / 7)
    assert hits / trials == pytest.approx(expected, abs=4 * math.sqrt(expected * (1 - expected) / trials))


def test_e11_bounded_mean_noise_scales_and_estimate():
    assert M.bounded_mean_noise_scales(0, 120, 1.0) == (120.0, 2.0)
    assert M.bounded_mean_noise_scales(-5, 5, 0.5) == (20.0, 4.0)
    ages = np.random.default_rng(4).uniform(0, 120, size=100_000)
    est = M.bounded_mean(ages, 0, 120, 1.0, rng=5)
    # Noise on the mean ≈ Lap(120)/N ± count noise: well below 0.05 at N = 1e5.
    assert est == pytest.approx(ages.mean(), abs=0.05)
    s = M.bounded_sum([-10, 1, 2, 50], -3, 5, 1e6, rng=0)
    assert s == pytest.approx(-3 + 1 + 2 + 5, abs=1e-3)
