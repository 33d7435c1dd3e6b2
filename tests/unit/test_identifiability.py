"""Identifiability bounds (Bernau et al. 2021) against the paper's tables, numbers we
derived from its formulas (and the authors' public code) and closed forms."""

import math

import numpy as np
import pytest
from scipy import stats

from dpaudit.dp import accounting
from dpaudit.metrics import identifiability as idf

MNIST_TARGETS = [0.52, 0.75, 0.9, 0.99]
OTHER_TARGETS = [0.53, 0.75, 0.9, 0.99]


def test_parameter_table_epsilon_from_rho_beta():
    # Paper's parameter table: ε = 0.08 / 0.12, 1.1, 2.2, 4.6 (rounded as printed).
    assert np.round(idf.epsilon_from_rho_beta(MNIST_TARGETS), 2).tolist() == [0.08, 1.1, 2.2, 4.6]
    assert round(idf.epsilon_from_rho_beta(0.53), 2) == 0.12
    # Bernau et al. 2021, Eq. 10, to three decimals.
    assert np.round(idf.epsilon_from_rho_beta([0.52, 0.75, 0.9, 0.99]), 3).tolist() == [0.080, 1.099, 2.197, 4.595]


def test_parameter_table_rho_alpha():
    # Paper's parameter table, ρ_α by Theorem 2 rounded to 2 decimals.
    mnist = idf.rho_alpha_thm2(idf.epsilon_from_rho_beta(MNIST_TARGETS), 0.01)
    other = idf.rho_alpha_thm2(idf.epsilon_from_rho_beta(OTHER_TARGETS), 0.001)
    assert np.round(mnist, 2).tolist() == [0.01, 0.14, 0.28, 0.54]
    assert np.round(other, 2).tolist() == [0.01, 0.12, 0.23, 0.46]
    # Bernau et al. 2021, parameter table, unrounded: 2Φ(2.197/6.215) − 1 = 0.276 and 2Φ(2.197/7.553) − 1 = 0.229.
    assert idf.rho_alpha_thm2(2.197, 0.01) == pytest.approx(2 * stats.norm.cdf(2.197 / 6.215) - 1, abs=2e-4)
    assert round(idf.rho_alpha_thm2(2.197, 0.001), 3) == 0.229


def test_fig3b_delta_dependence():
    # Spec Fig. 3(b): at ε = 2.2, ρ_α = 0.375, 0.277, 0.200, 0.164, 0.128, 0.091.
    got = idf.rho_alpha_thm2(2.2, np.array([1e-1, 1e-2, 1e-4, 1e-6, 1e-10, 1e-20]))
    assert np.round(got, 3).tolist() == [0.375, 0.277, 0.200, 0.164, 0.128, 0.091]


def test_fig2_success_rates():
    # Spec Fig. 2: Δ = 1, δ = 1e-6, σ = √(2 ln(1.25/δ))/ε: ρ_α = 0.429 (ε = 6), 0.223 (ε = 3).
    assert round(idf.rho_alpha_thm2(6.0, 1e-6), 3) == 0.429
    assert round(idf.rho_alpha_thm2(3.0, 1e-6), 3) == 0.223


def test_inverse_theorem2_roundtrip_and_clamp():
    eps = np.array([0.01, 0.5, 2.2, 9.0])
    assert idf.epsilon_from_rho_alpha(idf.rho_alpha_thm2(eps, 1e-3), 1e-3) == pytest.approx(eps, rel=1e-9)
    value, flagged = idf.clamp_epsilon(idf.epsilon_from_rho_alpha(np.array([-0.036, 0.2]), 1e-3))
    assert value[0] == 0.0 and flagged.tolist() == [True, False]
    # Spec table (rounded in the authors' way differs slightly): 0.241 at δ = 0.01 → ε′ ≈ 1.90.
    assert idf.epsilon_from_rho_alpha(0.241, 0.01) == pytest.approx(1.90, abs=0.02)


def test_rho_beta_and_expected():
    assert idf.rho_beta(math.log(9.0)) == pytest.approx(0.9, rel=1e-15)
    assert idf.rho_beta_expected(2.0, 0.0) == pytest.approx(idf.rho_beta(2.0), rel=1e-15)
    rb = idf.rho_beta(1.3)
    assert idf.rho_beta_expected(1.3, 0.1) == pytest.approx(rb + 0.1 * (1 - rb), rel=1e-14)
    assert 1 - idf.rho_beta_expected(20.0, 1e-3) == pytest.approx(0.999 * math.exp(-20), rel=1e-6)
    with pytest.raises(ValueError, match="rho_beta"):
        idf.epsilon_from_rho_beta(1.0)


def test_yeom_bound():
    assert idf.yeom_bound(2.2) == 1.0
    assert idf.yeom_bound(0.1) == pytest.approx(math.expm1(0.1))
    assert idf.yeom_bound(1e4) == 1.0


def test_noise_multipliers_legacy_match_reference():
    # Reference values of the authors' code (legacy conversion, k = 30).
    expected = {(0.52, 0.01): 404.8, (0.75, 0.01): 15.99, (0.9, 0.01): 8.38, (0.99, 0.01): 4.365,
                (0.53, 0.001): 329.0, (0.75, 0.001): 19.24, (0.9, 0.001): 9.95, (0.99, 0.001): 5.074}
    for (rho, delta), z_ref in expected.items():
        z = idf.noise_multiplier_for_rho_beta(rho, 30, delta, "legacy")
        decimals = len(str(z_ref).split(".")[1])
        assert round(z, decimals) == pytest.approx(z_ref, abs=10 ** -decimals), (rho, delta, z)


def test_continuous_conversion_and_order_cap():
    # Continuous orders give z = 209 and 170 at ρ_β = 0.52 / 0.53; the
    # legacy grid (α ≤ 63) realises only ε ≈ 0.041 / 0.062.
    assert round(idf.noise_multiplier_for_rho_beta(0.52, 30, 0.01, "continuous")) == 209
    assert round(idf.noise_multiplier_for_rho_beta(0.53, 30, 0.001, "continuous")) == 170
    z = idf.noise_multiplier_for_rho_beta(0.52, 30, 0.01, "legacy")
    assert idf.full_batch_epsilon(z, 30, 0.01, "continuous") == pytest.approx(0.041, abs=5e-4)
    # Closed form agrees with a brute-force minimum over a fine order grid.
    m, delta = 30 / (2 * 8.0**2), 1e-3
    orders = np.linspace(1.0001, 400, 2_000_000)
    brute = np.min(orders * m + math.log(1 / delta) / (orders - 1))
    assert idf.rdp_epsilon(m, delta, "continuous")["epsilon"] == pytest.approx(brute, rel=1e-7)
    # Inverse closed form round-trips.
    zc = idf.noise_multiplier_for_rho_beta(0.9, 30, 1e-3, "continuous")
    assert idf.full_batch_epsilon(zc, 30, 1e-3, "continuous") == pytest.approx(idf.epsilon_from_rho_beta(0.9), rel=1e-10)


def test_dp_accounting_conversion_is_tighter_and_matches_accountant():
    from dpaudit.dp import accounting

    legacy = idf.full_batch_epsilon(8.38, 30, 0.01, "legacy")
    improved = idf.full_batch_epsilon(8.38, 30, 0.01, "dp_accounting")
    # Second implementation: the accountant with q = 1 and 30 steps.
    direct = accounting.dpsgd_epsilon(8.38, 1.0, 30, 0.01)["epsilon"]
    assert improved == pytest.approx(direct, rel=1e-9)
    assert improved < legacy


def test_rdp_advantage_matches_derived_values():
    # RDP-exact expected advantages (derived from Bernau et al. 2021, Sec. 4.4): 0.005, 0.136, 0.256, 0.470 (MNIST)
    # and 0.007, 0.113, 0.217, 0.411 (others); repo outputs 0.2562 and 0.2168.
    z_m = [idf.noise_multiplier_for_rho_beta(r, 30, 0.01) for r in MNIST_TARGETS]
    z_o = [idf.noise_multiplier_for_rho_beta(r, 30, 0.001) for r in OTHER_TARGETS]
    assert np.round(idf.rho_alpha_rdp(30, z_m), 3).tolist() == [0.005, 0.136, 0.256, 0.470]
    assert np.round(idf.rho_alpha_rdp(30, z_o), 3).tolist() == [0.007, 0.113, 0.217, 0.411]
    assert round(idf.rho_alpha_rdp(30, z_m[2]), 4) == 0.2562
    assert round(idf.rho_alpha_rdp(30, z_o[2]), 4) == 0.2168
    # Heterogeneous form reduces to it when every step has S_t/σ_t = 1/z.
    assert idf.rho_alpha_heterogeneous(np.full(30, 3.0), np.full(30, 3.0 * z_m[2])) == pytest.approx(
        idf.rho_alpha_rdp(30, z_m[2]), rel=1e-12)


def test_heterogeneous_epsilon_equals_homogeneous():
    assert idf.heterogeneous_epsilon(np.full(30, 9.95), 1e-3) == pytest.approx(
        idf.full_batch_epsilon(9.95, 30, 1e-3), rel=1e-12)


def test_predicted_rates_match_derived_values():
    # Derived: predicted fraction with β > 0.9 at the ρ_β = 0.99 target: 0.131 (MNIST), 0.067;
    # predicted δ′ at ρ_β = 0.9: 0.0012 (δ = 0.01) and 0.0001 (δ = 0.001).
    m99 = 30 / (2 * idf.noise_multiplier_for_rho_beta(0.99, 30, 0.01) ** 2)
    o99 = 30 / (2 * idf.noise_multiplier_for_rho_beta(0.99, 30, 0.001) ** 2)
    assert round(idf.predicted_exceedance(m99, 0.9), 3) == 0.131
    assert round(idf.predicted_exceedance(o99, 0.9), 3) == 0.067
    m9 = 30 / (2 * 8.38**2)
    assert round(idf.predicted_exceedance(m9, 0.9), 4) == 0.0012
    assert round(idf.predicted_exceedance(30 / (2 * 9.95**2), 0.9), 4) == 0.0001
    # E[win] = Φ(√(M/2)) equals (1 + ρ_α,RDP)/2.
    assert idf.predicted_win_probability(m9) == pytest.approx((1 + idf.rho_alpha_rdp(30, 8.38)) / 2, rel=1e-12)


def test_llr_inner_product_equals_two_norm_form_and_scales():
    rng = np.random.default_rng(0)
    mu, mu_p = rng.normal(size=(2, 50))
    r = mu + rng.normal(scale=2.0, size=50)
    two_norm = (np.sum((r - mu_p) ** 2) - np.sum((r - mu) ** 2)) / (2 * 2.0**2)
    assert idf.log_likelihood_ratio(r, mu, mu_p, 2.0) == pytest.approx(two_norm, rel=1e-12)
    # 90k dimensions with float32-sized magnitudes: finite and equal to the exact form
    # evaluated on the difference vector (no cancellation of two ~1e9 norms).
    p = 90_000
    mu = rng.normal(scale=1e3, size=p)
    d = rng.normal(size=p)
    d *= 3.0 / np.linalg.norm(d)
    noise = rng.normal(scale=30.0, size=p)
    llr = idf.log_likelihood_ratio(mu + noise, mu, mu - d, 30.0)
    exact = (np.dot(noise, d) + 0.5 * np.dot(d, d)) / 900.0
    assert np.isfinite(llr) and llr == pytest.approx(exact, rel=1e-6, abs=1e-9)


def test_worst_case_noise_reaches_rho_beta_exactly():
    # Worst-case noise check of the authors' code: with per-step ε_i = ε/k, the final belief equals ρ_β = expit(ε).
    rng = np.random.default_rng(1)
    k, eps = 30, idf.epsilon_from_rho_beta(0.9)
    z = idf.sequential_noise_multiplier(eps, k, 1e-3)
    log_odds = 0.0
    for _ in range(k):
        mu, mu_p = rng.normal(size=(2, 20))
        sigma = z * np.linalg.norm(mu - mu_p)
        r = idf.worst_case_release(mu, mu_p, sigma, eps / k)
        log_odds += idf.log_likelihood_ratio(r, mu, mu_p, sigma)
    assert idf.belief(log_odds) == pytest.approx(0.9, abs=1e-12)


def test_analytic_law_matches_simulated_beliefs():
    # Bernau et al. 2021, Lemma 1 (our derivation): Λ_k ~ N(M, 2M), M = k/(2z²) in LS mode. 4,000 simulated runs of 30
    # steps in 40 dimensions; tolerance: 4 standard errors of the mean and a KS test.
    rng = np.random.default_rng(2)
    runs, k, p, z = 4000, 30, 40, 6.0
    d = rng.normal(size=(runs, k, p))
    mu = rng.normal(size=(runs, k, p))
    ls = np.linalg.norm(d, axis=-1)
    sigma = z * ls
    r = mu + sigma[..., None] * rng.normal(size=(runs, k, p))
    lam = idf.log_likelihood_ratio(r, mu, mu - d, sigma).sum(axis=1)
    m = k / (2 * z**2)
    assert lam.mean() == pytest.approx(m, abs=4 * math.sqrt(2 * m / runs))
    assert stats.kstest(lam, "norm", args=(m, math.sqrt(2 * m))).pvalue > 0.01
    wins = np.mean(idf.belief(lam) > 0.5)
    assert wins == pytest.approx(idf.predicted_win_probability(m), abs=4 * 0.5 / math.sqrt(runs))


def test_run_rows_dpsgd_and_baseline():
    train = {"mechanism": "dpsgd", "epsilon": 2.197, "delta": 1e-3, "noise_multiplier": 9.95,
             "steps": 30, "sampling_probability": 1.0, "accountant": "rdp", "sampling": "poisson",
             "neighbouring_relation": "add_or_remove_one"}
    rows = idf.run_identifiability(train).set_index("metric")
    assert rows.loc["rho_beta", "value"] == pytest.approx(0.9, abs=1e-4)
    assert rows.loc["rho_alpha_thm2", "value"] == pytest.approx(0.229, abs=5e-4)
    assert rows.loc["rho_alpha_rdp", "value"] == pytest.approx(0.2168, abs=1e-4)  # z = 9.95 rounded
    minibatch = idf.run_identifiability({**train, "sampling_probability": 0.05}).set_index("metric")
    assert not minibatch.loc["rho_alpha_rdp", "applicable"]
    assert math.isnan(minibatch.loc["rho_alpha_rdp", "value"])
    base = idf.run_identifiability({"mechanism": "baseline", "epsilon": math.inf, "delta": None})
    assert not base["applicable"].any() and base["value"].isna().all()
    assert base["conversion"].isna().all()  # no ε was converted


def _tv_distance(distance):
    """Oracle: total variation between N(0, 1) and N(distance, 1) by numerical
    integration (quad, abs error < 1e-10): the Bayes-optimal advantage of one test."""
    from scipy import integrate

    value, _ = integrate.quad(lambda x: abs(stats.norm.pdf(x) - stats.norm.pdf(x, distance)) / 2,
                              -40, 40 + distance, points=[distance / 2], epsabs=1e-12, limit=200)
    return value


@pytest.mark.parametrize(("accountant", "sampling", "conversion"), [
    ("rdp", "poisson", "dp_accounting"), ("pld", "poisson", "pld"),
    ("rdp", "shuffle", "dp_accounting"), ("pld", "shuffle", "analytic_gaussian"),
])
def test_run_rows_record_the_conversion_and_the_neighbouring_relation(accountant, sampling, conversion):
    # The (ε, δ) comes from dpaudit.dp.accounting as training computed it; every
    # row names the conversion and relation. Full batch (q = 1), k = 30, z = 5: k steps of
    # a Gaussian with sensitivity S·C and noise zC are one test at Mahalanobis distance
    # S√k/z, S = 1 (add/remove-one, Poisson) or 2 (replace-one, shuffle); the expected
    # advantage is that test's total variation (oracle: numerical integration, 1e-9).
    z, k, delta = 5.0, 30, 1e-3
    eps = accounting.dpsgd_epsilon(z, 1.0, k, delta, accountant, sampling)
    train = {"mechanism": "dpsgd", "epsilon": eps["epsilon"], "delta": delta, "noise_multiplier": z, "steps": k,
             "sampling_probability": 1.0, "accountant": accountant, "sampling": sampling,
             "neighbouring_relation": eps["neighbouring_relation"]}
    rows = idf.run_identifiability(train)
    assert (rows["conversion"] == conversion).all() and rows["applicable"].all()
    assert (rows["neighbouring_relation"] == eps["neighbouring_relation"]).all()
    sensitivity = 1.0 if sampling == "poisson" else 2.0
    rdp = rows.set_index("metric").loc["rho_alpha_rdp"]
    assert rdp["value"] == pytest.approx(_tv_distance(sensitivity * math.sqrt(k) / z), abs=1e-9)
    assert ("2C" in rdp["formula"]) == (sampling == "shuffle")
    # Shuffled mini-batches: the full-batch composition does not apply; said, not invented.
    mini = idf.run_identifiability({**train, "sampling_probability": 0.1}).set_index("metric").loc["rho_alpha_rdp"]
    assert not mini["applicable"] and math.isnan(mini["value"])
    assert ("shuffled" in mini["formula"]) == (sampling == "shuffle")


def test_run_rows_refuse_an_inconsistent_train_record():
    train = {"mechanism": "dpsgd", "epsilon": 1.0, "delta": 1e-3, "noise_multiplier": 5.0, "steps": 30,
             "sampling_probability": 1.0, "accountant": "rdp", "sampling": "shuffle",
             "neighbouring_relation": "add_or_remove_one"}
    with pytest.raises(ValueError, match="neighbouring_relation"):
        idf.run_identifiability(train)
    with pytest.raises(ValueError, match="conversion behind epsilon is unknown"):
        idf.run_identifiability({**train, "sampling": None})




@pytest.mark.parametrize("mechanism", ["output_perturbation", "objective_perturbation"])
def test_run_rows_pure_epsilon_mechanisms(mechanism):
    # ρ_β = expit(ε) and Yeom's min(1, e^ε − 1) hold for any ε-DP mechanism; the two ρ_α
    # rows are the Gaussian mechanism's and must not get a number.
    rows = idf.run_identifiability({"mechanism": mechanism, "epsilon": 0.4, "delta": 0.0, "accountant": "pure",
                                    "noise_multiplier": None, "steps": None, "sampling_probability": None})
    rows = rows.set_index("metric")
    assert rows.loc["rho_beta", "value"] == pytest.approx(1 / (1 + math.exp(-0.4)), rel=1e-12)
    assert rows.loc["rho_beta_expected", "value"] == pytest.approx(rows.loc["rho_beta", "value"], rel=1e-12)
    assert rows.loc["yeom_bound", "value"] == pytest.approx(math.exp(0.4) - 1, rel=1e-12)  # < 1: not capped
    assert rows.loc[["rho_beta", "rho_beta_expected", "yeom_bound"], "applicable"].all()
    for metric in ("rho_alpha_thm2", "rho_alpha_rdp"):
        assert not rows.loc[metric, "applicable"] and math.isnan(rows.loc[metric, "value"])
        assert "pure epsilon-DP" in rows.loc[metric, "formula"]
    assert (rows["delta"] == 0.0).all() and (rows["accountant"] == "pure").all()


def test_theorem2_is_not_a_bound_for_every_dp_mechanism():
    # Theorem 2 of Bernau et al. 2021 is the expected advantage of the classically calibrated Gaussian,
    # σ = Δ√(2 ln(1.25/δ))/ε. The analytically calibrated Gaussian (Balle & Wang 2018, Thm 8; its exact
    # δ(ε) is checked in test_dp_mechanisms.py) is exactly (2.197, 0.01)-DP with σ/Δ = 1.0407 and its
    # advantage 2Φ(Δ/(2σ)) − 1 (the total variation between N(0, σ²) and N(Δ, σ²)) is 0.369 > 0.276.
    # The bound of any (ε, δ)-DP mechanism, (e^ε − 1 + 2δ)/(e^ε + 1) (Kairouz et al. 2015), is 0.802.
    # Tolerances: 3 decimals as quoted; the order relations are strict with margins > 0.09.
    from dpaudit.dp import hypothesis, mechanisms

    eps, delta = 2.197, 0.01
    sigma = mechanisms.gaussian_sigma_analytic(1.0, eps, delta)
    assert mechanisms.gaussian_delta(sigma, eps) == pytest.approx(delta, rel=1e-9)  # exactly (ε, δ)-DP
    analytic = float(idf.advantage_from_distance(1.0 / sigma))
    assert analytic == pytest.approx(2 * stats.norm.cdf(0.5 / sigma) - 1, abs=1e-12)
    assert round(analytic, 3) == 0.369
    thm2 = float(idf.rho_alpha_thm2(eps, delta))
    assert round(thm2, 3) == 0.276
    any_dp = hypothesis.max_advantage(eps, delta)
    assert any_dp == pytest.approx((math.exp(eps) - 1 + 2 * delta) / (math.exp(eps) + 1), rel=1e-12)
    assert round(any_dp, 3) == 0.802
    assert thm2 < analytic <= any_dp

    # The run rows carry the any-DP bound next to Theorem 2's value, in the family's row format.
    train = {"mechanism": "dpsgd", "epsilon": eps, "delta": delta, "noise_multiplier": 5.0, "steps": 30,
             "sampling_probability": 0.1, "accountant": "rdp", "sampling": "poisson",
             "neighbouring_relation": accounting.NEIGHBOURING["poisson"]}
    rows = idf.run_identifiability(train)
    assert rows["metric"].is_unique and set(rows.columns) == set(idf.run_identifiability(
        {**train, "sampling_probability": 1.0}).columns)
    indexed = rows.set_index("metric")
    bound = indexed.loc["advantage_bound_any_dp"]
    assert bound["applicable"] and bound["value"] == pytest.approx(any_dp, rel=1e-12)
    assert "any (eps, delta)-DP" in bound["formula"]
    assert indexed.loc["rho_alpha_thm2", "value"] < analytic <= bound["value"]
    assert "classically calibrated" in indexed.loc["rho_alpha_thm2", "formula"]
    # Pure ε-DP: tanh(ε/2); a baseline: not applicable, NaN.
    pure = idf.run_identifiability({"mechanism": "output_perturbation", "epsilon": 0.4, "delta": 0.0,
                                    "accountant": "pure", "noise_multiplier": None, "steps": None,
                                    "sampling_probability": None}).set_index("metric")
    assert pure.loc["advantage_bound_any_dp", "value"] == pytest.approx(math.tanh(0.2), rel=1e-12)
    baseline = idf.run_identifiability({"mechanism": "baseline", "epsilon": math.inf}).set_index("metric")
    assert not baseline.loc["advantage_bound_any_dp", "applicable"]
    assert math.isnan(baseline.loc["advantage_bound_any_dp", "value"])


def test_normal_tails_are_scipy_stats_norm_bit_for_bit():
    # Oracle: the scipy.stats.norm calls these functions made before the job stopped importing scipy.stats.
    rng = np.random.default_rng(0)
    x = np.concatenate([[0.0, -0.0, 1e-300, 40.0, -40.0, np.inf, -np.inf], rng.normal(0, 5, 2000)])
    np.testing.assert_array_equal(idf.advantage_from_distance(x), 1.0 - 2.0 * stats.norm.sf(x / 2.0))
    m = np.concatenate([[1e-12, 0.5, 2.0, 1e4], rng.exponential(3.0, 500)])
    rho = rng.uniform(0.01, 0.99, m.size)
    np.testing.assert_array_equal(idf.predicted_win_probability(m), stats.norm.cdf(np.sqrt(m / 2.0)))
    from scipy import special

    np.testing.assert_array_equal(idf.predicted_exceedance(m, rho),
                                  stats.norm.sf((special.logit(rho) - m) / np.sqrt(2.0 * m)))
    for delta in (1e-5, 0.01):
        rho_a = np.concatenate([[0.0, -0.0, 1e-12, 0.999999], rng.uniform(-0.99, 0.99, 500)])
        got = idf.epsilon_from_rho_alpha(rho_a, delta)
        np.testing.assert_array_equal(got, 2.0 * idf._gaussian_scale(delta) * stats.norm.isf((1.0 - rho_a) / 2.0))
        assert got[0] == 0.0 and not np.signbit(got[:2]).any()
