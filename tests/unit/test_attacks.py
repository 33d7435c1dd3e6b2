"""Tests for dpaudit.metrics.attacks (LiRA, RMIA, the signal and the per-attack statistics).

Oracles: Gaussian log-densities from scipy.stats.norm with parameters fitted by explicit
loops, RMIA's formula evaluated pair by pair with probabilities (never in log space),
and φ in closed form. Validity by simulation: labels drawn independently of training.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpaudit.metrics import attacks as A

# ------------------------------------------------------------------ the signal


def test_phi_stable_at_one_minus_1e_12():
    p = 1.0 - 1e-12
    probs = np.array([[p, 1e-12 / 2, 1e-12 / 2], [1e-12, p, 0.0 + 1e-300]])
    phi = A.logit_confidence(np.log(probs), np.array([0, 1]))
    assert np.all(np.isfinite(phi))
    # φ = log(p / (1 − p)) with 1 − p = 1e-12 exactly
    assert phi[0] == pytest.approx(math.log(p) - math.log(1e-12), rel=1e-12)
    # shifting the logits by a constant changes nothing; large logits do not overflow
    big = np.log(probs) + 1e4
    assert np.allclose(A.logit_confidence(big, np.array([0, 1])), phi, rtol=1e-9)


def test_phi_matches_probabilities_and_stacks_over_models():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(4, 7, 5)) * 3
    labels = rng.integers(0, 5, 7)
    phi = A.logit_confidence(logits, labels)
    assert phi.shape == (4, 7)
    for k in range(4):
        for j in range(7):
            pr = np.exp(logits[k, j]) / np.exp(logits[k, j]).sum()
            py = pr[labels[j]]
            assert phi[k, j] == pytest.approx(math.log(py) - math.log(1 - py), rel=1e-10, abs=1e-12)
    # temperature: softmax(z / T)
    t = A.logit_confidence(logits, labels, temperature=2.0)
    assert np.allclose(t, A.logit_confidence(logits / 2.0, labels))
    # the loss attack's score is −CE = log p_y
    ce = -np.log(np.exp(logits[0, np.arange(7), labels]) / np.exp(logits[0]).sum(axis=1))
    assert np.allclose(A.loss_attack(phi[0]).scores, -ce)


# ------------------------------------------------------------------------ LiRA


def _known_gaussian_population(seed, k, n):
    """Reference φ whose per-example sample means and (ddof = 1) deviations are exactly
    the chosen μ_in, μ_out, σ_in, σ_out: each side's values are μ ± a alternately."""
    rng = np.random.default_rng(seed)
    inc = np.zeros((k, n), bool)
    for j in range(n):
        inc[rng.permutation(k)[: k // 2], j] = True
    mu_in, mu_out = rng.normal(2, 1, n), rng.normal(0, 1, n)
    sd_in, sd_out = rng.uniform(0.3, 1.5, n), rng.uniform(0.3, 1.5, n)
    ref = np.zeros((k, n))
    side = k // 2
    for j in range(n):
        for mask, mu, sd in ((inc[:, j], mu_in[j], sd_in[j]), (~inc[:, j], mu_out[j], sd_out[j])):
            a = sd * math.sqrt((side - 1) / side)
            ref[mask, j] = mu + a * np.resize([1.0, -1.0], side)
    return ref, inc, mu_in, mu_out, sd_in, sd_out, rng


def test_lira_online_is_the_exact_log_likelihood_ratio():
    ref, inc, mu_in, mu_out, sd_in, sd_out, rng = _known_gaussian_population(0, 64, 300)
    # the target's φ drawn from the known IN or OUT Gaussians
    member = rng.random(300) < 0.5
    target = np.where(member, rng.normal(mu_in, sd_in), rng.normal(mu_out, sd_out))
    got = A.lira_online(target, ref, inc)
    assert got.params["global_variance"] is False  # K = 64: per-example variance
    exact = stats.norm.logpdf(target, mu_in, sd_in) - stats.norm.logpdf(target, mu_out, sd_out)
    np.testing.assert_allclose(got.scores, exact, rtol=0, atol=1e-9)
    offline = A.lira_offline(target, ref, inc)
    np.testing.assert_allclose(offline.scores, -stats.norm.logsf(target, mu_out, sd_out), rtol=1e-9, atol=1e-9)


def test_lira_global_variance_below_64_models_matches_a_loop():
    rng = np.random.default_rng(3)
    k, n = 16, 50
    inc = rng.random((k, n)) < 0.5
    inc[0, :], inc[1, :] = True, False  # every example has IN and OUT models
    mu = rng.normal(size=n)
    ref = mu + 1.5 * inc + rng.normal(size=(k, n)) * rng.uniform(0.5, 2, n)
    target = mu + rng.normal(size=n)
    got = A.lira_online(target, ref, inc)
    assert got.params["global_variance"] is True and got.params["reference_models"] == 16
    # oracle: loops, pooled within-example residuals per side
    means, ss, dof = {}, {True: 0.0, False: 0.0}, {True: 0, False: 0}
    for j in range(n):
        for side in (True, False):
            vals = [ref[i, j] for i in range(k) if inc[i, j] == side]
            m = sum(vals) / len(vals)
            means[side, j] = m
            ss[side] += sum((v - m) ** 2 for v in vals)
            dof[side] += len(vals) - 1
    s_in, s_out = math.sqrt(ss[True] / dof[True]), math.sqrt(ss[False] / dof[False])
    for j in range(n):
        exact = stats.norm.logpdf(target[j], means[True, j], s_in) - stats.norm.logpdf(target[j], means[False, j], s_out)
        assert got.scores[j] == pytest.approx(exact, abs=1e-9)
    # forcing per-example variance changes the scores
    assert not np.allclose(A.lira_online(target, ref, inc, global_variance=False).scores, got.scores)


def test_lira_imputes_a_missing_side():
    rng = np.random.default_rng(4)
    inc = rng.random((8, 20)) < 0.5
    inc[:, 0] = False  # example 0 has no IN model
    ref = rng.normal(size=(8, 20)) + inc
    fit = A.gaussian_fit(ref, inc)
    assert fit.imputed_in == 1 and math.isfinite(fit.mean_in[0])
    both = (inc.sum(0) > 0) & ((~inc).sum(0) > 0)
    shift = np.median(fit.mean_in[both] - fit.mean_out[both])
    assert fit.mean_in[0] == pytest.approx(fit.mean_out[0] + shift)


# ------------------------------------------------------------------------ RMIA


def _expit(x):
    return 1.0 / (1.0 + math.exp(-x))


def _rmia_by_hand(target, ref, inc, population, gamma, a):
    """RMIA's formula term by term, with probabilities."""
    k, n = ref.shape

    def marginal(j):
        pin = [_expit(ref[i, j]) for i in range(k) if inc[i, j]]
        pout = [_expit(ref[i, j]) for i in range(k) if not inc[i, j]]
        if a is None:
            if pin and pout:
                return 0.5 * (sum(pin) / len(pin) + sum(pout) / len(pout))
            return sum(pin or pout) / len(pin or pout)
        if pout:
            return 0.5 * ((1 + a) * sum(pout) / len(pout) + (1 - a))
        return sum(pin) / len(pin)

    out = []
    for x in range(n):
        rx = _expit(target[x]) / marginal(x)
        hits = sum(1 for z in population if rx / (_expit(target[z]) / marginal(z)) >= gamma)
        out.append(hits / len(population))
    return np.array(out)


@pytest.mark.parametrize(("gamma", "a"), [(1.0, None), (1.3, None), (1.0, 0.3), (2.0, 1.0), (1.0, 0.0)])
def test_rmia_three_models_five_examples_by_hand(gamma, a):
    target = np.array([2.0, -0.5, 0.3, 4.0, -2.0])
    ref = np.array([[1.0, -1.0, 0.5, 2.0, -1.5],
                    [0.2, 0.1, -0.4, 3.5, -2.2],
                    [1.8, -0.7, 0.0, 1.0, -0.3]])
    inc = np.array([[True, False, True, False, True],
                    [False, False, True, True, False],
                    [True, True, False, True, False]])
    population = np.array([1, 2, 4])
    got = A.rmia(target, ref, inc, population=population, gamma=gamma, offline_a=a)
    np.testing.assert_allclose(got.scores, _rmia_by_hand(target, ref, inc, population, gamma, a), atol=1e-12)
    assert got.params["mode"] == ("online" if a is None else "offline")


def test_rmia_hand_case_values():
    """One value written out: x = 0 against z = 1, 2, 4 online, γ = 1."""
    target = np.array([2.0, -0.5, 0.3, 4.0, -2.0])
    ref = np.array([[1.0, -1.0, 0.5, 2.0, -1.5], [0.2, 0.1, -0.4, 3.5, -2.2], [1.8, -0.7, 0.0, 1.0, -0.3]])
    inc = np.array([[1, 0, 1, 0, 1], [0, 0, 1, 1, 0], [1, 1, 0, 1, 0]], bool)
    s = A.rmia(target, ref, inc, population=[1, 2, 4]).scores
    # Pr(x0) = ½(mean(expit(1.0), expit(1.8)) + expit(0.2)); LR(x0) = expit(2)/Pr(x0) ≈ 1.31028
    px0 = 0.5 * ((_expit(1.0) + _expit(1.8)) / 2 + _expit(0.2))
    assert _expit(2.0) / px0 == pytest.approx(1.31028, abs=1e-5)
    assert s[0] == pytest.approx(_rmia_by_hand(target, ref, inc, [1, 2, 4], 1.0, None)[0])


def test_tune_offline_a_returns_a_grid_value():
    rng = np.random.default_rng(5)
    inc = rng.random((6, 400)) < 0.5
    ref = rng.normal(size=400) + inc * 1.0 + rng.normal(size=(6, 400)) * 0.5
    a, aucs = A.tune_rmia_offline_a(ref, inc, population=np.arange(400))
    assert 0 <= a <= 1 and aucs.shape == (11,) and aucs.max() > 0.6


# ------------------------------------------------------------------ statistics


def test_statistics_rows_and_not_resolved():
    rng = np.random.default_rng(6)
    member = np.r_[np.ones(300, bool), np.zeros(50, bool)]
    scores = rng.normal(size=350) + member
    rows = A.attack_statistics(scores, member, delta=1e-5, seed=1, accountant_epsilon=1.0, attack="x")
    tpr = rows[rows.metric == "tpr_at_fpr"].set_index("fpr_target")
    # 50 non-members cannot realize FPR 1e-3 or 1e-2 (1/50 = 0.02), they can 0.1
    assert list(tpr.resolved) == [False, False, True]
    assert tpr.value.isna().tolist() == [True, True, False]
    row = tpr.loc[0.1]
    assert row.tp == int(np.sum(scores[member] >= row.threshold))
    assert row.fp == int(np.sum(scores[~member] >= row.threshold))
    assert row.ci_lower <= row.value <= row.ci_upper
    assert set(rows.metric) == {"attack_auc", "attack_advantage", "tpr_at_fpr", "epsilon_lower_bound",
                                "epsilon_lower_bound_exceeds_accountant"}
    assert (rows.attack == "x").all()


def _simulated_pool(rng, k, n):
    """φ of K reference models and a target: per-example difficulty, IN shifts φ up."""
    difficulty = rng.normal(0, 2, n)
    effect = rng.gamma(1.0, 1.0, n)
    inc = rng.random((k + 1, n)) < 0.5
    phi = difficulty + effect * inc + rng.normal(size=(k + 1, n)) * 0.7
    return phi[0], phi[1:], inc[0], inc[1:]


@pytest.mark.parametrize("attack", A.ATTACKS)
def test_validity_permuted_membership(attack):
    """Labels independent of the target's training: AUC's 95 % interval covers 0.5 and the
    certified ε is 0, in at least 18 of 20 seeds (as a rate: 36 of 40 seeds, since even
    an exact 95 % interval misses more than 2 of 20 with probability 7.5 %, and the
    three reference attacks share their data, so they miss on the same seeds)."""
    covered = zero = 0
    for seed in range(40):
        rng = np.random.default_rng([seed, 11])
        target, ref, _, inc = _simulated_pool(rng, 16, 1000)
        labels = rng.permutation(np.r_[np.ones(500, bool), np.zeros(500, bool)])
        s = A.run_attacks(target, ref, inc, population=np.flatnonzero(~labels), attacks=[attack])[attack]
        rows = A.attack_statistics(s.scores, labels, delta=1e-5, seed=seed)
        auc = rows[rows.metric == "attack_auc"].iloc[0]
        covered += auc.ci_lower <= 0.5 <= auc.ci_upper
        zero += rows[rows.metric == "epsilon_lower_bound"].value.iloc[0] == 0.0
    assert covered >= 36 and zero >= 36


def test_power_on_simulated_pool():
    """With real membership the reference attacks beat the loss threshold (sanity of signs).

    In this additive-in-φ simulation RMIA (which works with probabilities, saturated for
    easy examples) does not reach 2× the loss attack's TPR at 1 % FPR; its power test on
    trained models is in test_reference_models.py."""
    rng = np.random.default_rng(12)
    target, ref, member, inc = _simulated_pool(rng, 16, 4000)
    res = A.run_attacks(target, ref, inc, population=np.flatnonzero(~member))
    stats_ = {k: A.attack_statistics(v.scores, member, delta=1e-5, seed=0) for k, v in res.items()}

    def get(k, metric, target=None):
        r = stats_[k][stats_[k].metric == metric]
        if target is not None:
            r = r[r.fpr_target == target]
        return float(r.value.iloc[0])

    for k in ("lira_online", "lira_offline", "rmia"):
        assert get(k, "attack_auc") > get("loss", "attack_auc")
    for k in ("lira_online", "lira_offline"):
        assert get(k, "tpr_at_fpr", 0.01) >= 2 * get("loss", "tpr_at_fpr", 0.01)


def test_scoring_input_checks():
    with pytest.raises(ValueError, match="inclusion"):
        A.lira_online(np.zeros(3), np.zeros((2, 3)), np.zeros((2, 3), int))
    with pytest.raises(ValueError, match="non-finite"):
        A.lira_online(np.array([0, np.inf, 0]), np.zeros((2, 3)), np.zeros((2, 3), bool))
    with pytest.raises(ValueError, match="offline_a"):
        A.rmia(np.zeros(3), np.zeros((2, 3)), np.ones((2, 3), bool), population=[0], offline_a=2)
