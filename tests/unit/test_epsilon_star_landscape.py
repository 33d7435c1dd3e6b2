"""The ε* landscape (Negoescu et al. Figs 1–2): labels, marginals, ε̄ and flags per strategy, and the adapters."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import integrate
from scipy.special import expit

from dpaudit.aggregate import RUN_COLUMNS, collect_metrics, summary_from_table
from dpaudit.contract.metrics import metric_rows
from dpaudit.io import read_parquet, write_json, write_parquet
from dpaudit.metrics.epsilon_star import NormalFit, epsilon_star_run_metrics, mechanism_epsilon_bar
from dpaudit.plots.landscape import (
    MIN_KDE_POINTS,
    density_curve,
    landscape_for_dataset,
    strategy_labels,
)
from tests.scripts.fake import FakeSnakemake, run_script


def test_density_needs_enough_points_and_keeps_its_mass_inside_the_support():
    assert density_curve(np.array([0.1, 0.2, 0.3, 0.4])) is None  # 4 < MIN_KDE_POINTS
    assert MIN_KDE_POINTS == 5
    values = np.random.default_rng(0).exponential(0.05, 40)  # ε*-like: piled up at 0
    grid, density = density_curve(values, lower=0.0, points=4000)
    assert grid[0] == 0.0 and (density >= 0).all()
    # Oracle: a reflected KDE is a probability density on [0, ∞); the plain KDE on the same
    # grid would lose the mass it puts below 0 (here about a third).
    mass = integrate.trapezoid(density, grid)
    assert mass == pytest.approx(1.0, abs=0.03), mass


def test_labels_name_the_target_epsilon_and_the_grid_values_that_vary():
    table = pd.DataFrame({
        "mechanism": ["baseline", "dpsgd", "dpsgd"], "target_epsilon": [np.nan, 1.0, 1.0],
        "clip_norm": [np.nan, 1.0, 10.0], "microbatches": [np.nan] * 3, "epochs": [10, 10, 10],
        "batch_size": [64, 64, 64], "learning_rate": [0.05] * 3, "model": ["mlp"] * 3,
    })
    assert strategy_labels(table) == ["non-DP", "ε = 1, C=1", "ε = 1, C=10"]
    # issue 33: a grid of models labels each strategy with its model (a text value)
    models = table.assign(clip_norm=[np.nan, 1.0, 1.0], model=["mlp", "mlp", "cnn"])
    assert strategy_labels(models) == ["non-DP, model=mlp", "ε = 1, model=mlp", "ε = 1, model=cnn"]
    linear = pd.DataFrame({
        "mechanism": ["dpsgd", "output_perturbation", "objective_perturbation"], "target_epsilon": [1.0] * 3,
        "clip_norm": [1.0, np.nan, np.nan], "microbatches": [np.nan] * 3, "epochs": [10, np.nan, np.nan],
        "batch_size": [64, np.nan, np.nan], "learning_rate": [0.05, np.nan, np.nan], "model": ["mlp", None, None],
    })
    assert strategy_labels(linear) == ["ε = 1", "out-pert ε = 1", "obj-pert ε = 1"]


def _outputs(rng, shift, n=300, separated=False):
    split = np.repeat(["train", "holdout", "test"], n)
    centre = np.where(split == "train", -shift, 0.0)
    loss = rng.normal(centre, 1.0) + (np.where(split == "train", -100.0, 0.0) if separated else 0.0)
    p_true = expit(-loss)
    return pd.DataFrame({"example_id": np.arange(split.size), "split": split, "label": rng.integers(0, 2, split.size),
                         "loss_logit": loss, "loss_ce": np.log1p(np.exp(loss)), "p_true": p_true,
                         "correct": p_true > 0.5})


@pytest.fixture(scope="module")
def metrics_table():
    """2 baseline seeds and 6 DP seeds (one of them with perfectly separated losses)."""
    rng = np.random.default_rng(4)
    frames, runs = [], []
    plan = [("baseline", None, s, 1.0, False) for s in range(2)] + [("dpsgd", 1.0, s, 0.3, s == 5) for s in range(6)]
    for mechanism, target, seed, shift, separated in plan:
        run = f"{mechanism}_{seed}"
        frame = epsilon_star_run_metrics(
            _outputs(rng, shift, separated=separated), members_split="train", nonmembers_split="holdout",
            utility_split="test", classes=2, delta=1e-3, grid_size=2_000,
            bootstrap={"resamples": 20, "seed": 0, "grid_size": 1_000},
            goodness_of_fit={"n_samples": 100, "repeats": 2, "alpha": 0.05, "seed": 0})
        frames.append(metric_rows("epsilon_star", frame, dataset="toy", run=run))
        runs.append({"dataset": "toy", "run": run, "mechanism": mechanism, "target_epsilon": target,
                     "clip_norm": 1.0 if target else None, "microbatches": None, "epochs": 10, "batch_size": 64,
                     "learning_rate": 0.05, "seed": seed, "model": "mlp", "accountant_epsilon": target or math.inf,
                     "accountant_delta": 1e-3, "noise_multiplier": None, "accountant": "rdp", "sampling": "poisson",
                     "loss_diverged": False, "loss_divergence_reason": None, "no_skill": False,
                     "no_skill_reason": None, "training_note": None, "instability_note": None})
    runs = pd.DataFrame(runs).astype({"target_epsilon": "Float64", "clip_norm": "Float64", "microbatches": "Int64",
                                      "epochs": "Int64", "batch_size": "Int64", "learning_rate": "Float64",
                                      "seed": "Int64", "model": "string", "noise_multiplier": "float64"})
    return frames, runs[RUN_COLUMNS]


def test_landscape_strategies_carry_epsilon_bar_and_flags(metrics_table, tmp_path):
    frames, runs = metrics_table
    files = []
    for i, frame in enumerate(frames):
        files.append(tmp_path / f"m{i}.parquet")
        write_parquet(files[-1], frame)
    table = collect_metrics(files, runs)
    strategies, diagnostics, html = landscape_for_dataset(table, summary_from_table(table), "toy", {},
                                                          tmp_path / "l.png", tmp_path / "l.pdf")
    assert len(diagnostics) == 8 and html.count("<tr>") == 9 and "—" in html  # the separated run: undefined
    assert (tmp_path / "l.png").stat().st_size > 0 and (tmp_path / "l.pdf").read_bytes()[:4] == b"%PDF"
    dp = strategies.set_index("mechanism").loc["dpsgd"]
    # the separated seed has no ε* (NaN, flagged) and is left out of the strategy mean
    separated = table[(table["run"] == "dpsgd_5") & (table["metric"] == "epsilon_star") & (table["loss"] == "logit")]
    assert separated["value"].isna().all() and separated["none_kept"].all() and separated["separated"].all()
    assert dp["n_models"] == 5
    # ε̄ equals the library bound over the 5 defined seeds' fits (oracle: direct call)
    rows = table[(table["metric"] == "epsilon_star") & (table["loss"] == "logit") & (table["estimator"] == "parametric")
                 & table["run"].isin([f"dpsgd_{s}" for s in range(5)])]
    fits = [NormalFit(*r) for r in rows[["mu_tr", "sd_tr", "mu_pop", "sd_pop"]].to_numpy(float)]
    assert dp["eps_bar"] == pytest.approx(mechanism_epsilon_bar(fits, 1e-3).eps_bar, rel=1e-12)
    assert dp["n_parametric_on_boundary"] == rows["on_boundary"].sum()


def test_metric_and_landscape_adapters(tmp_path):
    rng = np.random.default_rng(8)
    outputs, info, train = tmp_path / "outputs.parquet", tmp_path / "dataset.json", tmp_path / "train.json"
    write_parquet(outputs, _outputs(rng, 0.5))
    write_json(info, {"splits": {"members": "train", "nonmembers": "holdout", "utility": "test"}, "classes": 2})
    write_json(train, {"delta": 1e-3})
    options = {"grid_size": 2_000, "alpha": 1.0, "empirical_filter": 0.001,
               "bootstrap": {"resamples": 10, "level": 0.9, "seed": 3, "grid_size": 1_000},
               "goodness_of_fit": {"enabled": True, "n_samples": 50, "repeats": 2, "alpha": 0.05, "seed": 0},
               "permutation_null": {"permutations": 30, "level": 0.95, "seed": 1}}
    out = tmp_path / "metric.parquet"
    run_script("metric_epsilon_star", FakeSnakemake(
        "metric_epsilon_star", input={"outputs": str(outputs), "info": str(info), "train": str(train)},
        output={"table": str(out)}, params={"options": options}, wildcards={"dataset": "toy", "run": "r"},
        log=[tmp_path / "log.txt"]))
    frame = read_parquet(out)
    eps = frame[frame["metric"] == "epsilon_star"]
    assert len(eps) == 4 and (eps["boot_resamples"] == 10).all() and (eps["boot_level"] == 0.9).all()
    assert eps["ceiling"].notna().all() and (frame["metric"] == "normal_fit_pvalue").sum() == 4
    null = frame[frame["metric"] == "within_permutation_null"]
    assert len(null) == 2 and (null["estimator"] == "empirical").all() and (null["null_permutations"] == 30).all()
    options["bootstrap"]["resamples"] = 0
    options["goodness_of_fit"]["enabled"] = False
    options["permutation_null"]["permutations"] = 0
    run_script("metric_epsilon_star", FakeSnakemake(
        "metric_epsilon_star", input={"outputs": str(outputs), "info": str(info), "train": str(train)},
        output={"table": str(out)}, params={"options": options}, wildcards={"dataset": "toy", "run": "r"},
        log=[tmp_path / "log.txt"]))
    frame = read_parquet(out)
    assert frame["boot_low"].isna().all() and not (frame["metric"] == "normal_fit_pvalue").any()
    assert not (frame["metric"] == "within_permutation_null").any()
