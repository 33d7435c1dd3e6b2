"""Output and objective perturbation as grid mechanisms (dpaudit.training.linear).

Oracles: scikit-learn's LogisticRegression (fit_intercept=False, C = 1/(nΛ)) for the
non-private weights; σ(w·x/scale) in numpy for the saved Keras model; the
L2-Laplace law (‖b‖ ~ Gamma(d, 1/β), β = nΛε/2, so E‖b‖ = d/β) for the noise; the
closed-form gradient of the logistic loss for the extracted gradient norms.
"""

import logging
import math

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit
from sklearn.linear_model import LogisticRegression

from dpaudit.extract.extract import extract_per_example
from dpaudit.io import read_json, write_json
from dpaudit.training import linear
from dpaudit.training.models import features, load_model
from dpaudit.training.params import normalize_params
from dpaudit.training.train import train_model

SPLITS = {"members": "train", "nonmembers": "holdout", "utility": "test"}
LOG = logging.getLogger("test_linear_mechanisms")
MECHANISMS = ("output_perturbation", "objective_perturbation")


def _frame(n=(80, 40, 40), d=4, seed=0, classes=2):
    rng = np.random.default_rng(seed)
    total = sum(n)
    x = (rng.normal(size=(total, d)) * 3.0 + 1.0).astype(np.float32)  # norms well above 1: scaling matters
    if classes == 2:
        y = (x[:, 0] - 0.5 * x[:, 1] + rng.normal(size=total) > 1.0).astype(np.int64)
    else:
        y = rng.integers(0, classes, size=total).astype(np.int64)
    split = np.repeat(["train", "holdout", "test"], n)
    return pd.DataFrame({"example_id": np.arange(total, dtype=np.int64) + 7, "split": split, "label": y,
                         "x": list(x)})


def _members(df):
    members = df[df["split"] == "train"]
    x = features(members).astype(np.float64)
    return x, members["label"].to_numpy(np.int64)


def _params(mechanism, **overrides):
    return {"mechanism": mechanism, "target_epsilon": 2.0, "seed": 5, "delta": 1e-3,
            "linear_regularization": 0.05, **overrides}


@pytest.mark.parametrize("lam", [1.0, 0.05, 0.002])
def test_nonprivate_weights_equal_sklearn_logistic_regression(lam):
    x, y = _members(_frame())
    x = x / linear.feature_scale(x)
    n = len(x)
    # ε = ∞ is not allowed; a huge ε makes the noise vanish (E‖b‖ = 2d/(nΛε)) and shows
    # that the released point is A(x) plus exactly the recorded noise.
    released, record = linear.release_weights(x, 2.0 * y - 1.0, "output_perturbation", 1e12, lam,
                                              np.random.default_rng(0))
    oracle = LogisticRegression(fit_intercept=False, C=1.0 / (n * lam), solver="newton-cholesky", tol=1e-12,
                                max_iter=1000)
    w_sklearn = oracle.fit(x, y).coef_.ravel()
    np.testing.assert_allclose(record["nonprivate_weights_norm"], np.linalg.norm(w_sklearn), rtol=1e-7)
    np.testing.assert_allclose(released, w_sklearn, atol=1e-8)
    assert record["noise_norm"] < 1e-9 and record["beta"] == pytest.approx(n * lam * 1e12 / 2)


def test_output_perturbation_noise_has_mean_norm_d_over_beta():
    # ‖b‖ ~ Gamma(d, 1/β): mean d/β, sd √d/β. Over K = 4000 seeded runs the mean of
    # ‖b‖ is within 4 standard errors (4·√d/(β√K), about 3 % of d/β for d = 4)
    # and the mean noise vector is within 4 standard errors of 0 per coordinate
    # (coordinate variance E‖b‖²/d = (d + 1)/β²).
    x, y = _members(_frame())
    x = x / linear.feature_scale(x)
    n, d = x.shape
    lam, eps, runs = 0.05, 2.0, 4000
    t = 2.0 * y - 1.0
    base, _ = linear.release_weights(x, t, "output_perturbation", 1e15, lam, np.random.default_rng(0))
    beta = n * lam * eps / 2
    norms, noise = [], []
    for seed in range(runs):
        released, record = linear.release_weights(x, t, "output_perturbation", eps, lam,
                                                  np.random.default_rng([seed, 3]))
        norms.append(record["noise_norm"])
        noise.append(released - base)
        assert record["beta"] == pytest.approx(beta) and record["expected_noise_norm"] == pytest.approx(d / beta)
    norms, noise = np.asarray(norms), np.asarray(noise)
    np.testing.assert_allclose(np.linalg.norm(noise, axis=1), norms, rtol=1e-9, atol=1e-12)
    assert abs(norms.mean() - d / beta) < 4 * math.sqrt(d) / beta / math.sqrt(runs)
    assert np.all(np.abs(noise.mean(axis=0)) < 4 * math.sqrt(d + 1) / beta / math.sqrt(runs))


def test_objective_perturbation_is_diffprivlib_with_c_one_over_n_lambda():
    x, y = _members(_frame())
    x = x / linear.feature_scale(x)
    n = len(x)
    lam = 0.05
    released, record = linear.release_weights(x, 2.0 * y - 1.0, "objective_perturbation", 2.0, lam,
                                              np.random.default_rng([5, 3]))
    assert record["C"] == pytest.approx(1.0 / (n * lam))
    assert record["algorithm"].startswith("diffprivlib-0.6.3")
    assert record["expected_noise_norm"] == pytest.approx(x.shape[1] * record["noise_scale"])
    assert record["released_weights_norm"] == pytest.approx(np.linalg.norm(released))


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_train_json_and_keras_model_probabilities(tmp_path, mechanism):
    df = _frame()
    info = train_model(df, SPLITS, _params(mechanism), tmp_path / "model.keras", threads=2, log=LOG,
                       run="r", dataset="toy", checkpoints=2, checkpoint_path=tmp_path / "checkpoints.npz")
    assert info["mechanism"] == mechanism and info["epsilon"] == 2.0 and info["delta"] == 0.0
    assert info["accountant"] == "pure" and info["neighbouring_relation"] == "replace_one"
    assert info["evaluation_delta"] == 1e-3 and info["linear_regularization"] == 0.05
    assert info["noise_multiplier"] is None and info["sampling_probability"] is None and info["steps"] is None
    assert info["seeds"] == {"seed": 5, "noise": [5, 3], "tf_global": 5}
    assert len(info["history"]) == 1 and 0 <= info["history"][0]["utility_accuracy"] <= 1
    assert "scipy" in info["versions"] and info["noise_norm"] > 0
    x_raw, y = _members(df)
    assert info["feature_scale"] == pytest.approx(np.linalg.norm(x_raw, axis=1).max())
    write_json(tmp_path / "train.json", info)
    assert read_json(tmp_path / "train.json")["feature_scale"] == pytest.approx(info["feature_scale"])

    # The saved model: P(y = 1 | x) = σ(w·x/scale) for every split's rows, w the released weights.
    model = load_model(tmp_path / "model.keras")
    kernel = model.get_layer("logits").get_weights()[0].astype(np.float64)
    assert kernel.shape == (x_raw.shape[1], 2) and not kernel[:, 0].any()
    w = kernel[:, 1]
    assert np.linalg.norm(w) == pytest.approx(info["released_weights_norm"], rel=1e-6)
    x_all = features(df).astype(np.float64)
    probabilities = model.predict(features(df), verbose=0).astype(np.float64)
    np.testing.assert_allclose(probabilities[:, 1], expit(x_all @ w / info["feature_scale"]), atol=2e-6)
    loss, accuracy = linear._loss_and_accuracy(x_raw / info["feature_scale"], y, w)
    assert info["history"][0]["loss"] == pytest.approx(loss, rel=1e-5)

    # Extraction: the loss is the logistic loss; the gradient norm is √2 × its gradient's norm.
    outputs, grads = extract_per_example(tmp_path / "model.keras", df, SPLITS, clip_norm=None,
                                         full_gradients=False)
    t = 2.0 * df["label"].to_numpy() - 1.0
    x_scaled = x_all / info["feature_scale"]
    margins = t * (x_scaled @ w)
    np.testing.assert_allclose(outputs["loss_ce"], np.logaddexp(0.0, -margins), rtol=1e-4, atol=1e-6)
    lr_grad_norm = expit(-margins) * np.linalg.norm(x_scaled, axis=1)
    np.testing.assert_allclose(grads["grad_norm"], math.sqrt(2) * lr_grad_norm, rtol=1e-4, atol=1e-7)
    assert (grads["clipped_norm"] == grads["grad_norm"]).all()


def test_same_seed_same_release_and_other_seed_differs(tmp_path):
    df = _frame()
    a = train_model(df, SPLITS, _params("output_perturbation"), tmp_path / "a.keras", threads=2, log=LOG)
    b = train_model(df, SPLITS, _params("output_perturbation"), tmp_path / "b.keras", threads=2, log=LOG)
    c = train_model(df, SPLITS, _params("output_perturbation", seed=6), tmp_path / "c.keras", threads=2, log=LOG)
    assert a["noise_norm"] == b["noise_norm"] != c["noise_norm"]
    assert a["nonprivate_weights_norm"] == c["nonprivate_weights_norm"]


def test_multiclass_dataset_refused_naming_dataset_and_mechanism(tmp_path):
    with pytest.raises(ValueError, match=r"objective_perturbation of run 'r'.*dataset 'digits' has 3 classes"):
        train_model(_frame(classes=3), SPLITS, _params("objective_perturbation"), tmp_path / "m.keras",
                    threads=2, log=LOG, run="r", dataset="digits")


def test_linear_params_validation():
    p = normalize_params({"mechanism": "output_perturbation", "target_epsilon": 1, "seed": 2})
    assert p == {"mechanism": "output_perturbation", "target_epsilon": 1.0, "seed": 2,
                 "linear_regularization": 1.0, "delta": None, "n_classes": None}
    # NA grid columns (the workflow's rows) are fine; set ones are refused.
    normalize_params({"mechanism": "output_perturbation", "target_epsilon": 1, "epochs": pd.NA, "clip_norm": None})
    with pytest.raises(ValueError, match=r"\['epochs', 'hidden_units'\] do not apply to mechanism output_perturbation"):
        normalize_params({"mechanism": "output_perturbation", "target_epsilon": 1, "epochs": 3, "hidden_units": [4]})
    with pytest.raises(ValueError, match="finite target_epsilon > 0"):
        normalize_params({"mechanism": "objective_perturbation"})
    with pytest.raises(ValueError, match="linear_regularization must be"):
        normalize_params({"mechanism": "objective_perturbation", "target_epsilon": 1, "linear_regularization": 0})
    with pytest.raises(ValueError, match="linear_regularization applies to"):
        normalize_params({"mechanism": "dpsgd", "target_epsilon": 1, "clip_norm": 1.0, "delta": 1e-5,
                          "linear_regularization": 1.0})
    assert "linear_regularization" not in normalize_params({"mechanism": "baseline"})


def test_downstream_readers_take_a_linear_train_json(tmp_path):
    # The real train.json of each linear mechanism through the ledger, the card, the
    # identifiability rows and the aggregation's run table: pure ε, δ = 0, no made-up σ/q/steps.
    from dpaudit.aggregate import load_train_infos, runs_frame
    from dpaudit.dp.card import privacy_card_from_info
    from dpaudit.dp.ledger import build_ledger
    from dpaudit.metrics.identifiability import run_identifiability

    df = _frame()
    infos, runs = [], {}
    for mechanism in MECHANISMS:
        info = train_model(df, SPLITS, _params(mechanism, target_epsilon=3.0), tmp_path / f"{mechanism}.keras",
                           threads=2, log=LOG)
        path = tmp_path / "results" / "toy" / mechanism / "train.json"
        write_json(path, {**info, "dataset": "toy", "run": mechanism})
        infos.append(read_json(path))
        runs[mechanism] = {"mechanism": mechanism, "target_epsilon": 3.0, "seed": 5}
    ledger = build_ledger(infos)
    rows = ledger.runs.set_index("run")
    assert (rows["epsilon"] == 3.0).all() and (rows["delta"] == 0.0).all() and rows["private"].all()
    assert (rows["rdp_composition"] == "pure_dp").all() and (rows["neighbouring_relation"] == "replace_one").all()
    assert rows["noise_multiplier"].isna().all() and (rows["notes"] == "").all()
    assert ledger.totals["basic_epsilon"].item() == 6.0 and ledger.totals["release_all_epsilon"].item() == 6.0
    card = privacy_card_from_info(infos[0])
    assert card.row["epsilon"] == 3.0 and card.row["delta"] == 0.0 and card.row["accountant"] == "pure"
    assert card.row["max_attack_accuracy_bound"] == pytest.approx(math.exp(3) / (1 + math.exp(3)))
    assert run_identifiability(infos[1]).set_index("metric").loc["rho_beta", "applicable"]
    paths = [tmp_path / "results" / "toy" / mechanism / "train.json" for mechanism in MECHANISMS]
    frame = runs_frame({"toy": runs}, load_train_infos(paths, [("toy", mechanism) for mechanism in MECHANISMS]))
    assert (frame["accountant_epsilon"] == 3.0).all() and (frame["accountant_delta"] == 0.0).all()
    assert frame["noise_multiplier"].isna().all() and (frame["accountant"] == "pure").all()
