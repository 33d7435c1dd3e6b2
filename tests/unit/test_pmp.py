"""Practical membership privacy (Lowy et al. 2024) against independent oracles."""

from __future__ import annotations

import itertools
import logging
import math

import numpy as np
import pandas as pd
import pytest
from scipy.special import logsumexp

from dpaudit.dp import mechanisms
from dpaudit.dp.hypothesis import clopper_pearson_lower, clopper_pearson_upper
from dpaudit.metrics.pmp import bounds, dpsgd, expmech, gaussian
from dpaudit.metrics.pmp.run import pmp_run_metrics
from dpaudit.reference.parent_set import parent_set
from dpaudit.simulations import pmp as sim

# ------------------------------------------------------------- Gaussian profile (Lemma 10)


def test_balle_wang_reference_values():
    # Reference values (Balle & Wang 2018, Thm 8, recomputed), 4-5 significant digits as printed.
    assert mechanisms.gaussian_delta(1.0, 1.0, 1.0) == pytest.approx(0.126937, abs=5e-7)
    assert mechanisms.gaussian_sigma_analytic(1.0, 1.0, 1e-5) == pytest.approx(3.7306, abs=5e-5)
    assert mechanisms.gaussian_sigma_analytic(1.0, 8.0, 1e-5) == pytest.approx(0.6002, abs=5e-5)
    # the inverse returns the calibrated ε (round trip to 1e-9)
    sigma = mechanisms.gaussian_sigma_analytic(1.0, 8.0, 1e-5)
    assert mechanisms.gaussian_epsilon_analytic(sigma, 1e-5) == pytest.approx(8.0, rel=1e-9)


def test_profile_vectorised_over_sensitivity_matches_scalar_calls_and_zero_guard():
    mu = np.array([0.0, 0.3, 1.0, 4.0])
    vector = mechanisms.gaussian_delta(1.0, 0.5, mu)
    assert vector[0] == 0.0  # δ_G(ε; 0) = 0 (identical outputs)
    for value, m in zip(vector[1:], mu[1:], strict=True):
        assert value == mechanisms.gaussian_delta(m ** -1, 0.5, 1.0) or value == pytest.approx(
            mechanisms.gaussian_delta(1.0 / m, 0.5), rel=1e-12)
    # closed form Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ) with scipy's ndtr, moderate values
    from scipy.special import ndtr
    m, e = 1.7, 0.4
    assert mechanisms.gaussian_delta(1.0, e, m) == pytest.approx(
        ndtr(m / 2 - e / m) - math.exp(e) * ndtr(-m / 2 - e / m), rel=1e-12)


# ------------------------------------------------------------- MIA bounds (Lemma 6, 13)


def test_lemma6_and_inverse_and_lemma13():
    assert bounds.mia_success_bound(0.1) == pytest.approx(0.52498, abs=5e-6)  # Lowy et al. 2024, Lemma 6
    assert bounds.mia_success_bound(0.123) == pytest.approx(0.5307, abs=5e-5)
    assert bounds.mia_success_bound(7.0) == pytest.approx(0.99909, abs=5e-6)  # claim 1
    assert bounds.target_pmp_epsilon(0.525) == pytest.approx(0.1001, abs=5e-5)
    # δ extension (e^ε + δ)/(1 + e^ε): our extension, ε̃ = 1, δ = 0.01 -> 0.734
    assert bounds.mia_success_bound_delta(1.0, 0.01) == pytest.approx((math.e + 0.01) / (1 + math.e), rel=1e-12)
    assert bounds.mia_success_bound_delta(1.0, 0.01) == pytest.approx(0.734, abs=5e-4)
    assert bounds.mip_eta(0.5) == pytest.approx((1 - math.exp(-0.5)) / 2, rel=1e-12)
    assert bounds.pmp_advantage_bound(0.3) == pytest.approx(math.tanh(0.15), rel=1e-12)
    with pytest.raises(ValueError, match="target MIA success"):
        bounds.target_pmp_epsilon(0.4)


# ------------------------------------------------------------- exponential mechanism


def _brute_pmp(logp_of_subset, n_parent, n):
    """Direct Definition-2 oracle: average P_D(w) over every subset containing / not containing x."""
    subsets = list(itertools.combinations(range(n_parent), n))
    probs = np.array([np.exp(logp_of_subset(s)) for s in subsets])
    best = 0.0
    for x in range(n_parent):
        inside = np.array([x in s for s in subsets])
        p_in, p_out = probs[inside].mean(axis=0), probs[~inside].mean(axis=0)
        both = (p_in > 0) | (p_out > 0)
        best = max(best, float(np.abs(np.log(p_in[both]) - np.log(p_out[both])).max()))
    return best


def _instance(seed, n=3, d=2, m=5, beta=3.0):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((m, d))
    w /= np.linalg.norm(w, axis=1, keepdims=True)
    x = rng.standard_normal((2 * n, d))
    return expmech.distance_losses(w, x), n, beta


def test_exact_em_pmp_matches_linear_space_brute_force():
    losses, n, beta = _instance(0)

    def logp(subset):
        loss = losses[:, list(subset)].mean(axis=1)
        return -beta * loss - logsumexp(-beta * loss)

    res = expmech.expmech_pmp_exact(losses, n, beta)
    assert res["eps_pmp"] == pytest.approx(_brute_pmp(logp, 2 * n, n), rel=1e-10)
    assert res["eps_pmp"] >= res["eps_pmp_onesided_inout"] - 1e-12


def test_n1_pmp_equals_exact_dp_of_the_pair():
    # Corollary 4 (corrected): n = 1 gives P_in = A(x), P_out = A(x'), so ε̃ = ε_exact(X).
    losses, n, beta = _instance(3, n=1, m=7, beta=4.0)
    res = expmech.expmech_pmp_exact(losses, n, beta)
    logp0 = -beta * losses[:, 0] - logsumexp(-beta * losses[:, 0])
    logp1 = -beta * losses[:, 1] - logsumexp(-beta * losses[:, 1])
    assert res["eps_pmp"] == pytest.approx(np.abs(logp0 - logp1).max(), rel=1e-12)
    assert res["eps_pmp"] == pytest.approx(res["eps_X_exact"], rel=1e-12)


def test_separation_example_sum_mod_6_is_exactly_ln2():
    # Lowy et al. 2024, separation example: X = {0..5}, n = 3, A(D) = ΣD mod 6 (deterministic): ε̃ = ln 2.
    masks = expmech.subset_masks(6, 3)
    out = (masks.astype(int) @ np.arange(6)) % 6
    logp = np.where(np.arange(6)[None, :] == out[:, None], 0.0, -np.inf)
    res = expmech.pmp_from_log_probabilities(logp, masks)
    assert res["eps_pmp"] == pytest.approx(math.log(2.0), abs=1e-12)
    # the paper's n = 6 claim: ΣD mod 12 on {0..11} is ≤ ln(40/37); spec computes 0.0267
    masks12 = expmech.subset_masks(12, 6)
    out12 = (masks12.astype(int) @ np.arange(12)) % 12
    logp12 = np.where(np.arange(12)[None, :] == out12[:, None], 0.0, -np.inf)
    value = expmech.pmp_from_log_probabilities(logp12, masks12)["eps_pmp"]
    assert value <= math.log(40 / 37) and value == pytest.approx(0.0267, abs=5e-5)


def test_monte_carlo_agrees_with_enumeration_at_n6():
    losses, n, beta = _instance(5, n=6, d=5, m=32, beta=20.0)
    exact = expmech.expmech_pmp_exact(losses, n, beta)["eps_pmp"]
    mc = expmech.expmech_pmp_monte_carlo(losses, n, beta, n_subsets=4000, rng=11, n_bootstrap=200)
    # 95 % bootstrap interval over subsets (the log of a ratio of means is biased)
    assert mc["eps_pmp_ci_lo"] <= exact <= mc["eps_pmp_ci_hi"], (exact, mc["eps_pmp_ci_lo"], mc["eps_pmp_ci_hi"])


def test_monte_carlo_without_bootstrap_gives_nan_interval_and_the_same_estimate():
    # n_bootstrap = 0 (the simulations' setting) used to raise IndexError (quantile of nothing).
    losses, n, beta = _instance(5, n=6, d=5, m=32, beta=20.0)
    with_boot = expmech.expmech_pmp_monte_carlo(losses, n, beta, n_subsets=500, rng=11, n_bootstrap=50)
    without = expmech.expmech_pmp_monte_carlo(losses, n, beta, n_subsets=500, rng=11, n_bootstrap=0)
    assert without["eps_pmp"] == with_boot["eps_pmp"]  # the bootstrap draws come after the estimate
    assert math.isnan(without["eps_pmp_ci_lo"]) and math.isnan(without["eps_pmp_ci_hi"])
    assert math.isnan(without["eps_pmp_boot_se"])
    assert without["boot_used"] == 0 and without["boot_dropped"] == 0
    assert with_boot["boot_used"] == 50 and with_boot["boot_dropped"] == 0


def test_bootstrap_resamples_with_an_empty_group_are_dropped_and_counted():
    # 5 subsets of a 4-point X: many resamples leave some x in all or none of the drawn
    # subsets (no P_in or P_out; this raised a math domain error). Oracle: each resample
    # expanded row by row, P_in/P_out as plain linear-space means, max_{x,w} |ln P_in/P_out|.
    losses, n, beta = _instance(2, n=2, d=1, m=5, beta=3.0)
    masks = np.array([[1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 1, 0], [0, 1, 0, 1], [1, 0, 0, 1]], dtype=bool)
    logp = expmech.log_probabilities(masks, losses, n, beta)
    boot = expmech._bootstrap_eps(logp, masks, np.random.default_rng(3), 400)
    counts = np.random.default_rng(3).multinomial(5, np.full(5, 0.2), size=400)
    probs = np.exp(logp)
    for b in range(400):
        rows = np.repeat(np.arange(5), counts[b])
        m = masks[rows]
        if (m.all(axis=0) | ~m.any(axis=0)).any():
            assert math.isnan(boot[b])
            continue
        ratios = [np.log(probs[rows][m[:, i]].mean(axis=0) / probs[rows][~m[:, i]].mean(axis=0)) for i in range(4)]
        assert boot[b] == pytest.approx(np.abs(ratios).max(), rel=1e-12)
    dropped = int(np.isnan(boot).sum())
    assert 0 < dropped < 400
    # the Monte Carlo entry point keeps the rest and says how many it dropped
    losses, n, beta = _instance(1, n=2, d=1, m=5, beta=3.0)
    res = expmech.expmech_pmp_monte_carlo(losses, n, beta, n_subsets=5, rng=1, n_bootstrap=200)
    assert res["boot_dropped"] > 0 and res["boot_used"] + res["boot_dropped"] == 200
    assert res["eps_pmp_ci_lo"] <= res["eps_pmp_ci_hi"]


def test_simulation_monte_carlo_path_runs_without_bootstrap():
    # n above exact_max_n takes the Monte Carlo path with n_bootstrap = 0 (it raised IndexError).
    # Oracle: at n = 3 the exact enumeration of all C(6, 3) subsets on the same trial.
    fig1 = {**sim.DEFAULTS["fig1"], "data_std": [1.0], "n": 3}
    mc = sim.simulate_expmech({**sim.DEFAULTS, "trials_expmech": 2, "exact_max_n": 2, "mc_subsets": 20000,
                               "fig1": fig1}, figures=(1,))
    exact = sim.simulate_expmech({**sim.DEFAULTS, "trials_expmech": 2, "fig1": fig1}, figures=(1,))
    assert (mc["exact_or_mc"] == "mc").all() and (exact["exact_or_mc"] == "exact").all()
    # same data per trial (the seed fixes candidates and X before either estimator draws)
    np.testing.assert_allclose(mc["eps_global"], exact["eps_global"], rtol=1e-12)
    # 20,000 of 20 subsets sampled with replacement: MC error ~1 % here; 5 % leaves room for the upward bias
    np.testing.assert_allclose(mc["eps_pmp"], exact["eps_pmp"], rtol=0.05)


def test_global_sensitivity_ball_and_r1():
    w = np.array([[1.0, 0.0], [0.0, 1.0]])
    assert expmech.global_sensitivity_ball(w, 10.0, 6) == pytest.approx(11.0 / 6)  # (1 + C)/n
    assert expmech.global_sensitivity_ball(w, 0.5, 2) == pytest.approx((1 + 0.5 - 0.5) / 2)
    losses = np.array([[0.0, 2.0, 1.0], [3.0, 3.0, 3.5]])
    assert expmech.subset_sensitivity(losses, 2) == pytest.approx(1.0)


def test_fig2_at_c50_reproduces_the_paper():
    # Lowy et al. Fig 2 text: at C = 50 both ratios < 0.0123, ε̃ ≈ 0.123; our reproduction 0.0115 / 0.0119.
    options = {**sim.DEFAULTS, "trials_expmech": 20, "fig2": {**sim.DEFAULTS["fig2"], "clip_C": [50]}}
    rows = sim.simulate_expmech(options, figures=(2,))
    se_x = rows["ratio_X"].std(ddof=1) / math.sqrt(len(rows))
    se = rows["ratio"].std(ddof=1) / math.sqrt(len(rows))
    assert abs(rows["ratio_X"].mean() - 0.0119) <= 3 * se_x + 5e-4, (rows["ratio_X"].mean(), se_x)
    assert abs(rows["ratio"].mean() - 0.0115) <= 3 * se + 5e-4, (rows["ratio"].mean(), se)
    assert rows["eps_global"].mean() == pytest.approx(10.27, abs=0.2)  # ε ≈ ε(X): X is nearly worst case
    assert rows["ordering_ok"].all()


def test_ordering_holds_on_every_simulated_trial():
    options = {**sim.DEFAULTS, "trials_expmech": 3, "trials_gauss": 2}
    e = sim.simulate_expmech(options)
    assert e["ordering_ok"].all(), e.loc[~e["ordering_ok"], ["figure_id", "eps_pmp", "eps_X_exact", "eps_global"]]
    assert (e["eps_pmp"] <= e["eps_X_exact"] + 1e-9).all()
    g = sim.simulate_gauss({**options, "fig6": {**sim.DEFAULTS["fig6"], "d": [1, 20]},
                            "fig4": {**sim.DEFAULTS["fig4"], "x_values": [1, 10]}})
    assert g["ordering_ok"].all()
    # our reproduction, Fig 4 global mode at ε = 10: ε̃ ≈ 0.31, ε(X) ≈ 0.45 (2 trials: loose)
    at10 = g[(g["figure_id"] == "fig4") & (g["x_axis_mode"] == "eps_global") & (g["x_value"] == 10)]
    assert at10["eps_pmp"].mean() == pytest.approx(0.31, abs=0.05)


# ------------------------------------------------------------- Gaussian Prop. 12


def _brute_prop12(features, n, sigma, eps):
    """max_x (1/(nN)) Σ_{D∋x} Σ_{D'∌x, D'~D} δ_G(ε; ‖q(D) − q(D')‖/σ), by enumeration."""
    n_parent = features.shape[0]
    subsets = [frozenset(s) for s in itertools.combinations(range(n_parent), n)]
    big_n = math.comb(2 * n, n) // 2
    worst = 0.0
    for x in range(n_parent):
        total = 0.0
        for d in (s for s in subsets if x in s):
            qd = features[list(d)].sum(axis=0)
            for j in range(n_parent):
                if j in d:
                    continue
                d2 = (d - {x}) | {j}
                total += mechanisms.gaussian_delta(sigma, eps, np.linalg.norm(qd - features[list(d2)].sum(axis=0)))
        worst = max(worst, total / (n * big_n))
    return worst


def test_gaussian_closed_form_equals_enumerated_prop12():
    rng = np.random.default_rng(2)
    f = rng.standard_normal((6, 3))
    sigma, delta = 1.3, 1e-3
    res = gaussian.gaussian_pmp(f, sigma, delta, sensitivity_global=10.0)
    # at the returned ε̃ the enumerated bound equals δ (the root), to solver precision
    assert _brute_prop12(f, 3, sigma, res["eps_pmp"]) == pytest.approx(delta, rel=1e-6)
    assert res["eps_pmp"] <= res["eps_X"] <= res["eps_global"]


# ------------------------------------------------------------- DP-SGD recipes


def _softmax_regression_grads(x, y, w, b):
    logits = x @ w + b
    p = np.exp(logits - logsumexp(logits, axis=1, keepdims=True))
    p[np.arange(len(y)), y] -= 1.0
    # per-example gradient of CE w.r.t. kernel (d × k) and bias (k), flattened in Keras order
    kernel = x[:, :, None] * p[:, None, :]
    return np.concatenate([kernel.reshape(len(x), -1), p], axis=1)


def test_recipe_a_on_linear_model_equals_bruteforce_numpy(tmp_path):
    from dpaudit import _tf
    from dpaudit.extract.pmp_pairs import clipped_distances, read_pmp_pairs
    from dpaudit.metrics.pmp.gaussian import pairwise_distances
    from dpaudit.training.models import build_mlp, load_model, logits_model

    _tf.configure(1, 0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 3)).astype(np.float32)
    y = np.array([0, 1, 0, 1, 1, 0])
    model = build_mlp(3, {"hidden_units": [], "activation": "relu", "dropout": 0.0, "n_classes": 2}, seed=0)
    path = tmp_path / "m.keras"
    model.save(path)
    model = load_model(path)
    net = logits_model(model)
    clip, z, delta = 0.5, 1.1, 1e-3
    # X = the 3 members and 3 non-members in id order; the extraction's final-weight factors
    examples = pd.DataFrame({"example_id": np.arange(6), "split": ["train"] * 3 + ["holdout"] * 3, "label": y,
                             "x": list(x)})
    train = {"mechanism": "dpsgd", "epsilon": 3.0, "steps": 10, "clip_norm": clip, "noise_multiplier": z}
    pairs = read_pmp_pairs(_extract_pmp_pairs(tmp_path, examples, train, None))
    assert pairs["example_id"].tolist() == list(range(6)) and pairs["total"] is None
    assert pairs["metadata"]["layers"] == [[3, 2]]
    np.testing.assert_array_equal(pairs["inputs"], x)  # one Dense layer: its input is x
    kernel, bias = (v.numpy().astype(np.float64) for v in net.trainable_variables)
    raw = _softmax_regression_grads(x.astype(np.float64), y, kernel, bias)
    norms = np.linalg.norm(raw, axis=1)
    hand = raw * np.minimum(1.0, clip / norms)[:, None]
    np.testing.assert_allclose(pairs["grad_norm"], norms, rtol=1e-10)  # float64 factors vs float64 vectors
    distances = clipped_distances(pairs["inputs"], pairs["deltas"], pairs["grad_norm"], pairs["metadata"]["layers"],
                                  clip)
    np.testing.assert_allclose(distances, pairwise_distances(hand), rtol=2e-5, atol=1e-7)
    res = dpsgd.recipe_a_single_step(hand, z, clip, delta)
    assert _brute_prop12(hand, 3, z * clip, res["eps_pmp"]) == pytest.approx(delta, rel=1e-6)
    from_pairs = dpsgd.recipe_a_single_step(None, z, clip, delta, distances=distances)
    assert from_pairs["eps_pmp"] == pytest.approx(res["eps_pmp"], rel=1e-5)
    # global replace-one μ = 2/z
    assert res["eps_global"] == pytest.approx(mechanisms.gaussian_epsilon_analytic(z / 2, delta), rel=1e-12)


def test_recipe_b_worst_case_pair_equals_global_replace_one():
    # Two opposite gradients of norm C are the worst replace-one pair: χ = 4 sinh(1/z²), so
    # ε̃ (each target's only partner) = ε_global of the same method (Recipe B, see dpaudit.metrics.pmp.dpsgd).
    clip, z, q, delta = 1.0, 1.2, 0.05, 1e-5
    g = np.array([[0.6, 0.8], [-0.6, -0.8]])
    ckpts = [{"steps": 300, "clipped": g}, {"steps": 200, "clipped": g}]
    res = dpsgd.recipe_b_trajectory(ckpts, sampling_rate=q, noise_multiplier=z, clip=clip, delta=delta,
                                    n_partners=10, seed=0)
    assert res["eps_pmp"] == pytest.approx(res["eps_global"], rel=1e-8)
    mu = q * math.sqrt(500 * 4 * math.sinh(1 / z**2))
    assert res["mu_global"] == pytest.approx(mu, rel=1e-12)
    # add/remove reference: χ = e^{1/z²} − 1 (b = 0)
    assert dpsgd.replace_one_chi(1 / z**2, 0.0, 0.0) == pytest.approx(math.expm1(1 / z**2), rel=1e-12)
    # identical gradients carry no information: χ = 0 and ε̃ = 0
    same = [{"steps": 500, "clipped": np.tile([[0.6, 0.8]], (4, 1))}]
    assert dpsgd.recipe_b_trajectory(same, sampling_rate=q, noise_multiplier=z, clip=clip, delta=delta,
                                     n_partners=3, seed=0)["eps_pmp"] == 0.0


def test_recipe_b_projection_keeps_distances_approximately():
    rng = np.random.default_rng(4)
    g, _ = dpsgd.clip_rows(rng.standard_normal((40, 3000)), 1.0)
    kw = dict(sampling_rate=0.02, noise_multiplier=1.0, clip=1.0, delta=1e-5, n_partners=39, seed=1)
    exact = dpsgd.recipe_b_trajectory([{"steps": 1000, "clipped": g}], projection_dim=0, **kw)
    projected = dpsgd.recipe_b_trajectory([{"steps": 1000, "clipped": g}], projection_dim=2048, **kw)
    assert projected["projection_dim"] == 2048 and exact["projection_dim"] == 0
    # JL with p = 2048: relative distance error ~ 1/sqrt(p) ≈ 2 %; ε̃ within 10 %
    assert projected["eps_pmp"] == pytest.approx(exact["eps_pmp"], rel=0.1)


def _halves(n_models, n_parent, seed=0):
    """[n_models, n_parent] in-masks, each row a uniformly random half of the columns."""
    rng = np.random.default_rng(seed)
    mask = np.zeros((n_models, n_parent), dtype=bool)
    for row in mask:
        row[rng.permutation(n_parent)[: n_parent // 2]] = True
    return mask


def test_recipe_c_against_hand_clopper_pearson():
    rng = np.random.default_rng(0)
    n_models, n_parent = 40, 6
    in_mask = _halves(n_models, n_parent)
    scores = rng.standard_normal((n_models, n_parent)) * 0.01 + np.where(in_mask, 5.0, 0.0)
    scores[:, 0] = rng.standard_normal(n_models)  # example 0: no signal
    res = dpsgd.empirical_pmp(scores, in_mask, delta=0.0, alpha=0.05, seed=1)
    # perfectly separated examples: in the evaluation half TP = n_in, FP = 0, so
    # ε̂ = ln(TPR_lo / FPR_hi) with one-sided CP at α/(2·2n): two bounds per x over 2n x's
    order = np.random.default_rng(1).permutation(n_models)
    ev = order[n_models // 2:]
    level = 0.05 / (2 * n_parent)
    assert res["alpha_per_bound"] == level and res["alpha"] == 0.05
    n_in, n_out = int(in_mask[ev, 1].sum()), int((~in_mask[ev, 1]).sum())
    expected = max(math.log(clopper_pearson_lower(n_in, n_in, level) / clopper_pearson_upper(0, n_out, level)),
                   math.log(clopper_pearson_lower(n_out, n_out, level) / clopper_pearson_upper(0, n_in, level)))
    assert res["emp_eps_lower_x"][1] == pytest.approx(expected, rel=1e-12)
    assert res["emp_eps_lower_x"][0] < res["emp_eps_lower_x"][1]
    # perfect separation is the best case: example 1 reaches the certifiable maximum
    assert res["emp_eps_certifiable_x"][1] == pytest.approx(expected, rel=1e-12)
    assert np.all(res["emp_eps_lower_x"] <= res["emp_eps_certifiable_x"])
    assert res["emp_eps_point_x"][1] == math.inf  # plug-in rates TPR = 1, FPR = 0: a point estimate, not a bound


def _brute_force_certifiable(n_in, n_out, level, delta):
    """Largest Recipe C bound over EVERY evaluation outcome (TP, FP) and both directions."""
    best = 0.0
    for tp in range(n_in + 1):
        for fp in range(n_out + 1):
            for a, b, m_a, m_b in ((tp, fp, n_in, n_out), (n_in - tp, n_out - fp, n_in, n_out)):
                tpr_lo, fpr_hi = clopper_pearson_lower(a, m_a, level), clopper_pearson_upper(b, m_b, level)
                tnr_lo = clopper_pearson_lower(m_b - b, m_b, level)
                fnr_hi = clopper_pearson_upper(m_a - a, m_a, level)
                for num, den in ((tpr_lo - delta, fpr_hi), (tnr_lo - delta, fnr_hi)):
                    if num > 0:
                        best = max(best, math.log(num / den))
    return best


@pytest.mark.parametrize(("n_in", "n_out", "n_parent", "delta"),
                         [(4, 4, 2000, 1e-5), (3, 5, 20, 0.0), (20, 20, 2000, 1e-5), (30, 12, 200, 1e-3)])
def test_certifiable_epsilon_is_the_best_case_over_every_outcome(n_in, n_out, n_parent, delta):
    # Oracle: brute force over every (TP, FP) the evaluation models could produce, in both
    # score directions, with dpaudit.dp.hypothesis' one-sided Clopper–Pearson bounds.
    level = 0.05 / (2 * n_parent)
    got = float(dpsgd.certifiable_epsilon(n_in, n_out, level, delta))
    assert got == pytest.approx(_brute_force_certifiable(n_in, n_out, level, delta), rel=1e-12, abs=1e-15)
    if n_in == n_out:  # closed form at δ = 0 for balanced halves: ln(a^{1/m}/(1 − a^{1/m})), floored
        root = level ** (1 / n_in)
        closed = max(0.0, math.log((root - delta) / (1 - root)))
        assert got == pytest.approx(closed, rel=1e-10, abs=1e-15)


def test_recipe_c_with_16_reference_models_is_vacuous_at_2n_2000():
    # R = 16: 8 evaluation models, about 4 in and 4 out per x. Even a perfect attack cannot
    # certify anything at α = 0.05 over 2n = 2000 examples (about 4·log2(2·2000/0.05) ≈ 65 models needed).
    n_parent, n_models = 2000, 16
    in_mask = _halves(n_models, n_parent)
    scores = np.where(in_mask, 1.0, 0.0)  # every in-model above every out-model
    res = dpsgd.empirical_pmp(scores, in_mask, delta=1e-5, alpha=0.05, seed=0)
    assert res["emp_eps_certifiable"] == 0.0 and res["emp_eps_lower"] == 0.0
    assert res["emp_eps_point"] == math.inf


def test_baseline_run_gets_not_applicable_rows():
    examples = pd.DataFrame({"example_id": np.arange(4), "split": ["train", "train", "holdout", "test"],
                             "label": [0, 1, 0, 1]})
    rows, per_example = pmp_run_metrics(
        examples, {"members": "train", "nonmembers": "holdout", "utility": "test"},
        {"mechanism": "baseline", "epsilon": math.inf, "delta": None, "accountant": None},
        gradients_path="absent.parquet", options={}, log=logging.getLogger("test"))
    assert (rows["status"] == "not_applicable").all() and rows["value"].isna().all()
    assert "not applicable" in rows["note"].iloc[0]
    assert per_example.empty
    # the accountant's ε is a column of every row (the mia family writes it as a metric)
    assert (rows["accountant_epsilon"] == math.inf).all() and "accountant" not in set(rows["method"])
    # per-group clipping (microbatches) breaks the recipes' assumption: rows say so, no crash
    rows, _ = pmp_run_metrics(
        examples, {"members": "train", "nonmembers": "holdout", "utility": "test"},
        {"mechanism": "dpsgd", "epsilon": 2.0, "delta": 1e-3, "accountant": "rdp", "microbatches": 4},
        gradients_path="absent.parquet", options={}, log=logging.getLogger("test"))
    assert (rows["status"] == "not_applicable").all()
    assert rows["note"].str.contains("microbatches").any()
    # a pure ε-DP linear run: finite ε, but no DP-SGD noise for the recipes to bound
    rows, per_example = pmp_run_metrics(
        examples, {"members": "train", "nonmembers": "holdout", "utility": "test"},
        {"mechanism": "output_perturbation", "epsilon": 2.0, "delta": 0.0, "accountant": "pure"},
        gradients_path="absent.parquet", options={}, log=logging.getLogger("test"))
    assert (rows["status"] == "not_applicable").all() and rows["value"].isna().all()
    assert rows["note"].str.contains("output_perturbation").all() and "inf" not in rows["note"].iloc[0]
    assert (rows["accountant_epsilon"] == 2.0).all() and per_example.empty


def test_parent_set_is_equal_size_and_refuses_too_few_nonmembers():
    ids, is_member = parent_set(np.arange(5), np.arange(100, 120), seed=0)
    assert ids.size == 10 and is_member.sum() == 5 and set(ids[5:]) <= set(range(100, 120))
    with pytest.raises(ValueError, match="equal-size parent set"):
        parent_set(np.arange(5), np.arange(100, 103), seed=0)


# ------------------------------------------------------------- CHOOSE-EPS


def test_choose_epsilon_gaussian_and_monotonicity_check():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((40, 5))
    x *= np.minimum(1.0, 3.0 / np.linalg.norm(x, axis=1))[:, None]
    n, clip, delta = 20, 3.0, 1e-2

    def pmp_of(eps):
        sigma = mechanisms.gaussian_sigma_analytic(2 * clip / n, eps, delta)
        return gaussian.gaussian_pmp(x / n, sigma, delta, sensitivity_global=2 * clip / n)["eps_pmp"]

    target = bounds.target_pmp_epsilon(0.525)
    res = bounds.choose_epsilon(pmp_of, target, eps_lo=0.1, eps_hi=50.0)
    assert res["status"] == "ok" and res["monotone"]
    assert pmp_of(res["epsilon"]) <= target + 1e-9 < pmp_of(res["epsilon"] * 1.01)
    with pytest.raises(ValueError, match="not monotone"):
        bounds.choose_epsilon(lambda e: math.sin(e), 0.5, eps_lo=0.1, eps_hi=10.0)


def test_checkpoint_recorder_covers_every_step(tmp_path):
    from dpaudit.training.checkpoint_recorder import CheckpointRecorder

    class FakeModel:
        def __init__(self):
            self.t = 0

        def get_weights(self):
            return [np.array([self.t], dtype=np.float32)]

    model = FakeModel()
    recorder = CheckpointRecorder(4, 10, model)
    for step in range(10):
        model.t = step
        recorder.before_step()
    recorder.save(tmp_path / "c.npz")
    with np.load(tmp_path / "c.npz") as data:
        assert data["start_step"].tolist() == [0, 2, 5, 7]
        assert data["steps_represented"].tolist() == [2, 3, 2, 3]
        assert [float(data[f"w{k}_0"][0]) for k in range(4)] == [0.0, 2.0, 5.0, 7.0]


def test_parent_set_takes_every_member_and_subsamples_them_when_the_pool_is_small():
    from dpaudit.reference.parent_set import build_parent_set

    splits = {"members": "train", "nonmembers": "holdout", "utility": "test"}
    examples = pd.DataFrame({"example_id": np.arange(20), "label": 0,
                             "split": ["train"] * 8 + ["holdout"] * 5 + ["test"] * 7})
    parent = build_parent_set(examples, splits, seed=2, pool="nonmembers_and_utility")
    assert parent["ids"].size == 16 and not parent["members_subsampled"]
    assert set(parent["ids"][parent["is_member"]]) == set(range(8))
    assert set(parent["ids"][~parent["is_member"]]) <= set(range(8, 20))
    # non-member pool smaller than the members: X subsamples the members and says so
    small = build_parent_set(examples, splits, seed=2, pool="nonmembers")
    assert small["members_subsampled"] and small["ids"].size == 10


@pytest.mark.parametrize(("mu", "delta"), [(9.0, 1e-2), (8.5, 1e-5), (20.0, 1e-5), (0.3, 1e-5)])
def test_per_row_solver_with_large_mu_matches_brentq(mu, delta):
    # Oracle: scipy's brentq on the Balle–Wang profile itself. At large μ, δ_G(0) ≈ 1 and
    # log δ̃ is nearly flat at ε = 0; a plain Newton step jumped past 1e6 there and raised.
    from scipy.optimize import brentq

    root = brentq(lambda e: mechanisms.gaussian_delta(1.0, e, mu) - delta, 0.0, 1e4, xtol=1e-12)
    got = bounds.profile_epsilon_per_row(np.full((2, 7), mu), delta)
    np.testing.assert_allclose(got, root, rtol=1e-8)
    assert np.all(mechanisms.gaussian_delta(1.0, got, mu) <= delta * (1 + 1e-12))


# ------------------------------------------------------------- rows of one DP-SGD run

SPLITS = {"members": "train", "nonmembers": "holdout", "utility": "test"}


def _extract_pmp_pairs(tmp_path, examples, train, checkpoints_path, model="m.keras", **options):
    """The extraction stage's pmp_pairs.parquet of a saved model (default pmp options)."""
    from dpaudit.extract.dense_model import read_dense_model
    from dpaudit.extract.extract import write_pmp_pairs_of_model
    from dpaudit.training.models import features

    path = tmp_path / "pmp_pairs.parquet"
    parent = {"parent_seed": 0, "nonmember_pool": "nonmembers_and_utility", "partners_relative_standard_error": 0.01,
              "partners_max": 256, "seed": 0, **options}
    write_pmp_pairs_of_model(read_dense_model(tmp_path / model), examples, features(examples), SPLITS, path=path,
                             train=train, checkpoints_path=checkpoints_path, parent=parent)
    return path


def _dpsgd_run(tmp_path, n_models, *, noise_multiplier, caplog):
    """pmp_run_metrics on a 3-feature softmax regression (X = 10 members + 10 others, 6 of the
    nonmembers split and 4 of the utility split) whose recipe reference pool (P = the 10 members
    and 6 non-members) separates every x of P perfectly (φ = 0 in-models, −5 out-models)."""
    from dpaudit import _tf
    from dpaudit.reference.parent_set import build_parent_set
    from dpaudit.training.models import build_mlp

    _tf.configure(1, 0)
    rng = np.random.default_rng(0)
    examples = pd.DataFrame({"example_id": np.arange(20), "split": ["train"] * 10 + ["holdout"] * 6 + ["test"] * 4,
                             "label": rng.integers(0, 2, 20),
                             "x": list(rng.standard_normal((20, 3)).astype(np.float32))})
    model = build_mlp(3, {"hidden_units": [], "activation": "relu", "dropout": 0.0, "n_classes": 2}, seed=0)
    model.save(tmp_path / "m.keras")
    np.savez(tmp_path / "c.npz", start_step=np.array([0]), steps_represented=np.array([100]),
             **{f"w0_{j}": w for j, w in enumerate(model.get_weights())})
    assert build_parent_set(examples, SPLITS, seed=0, pool="nonmembers_and_utility")["ids"].size == 20
    population = np.arange(16)
    inside = np.random.default_rng(3).random((n_models, population.size)) < 0.5
    pool = pd.DataFrame({"example_id": np.tile(population, n_models),
                         "model": np.repeat(np.arange(n_models), population.size),
                         "included": inside.ravel(), "phi": np.where(inside, 0.0, -5.0).ravel()})
    train = {"mechanism": "dpsgd", "epsilon": 3.0, "delta": 1e-3, "accountant": "rdp", "clip_norm": 1.0,
             "noise_multiplier": noise_multiplier, "sampling_probability": 0.1, "steps": 100}
    # the pool's record of the target (what pool_checks compares) and of its models' own rates
    pool_info = {"recipe_name": "recipe", "noise_multiplier": noise_multiplier, "target_sampling_probability": 0.1,
                 "target_steps": 100, "target_epsilon": 3.0, "reference_sampling_probability": [0.13, 0.14],
                 "reference_steps": [70, 71], "reference_epsilon": [3.3, 3.4], "reference_epsilon_max": 3.4}
    log = logging.getLogger("test_pmp_rows")
    with caplog.at_level(logging.WARNING, logger="test_pmp_rows"):
        gradients = _extract_pmp_pairs(tmp_path, examples, train, tmp_path / "c.npz")
        rows, per_example = pmp_run_metrics(examples, SPLITS, train, gradients_path=gradients,
                                            options={"alpha": 0.05, "recipe_c": True}, pool=pool,
                                            pool_info=pool_info, log=log)
    # One row per (method, metric) indexed; the quantile rows and the add/remove ε row are in attrs["all"].
    single = rows["quantile"].isna() & (rows["neighbouring_relation"] != "add_remove")
    indexed = rows[single].set_index(["method", "metric"])
    indexed.attrs["all"] = rows
    return indexed, per_example


def test_ordering_failure_is_flagged_in_a_row_and_logged(tmp_path, caplog):
    # Noise multiplier 1000: Recipe B's ε̃ is ~0, while 400 perfectly separating reference
    # models certify ε̂ > 0, so ε̂ ≲ ε̃ fails: ordering_holds is False, a note, and a log warning.
    rows, _ = _dpsgd_run(tmp_path, 400, noise_multiplier=1000.0, caplog=caplog)
    eps_c = rows.loc[("empirical_lira", "empirical_epsilon_lower_bound"), "value"]
    eps_b = rows.loc[("dpsgd_clt", "epsilon_pmp"), "value"]
    assert eps_c > 1.0 > 0.01 > eps_b
    flag = rows.loc[("dpsgd_clt", "ordering_holds")]
    assert flag["value"] is False
    assert "empirical_epsilon_lower_bound=" in flag["note"] and "> epsilon_pmp=" in flag["note"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("PMP ordering check failed" in m and "empirical_epsilon_lower_bound" in m for m in warnings), warnings


def test_recipe_c_rows_point_estimate_certifiable_max_and_mia_bounds(tmp_path, caplog):
    delta = 1e-3
    rows, per_example = _dpsgd_run(tmp_path, 400, noise_multiplier=1.0, caplog=caplog)
    bound = rows.loc[("empirical_lira", "empirical_epsilon_lower_bound")]
    # parameter columns: family-wise α and the level of each one-sided bound, α/(2m) with m = 16
    # examples of X in the pool's population (the 4 of the utility split are in no model's)
    assert bound["alpha"] == 0.05 and bound["alpha_per_bound"] == pytest.approx(0.05 / 32, rel=1e-15)
    assert bound["n_reference_models"] == 400 and bound["n_eval_models"] == 200 and bound["n_bounded"] == 16
    assert bound["note"].startswith("4 of the 20 examples of X are outside") and bound["reference_recipe"] == "recipe"
    # the models' own accounting is recorded, not warned about: ε̂ bounds their mechanism
    assert bound["reference_epsilon"] == 3.4 and "accountant eps is up to 3.4 (the run's 3)" in bound["note"]
    assert "not of this run's recipe" not in bound["note"]
    assert not any("Recipe C: the reference pool" in r.getMessage() for r in caplog.records)
    bounded = per_example["example_id"] < 16
    assert per_example.loc[~bounded, ["emp_eps_lower_x", "emp_eps_point_x"]].isna().all().all()
    assert per_example.loc[bounded, "emp_eps_lower_x"].notna().all()
    # perfect separation: the bound reaches the certifiable maximum, and the point estimate
    # (its own method, named as such) is +inf from plug-in rates TPR = 1, FPR = 0
    ceiling = rows.loc[("empirical_lira", "empirical_epsilon_certifiable"), "value"]
    assert bound["value"] == pytest.approx(ceiling, rel=1e-12) and ceiling > 0
    point = rows.loc[("empirical_lira_point", "empirical_epsilon_point")]
    assert point["value"] == math.inf and "NOT a bound" in point["label"]
    assert per_example["emp_eps_certifiable_x"].max() == ceiling
    assert np.isinf(per_example.loc[bounded, "emp_eps_point_x"]).all()
    # Lemma 6 (and its δ form) at ε̂ and at Recipe B's global ε: closed form (e^ε + δ)/(1 + e^ε)
    e = math.exp(bound["value"])
    assert rows.loc[("empirical_lira", "mia_success_bound_pmp"), "value"] == pytest.approx(e / (1 + e), rel=1e-12)
    assert rows.loc[("empirical_lira", "mia_success_bound_pmp_delta"), "value"] == pytest.approx(
        (e + delta) / (1 + e), rel=1e-12)
    every = rows.attrs["all"]
    glob = every[(every["method"] == "dpsgd_clt") & (every["metric"] == "epsilon_global")].set_index(
        "neighbouring_relation")["value"]
    g = math.exp(glob["replace_one"])
    assert rows.loc[("dpsgd_clt", "mia_success_bound_global"), "value"] == pytest.approx(
        (g + delta) / (1 + g), rel=1e-12)
    assert glob["add_remove"] <= glob["replace_one"]  # replace-one neighbours are farther apart
    # quantiles of the per-example values are rows with a quantile column, from the per-example frame
    quantiles = every[every["metric"] == "empirical_epsilon_lower_bound_quantile"].set_index("quantile")["value"]
    assert quantiles[0.5] == np.quantile(per_example.loc[bounded, "emp_eps_lower_x"], 0.5)
    assert quantiles[0.99] == np.quantile(per_example.loc[bounded, "emp_eps_lower_x"], 0.99)
    # every row is declared in the vocabulary
    from dpaudit.contract.metrics import metric_rows

    written = metric_rows("pmp", every, dataset="d", run="r")
    assert written["value_bool"].notna().sum() == 1  # ordering_holds


def test_recipe_c_with_16_reference_models_says_it_is_vacuous(tmp_path, caplog):
    rows, _ = _dpsgd_run(tmp_path, 16, noise_multiplier=1.0, caplog=caplog)
    assert rows.loc[("empirical_lira", "empirical_epsilon_certifiable"), "value"] == 0.0
    assert rows.loc[("empirical_lira", "empirical_epsilon_lower_bound"), "value"] == 0.0
    assert "vacuous" in rows.loc[("empirical_lira", "empirical_epsilon_lower_bound"), "note"]
    assert any("cannot certify" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


def _tf_metric_gradients(model_path, x, y, weight_sets, clip):
    """The oracle: metric_pmp's gradients before the extraction stage computed them (it ran
    TensorFlow itself): the saved model, one traced per-example gradient function, chunks of
    4096 rows, the final weights first (None), then each checkpoint's, clipped in float64."""
    from dpaudit import _tf
    from dpaudit.training.models import load_model, logits_model

    from .tf_gradients import tf_per_example_gradient_fn

    model = load_model(model_path)
    fn = tf_per_example_gradient_fn(logits_model(model))
    out = []
    for weights in weight_sets:
        if weights is not None:
            model.set_weights(weights)
        parts = [fn(_tf.tf.constant(x[s:s + 4096]), _tf.tf.constant(y[s:s + 4096]))[1].numpy()
                 for s in range(0, len(x), 4096)]
        out.append(dpsgd.clip_rows(np.concatenate(parts), clip)[0])
    return out


def test_extracted_pmp_pairs_give_the_rows_of_the_tensorflow_metric(tmp_path):
    # A hidden-layer MLP (P = 5·8 + 8 + 8·2 + 2 = 66, the tiny e2e run's model), three
    # checkpoints. Oracle: what the metric computed when it clipped TensorFlow's whole gradient
    # vectors (Recipe B without projection), a second implementation of the gradients. Recipes A
    # and B, both from the Dense-layer factors extraction computes in numpy (stored as float32),
    # equal it to float32 rounding: rtol 1e-5 (docs/architecture.md).
    from dpaudit import _tf
    from dpaudit.extract.pmp_pairs import read_pmp_pairs
    from dpaudit.reference.parent_set import build_parent_set
    from dpaudit.training.models import build_mlp, features

    _tf.configure(1, 0)
    rng = np.random.default_rng(1)
    n = 70
    examples = pd.DataFrame({"example_id": np.arange(n) + 1000,
                             "split": ["train"] * 30 + ["holdout"] * 25 + ["test"] * 15,
                             "label": rng.integers(0, 2, n), "x": list(rng.standard_normal((n, 5)).astype(np.float32))})
    model = build_mlp(5, {"hidden_units": [8], "activation": "relu", "dropout": 0.0, "n_classes": 2}, seed=0)
    model.save(tmp_path / "m.keras")
    checkpoints = [[w + 0.3 * k * rng.standard_normal(w.shape).astype(np.float32) for w in model.get_weights()]
                   for k in range(3)]
    np.savez(tmp_path / "c.npz", start_step=np.array([0, 40, 80]), steps_represented=np.array([40, 40, 40]),
             **{f"w{k}_{j}": w for k, ws in enumerate(checkpoints) for j, w in enumerate(ws)})
    train = {"mechanism": "dpsgd", "epsilon": 3.0, "delta": 1e-3, "accountant": "rdp", "clip_norm": 0.5,
             "noise_multiplier": 1.1, "sampling_probability": 0.1, "steps": 120}
    options = {"partners_max": 32, "seed": 0}  # 2n = 20 points: every partner, in both computations
    path = _extract_pmp_pairs(tmp_path, examples, train, tmp_path / "c.npz", **options)
    pairs = read_pmp_pairs(path)
    assert pairs["metadata"]["checkpoint_steps"] == [40, 40, 40] and pairs["metadata"]["layers"] == [[5, 8], [8, 2]]
    rows, per_example = pmp_run_metrics(examples, SPLITS, train, gradients_path=path, options=options,
                                        log=logging.getLogger("test"))

    ids = build_parent_set(examples, SPLITS, seed=0, pool="nonmembers_and_utility")["ids"]
    frame = examples.set_index("example_id").loc[ids].reset_index()
    final, *clipped = _tf_metric_gradients(tmp_path / "m.keras", features(frame), frame["label"].to_numpy(np.int64),
                                           [None, *checkpoints], 0.5)
    res_a = dpsgd.recipe_a_single_step(final, 1.1, 0.5, 1e-3)
    res_b = dpsgd.recipe_b_trajectory([{"steps": 40, "clipped": c} for c in clipped], sampling_rate=0.1,
                                      noise_multiplier=1.1, clip=0.5, delta=1e-3, n_partners=32, seed=0,
                                      projection_dim=0)
    np.testing.assert_array_equal(per_example["example_id"], ids)
    np.testing.assert_allclose(per_example["eps_pmp_x_gauss_single_step"], res_a["eps_pmp_x"], rtol=1e-5)
    for column, key in (("eps_pmp_x_dpsgd_clt", "eps_pmp_x"), ("mu_mean_dpsgd_clt", "mu_mean_x"),
                        ("mu_max_dpsgd_clt", "mu_max_x")):
        np.testing.assert_allclose(per_example[column], res_b[key], rtol=1e-5, err_msg=column)
    value = rows[rows["quantile"].isna() & (rows["neighbouring_relation"] != "add_remove")].set_index(
        ["method", "metric"])["value"]
    assert value[("dpsgd_clt", "epsilon_pmp")] == pytest.approx(res_b["eps_pmp"], rel=1e-5)
    assert value[("dpsgd_clt", "epsilon_parent_set")] == pytest.approx(res_b["eps_X"], rel=1e-5)
    assert value[("gauss_single_step", "epsilon_pmp")] == pytest.approx(res_a["eps_pmp"], rel=1e-5)
    assert value[("gauss_single_step", "epsilon_parent_set")] == pytest.approx(res_a["eps_X"], rel=1e-5)
    assert res_b["eps_pmp"] > 0 and res_a["eps_pmp"] > 0
    # the metric refuses pairs drawn with other options than its own
    with pytest.raises(ValueError, match="pmp_pairs.parquet: Recipe B's pairs were drawn with"):
        pmp_run_metrics(examples, SPLITS, train, gradients_path=path, options={**options, "partners_max": 64},
                        log=logging.getLogger("test"))


def test_pmp_pairs_of_runs_without_recipes_have_no_rows_and_the_metric_checks_x(tmp_path):
    from dpaudit import _tf
    from dpaudit.extract.pmp_pairs import read_pmp_pairs
    from dpaudit.training.models import build_mlp

    _tf.configure(1, 0)
    rng = np.random.default_rng(0)
    examples = pd.DataFrame({"example_id": np.arange(8), "split": ["train"] * 4 + ["holdout"] * 4,
                             "label": rng.integers(0, 2, 8), "x": list(rng.standard_normal((8, 3)).astype(np.float32))})
    build_mlp(3, {"hidden_units": [], "activation": "relu", "dropout": 0.0, "n_classes": 2}, seed=0).save(
        tmp_path / "m.keras")
    baseline = {"mechanism": "baseline", "epsilon": math.inf, "steps": 10}
    assert read_pmp_pairs(_extract_pmp_pairs(tmp_path, examples, baseline, None)) is None
    train = {"mechanism": "dpsgd", "epsilon": 3.0, "delta": 1e-3, "accountant": "rdp", "clip_norm": 1.0,
             "noise_multiplier": 1.0, "sampling_probability": 0.1, "steps": 10}
    path = _extract_pmp_pairs(tmp_path, examples, train, None)
    # no checkpoints: Recipe A only; another parent seed than the extraction's is refused by name
    rows, _ = pmp_run_metrics(examples, SPLITS, train, gradients_path=path, options={}, log=logging.getLogger("test"))
    assert (rows.loc[rows["method"] == "dpsgd_clt", "status"] == "not_computed").all()
    examples = pd.concat([examples, examples.assign(example_id=examples["example_id"] + 8, split="test")])
    with pytest.raises(ValueError, match="pmp_pairs.parquet.*not those of this parent set"):
        pmp_run_metrics(examples, SPLITS, train, gradients_path=path, options={"parent_seed": 5},
                        log=logging.getLogger("test"))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_chi_sums_from_factors_equal_the_sums_from_the_vectors(dtype, monkeypatch):
    """Oracle: trajectory_chi_sums on the explicit vectors (kernel a ⊗ δ, bias δ per Dense layer),
    without projection, on the same drawn pairs. Tolerance 1e-9 relative with float64 Gram blocks
    (only the summation order differs); with the float32 products the extraction uses
    (``pmp_partners.CHI_DTYPE``), 2e-5 of the largest sum: ⟨g_t, g_p⟩ to ~1e-6 of ‖g_t‖‖g_p‖."""
    from dpaudit.extract import pmp_pairs
    from dpaudit.extract.pmp_pairs import (
        factor_norms_sq,
        trajectory_chi_sums,
        trajectory_chi_sums_from_factors,
    )

    rng = np.random.default_rng(3)
    layers, n = [(5, 4), (4, 3)], 40

    def checkpoint(scale, steps):
        inputs = rng.standard_normal((n, 9)) * scale
        deltas = rng.standard_normal((n, 7)) * scale
        parts, a0, d0 = [], 0, 0
        for width_in, width_out in layers:
            a, d = inputs[:, a0:a0 + width_in], deltas[:, d0:d0 + width_out]
            parts += [np.einsum("ni,nj->nij", a, d).reshape(n, -1), d]
            a0, d0 = a0 + width_in, d0 + width_out
        vectors = np.concatenate(parts, axis=1)
        np.testing.assert_allclose(factor_norms_sq(inputs, deltas, layers), (vectors**2).sum(axis=1), rtol=1e-12)
        return {"steps": steps, "inputs": inputs, "deltas": deltas, "layers": layers}, \
            {"steps": steps, "clipped": dpsgd.clip_rows(vectors, 1.5)[0]}

    monkeypatch.setattr(pmp_pairs, "CHI_DTYPE", np.dtype(dtype).type)
    pairs = [checkpoint(scale, steps) for scale, steps in ((0.3, 10), (1.0, 7), (2.0, 3))]  # some rows clipped
    from_factors = trajectory_chi_sums_from_factors([f for f, _ in pairs], noise_multiplier=1.1, clip=1.5,
                                                    n_partners=6, seed=2)
    from_vectors = trajectory_chi_sums([v for _, v in pairs], noise_multiplier=1.1, clip=1.5, n_partners=6, seed=2,
                                       projection_dim=0)
    assert from_factors["partners"] == 6 and from_factors["total"].shape == (n, 6)
    np.testing.assert_array_equal(from_vectors["targets"], np.repeat(np.arange(n), 6))
    got, want = from_factors["total"].ravel(), from_vectors["total"]
    if dtype == "float64":
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    else:
        np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * want.max())
    assert from_factors["steps"] == 20 and from_factors["checkpoints"] == 3 and from_factors["projection_dim"] == 0
