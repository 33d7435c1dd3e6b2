"""Honest ε*: ceilings, undefined values, flags, bootstrap intervals, Normal-fit check, ε̄ per strategy.

Oracles: brute-force enumeration of every count pair (ceiling), the estimator run on
explicitly resampled arrays (bootstrap), a closed form of ε* for two equal-variance
Normals (coverage), Monte Carlo spread over independent samples (bootstrap SE) and a
direct call of the mechanism-level bound (ε̄ per strategy).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dpaudit.metrics.epsilon_star import (
    NormalFit,
    bootstrap_epsilon_star,
    distribution_epsilon_star,
    empirical_ceiling,
    empirical_epsilon_star,
    epsilon_star_metrics,
    mechanism_epsilon_bar,
    normal_epsilon_star,
    normal_fit_check,
    parametric_ceiling,
    resample_indices,
    strategy_epsilon_bar,
)
from dpaudit.metrics.epsilon_star import bootstrap as bootstrap_module


def _brute_force_ceiling(n_tr, n_pop, delta, a):
    """Every (non-members below, members below) count pair, the filter written out, eq. 7."""
    c_pop, c_tr = np.meshgrid(np.arange(n_pop + 1), np.arange(n_tr + 1), indexing="ij")
    fpr, tnr = c_pop / n_pop, (n_pop - c_pop) / n_pop
    tpr, fnr = c_tr / n_tr, (n_tr - c_tr) / n_tr
    best = 1.0
    for i, j in zip(*np.nonzero((fpr > a) & (fnr > a) & (tnr > a) & (tpr > a)), strict=True):
        t, e, tn, tp = fpr[i, j], fnr[i, j], tnr[i, j], tpr[i, j]
        best = max(best, (tp - delta) / t, (tn - delta) / e, (e - delta) / tn, (t - delta) / tp)
    return math.log(best)


@pytest.mark.parametrize(
    ("n_tr", "n_pop", "delta", "a"),
    [(284, 142, 6.23e-4, 1e-3), (50, 80, 1e-3, 0.05), (1000, 1000, 1e-4, 1e-3), (37, 13, 0.0, 0.1),
     (3000, 7, 1e-5, 1e-3)],
)
def test_empirical_ceiling_equals_brute_force_over_all_count_pairs(n_tr, n_pop, delta, a):
    assert empirical_ceiling(n_tr, n_pop, delta, a) == pytest.approx(
        _brute_force_ceiling(n_tr, n_pop, delta, a), rel=1e-13, abs=1e-13)


def test_ceiling_is_nan_when_the_filter_keeps_no_count():
    # n = 3 with a = 0.34: 1/3 is not > 0.34 and 2/3 is not < 0.66, so no count of 3 can be kept
    assert math.isnan(empirical_ceiling(3, 100, 1e-3, 0.34))


def _separated_up_to_the_filter(n_tr, n_pop):
    """Losses as separated as the 0.001 filter lets a threshold be kept: one example of each
    set on the wrong side (the filter needs FPR and FNR > 0), all others perfectly apart."""
    members = np.concatenate([np.arange(n_tr - 1.0), [10_000.0]])
    nonmembers = np.concatenate([[n_tr / 2 + 0.5], 5_000.0 + np.arange(n_pop - 1.0)])
    return members, nonmembers


def test_perfectly_separated_run_sits_on_the_ceiling_and_is_flagged():
    n_tr, n_pop, delta = 300, 150, 1e-4
    members, nonmembers = _separated_up_to_the_filter(n_tr, n_pop)
    res = empirical_epsilon_star(members, nonmembers, delta)
    ceiling = _brute_force_ceiling(n_tr, n_pop, delta, 1e-3)
    assert res.eps_star == pytest.approx(ceiling, rel=1e-13)
    frame = epsilon_star_metrics({"logit": members}, {"logit": nonmembers}, delta, grid_size=10_000)
    row = frame[(frame["metric"] == "epsilon_star") & (frame["estimator"] == "empirical")].iloc[0]
    assert row["at_ceiling"] and not row["none_kept"] and not row["separated"]
    assert row["ceiling"] == pytest.approx(ceiling, rel=1e-13)
    # the winning ratio rests on one example (m2's denominator FNR = 1/n_tr)
    assert row["term"] == "m2" and row["argmax_count"] == pytest.approx(1.0)


def test_fully_separated_losses_are_nan_and_flagged_never_zero():
    members, nonmembers = np.arange(200.0), 1_000.0 + np.arange(100.0)
    frame = epsilon_star_metrics({"logit": members}, {"logit": nonmembers}, 1e-4, grid_size=10_000)
    rows = frame[frame["metric"] == "epsilon_star"].set_index("estimator")
    emp = rows.loc["empirical"]
    assert math.isnan(emp["value"]) and emp["none_kept"] and emp["separated"] and emp["n_kept"] == 0
    # beyond the ceiling (one example of each set moved across the gap reaches it): flagged as on it
    assert emp["at_ceiling"] and emp["ceiling"] == pytest.approx(_brute_force_ceiling(200, 100, 1e-4, 1e-3))
    assert rows.loc["parametric", "separated"]
    # the parametric Normals of separated losses are far apart too: nothing kept, NaN
    par = rows.loc["parametric"]
    assert par["n_kept"] > 0 or (math.isnan(par["value"]) and par["none_kept"])


def test_parametric_ceiling_flag_near_the_supremum():
    # Two unit Normals 2 z_delta apart cross the filter at one threshold: m1 -> (1 - 2 delta)/delta.
    delta = 1e-3
    # a kept window 0.003 sd wide holds ~10 points of the 10^6-level grid
    gap = 2 * stats.norm.isf(delta) - 0.003
    res = normal_epsilon_star(NormalFit(gap, 1.0, 0.0, 1.0), delta)
    assert parametric_ceiling(delta) - 0.01 <= res.eps_star < parametric_ceiling(delta)


def test_identical_losses_keep_nothing_and_are_not_separated():
    frame = epsilon_star_metrics({"logit": np.ones(50)}, {"logit": np.ones(40)}, 1e-3,
                                 estimators=("empirical",))
    row = frame[frame["metric"] == "epsilon_star"].iloc[0]
    assert math.isnan(row["value"]) and row["none_kept"] and not row["separated"] and pd.isna(row["at_ceiling"])


# --- bootstrap ---------------------------------------------------------------


@pytest.mark.parametrize("estimator", ["empirical", "parametric"])
def test_bootstrap_replicates_equal_the_estimator_on_resampled_arrays(estimator, monkeypatch):
    rng = np.random.default_rng(3)
    members = np.round(rng.normal(0.0, 1.0, 120), 1)  # rounding makes ties, as real losses have
    nonmembers = np.round(rng.normal(0.6, 1.3, 70), 1)
    delta, seed, grid = 1e-3, 11, 2_000
    monkeypatch.setattr(bootstrap_module, "BLOCK_ELEMENTS", 500)  # several blocks, 2 replicates each
    boot = bootstrap_epsilon_star(members, nonmembers, delta, estimator=estimator, resamples=9, seed=seed,
                                  grid_size=grid)
    for k in range(9):
        idx_tr, idx_pop = resample_indices(seed, k, members.size, nonmembers.size)
        if estimator == "empirical":
            expected = empirical_epsilon_star(members[idx_tr], nonmembers[idx_pop], delta).eps_star
            assert boot.replicates[k] == pytest.approx(expected, rel=1e-14, abs=1e-14)
        else:
            from dpaudit.metrics.epsilon_star import parametric_epsilon_star
            expected = parametric_epsilon_star(members[idx_tr], nonmembers[idx_pop], delta,
                                               grid_size=grid).eps_star
            # one-call tails vs the estimator's two ndtr calls: rounding only
            assert boot.replicates[k] == pytest.approx(expected, rel=1e-11)
    again = bootstrap_epsilon_star(members, nonmembers, delta, estimator=estimator, resamples=9, seed=seed,
                                   grid_size=grid)
    np.testing.assert_array_equal(again.replicates, boot.replicates)  # seeded; block size irrelevant


def _masked_normal_epsilon_star_values(mu_tr, sd_tr, mu_pop, sd_pop, delta, grid_size):
    """The replicates' parametric ε* as first written (boolean masks, one ratio array): the oracle."""
    from scipy import special

    from dpaudit.metrics.epsilon_star.estimators import quantile_levels

    q, q_c, z = quantile_levels(int(grid_size))
    own = (q > delta) & (q_c > delta)
    q, q_c, z = q[own], q_c[own], z[own]
    out = np.full(len(mu_tr), np.nan)
    for i in range(len(mu_tr)):
        if not (sd_tr[i] > 0 and sd_pop[i] > 0):
            continue
        best = -np.inf
        for x, rate_lo, rate_hi in (((mu_tr[i] + sd_tr[i] * z - mu_pop[i]) / sd_pop[i], q, q_c),
                                    ((mu_tr[i] - mu_pop[i] - sd_pop[i] * z) / sd_tr[i], q_c, q)):
            small = special.ndtr(-np.abs(x))
            tail = np.where(x >= 0, small, 1.0 - small)
            body = np.where(x >= 0, 1.0 - small, small)
            keep = (tail > delta) & (body > delta)
            if keep.any():
                t, b, lo, hi = tail[keep], body[keep], rate_lo[keep], rate_hi[keep]
                best = max(best, float(np.max(np.maximum(np.maximum((hi - delta) / t, (b - delta) / lo),
                                                         np.maximum((lo - delta) / b, (t - delta) / hi)))))
        out[i] = np.log(max(1.0, best)) if best > -np.inf else np.nan
    return out


@pytest.mark.parametrize(("delta", "grid"), [(1e-4, 100_000), (6.23e-4, 20_000), (0.0, 5_000), (0.2, 3_000)])
def test_parametric_replicates_equal_the_masked_form_bit_for_bit(delta, grid):
    rng = np.random.default_rng(int(delta * 1e6))
    n = 60
    mu_tr, mu_pop = rng.normal(0, 2, n), rng.normal(0, 2, n)
    sd_tr, sd_pop = np.exp(rng.normal(0, 1, n)), np.exp(rng.normal(0, 1, n))
    mu_tr[:3] = mu_pop[:3] + np.array([0.0, 60.0, -60.0])  # identical, and too far apart to keep anything
    sd_tr[:3] = sd_pop[:3]
    sd_tr[5], sd_pop[7] = 0.0, np.nan  # degenerate fits
    fast = bootstrap_module.normal_epsilon_star_values(mu_tr, sd_tr, mu_pop, sd_pop, delta, grid)
    np.testing.assert_array_equal(fast, _masked_normal_epsilon_star_values(mu_tr, sd_tr, mu_pop, sd_pop, delta, grid))
    assert np.isnan(fast[[5, 7]]).all() and np.isfinite(fast).sum() > n // 2  # both kinds exercised


def test_grid_best_of_a_scattered_kept_set_equals_the_masked_form():
    # a non-monotone x (never produced by the grids) keeps scattered points: the mask path
    from scipy import special

    rng = np.random.default_rng(1)
    x = rng.normal(0, 3, 500)
    lo = np.sort(rng.uniform(0.01, 0.99, 500))
    hi, delta = 1.0 - lo, 0.02
    small = special.ndtr(-np.abs(x))
    tail, body = np.where(x >= 0, small, 1.0 - small), np.where(x >= 0, 1.0 - small, small)
    keep = (tail > delta) & (body > delta)
    t, b, lo_k, hi_k = tail[keep], body[keep], lo[keep], hi[keep]
    expected = float(np.max(np.maximum(np.maximum((hi_k - delta) / t, (b - delta) / lo_k),
                                       np.maximum((lo_k - delta) / b, (t - delta) / hi_k))))
    assert not keep.all() and bootstrap_module._grid_best(x, lo, hi, lo - delta, hi - delta, delta) == expected


def test_empirical_bootstrap_covers_the_closed_form_value():
    # Members N(0,1), non-members N(1,1): the likelihood ratio is monotone, so each term of
    # eq. 7 peaks at a filter edge (FPR, FNR, TNR or TPR = a) -> closed form below.
    a, delta, n, level = 0.05, 1e-3, 2000, 0.9
    nd = stats.norm
    truth = math.log(max(
        (nd.cdf(1 + nd.ppf(a)) - delta) / a, (nd.sf(nd.isf(a) - 1) - delta) / a,
        (nd.sf(1 + nd.isf(a)) - delta) / a, (nd.cdf(nd.ppf(a) - 1) - delta) / a))
    # second implementation: the true-CDF estimator on its 2x10^6 quantile grid
    assert distribution_epsilon_star(nd(0, 1), nd(1, 1), delta, lower=a).eps_star == pytest.approx(truth, abs=1e-5)
    covered, replicates = 0, 40
    for r in range(replicates):
        rng = np.random.default_rng([99, r])
        boot = bootstrap_epsilon_star(rng.normal(0, 1, n), rng.normal(1, 1, n), delta, estimator="empirical",
                                      resamples=200, level=level, seed=r, empirical_filter=a)
        covered += boot.low <= truth <= boot.high
    # 40 draws at nominal 0.9: P(covered <= 29 | 0.9) ~ 0.2 % ; measured 0.87 over 60 draws
    assert 30 <= covered <= replicates, f"coverage {covered}/{replicates} at nominal {level}"


def test_parametric_bootstrap_se_matches_the_spread_over_independent_samples():
    delta, n, grid = 1e-3, 1000, 10_000
    estimates, ses = [], []
    for r in range(25):
        rng = np.random.default_rng([7, r])
        members, nonmembers = rng.normal(0, 1, n), rng.normal(0.7, 1.2, n)
        frame = epsilon_star_metrics({"logit": members}, {"logit": nonmembers}, delta, grid_size=grid,
                                     estimators=("parametric",),
                                     bootstrap={"resamples": 100, "seed": r, "grid_size": grid})
        row = frame[frame["metric"] == "epsilon_star"].iloc[0]
        estimates.append(row["value"])
        ses.append(row["boot_se"])
        assert row["boot_low"] <= row["boot_high"] and row["boot_resamples"] == 100
    ratio = np.mean(ses) / np.std(estimates, ddof=1)
    # Monte Carlo oracle; measured ratio 0.81. A factor 2 either way flags a broken bootstrap.
    assert 0.5 < ratio < 2.0, ratio


# --- goodness of fit ------------------------------------------------------------


def test_normal_fit_check_accepts_normal_and_rejects_bimodal_values():
    rng = np.random.default_rng(0)
    assert not normal_fit_check(rng.normal(size=3000), n_samples=300, seed=1).rejected
    bimodal = np.concatenate([rng.normal(-3, 0.5, 1500), rng.normal(3, 0.5, 1500)])
    check = normal_fit_check(bimodal, n_samples=300, seed=1)
    assert check.rejected and check.p_value < 1e-3 and check.n_samples == 300


def test_goodness_of_fit_rows_and_flag_on_the_parametric_row():
    rng = np.random.default_rng(1)
    members = np.concatenate([rng.normal(-3, 0.3, 400), rng.normal(2, 0.3, 400)])
    nonmembers = rng.normal(0, 1, 300)
    frame = epsilon_star_metrics({"logit": members}, {"logit": nonmembers}, 1e-3, grid_size=10_000,
                                 goodness_of_fit={"n_samples": 200, "repeats": 5, "alpha": 0.05, "seed": 0})
    gof = frame[frame["metric"] == "normal_fit_pvalue"].set_index("gof_set")
    assert set(gof.index) == {"members", "nonmembers"}
    assert gof.loc["members", "normal_rejected"]
    # 300 non-members cannot hold out 200 and still be fitted: half of them is used, and recorded
    assert gof.loc["members", "gof_n_samples"] == 200 and gof.loc["nonmembers", "gof_n_samples"] == 150
    assert (gof["gof_repeats"] == 5).all()
    par = frame[(frame["metric"] == "epsilon_star") & (frame["estimator"] == "parametric")].iloc[0]
    assert par["normal_rejected"]
    emp = frame[(frame["metric"] == "epsilon_star") & (frame["estimator"] == "empirical")].iloc[0]
    assert pd.isna(emp["normal_rejected"])


# --- mechanism-level bound per strategy --------------------------------------


def test_strategy_epsilon_bar_equals_the_direct_bound():
    rng = np.random.default_rng(5)
    rows = []
    for strategy in ("a", "b"):
        for seed in range(3):
            rows.append({"strategy": strategy, "seed": seed, "mu_tr": rng.normal(0.1, 0.05), "sd_tr": 0.9,
                         "mu_pop": 0.0, "sd_pop": rng.uniform(0.9, 1.2), "delta": 1e-4})
    models = pd.DataFrame(rows)
    out = strategy_epsilon_bar(models, ["strategy"], n_grid=20_000).set_index("strategy")
    for strategy, group in models.groupby("strategy"):
        fits = [NormalFit(*r) for r in group[["mu_tr", "sd_tr", "mu_pop", "sd_pop"]].to_numpy()]
        direct = mechanism_epsilon_bar(fits, 1e-4, n_grid=20_000)
        assert out.loc[strategy, "eps_bar"] == direct.eps_bar
        assert out.loc[strategy, "eps_bar"] <= out.loc[strategy, "eps_bar_log_mean_exp"] + 1e-12
    models.loc[0, "sd_tr"] = np.nan
    assert math.isnan(strategy_epsilon_bar(models, ["strategy"]).set_index("strategy").loc["a", "eps_bar"])


def test_one_component_fit_equals_sklearns_gaussian_mixture():
    # Oracle: sklearn's GaussianMixture(1) replayed on the same random stream as the library.
    from scipy import stats as st
    from sklearn.mixture import GaussianMixture

    from dpaudit.metrics.epsilon_star import gmm_ks_goodness_of_fit

    x = np.random.default_rng(2).gamma(2.0, 1.0, 700)
    table = gmm_ks_goodness_of_fit(x, n_components=[1], n_samples=[100, 300], n_repeats=3, seed=5)
    expected = []
    for rep in range(3):
        rng = np.random.default_rng([5, rep])
        perm = rng.permutation(x.size)
        held, fit_set = x[perm[:300]], x[perm[300:]].reshape(-1, 1)
        gmm = GaussianMixture(n_components=1, random_state=int(rng.integers(2**31))).fit(fit_set)
        mean, sd = gmm.means_.ravel(), np.sqrt(gmm.covariances_.ravel())
        for ns in (100, 300):
            comp = rng.choice(1, size=ns, p=[1.0])
            expected.append(st.ks_2samp(held[:ns], rng.normal(mean[comp], sd[comp])).pvalue)
    np.testing.assert_allclose(table["p_value"].to_numpy(), expected, rtol=1e-9)
