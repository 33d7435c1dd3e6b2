"""Epsilon* estimators (Negoescu et al. 2023).

Oracles are written independently of the library: brute-force Python loops,
eq. (7) in its (t, eta) form, the parametric recipe of Negoescu et al. 2023 (Sec. 3.1, App. B) re-typed with
scipy.stats, and closed forms. Each test states its source and tolerance.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dpaudit.metrics.epsilon_star import (
    NormalFit,
    aggregate_strategies,
    empirical_epsilon_star,
    epsilon_star_metrics,
    epsilon_star_terms,
    gmm_ks_goodness_of_fit,
    log_mean_exp,
    mechanism_epsilon_bar,
    normal_epsilon_star,
    parametric_ceiling,
    parametric_epsilon_star,
    transform_losses,
)


def eq7_terms(t: float, eta: float, delta: float) -> list[float]:
    """Eq. (7) of the paper, in its (FPR t, FNR eta) form."""
    return [
        (1 - delta - eta) / t,
        (1 - delta - t) / eta,
        (eta - delta) / (1 - t),
        (t - delta) / (1 - eta),
    ]


def brute_force_empirical(members, nonmembers, delta, a=1e-3):
    """Loop over every observed loss as a threshold; "member" iff loss <= tau (Negoescu et al. 2023, App. B.1)."""
    best = [-math.inf] * 4
    for tau in sorted(set(members) | set(nonmembers)):
        t = sum(1 for v in nonmembers if v <= tau) / len(nonmembers)
        eta = sum(1 for v in members if v > tau) / len(members)
        if a < t < 1 - a and a < eta < 1 - a:
            best = [max(b, m) for b, m in zip(best, eq7_terms(t, eta, delta), strict=True)]
    return math.log(max(1.0, *best)), best


# --- empirical -------------------------------------------------------------


@pytest.mark.parametrize(
    ("n_tr", "n_pop", "delta", "seed"), [(40, 60, 0.01, 0), (75, 30, 1e-3, 1), (120, 120, 0.0, 2)]
)
def test_empirical_matches_brute_force_loop(n_tr, n_pop, delta, seed):
    # Source: Negoescu et al. 2023, App. B.1 (all thresholds, filter (0.001, 0.999), eq. 7). Tolerance 1e-12
    # relative: both sides are a few float divisions of the same counts.
    rng = np.random.default_rng(seed)
    # rounding creates ties inside and across the two sets
    members = np.round(rng.normal(0.0, 1.0, n_tr), 1)
    nonmembers = np.round(rng.normal(0.7, 1.3, n_pop), 1)
    expected_eps, expected_m = brute_force_empirical(members.tolist(), nonmembers.tolist(), delta)
    res = empirical_epsilon_star(members, nonmembers, delta)
    assert res.eps_star == pytest.approx(expected_eps, rel=1e-12, abs=1e-12)
    np.testing.assert_allclose(res.m, expected_m, rtol=1e-12)
    assert res.term == f"m{int(np.argmax(expected_m)) + 1}"


def test_empirical_argmax_rates_and_boundary_flag():
    # Source: our output contract (persist argmax point and boundary flag).
    # Hand-made: members 0..9, non-members 5..14 (n = 10 each), delta = 0.
    members, nonmembers = np.arange(10.0), np.arange(5.0, 15.0)
    res = empirical_epsilon_star(members, nonmembers, 0.0)
    # tau = 5: t = 1/10, eta = 4/10 -> m1 = 0.6/0.1 = 6; tau = 9: t = 5/10, eta = 0 (filtered);
    # tau = 8: t = 0.4, eta = 0.1 -> m2 = 0.6/0.1 = 6. Ties resolve to m1 (first term).
    assert res.eps_star == pytest.approx(math.log(6.0), abs=1e-12)
    assert res.term == "m1"
    assert (res.argmax_fpr, res.argmax_fnr) == pytest.approx((0.1, 0.4), abs=1e-15)
    # tau = 5 is the smallest kept threshold (tau = 4 has t = 0): the filter binds there
    assert res.on_boundary is True
    assert res.n_kept == 4  # tau = 5, 6, 7, 8
    assert res.grid_size == 15


def test_empirical_direction_invariance_exact():
    # Source: Negoescu et al. 2023, eq. 7 (direction invariance): negating the score maps (t, eta) to
    # (1 - t, 1 - eta), which permutes m1<->m3 and m2<->m4. Exact (1e-15): the rates
    # come from the same integer counts.
    rng = np.random.default_rng(3)
    members = rng.gamma(2.0, 5.0, 3000)
    nonmembers = rng.gamma(3.0, 5.0, 2000)
    a = empirical_epsilon_star(members, nonmembers, 1e-4)
    b = empirical_epsilon_star(-members, -nonmembers, 1e-4)
    assert b.eps_star == pytest.approx(a.eps_star, rel=1e-15, abs=0)
    np.testing.assert_allclose(b.m, [a.m[2], a.m[3], a.m[0], a.m[1]], rtol=1e-15)


def test_parametric_direction_invariance_of_the_fitted_test():
    # Source: Negoescu et al. 2023, eq. 7 with all four terms. phi -> -phi flips the test direction of the fitted Normals;
    # eps* must not change. Tolerance 1e-9: the mirrored grid equals the original only up to
    # the rounding of ndtri(1 - q) vs -ndtri(q).
    fit = NormalFit(mu_tr=-0.9, sd_tr=0.12, mu_pop=-1.05, sd_pop=0.2)
    flipped = NormalFit(mu_tr=0.9, sd_tr=0.12, mu_pop=1.05, sd_pop=0.2)
    a = normal_epsilon_star(fit, 1e-6, grid_size=200_000)
    b = normal_epsilon_star(flipped, 1e-6, grid_size=200_000)
    assert a.eps_star > 1.0
    assert b.eps_star == pytest.approx(a.eps_star, abs=1e-9)


def test_identical_inputs_give_zero():
    # Source: Negoescu et al. 2023, eq. 7 (identical distributions): every term is < 1, so eps* = ln 1 = 0
    # exactly, far below the caps (ln 999 and ln((1 - 2 delta)/delta)).
    rng = np.random.default_rng(4)
    losses = rng.normal(0.0, 1.0, 5000)
    emp = empirical_epsilon_star(losses, losses.copy(), 1e-5)
    par = parametric_epsilon_star(losses, losses.copy(), 1e-5, grid_size=100_000)
    assert emp.eps_star == 0.0
    assert par.eps_star == 0.0
    assert max(emp.m) < 1.0
    assert max(par.m) < 1.0


def test_empirical_hard_cap():
    # Source: Negoescu et al. 2023, eq. 7 (hard caps): with FPR, FNR in (0.001, 0.999) every term is below
    # 999, so eps* < ln 999. Members 0..n-1 and non-members shifted so that exactly one kept
    # threshold has t = eta = 101/n: m1 = (1 - delta - 101/n)/(101/n), computed by hand.
    n, overlap, delta = 100_000, 202, 1e-6
    members = np.arange(n, dtype=float)
    nonmembers = members + (n - overlap)
    res = empirical_epsilon_star(members, nonmembers, delta)
    expected = math.log((1 - delta - 101 / n) / (101 / n))
    assert res.eps_star == pytest.approx(expected, rel=1e-12)
    assert res.eps_star < math.log(999)
    assert res.n_kept == 1


def test_empirical_fully_separated_keeps_nothing():
    # Consequence of the literal filter (Negoescu et al. 2023, App. B.1): when no threshold has both
    # FPR and FNR above 0.001 nothing is kept. eps* is then undefined (NaN), never the
    # floor 0: separated losses are the least private case, not the most private one.
    res = empirical_epsilon_star(np.arange(1000.0), np.arange(1000.0) + 5000, 1e-5)
    assert res.n_kept == 0
    assert math.isnan(res.eps_star) and res.term is None
    assert res.term is None
    assert np.isnan(res.m).all()


@pytest.mark.parametrize("delta", [1e-5, 3.911e-7])
def test_parametric_hard_cap(delta):
    # Source: Negoescu et al. 2023, eq. 7 and footnote 2: with FPR, FNR in (delta, 1 - delta) every term is below
    # (1 - 2 delta)/delta. Member means are chosen so that the kept window shrinks to a few
    # hundredths of a standard deviation; eps* then approaches the cap (within 0.3 nats,
    # from m1 ~ 1/t with t ~ 1.3 delta at the window's centre) but never reaches it.
    cap = math.log((1 - 2 * delta) / delta)
    z = -stats.norm.ppf(delta)
    values = []
    for gap in np.linspace(0.0, 2 * z - 0.01, 25):
        res = normal_epsilon_star(NormalFit(gap, 1.0, 0.0, 1.0), delta, grid_size=100_000)
        if res.n_kept == 0:  # the window fell between grid points: undefined, never 0
            assert math.isnan(res.eps_star)
            continue
        assert res.eps_star < cap
        values.append(res.eps_star)
    assert max(values) > cap - 0.3
    assert parametric_ceiling(delta) == pytest.approx(cap, rel=1e-15)


# --- the four terms ------------------------------------------------------


def test_terms_equal_tpr_fpr_forms():
    # Source: Negoescu et al. 2023, eq. 7: m1 = (TPR - d)/FPR = (1 - d - eta)/t, m2 = (TNR - d)/FNR,
    # m3 = (FNR - d)/TNR, m4 = (FPR - d)/TPR. Hand values at t = 0.1, eta = 0.2, d = 0.01:
    # 0.79/0.1, 0.89/0.2, 0.19/0.9, 0.09/0.8. Tolerance 1e-14.
    m = epsilon_star_terms([0.1], [0.2], 0.01)[:, 0]
    np.testing.assert_allclose(m, [7.9, 4.45, 0.19 / 0.9, 0.1125], rtol=1e-14)
    rng = np.random.default_rng(5)
    t, eta = rng.uniform(0.01, 0.99, 1000), rng.uniform(0.01, 0.99, 1000)
    got = epsilon_star_terms(t, eta, 1e-3, tpr=1 - eta, tnr=1 - t)
    expected = np.array([eq7_terms(ti, ei, 1e-3) for ti, ei in zip(t, eta, strict=True)]).T
    np.testing.assert_allclose(got, expected, rtol=1e-12)


# --- parametric ------------------------------------------------------------


def spec_reference_parametric(l_tr, l_pop, delta, nq):
    """The parametric recipe of Negoescu et al. 2023 (Sec. 3.1, App. B), re-typed with scipy.stats (1 - x forms included)."""
    lo = min(l_tr.min(), l_pop.min())
    hi = max(l_tr.max(), l_pop.max())

    def f(v):
        s = (v - lo) / (hi - lo) + 1.0
        return -s - np.log1p(-np.exp(-s))

    p_tr, p_pop = f(l_tr), f(l_pop)
    mt, st = stats.norm.fit(p_tr)
    mp, sp = stats.norm.fit(p_pop)
    q = (np.arange(nq) + 0.5) / nq
    c = np.concatenate([stats.norm.ppf(q, mt, st), stats.norm.ppf(q, mp, sp)])
    fpr, fnr = stats.norm.sf(c, mp, sp), stats.norm.cdf(c, mt, st)
    k = (fpr > delta) & (fpr < 1 - delta) & (fnr > delta) & (fnr < 1 - delta)
    t, e = fpr[k], fnr[k]
    m = np.stack(
        [(1 - delta - e) / t, (1 - delta - t) / e, (e - delta) / (1 - t), (t - delta) / (1 - e)]
    )
    return math.log(max(m.max(), 1.0)), (mt, st, mp, sp, lo, hi)


@pytest.mark.parametrize(("shape_pop", "delta"), [(2.0, 1e-5), (3.0, 1e-5), (4.0, 3.911e-7)])
def test_parametric_matches_reference_recipe(shape_pop, delta):
    # Source: Negoescu et al. 2023, Sec. 3.1 and App. B (the parametric estimator). Tolerance: fits 1e-12
    # relative; eps* 1e-6 absolute (the reference forms 1 - x near the boundary, which
    # moves the kept boundary point by at most one grid cell's rounding).
    rng = np.random.default_rng(6)
    members, nonmembers = rng.gamma(2.0, 5.0, 20_000), rng.gamma(shape_pop, 5.0, 15_000)
    expected, (mt, st, mp, sp, lo, hi) = spec_reference_parametric(
        members, nonmembers, delta, 100_000
    )
    res = parametric_epsilon_star(members, nonmembers, delta, grid_size=100_000)
    fit = res.fit
    np.testing.assert_allclose(
        [fit.mu_tr, fit.sd_tr, fit.mu_pop, fit.sd_pop], [mt, st, mp, sp], rtol=1e-12
    )
    assert (fit.lo, fit.hi, fit.alpha) == (lo, hi, 1.0)
    assert res.eps_star == pytest.approx(expected, abs=1e-6)
    assert res.grid_size == 200_000
    assert 0 < res.n_kept <= res.grid_size


def test_transform_range_and_pooled_minmax_invariance():
    # Source: Negoescu et al. 2023, App. B (min-max, shift, logit): phi in [-2 - log(1 - e^-2), -1 - log(1 - e^-1)] =
    # [-1.8546, -0.5413] (hand values, 1e-4); pooled min-max makes the parametric eps*
    # invariant to an increasing affine map of the losses (1e-9: only rounding differs).
    rng = np.random.default_rng(7)
    members, nonmembers = rng.normal(0, 1, 5000), rng.normal(1, 1.5, 4000)
    phi_tr, phi_pop, lo, hi = transform_losses(members, nonmembers)
    both = np.concatenate([phi_tr, phi_pop])
    assert both.min() == pytest.approx(-1.8546, abs=1e-4)
    assert both.max() == pytest.approx(-0.5413, abs=1e-4)
    # decreasing in the loss
    assert np.all(np.diff(phi_tr[np.argsort(members)]) < 0)
    a = parametric_epsilon_star(members, nonmembers, 1e-5, grid_size=50_000).eps_star
    b = parametric_epsilon_star(
        3.0 * members - 7.0, 3.0 * nonmembers - 7.0, 1e-5, grid_size=50_000
    ).eps_star
    assert b == pytest.approx(a, abs=1e-9)


def test_invalid_inputs_raise():
    # float32 overflow gives infinite logit losses that break the min-max;
    # they must fail loudly rather than yield a silent eps*.
    with pytest.raises(ValueError, match="NaN"):
        empirical_epsilon_star([0.0, np.nan], [1.0], 1e-5)
    with pytest.raises(ValueError, match="non-finite"):
        parametric_epsilon_star([0.0, np.inf], [1.0, 2.0], 1e-5)
    with pytest.raises(ValueError, match="identical"):
        parametric_epsilon_star([1.0, 1.0], [1.0], 1e-5)


# --- mechanism level -------------------------------------------------------


def test_log_mean_exp_closed_form():
    # log mean(e^0, e^ln3) = ln 2 exactly (1e-15); stable for large inputs.
    assert log_mean_exp([0.0, math.log(3.0)]) == pytest.approx(math.log(2.0), abs=1e-15)
    assert log_mean_exp([1000.0, 1000.0]) == pytest.approx(1000.0, abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_mechanism_bound_below_log_mean_exp(seed):
    # Source: paper Theorem 2 (eq. 21) of Negoescu et al. 2023: with a common t-grid and the
    # filter on t only, eps_bar <= log mean e^{eps*_j} holds exactly (Jensen). Tolerance
    # 1e-12 (float rounding of the mean).
    rng = np.random.default_rng(seed)
    fits = [
        NormalFit(
            rng.normal(-0.9, 0.1),
            rng.uniform(0.05, 0.2),
            rng.normal(-1.0, 0.1),
            rng.uniform(0.05, 0.2),
        )
        for _ in range(5)
    ]
    for delta in (1e-5, 3.911e-7):
        bound = mechanism_epsilon_bar(fits, delta, n_grid=20_000)
        assert bound.eps_bar <= bound.log_mean_exp_eps_star + 1e-12
        assert bound.log_mean_exp_eps_star == pytest.approx(log_mean_exp(bound.eps_star), abs=1e-15)


def test_mechanism_bound_identical_instances_and_independent_grid():
    # Identical instances: Jensen is an equality (1e-12). The value is checked against an
    # independent dense evaluation with scipy.stats on a log-spaced t-grid (1e-3 nats:
    # both are discretised suprema of the same smooth curve).
    fit = NormalFit(-0.95, 0.11, -1.05, 0.14)
    delta = 1e-5
    bound = mechanism_epsilon_bar([fit] * 5, delta, n_grid=200_000)
    assert bound.eps_bar == pytest.approx(bound.log_mean_exp_eps_star, abs=1e-12)
    small = np.logspace(math.log10(delta), math.log10(0.5), 300_001)[1:]
    t = np.concatenate([small, 1 - small])
    c = stats.norm.isf(t, fit.mu_pop, fit.sd_pop)  # FPR = P_pop(phi >= c) = t
    eta = stats.norm.cdf(c, fit.mu_tr, fit.sd_tr)
    terms = np.stack(eq7_terms(t, eta, delta))
    expected = math.log(max(1.0, terms.max()))
    assert bound.eps_bar == pytest.approx(expected, abs=1e-3)


# --- goodness of fit -------------------------------------------------------


def test_gmm_ks_detects_misfit_and_accepts_fit():
    # Source: Negoescu et al. 2023, App. B.2. Oracle: KS behaviour, not the implementation.
    # Normal data with 1 component: p-values are ~uniform, median far above 0.05.
    # Two well separated modes with 1 component and 1000 held-out points: KS rejects
    # (p < 1e-3); 2 components fit it again (median p > 0.05).
    rng = np.random.default_rng(8)
    normal = rng.normal(0.0, 1.0, 6000)
    bimodal = np.concatenate([rng.normal(-3, 0.5, 3000), rng.normal(3, 0.5, 3000)])
    a = gmm_ks_goodness_of_fit(normal, n_components=[1], n_samples=[200, 1000], n_repeats=5, seed=1)
    b = gmm_ks_goodness_of_fit(bimodal, n_components=[1, 2], n_samples=[1000], n_repeats=3, seed=1)
    assert list(a.columns) == ["n_components", "n_samples", "rep", "ks_stat", "p_value"]
    assert len(a) == 10 and len(b) == 6
    assert a["p_value"].median() > 0.05
    assert (b[b["n_components"] == 1]["p_value"] < 1e-3).all()
    assert b[b["n_components"] == 2]["p_value"].median() > 0.05
    again = gmm_ks_goodness_of_fit(
        normal, n_components=[1], n_samples=[200, 1000], n_repeats=5, seed=1
    )
    pd.testing.assert_frame_equal(a, again)


# --- the persisted long-format table ---------------------------------------


def test_epsilon_star_metrics_long_format():
    # Source: our output contract (both losses). CE = log(1 + e^loss) is a strictly
    # increasing map of the logit loss (Negoescu et al. 2023, footnote 1), so the empirical eps* is identical for
    # both variants (1e-12); the table's values equal the direct calls exactly.
    rng = np.random.default_rng(9)
    logit_tr = np.round(rng.normal(-2.0, 1.0, 4000), 4)
    logit_pop = np.round(rng.normal(-1.5, 1.2, 3000), 4)
    members = {"logit": logit_tr, "ce": np.logaddexp(0.0, logit_tr)}
    nonmembers = {"logit": logit_pop, "ce": np.logaddexp(0.0, logit_pop)}
    frame = epsilon_star_metrics(members, nonmembers, 1e-5, grid_size=50_000)
    # five values and the at_resolution flag (issue 46) per loss and estimator
    assert len(frame) == 2 * 2 * 6
    assert list(frame.columns[:2]) == ["metric", "value"]
    assert str(frame["value"].dtype) == "float64"
    assert str(frame["on_boundary"].dtype) == "boolean"
    for col in ("n_tr", "n_pop", "grid_size", "n_kept"):
        assert str(frame[col].dtype) == "int64"
    eps = frame[frame["metric"] == "epsilon_star"].set_index(["loss", "estimator"])["value"]
    assert eps[("logit", "empirical")] == pytest.approx(eps[("ce", "empirical")], abs=1e-12)
    direct = parametric_epsilon_star(logit_tr, logit_pop, 1e-5, grid_size=50_000)
    assert eps[("logit", "parametric")] == direct.eps_star
    values = frame[frame["metric"] != "at_resolution"]  # the flag rows carry no fit (issue 46)
    par = values[(values["loss"] == "logit") & (values["estimator"] == "parametric")]
    assert (par["mu_tr"] == direct.fit.mu_tr).all() and (par["lo"] == direct.fit.lo).all()
    assert (par["n_tr"] == 4000).all() and (par["n_pop"] == 3000).all()
    assert (par["grid_size"] == 100_000).all()
    emp = values[values["estimator"] == "empirical"]
    assert emp[["mu_tr", "sd_tr", "mu_pop", "sd_pop", "lo", "hi", "alpha"]].isna().all().all()
    assert (emp["filter_lo"] == 1e-3).all() and (par["filter_lo"] == 1e-5).all()
    assert set(frame["metric"]) == {"epsilon_star", "m1", "m2", "m3", "m4", "at_resolution"}
    # frames of many runs concatenate without dtype drift, including an all-NA argmax
    empty = epsilon_star_metrics(
        {"logit": np.arange(100.0)},
        {"logit": np.arange(100.0) + 1000},
        1e-5,
        estimators=("empirical",),
    )
    assert empty["term"].isna().all() and empty["on_boundary"].isna().all()
    both = pd.concat([frame, empty], ignore_index=True)
    assert (both.dtypes == frame.dtypes).all()


def test_aggregate_strategies_hand_values():
    # Source: Negoescu et al. 2023, Sec. 4: arithmetic mean, min, max over seeds; Theorem 2's
    # log-mean-exp. Hand values, tolerance 1e-12.
    frame = pd.DataFrame(
        {
            "dataset": ["a"] * 7,
            "strategy_id": ["s1", "s1", "s1", "s2", "s2", "s3", "s4"],
            "eps_star": [0.0, math.log(3.0), math.log(2.0), 1.0, 3.0, 0.5, 2.5],
            "utility": [0.8, 0.9, 0.7, 0.95, 0.85, 0.5, 0.6],
        }
    )
    out = aggregate_strategies(
        frame, ["dataset", "strategy_id"], pareto_within=["dataset"]
    ).set_index("strategy_id")
    assert out.loc["s1", "n_models"] == 3
    assert out.loc["s1", "eps_star_mean"] == pytest.approx(
        (math.log(3.0) + math.log(2.0)) / 3, abs=1e-12
    )
    assert out.loc["s1", "log_mean_exp_eps_star"] == pytest.approx(math.log(2.0), abs=1e-12)
    assert (out.loc["s2", ["eps_star_min", "eps_star_max"]] == [1.0, 3.0]).all()
    assert out.loc["s2", "util_mean"] == pytest.approx(0.9, abs=1e-12)
    # means: s1 (0.597, 0.8), s2 (2.0, 0.9), s3 (0.5, 0.5), s4 (2.5, 0.6). s3 has the
    # lowest eps* (first hull vertex); s4 is dominated by s1 and s2.
    assert out["nondominated"].tolist() == [True, True, True, False]
    assert out["on_pareto"].tolist() == [True, True, True, False]


# ---------------------------------------------------------------- refused inputs (numbers from outside)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -0.1, 0.5])
def test_empirical_filter_that_keeps_nothing_is_refused(bad):
    # A NaN filter used to keep no threshold, so every ε* was NaN.
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="filter_bound: the rate filter .* keeps no threshold"):
        empirical_epsilon_star(rng.normal(size=50), rng.normal(size=50), 1e-5, filter_bound=bad)


def test_filter_bounds_of_epsilon_star_from_rates_are_checked():
    from dpaudit.metrics.epsilon_star.estimators import empirical_rates, epsilon_star_from_rates

    rng = np.random.default_rng(0)
    rates = empirical_rates(rng.normal(size=50), rng.normal(size=50))
    with pytest.raises(ValueError, match="keeps no threshold"):
        epsilon_star_from_rates(rates, 1e-5, lower=1e-3, upper_margin=float("nan"))
    with pytest.raises(ValueError, match="delta"):
        epsilon_star_from_rates(rates, float("nan"), lower=1e-3)


@pytest.mark.parametrize("alpha", [float("nan"), float("inf"), 0.0])
def test_parametric_alpha_refused_up_front_not_as_degenerate_fit(alpha):
    from dpaudit.metrics.epsilon_star.estimators import parametric_epsilon_star

    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=r"^alpha \(the shift"):
        parametric_epsilon_star(rng.normal(size=50), rng.normal(size=50), 1e-5, grid_size=100, alpha=alpha)


def test_distribution_levels_refused_when_empty_or_not_in_unit_interval():
    from dpaudit.metrics.epsilon_star.estimators import distribution_rates

    for levels in ([], [float("nan")], [0.0, 0.5], [0.5, 1.0]):
        with pytest.raises(ValueError, match="levels must be a non-empty array"):
            distribution_rates(stats.norm(0, 1), stats.norm(1, 1), levels)
    from dpaudit.metrics.epsilon_star.estimators import quantile_levels

    with pytest.raises(ValueError, match="grid_size"):
        quantile_levels(0)


def test_bootstrap_and_goodness_of_fit_refuse_nan_levels_and_filters():
    from dpaudit.metrics.epsilon_star.bootstrap import bootstrap_epsilon_star
    from dpaudit.metrics.epsilon_star.goodness_of_fit import normal_fit_check

    rng = np.random.default_rng(0)
    tr, pop = rng.normal(size=40), rng.normal(size=40)
    with pytest.raises(ValueError, match="empirical_filter: the rate filter"):
        bootstrap_epsilon_star(tr, pop, 1e-5, estimator="empirical", resamples=2, empirical_filter=float("nan"))
    with pytest.raises(ValueError, match="level"):
        bootstrap_epsilon_star(tr, pop, 1e-5, estimator="empirical", resamples=2, level=float("nan"))
    with pytest.raises(ValueError, match=r"^alpha \(the shift"):
        bootstrap_epsilon_star(tr, pop, 1e-5, estimator="parametric", resamples=2, alpha=float("nan"))
    with pytest.raises(ValueError, match="goodness-of-fit alpha"):
        normal_fit_check(tr, alpha=float("nan"))
