"""The DI audit loop (Bernau et al. 2021, Alg. 1) against independent oracles: finite
differences and one-example passes for the clipped gradients, the analytic law of the
log-odds (Bernau et al. 2021, Lemma 1), scikit-image's SSIM, brute-force neighbour ranking."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import special, stats

from dpaudit.metrics import identifiability as idf
from dpaudit.metrics import identifiability_audit as audit
from dpaudit.metrics import identifiability_grid as audit_grid


def _toy(rng, n=20, d=5, classes=3):
    x = rng.normal(size=(n, d))
    y = rng.integers(classes, size=n)
    return x, y


@pytest.mark.parametrize(("output", "classes"), [("softmax", 3), ("sigmoid", 2)])
def test_gradients_match_finite_differences_and_per_example_clipping(output, classes):
    rng = np.random.default_rng(0)
    x, y = _toy(rng, n=9, classes=classes)
    model = audit.MLP.glorot(5, [4, 3], classes, output, rng)
    theta = model.flat()
    total, norms, _ = model.clipped_gradients(x, y, math.inf)
    numeric = np.zeros_like(theta)
    for i in range(theta.size):  # central differences of the summed loss, step 1e-6
        e = np.zeros_like(theta)
        e[i] = 1e-6
        model.set_flat(theta + e)
        up = model.losses(x, y)[0].sum()
        model.set_flat(theta - e)
        down = model.losses(x, y)[0].sum()
        numeric[i] = (up - down) / 2e-6
    model.set_flat(theta)
    assert np.max(np.abs(total - numeric)) < 1e-7
    # Per-example clipping: one-example passes clipped by hand, then summed.
    clip = float(np.median(norms))
    singles = [model.clipped_gradients(x[i:i + 1], y[i:i + 1], math.inf)[0] for i in range(len(x))]
    expected = sum(g * min(1.0, clip / np.linalg.norm(g)) for g in singles)
    clipped, norms2, kept = model.clipped_gradients(x, y, clip, keep=[2])
    assert np.allclose(clipped, expected, rtol=1e-12, atol=1e-12)
    assert np.allclose(norms2, [np.linalg.norm(g) for g in singles], rtol=1e-12)
    assert np.allclose(kept[0], singles[2] * min(1.0, clip / np.linalg.norm(singles[2])), rtol=1e-12)


def _setup(rng, neighbourhood="bounded", mode="ls", z=2.0, steps=10, optimizer="adam"):
    x, y = _toy(rng)
    xt, yt = _toy(rng, n=30)
    bounded = neighbourhood == "bounded"
    return audit.AuditSetup(
        x=x, y=y, x_alt=rng.normal(size=5) * 3 if bounded else None, y_alt=1 if bounded else None, star=0,
        x_test=xt, y_test=yt, classes=3, neighbourhood=neighbourhood, mode=mode, noise_multiplier=z,
        steps=steps, clip_norm=1.0, learning_rate=0.05, optimizer=optimizer, hidden=(4,))


def test_ls_mode_log_odds_follow_the_analytic_law():
    # Bernau et al. 2021, Lemma 1 (our derivation of its law): in LS mode Λ_k ~ N(M, 2M) with M = k/(2z²). 400 runs; tolerances:
    # 4 standard errors for the mean and the win rate, KS p > 0.01 for η_t ~ N(0, 1).
    rng = np.random.default_rng(3)
    setup = _setup(rng, z=2.0, steps=10)
    runs, steps, _ = audit.audit_block(setup, range(400), seed=11)
    m = 10 / (2 * 2.0**2)
    # A step where x* and x′ have identical clipped gradients (all hidden units dead)
    # has LS_t = 0 and reveals nothing; the law holds per informative step.
    informative = steps.groupby("run_id")["ls_t"].apply(lambda s: int((s > 0).sum()))
    assert np.allclose(runs.set_index("run_id")["M_sum"], informative / (2 * 2.0**2), rtol=1e-12)
    runs = runs[runs["run_id"].isin(informative.index[informative == 10])]
    assert len(runs) > 350
    lam = runs["final_logodds"].to_numpy()
    assert lam.mean() == pytest.approx(m, abs=4 * math.sqrt(2 * m / len(lam)))
    assert stats.kstest(lam, "norm", args=(m, math.sqrt(2 * m))).pvalue > 0.01
    assert runs["win"].mean() == pytest.approx(idf.predicted_win_probability(m), abs=4 * math.sqrt(0.25 / len(lam)))
    assert stats.kstest(steps["eta_t"].dropna(), "norm").pvalue > 0.01
    assert (steps["ls_t"] <= 2 * setup.clip_norm + 1e-9).all()
    assert np.allclose(steps["sigma_t"], 2.0 * steps["ls_t"], rtol=1e-12)


def test_gs_mode_noise_and_records_ls():
    rng = np.random.default_rng(4)
    setup = _setup(rng, mode="gs", z=3.0)
    runs, steps, _ = audit.audit_block(setup, range(5), seed=1)
    assert np.allclose(steps["sigma_t"], 3.0 * 2.0)  # z · 2C, bounded, C = 1
    assert (steps["ls_t"] > 0).all() and (steps["ls_t"] < 2.0).all()  # LS recorded, not overwritten by GS
    # M_sum uses the realised LS (not k/(2z²) in GS mode).
    per_run = steps.groupby("run_id").apply(lambda s: np.sum(s["ls_t"] ** 2 / (2 * s["sigma_t"] ** 2)),
                                            include_groups=False)
    assert np.allclose(runs.set_index("run_id")["M_sum"], per_run, rtol=1e-12)


def test_release_vectors_reproduce_the_llr_and_share_one_noise_draw():
    rng = np.random.default_rng(5)
    setup = _setup(rng, neighbourhood="unbounded")
    runs, steps, vectors = audit.audit_block(setup, range(2), seed=2, vector_runs=1)
    assert set(vectors["run_id"]) == {0}
    v = vectors.set_index(["t", "kind"])["values"]
    for t in (1, 5):
        mu, mu_p, r, noise = (np.asarray(v[(t, k)], dtype=np.float64) for k in ("mu_D", "mu_Dp", "release", "noise"))
        assert np.allclose(r, mu + noise, rtol=1e-6, atol=1e-5)  # the released vector carries the drawn noise
        row = steps[(steps["run_id"] == 0) & (steps["t"] == t)].iloc[0]
        two_norm = (np.sum((r - mu_p) ** 2) - np.sum((r - mu) ** 2)) / (2 * row["sigma_t"] ** 2)
        assert row["llr_t"] == pytest.approx(two_norm, rel=1e-4, abs=1e-4)  # float32 storage
        assert np.linalg.norm(mu - mu_p) == pytest.approx(row["ls_t"], rel=1e-5)
        assert row["ls_t"] <= setup.clip_norm + 1e-9  # unbounded: LS ≤ C


def test_sgd_update_uses_the_released_gradient():
    # As in the authors' code: the optimizer step applies r_t/n, the same draw the adversary sees. With
    # plain SGD the weights after step 1 are θ0 − lr·r_1/n; check via the step-2 gradient.
    rng = np.random.default_rng(6)
    setup = _setup(rng, optimizer="sgd", steps=2)
    _, _, vectors = audit.audit_block(setup, [0], seed=3, vector_runs=1)
    seed_init, _, _ = audit._run_seeds(3, 0)
    model = audit.MLP.glorot(5, setup.hidden, 3, "softmax", np.random.default_rng(seed_init))
    release = np.asarray(vectors.set_index(["t", "kind"])["values"][(1, "release")], dtype=np.float64)
    model.set_flat(model.flat() - setup.learning_rate * release / len(setup.x))
    x_all = np.vstack([setup.x, setup.x_alt])
    y_all = np.append(setup.y, setup.y_alt)
    total, _, kept = model.clipped_gradients(x_all, y_all, setup.clip_norm, keep=[len(setup.x)])
    mu2 = np.asarray(vectors.set_index(["t", "kind"])["values"][(2, "mu_D")], dtype=np.float64)
    assert np.allclose(total - kept[0], mu2, rtol=1e-4, atol=1e-4)


def test_random_true_dataset_scores_wins_for_both_sides():
    rng = np.random.default_rng(7)
    setup = _setup(rng, z=0.5)
    setup.true_dataset = "random"
    runs, _, _ = audit.audit_block(setup, range(60), seed=4)
    assert set(runs["b_true"]) == {0, 1}
    assert (runs["win"] == ((runs["final_logodds"] > 0) == (runs["b_true"] == 0))).all()
    assert runs["win"].mean() > 0.8  # z = 0.5, k = 10: predicted Φ(√(20/2)) ≈ 0.999


@pytest.mark.parametrize("shape", [(8, 8), (28, 28)])
def test_vectorised_ssim_matches_scikit_image(shape):
    from skimage.metrics import structural_similarity

    rng = np.random.default_rng(8)
    a = rng.integers(0, 17, size=(4, *shape)).astype(float)
    b = rng.integers(0, 17, size=(3, *shape)).astype(float)
    b[0] = a[0]  # identical images: SSIM 1
    got = audit.ssim_matrix(a, b, data_range=16.0)
    ref = np.array([[structural_similarity(p, q, data_range=16.0) for q in b] for p in a])
    assert np.allclose(got, ref, rtol=1e-10, atol=1e-12)
    assert got[0, 0] == pytest.approx(1.0)


def test_rank_neighbours_brute_force():
    rng = np.random.default_rng(9)
    members = rng.integers(0, 2, size=(12, 30)).astype(float)
    pool = rng.integers(0, 2, size=(15, 30)).astype(float)
    table = audit.rank_neighbours(members, pool, "hamming", top=3)
    hamming = np.array([[np.sum(m != p) for p in pool] for m in members])
    top = table[(table["neighbourhood"] == "bounded") & (table["rank"] == "max1")].iloc[0]
    assert hamming[top["idx_x"], top["idx_xprime"]] == hamming.max() == top["score"]
    low = table[(table["neighbourhood"] == "bounded") & (table["rank"] == "min1")].iloc[0]
    assert low["score"] == hamming.min()
    unb = table[(table["neighbourhood"] == "unbounded") & (table["rank"] == "max1")].iloc[0]
    assert unb["score"] == hamming.max(axis=1).max()
    manhattan = audit.rank_neighbours(members, pool, "manhattan", top=1, unbounded_criterion="within_D")
    within = np.abs(members[:, None] - members[None]).sum(axis=(1, 2))
    assert manhattan[manhattan["neighbourhood"] == "unbounded"]["idx_x"].iloc[0] == int(np.argmax(within))


def test_summary_against_direct_counts():
    rng = np.random.default_rng(10)
    setup = _setup(rng, z=2.0)
    runs, steps, _ = audit.audit_block(setup, range(50), seed=5)
    keys = {"dataset": "toy", "config": "bounded-ls-rho0.9-max1", "neighbourhood": "bounded", "sens_mode": "ls",
            "rho_target": 0.9, "pair": "max1"}
    runs = runs.assign(**{**audit.describe(setup, 0.9, 0.01, "legacy"), **keys})
    steps = steps.assign(**keys)
    row = idf.summarize_audit(runs, steps, alpha=0.05).iloc[0]
    wins = int(runs["win"].sum())
    assert row["adv_empirical"] == pytest.approx(2 * wins / 50 - 1)
    lo = stats.beta.ppf(0.025, wins, 50 - wins + 1)
    assert row["adv_ci_low"] == pytest.approx(2 * lo - 1, rel=1e-9)
    beliefs = special.expit(runs["final_logodds"])
    assert row["delta_prime"] == pytest.approx(np.mean(beliefs > 0.9))
    assert row["max_belief"] == pytest.approx(beliefs.max())
    # LS mode: every informative step's effective multiplier is z, so ε′ from
    # sensitivities is ε(z) for a run whose 10 steps all have LS_t > 0.
    assert (steps.groupby("run_id")["ls_t"].min() > 0).any()  # the maximum is such a run
    assert row["eps_prime_sens_max"] == pytest.approx(idf.full_batch_epsilon(2.0, 10, 0.01), rel=1e-9)
    assert row["ls_violations"] == 0 and row["runs"] == 50
    assert row["eta_undefined_steps"] == int((steps["ls_t"] == 0).sum())  # η_t undefined where LS_t = 0


def test_eta_ks_check_is_bonferroni_adjusted_over_the_configurations():
    # Oracle: scipy's KS p-value per configuration times the number of configurations
    # (capped at 1); the raw p-value stays. A configuration whose η_t is shifted by 0.5
    # (as a wrong LLR sign would at z = 2) is flagged at the family-wise level 0.01.
    rng = np.random.default_rng(14)
    runs, steps = [], []
    for mode, config in (("ls", "a"), ("gs", "b"), ("ls", "c")):
        setup = _setup(rng, mode=mode, z=2.0)
        r, s, _ = audit.audit_block(setup, range(30), seed=8)
        keys = {"dataset": "toy", "config": config, "neighbourhood": "bounded", "sens_mode": mode,
                "rho_target": 0.9, "pair": "max1"}
        runs.append(r.assign(**{**audit.describe(setup, 0.9, 0.01, "legacy"), **keys}))
        steps.append(s.assign(**keys, eta_t=s["eta_t"] + (0.5 if config == "c" else 0.0)))
    summary = idf.summarize_audit(pd.concat(runs), pd.concat(steps)).set_index("config")
    assert (summary["eta_ks_configurations"] == 3).all()
    for config, s in zip("abc", steps, strict=True):
        raw = stats.kstest(s["eta_t"].dropna(), "norm").pvalue
        assert summary.loc[config, "eta_ks_pvalue"] == pytest.approx(raw, rel=1e-12)
        assert summary.loc[config, "eta_ks_pvalue_bonferroni"] == pytest.approx(min(1.0, 3 * raw), rel=1e-12)
    assert summary["eta_ks_failed"].tolist() == [False, False, True]


def test_eps_prime_from_beliefs_stays_finite_at_huge_log_odds():
    # logit(expit(Λ)) overflows to ∞ for Λ ≳ 37 in float64 (expit rounds to 1); ε′ from
    # the maximum belief must be the maximum log-odds in favour of the true dataset
    # exactly (oracle: the planted value, rel 1e-12).
    rng = np.random.default_rng(15)
    setup = _setup(rng, z=2.0)
    runs, steps, _ = audit.audit_block(setup, range(5), seed=9)
    keys = {"dataset": "toy", "config": "c", "neighbourhood": "bounded", "sens_mode": "ls", "rho_target": 0.9,
            "pair": "max1"}
    runs = runs.assign(**{**audit.describe(setup, 0.9, 0.01, "legacy"), **keys})
    assert special.logit(special.expit(800.0)) == math.inf  # the overflow being avoided
    for b_true, planted in ((0, 800.0), (1, -800.0)):
        huge = runs.copy()
        huge.loc[huge["run_id"] == 3, ["final_logodds", "b_true"]] = [planted, b_true]
        row = idf.summarize_audit(huge, steps.assign(**keys)).iloc[0]
        assert row["eps_prime_belief"] == pytest.approx(800.0, rel=1e-12) and not row["eps_prime_belief_clamped"]
        assert row["max_belief"] == 1.0


def test_setup_refuses_bad_values():
    rng = np.random.default_rng(11)
    with pytest.raises(ValueError, match="neighbourhood"):
        _setup(rng, neighbourhood="replace")
    with pytest.raises(ValueError, match="x′"):
        audit.AuditSetup(x=np.zeros((3, 2)), y=np.zeros(3, int), x_alt=None, y_alt=None, star=0,
                         x_test=np.zeros((1, 2)), y_test=np.zeros(1, int), classes=2, neighbourhood="bounded",
                         mode="ls", noise_multiplier=1.0)


@pytest.mark.parametrize(("key", "value"), [("clip_norm", math.nan), ("learning_rate", math.nan),
                                            ("noise_multiplier", math.inf), ("noise_multiplier", math.nan),
                                            ("clip_norm", 0.0), ("learning_rate", -1.0)])
def test_setup_refuses_non_finite_numbers_naming_them(key, value):
    # A NaN clip norm or learning rate used to train on NaN weights and report "health failures: 0".
    rng = np.random.default_rng(11)
    good = _setup(rng)
    fields = {f: getattr(good, f) for f in good.__dataclass_fields__}
    with pytest.raises(ValueError, match=rf"AuditSetup {key} must be a finite number"):
        audit.AuditSetup(**{**fields, key: value})


def test_setup_refuses_empty_or_non_finite_data():
    rng = np.random.default_rng(11)
    good = _setup(rng)
    fields = {f: getattr(good, f) for f in good.__dataclass_fields__}
    bad_x = good.x.copy()
    bad_x[1, 0] = np.nan
    with pytest.raises(ValueError, match="AuditSetup x holds non-finite"):
        audit.AuditSetup(**{**fields, "x": bad_x})
    with pytest.raises(ValueError, match="AuditSetup x_test must be a non-empty"):
        audit.AuditSetup(**{**fields, "x_test": good.x_test[:0], "y_test": good.y_test[:0]})


def test_ssim_shape_mismatch_names_image_shape_and_d():
    a = np.zeros((2, 64))
    with pytest.raises(ValueError, match=r"image_shape \[7, 7\] \(49 pixels\) does not match the d = 64"):
        audit.distance_matrix(a, a, "ssim", image_shape=(7, 7), data_range=1.0)
    with pytest.raises(ValueError, match="data_range must be a finite number"):
        audit.distance_matrix(a, a, "ssim", image_shape=(8, 8), data_range=math.nan)


def test_blocks_cover_every_run_once():
    ids = [i for b in audit_grid.blocks(103, 25) for i in audit_grid.block_run_ids(b, 103, 25)]
    assert ids == list(range(103))
    configs = audit_grid.audit_configs({"rho_beta": [0.75, 0.9], "runs_per_rho": {"0.9": 7}},
                                  {"neighbourhoods": ["bounded"], "modes": ["ls", "gs"], "pairs": ["max1"], "runs": 3})
    assert len(configs) == 4 and configs["bounded-ls-rho0.9-max1"]["runs"] == 7
    with pytest.raises(ValueError, match="runs_per_rho"):  # never a silent fallback to audit.runs
        audit_grid.audit_configs({"rho_beta": [0.9], "runs_per_rho": {"0.95": 7}},
                                 {"neighbourhoods": ["bounded"], "modes": ["ls"], "pairs": ["max1"], "runs": 3})
    assert isinstance(pd.DataFrame(configs).T, pd.DataFrame)


def _frame(rng, n=60, d=6):
    x = rng.integers(0, 2, size=(n, d)).astype(np.float32)
    split = np.array(["train"] * 40 + ["holdout"] * 20)
    return pd.DataFrame({"example_id": np.arange(n), "split": split, "label": rng.integers(0, 2, size=n),
                         "x": list(x)}), {"splits": {"members": "train", "nonmembers": "holdout", "utility": "holdout"},
                                          "classes": 2}


def test_explicit_neighbour_and_pool_choices():
    rng = np.random.default_rng(12)
    examples, info = _frame(rng)
    data = audit.audit_data(examples, info, 10, pool="other_members")
    assert data["pool"].tolist() == list(range(10, 40))  # members after D, never test rows
    assert audit.audit_data(examples, info, 10)["pool"].tolist() == list(range(40, 60))
    options = {"n": 10, "delta": 0.01, "distance": "hamming", "hidden_units": [4], "output": "sigmoid",
               "learning_rate": 0.01, "neighbour": {"x_star": 3, "x_prime": 45}}
    shared = {"steps": 3, "clip_norm": 1.0, "optimizer": "sgd", "conversion": "legacy", "true_dataset": "D",
              "block_size": 2, "seed": 0, "vector_runs": 0}
    params = {"neighbourhood": "bounded", "mode": "gs", "rho_beta": 0.9, "pair": "explicit", "runs": 3}
    runs, steps, _ = audit.run_audit_block(examples, info, pd.DataFrame(), "toy", options, shared,
                                           "bounded-gs-rho0.9-explicit", params, block=1)
    assert runs["run_id"].tolist() == [2] and runs["example_id_xstar"].iloc[0] == 3
    assert runs["example_id_xprime"].iloc[0] == 45 and (steps["pair"] == "explicit").all()
    with pytest.raises(ValueError, match="outside D"):
        audit.run_audit_block(examples, info, pd.DataFrame(), "toy", {**options, "neighbour": {"x_star": 3, "x_prime": 5}},
                              shared, "bounded-gs-rho0.9-explicit", params, block=0)
    with pytest.raises(ValueError, match="not among the first 10 members"):
        audit.run_audit_block(examples, info, pd.DataFrame(), "toy", {**options, "neighbour": {"x_star": 30}},
                              shared, "bounded-gs-rho0.9-explicit", {**params, "neighbourhood": "unbounded"}, block=0)


def test_eta_is_the_standardized_llr_and_its_ks_check_catches_a_wrong_llr(monkeypatch):
    # Bernau et al. 2021, Lemma 1: η_t = (L_t − s·LS_t²/(2σ_t²))·σ_t/LS_t (s = ±1 for b = 0/1) equals
    # ⟨n_t, d_t⟩/(σ_t LS_t), recomputed here from the stored noise and gradient vectors
    # (float32 storage: rel 1e-4). Both true datasets are played (true_dataset random).
    rng = np.random.default_rng(13)
    setup = _setup(rng, z=2.0, steps=10)
    setup.true_dataset = "random"
    runs, steps, vectors = audit.audit_block(setup, range(6), seed=7, vector_runs=6)
    assert set(runs["b_true"]) == {0, 1}
    v = vectors.set_index(["run_id", "t", "kind"])["values"]
    for row in steps[steps["ls_t"] > 0].itertuples():
        noise, g_star, g_alt = (np.asarray(v[(row.run_id, row.t, k)], dtype=np.float64)
                                for k in ("noise", "g_xstar", "g_xprime"))
        d = g_star - g_alt
        assert row.eta_t == pytest.approx(noise @ d / (row.sigma_t * np.linalg.norm(d)), rel=1e-4, abs=1e-4)
    assert steps.loc[steps["ls_t"] == 0, "eta_t"].isna().all()
    # With the right LLR the KS p-value of η ~ N(0, 1) is Uniform(0, 1): over 20 seeds
    # (40 runs × 10 steps each, trained on D) a KS test of the p-values against U(0, 1)
    # gives p > 0.01. A wrong LLR (sign flipped: η shifts by −LS/σ = −1/z = −0.5; divided
    # by σ instead of σ²: η scaled by σ_t = 2 LS_t) drives every p-value below 1e-6 with
    # 400 steps.
    setup.true_dataset = "D"

    def ks(seed):
        _, s, _ = audit.audit_block(setup, range(40), seed=seed)
        return stats.kstest(s["eta_t"].dropna(), "norm").pvalue

    correct = np.array([ks(seed) for seed in range(100, 120)])
    assert stats.kstest(correct, "uniform").pvalue > 0.01
    right = idf.log_likelihood_ratio
    for wrong in (lambda *a: -right(*a), lambda r, mu, mu_p, sigma: right(r, mu, mu_p, sigma) * sigma):
        monkeypatch.setattr(idf, "log_likelihood_ratio", wrong)
        assert max(ks(seed) for seed in range(100, 103)) < 1e-6
    monkeypatch.undo()


def test_figure_6_plots_the_belief_in_the_true_dataset(monkeypatch, tmp_path):
    # With true_dataset random, half the runs train on D′: the box must show the belief in
    # the dataset trained on. Oracle: the loop's final_belief_D for b = 0 and
    # 1 − final_belief_D for b = 1 (abs 1e-12), read from the data handed to boxplot.
    from matplotlib.axes import Axes

    from dpaudit.plots import identifiability as plots

    rng = np.random.default_rng(16)
    setup = _setup(rng, z=0.5)
    setup.true_dataset = "random"
    runs, _, _ = audit.audit_block(setup, range(20), seed=10)
    assert set(runs["b_true"]) == {0, 1}
    runs = runs.assign(dataset="toy", pair="max1", rho_target=0.9, neighbourhood="bounded", sens_mode="ls")
    drawn, boxplot = [], Axes.boxplot

    def spy(self, data, *args, **kwargs):
        drawn.append([np.asarray(x, dtype=np.float64) for x in data])
        return boxplot(self, data, *args, **kwargs)

    monkeypatch.setattr(Axes, "boxplot", spy)
    plots.figure_6(runs, tmp_path / "f6.png", tmp_path / "f6.pdf")
    expected = np.where(runs["b_true"] == 0, runs["final_belief_D"], 1.0 - runs["final_belief_D"])
    assert np.allclose(drawn[0][0], expected, rtol=0, atol=1e-12)
    assert (drawn[0][0] > 0.5).mean() > 0.8  # z = 0.5: the adversary mostly wins on either side


def test_success_table_uses_the_configured_targets():
    # The paper's table is at ρ_β = 0.9; a configuration without 0.9 used to give an empty
    # table. Now every configured target has its block, and a target with no
    # configuration is refused.
    from dpaudit.plots import identifiability as plots

    rng = np.random.default_rng(17)
    setup = _setup(rng, z=2.0)
    runs, steps, _ = audit.audit_block(setup, range(10), seed=12)
    keys = {"dataset": "toy", "config": "bounded-ls-rho0.75-max1", "neighbourhood": "bounded", "sens_mode": "ls",
            "rho_target": 0.75, "pair": "max1"}
    summary = idf.summarize_audit(runs.assign(**{**audit.describe(setup, 0.75, 0.01, "legacy"), **keys}),
                                  steps.assign(**keys))
    table = plots.success_table(summary, [0.75])
    assert len(table) == 1 and table["rho_target"].tolist() == [0.75]
    assert table["adv_empirical"].iloc[0] == summary["adv_empirical"].iloc[0]
    with pytest.raises(ValueError, match="no audit configuration at rho_beta"):
        plots.success_table(summary, [0.75, 0.9])


def test_the_analytic_figures_normal_densities_are_scipys_bit_for_bit():
    # Oracle: scipy.stats.norm (pdf, logpdf, cdf), which figures 1-2 used before issue 36;
    # tolerance: none (np.array_equal), on the figures' grids, their σ (δ = 1e-6, ε = 6, 3)
    # and other scales.
    from dpaudit.plots import identifiability as plots

    grids = (np.linspace(-4, 4, 801), np.linspace(-10, 10, 801), np.linspace(-4, 5, 901))
    scales = [plots._sigma(eps, 1e-6) for eps in (6.0, 3.0, 1.0, 0.5)] + [0.05, 1.0, 2.5]
    for r in grids:
        for s in scales:
            for loc in (0, 1):
                assert np.array_equal(plots._norm_pdf(r, loc, s), stats.norm.pdf(r, loc, s))
                assert np.array_equal(plots._norm_logpdf(r, loc, s), stats.norm.logpdf(r, loc, s))
    for s in scales:
        assert special.ndtr(1 / (2 * s)) == stats.norm.cdf(1 / (2 * s))
