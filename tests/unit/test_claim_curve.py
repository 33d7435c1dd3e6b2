"""The claimed trade-off curve (dpaudit.dp.tradeoff), the claim-curve test
(dpaudit.dp.canary_bounds.claim_curve_test) and the detectable noise factor
(dpaudit.dp.canary_power), issue 22.

Settings "breast_cancer" are the default config's: 284 members, batch 64, 10 epochs, so
q = 64/284, T = (284 // 64)·10 = 40 steps, δ = auto = 1/(n ln n) = 6.23e-4, σ calibrated
by the RDP accountant (the config's), 5,000 canaries, α = 0.05, 40 thresholds per tail.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from scipy import special, stats

from dpaudit.dp import accounting
from dpaudit.dp import canary_power as cp
from dpaudit.dp.canary_bounds import claim_curve_test
from dpaudit.dp.hypothesis import dp_tradeoff_curve
from dpaudit.dp.tradeoff import ClaimedCurve, accountant_tradeoff, pure_tradeoff

N_MEMBERS = 284
Q = 64 / N_MEMBERS
STEPS = (N_MEMBERS // 64) * 10
DELTA = 1.0 / (N_MEMBERS * math.log(N_MEMBERS))
M = 5000
ALPHA = 0.05
ALPHAS = np.concatenate([np.geomspace(1e-6, 1e-2, 200), np.linspace(0.01, 1 - 1e-6, 200)])


@functools.cache
def _claim(eps: float) -> tuple[float, ClaimedCurve]:
    sigma = accounting.calibrate_noise(eps, Q, STEPS, DELTA, "rdp", "poisson")
    return sigma, accountant_tradeoff(sigma, Q, STEPS, "poisson", points=[(eps, DELTA)])


def _flagged(eps: float, seeds: int = 20, m: int = M, **bug) -> int:
    sigma, curve = _claim(eps)
    count = 0
    for seed in range(seeds):
        scores, included = cp.simulate_canary_scores(m, Q, STEPS, sigma, rng=np.random.default_rng(seed), **bug)
        count += claim_curve_test(scores, included, curve, alpha=ALPHA, delta=DELTA).rejected
    return count


# ------------------------------------------------------------------ oracles


@pytest.mark.parametrize("sigma", [0.5, 1.0, 3.0])
def test_single_gaussian_step_is_the_gaussian_curve(sigma):
    # Dong, Roth, Su 2022, Thm. 2.7: the Gaussian mechanism with sensitivity 1 is
    # (1/σ)-GDP, G_μ(α) = Φ(Φ⁻¹(1 − α) − μ); tolerance 1e-6 (issue 22).
    expected = stats.norm.cdf(stats.norm.ppf(1 - ALPHAS) - 1.0 / sigma)
    np.testing.assert_allclose(accountant_tradeoff(sigma, 1.0, 1).fnr(ALPHAS), expected, rtol=0, atol=1e-6)


def test_composed_gaussian_steps_are_the_composed_curve():
    # Dong, Roth, Su 2022, Cor. 3.3: T compositions of μ-GDP are √T·μ-GDP.
    sigma, steps = 2.0, 9
    expected = stats.norm.cdf(stats.norm.ppf(1 - ALPHAS) - math.sqrt(steps) / sigma)
    curve = accountant_tradeoff(sigma, 1.0, steps)
    assert curve.gaussian_mu == pytest.approx(1.5)
    np.testing.assert_allclose(curve.fnr(ALPHAS), expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("eps", [1.0, 4.0])
def test_poisson_curve_dominates_the_accountants_profile_and_touches_the_pld_one(eps):
    # Dong, Roth, Su 2022, Prop. 2.12: every (ε, δ(ε)) point the accountant states is a
    # trade-off curve max(0, 1 − δ − e^ε α, e^{−ε}(1 − δ − α)) f_claim must lie above.
    # Tolerance 1e-5: f_claim uses dp_accounting's pessimistic PLD at value
    # discretization 1e-3 (tradeoff.PLD_DISCRETIZATION), the accountant at 1e-4; the
    # coarser one states a δ(ε) up to a few 1e-6 larger (measured 3.7e-6 at σ(ε = 1)),
    # which lowers f_claim's lines by that much, and the ε grid (spacing 0.002) lowers it
    # by < 1e-6. Both errors make the claim weaker, never stronger.
    tol = 1e-5
    sigma, _ = _claim(eps)
    curve = accountant_tradeoff(sigma, Q, STEPS)
    alphas = np.geomspace(1e-9, 1.0, 20000)
    f = curve.fnr(alphas)
    deltas = np.geomspace(1e-8, 1e-1, 12)
    for accountant in ("pld", "rdp"):
        eps_profile = accounting.dpsgd_profile(sigma, Q, STEPS, deltas, accountant)
        for e, d in zip(eps_profile, deltas, strict=True):
            gap = f - dp_tradeoff_curve(e, d, alphas)
            assert gap.min() >= -tol, (accountant, e, d, gap.min())
            if accountant == "pld":  # the accountant's own lines support f_claim: it touches them
                assert gap.min() <= tol, (e, d, gap.min())


@pytest.mark.parametrize("eps", [0.1, 1.0, 5.0])
def test_pure_curve_is_exact(eps):
    expected = np.maximum(0.0, np.maximum(1 - np.exp(eps) * ALPHAS, np.exp(-eps) * (1 - ALPHAS)))
    np.testing.assert_allclose(pure_tradeoff(eps).fnr(ALPHAS), expected, rtol=0, atol=1e-15)
    np.testing.assert_allclose(pure_tradeoff(eps).fnr(ALPHAS), dp_tradeoff_curve(eps, 0.0, ALPHAS), atol=1e-15)


@pytest.mark.parametrize("which", ["poisson", "gaussian", "pure"])
def test_inverse_is_consistent(which):
    # f is symmetric (Dong, Roth, Su 2022, Prop. 2.4 for the curves from a profile), so
    # f(f(α)) = α where f(α) > 0; 1e-9 relative: the PLD envelope is a max over the
    # same ε lines for α and f(α) (measured ≤ 7e-10).
    curve = {"poisson": lambda: _claim(4.0)[1], "gaussian": lambda: accountant_tradeoff(1.3, 1.0, 4),
             "pure": lambda: pure_tradeoff(2.0)}[which]()
    f = curve.fnr(ALPHAS)
    keep = f > 1e-12
    np.testing.assert_allclose(curve.fpr(f[keep]), ALPHAS[keep], rtol=1e-9, atol=1e-15)


def test_tiny_mu_curve_is_near_one_minus_alpha():
    # σ = 1e4, T = 1: μ = 1e-4, and G_μ(α) ≥ 1 − α − μ/√(2π) (the largest gap, at α = ½).
    curve = accountant_tradeoff(1e4, 1.0, 1)
    np.testing.assert_allclose(curve.fnr(ALPHAS), 1 - ALPHAS, atol=1e-4 / math.sqrt(2 * math.pi) + 1e-12)
    poisson = accountant_tradeoff(200.0, 0.01, 10)  # subsampled, μ_eff ≈ q√T/σ ≈ 1.6e-4
    np.testing.assert_allclose(poisson.fnr(ALPHAS), 1 - ALPHAS, atol=2e-3)


# ------------------------------------------------------------------ power (numpy mirror)


@pytest.mark.parametrize(("eps", "bug", "at_least"), [
    (1.0, {"noise_factor": 0.5}, 18),
    (4.0, {"noise_factor": 0.8}, 16),
    (1.0, {"steps_factor": 4}, 18),
    (1.0, {"sample_rate_factor": 2.0}, 18),  # data sampled at 2q, accountant at q
    (1.0, {"clip_factor": 2.0}, 18),  # clipped at 2C, noise for C
    (4.0, {"sample_rate_factor": 2.0}, 18),
    (4.0, {"clip_factor": 2.0}, 18),
])
def test_broken_mechanisms_are_flagged(eps, bug, at_least):
    # issue 22, Tests/Power: 20 seeds, m = 5,000, breast_cancer settings.
    assert _flagged(eps, **bug) >= at_least


def test_correct_mechanism_is_rarely_flagged():
    # issue 22, Tests/Validity: at most 3 of 40 (the test is at α = 0.05 per audit).
    assert _flagged(1.0) + _flagged(4.0) <= 3


def _binomial_ok(flags: int, trials: int) -> bool:
    # "at the nominal rate or less": a one-sided binomial test of rate ≤ α at level 1e-3
    return stats.binom.sf(flags - 1, trials, ALPHA) >= 1e-3


def test_exact_gaussian_pair_is_flagged_at_most_at_the_nominal_rate():
    # The dominating pair of a μ-GDP claim: N(0, 1) (out) against N(μ, 1) (in).
    mu, m, trials = 1.0, 1000, 200
    curve = ClaimedCurve(gaussian_mu=mu)
    flags = 0
    for seed in range(trials):
        rng = np.random.default_rng(seed)
        included = rng.random(m) < 0.5
        scores = rng.standard_normal(m) + mu * included
        flags += cp.claim_curve_rejects(scores, included, curve, alpha=ALPHA)
    assert _binomial_ok(flags, trials), flags


def test_exact_pure_pair_is_flagged_at_most_at_the_nominal_rate():
    # The dominating pair of pure ε-DP: randomized response, P[1 | in] = e^ε/(1 + e^ε),
    # P[1 | out] = 1/(1 + e^ε); its one non-trivial test sits on the curve's kink.
    eps, m, trials = 1.0, 1000, 200
    curve = pure_tradeoff(eps)
    flags = 0
    for seed in range(trials):
        rng = np.random.default_rng(seed)
        included = rng.random(m) < 0.5
        scores = (rng.random(m) < np.where(included, special.expit(eps), special.expit(-eps))).astype(float)
        flags += cp.claim_curve_rejects(scores, included, curve, alpha=ALPHA)
    assert _binomial_ok(flags, trials), flags


def test_fast_decision_is_the_tests_decision():
    sigma, curve = _claim(4.0)
    decisions = []
    for seed, f in enumerate([1.0, 0.85, 0.8, 0.75, 0.6, 0.9, 0.82, 0.78, 0.7]):
        scores, included = cp.simulate_canary_scores(2000, Q, STEPS, sigma, noise_factor=f,
                                                     rng=np.random.default_rng(seed))
        if seed % 3 == 0:
            scores = np.round(scores, 1)  # ties
        full = claim_curve_test(scores, included, curve, alpha=ALPHA, delta=DELTA).rejected
        assert cp.claim_curve_rejects(scores, included, curve, alpha=ALPHA) == full
        decisions.append(full)
    assert 0 < sum(decisions) < len(decisions)  # both outcomes were checked



def test_fast_decision_against_a_pure_curve():
    # The linear releases' claim (pure ε-DP): two Gaussian score samples, shifted from 0 to 1.5.
    rng = np.random.default_rng(0)
    curve = pure_tradeoff(1.0)
    included = np.repeat([True, False], 400)
    agreed = set()
    for shift in np.linspace(0.0, 1.5, 16):
        scores = np.concatenate([rng.normal(shift, 1, 400), rng.normal(0, 1, 400)])
        fast = cp.claim_curve_rejects(scores, included, curve, alpha=0.05, per_tail=40)
        assert fast == claim_curve_test(scores, included, curve, alpha=0.05, delta=0.0, per_tail=40).rejected
        agreed.add(fast)
    assert agreed == {True, False}  # both outcomes exercised

@pytest.mark.parametrize(("eps", "bug"), [(1.0, {"noise_factor": 0.6}), (4.0, {}), (4.0, {"steps_factor": 4}),
                                          (4.0, {"sample_rate_factor": 2.0, "clip_factor": 2.0})])
def test_tabulated_scores_have_the_mechanisms_distribution(eps, bug):
    # Two-sample Kolmogorov–Smirnov, 20,000 scores each way, per class; level 1e-3.
    sigma, _ = _claim(eps)
    noise = bug.pop("noise_factor", 1.0)
    tab, tab_in = cp.tabulated_canary_sampler(20000, Q, STEPS, sigma, **bug)(noise, np.random.default_rng(1))
    direct, direct_in = cp.simulate_canary_scores(20000, Q, STEPS, sigma, noise_factor=noise,
                                                  rng=np.random.default_rng(2), **bug)
    assert stats.ks_2samp(tab[tab_in], direct[direct_in]).pvalue > 1e-3
    assert stats.ks_2samp(tab[~tab_in], direct[~direct_in]).pvalue > 1e-3


# ------------------------------------------------------------------ power statement


def _factor(eps: float, m: int = M, **kw) -> dict:
    sigma, curve = _claim(eps)
    return cp.detectable_noise_factor(canaries=m, q=Q, steps=STEPS, sigma=sigma, curve=curve, alpha=ALPHA,
                                      delta=DELTA, **kw)


def test_detectable_factor_is_stable_across_seeds():
    # issue 22: two seeds agree within 0.05.
    a, b = _factor(4.0, seed=0), _factor(4.0, seed=1)
    assert abs(a["factor"] - b["factor"]) <= 0.05, (a, b)
    assert a["power_at_factor"] >= 0.8 > a["power_at_next"]
    assert 0.5 < a["factor"] < 1.0


def test_detectable_factor_grows_with_the_canaries():
    factors = [_factor(1.0, m=m, repetitions=50)["factor"] for m in (500, 2000, 8000)]
    assert factors == sorted(factors), factors
    assert factors[0] < factors[-1]


def test_tabulated_and_direct_simulation_give_the_same_factor():
    # Same test, scores simulated step by step or read from the tabulated distribution;
    # 40 repetitions each, so within the seed-to-seed spread (0.05).
    a = _factor(4.0, m=2000, repetitions=40, method="direct")
    b = _factor(4.0, m=2000, repetitions=40, method="tabulated")
    assert abs(a["factor"] - b["factor"]) <= 0.05, (a["factor"], b["factor"])


@pytest.mark.parametrize(("eps", "m", "seed"), [(4.0, 2000, 0), (1.0, 3000, 5)])
def test_tabulated_factor_is_the_generic_bisection_on_the_tabulated_sampler(eps, m, seed):
    # Oracle: detectable_factor on tabulated_canary_sampler (each repetition drawn afresh at
    # every f, scores unsorted). detectable_noise_factor draws each repetition once and reads
    # sorted scores: the same scores, decisions and record.
    sigma, curve = _claim(eps)
    oracle = cp.detectable_factor(cp.tabulated_canary_sampler(m, Q, STEPS, sigma), curve=curve, alpha=ALPHA,
                                  repetitions=20, seed=seed)
    fast = _factor(eps, m=m, repetitions=20, seed=seed)
    assert {k: v for k, v in fast.items() if k in oracle and k != "seconds"} == {
        k: v for k, v in oracle.items() if k != "seconds"}
    assert len(oracle["powers"]) > 3


def test_generic_factor_for_a_linear_like_release():
    # A Laplace release with claimed scale 1/ε for sensitivity 1 (pure ε-DP, score = the
    # release): noise scale f/ε. Correct (f = 1) is rarely rejected; the factor lies in (0, 1).
    eps, m = 1.0, 2000

    def simulate(f, rng):
        included = rng.random(m) < 0.5
        return included + rng.laplace(scale=f / eps, size=m), included

    out = cp.detectable_factor(simulate, curve=pure_tradeoff(eps), alpha=ALPHA, repetitions=40)
    assert 0.0 < out["factor"] < 1.0
    assert out["power_at_factor"] >= 0.8


def test_batched_factor_is_the_per_repetition_factor():
    # Oracle: the per-repetition version. A batched sampler that draws repetition r from the
    # generator seeded (seed, r), as detectable_factor does, must give the same bisection.
    eps, m, repetitions = 1.0, 600, 30

    def simulate(f, rng):
        included = rng.random(m) < 0.5
        return included + rng.laplace(scale=f / eps, size=m), included

    def simulate_all(f):
        drawn = [simulate(f, np.random.default_rng([7, r])) for r in range(repetitions)]
        return np.stack([s for s, _ in drawn]), np.stack([i for _, i in drawn])

    one = cp.detectable_factor(simulate, curve=pure_tradeoff(eps), alpha=ALPHA, repetitions=repetitions, seed=7)
    batched = cp.detectable_factor_batched(simulate_all, curve=pure_tradeoff(eps), alpha=ALPHA)
    for key in ("factor", "power_at_factor", "next_factor", "power_at_next", "evaluations", "powers"):
        assert batched[key] == one[key], key
    assert batched["repetitions"] == repetitions and batched["seed"] is None
    assert 0.0 < one["factor"] < 1.0 and one["powers"][1.0] <= 0.2
