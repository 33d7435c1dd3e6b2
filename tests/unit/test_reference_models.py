"""Tests for dpaudit.reference.pool_training: K reference models stacked on a model axis.

Oracles: ``train_model`` itself (model k is the run ``train_model`` releases on model k's
half with seed k and the recipe's hyperparameters: same weights, same q_k = B/n_k, steps
and accountant ε; the target's σ and ε are train_model's on the target's n members),
``dpaudit.dp.accounting`` called directly, the stack's own model trained alone, the
one-model-at-a-time fallback, and the attacks' power on an overfit baseline.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd
import pytest

from dpaudit.metrics import attacks as A
from dpaudit.reference import pool_training as R
from dpaudit.training.train import train_model

LOG = logging.getLogger("test_reference_models")
SPLITS = {"members": "members", "nonmembers": "nonmembers", "utility": "utility"}


def _data(seed=0, n=120, d=8, flip=0.1):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(2 * n, d)).astype(np.float32)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int64)
    noisy = rng.random(2 * n) < flip
    y[noisy] = 1 - y[noisy]
    return x, y


def _recipe(mechanism, **extra):
    p = dict(mechanism=mechanism, epochs=3, batch_size=24, learning_rate=0.05, hidden_units=[16], n_classes=2)
    if mechanism == "dpsgd":
        p.update(clip_norm=1.0, delta=1e-5, target_epsilon=2.0)
    p.update(extra)
    return p


def _train_model_weights(x, y, members, params, seed, tmp_path):
    """train_model on the rows ``members`` of P (in P's order) with ``seed``: (weights, info)."""
    frame = pd.DataFrame({"example_id": np.arange(len(y)), "split": np.where(members, "members", "nonmembers"),
                          "label": y, "x": list(x)})
    frame = pd.concat([frame, frame.iloc[:4].assign(split="utility")], ignore_index=True)
    path = tmp_path / f"m{seed}.keras"
    info = train_model(frame[frame.split != "nonmembers"], SPLITS, {**params, "seed": int(seed)}, path,
                       threads=1, log=LOG)
    from dpaudit.training.models import load_model

    model = load_model(path)
    return [w for layer in model.layers for w in layer.get_weights()], info


def _exact_half(rng, size, n):
    row = np.zeros(size, bool)
    row[rng.permutation(size)[:n]] = True
    return row


@pytest.mark.parametrize("mechanism", ["baseline", "dpsgd", "adam"])
@pytest.mark.parametrize("population", [240, 180])
def test_stack_model_equals_train_model_run(mechanism, population, tmp_path):
    """Model 0 of a stack of 3 and train_model on model 0's half (its n_0 rows, not the
    target's n = 120: |P| = 2n and |P| = 1.5n, the default split's) with its seed and the
    recipe's hyperparameters end with the same weights, at the same q = B/n_0 and steps
    (DP-SGD at σ = 0: the noise is the one part drawn from another generator)."""
    x, y = _data()
    x, y = x[:population], y[:population]
    n = 120
    params = _recipe("dpsgd", noise_multiplier=0.0, target_epsilon=None) if mechanism == "dpsgd" else (
        _recipe("baseline", optimizer="adam", learning_rate=0.01) if mechanism == "adam" else _recipe("baseline"))
    inc = R.inclusion_matrix(3, 3, population)
    seeds = R.reference_seeds(3, 3)
    pool = R.train_reference_models(x, y, params, n_members=n, inclusion=inc, seeds=seeds, return_weights=True)
    assert pool.vectorized
    n_0 = int(inc[0].sum())
    assert n_0 != n
    weights, info = _train_model_weights(x, y, inc[0], params, seeds[0], tmp_path)
    assert info["n_members"] == n_0 == pool.info["training_rows"][0]
    assert pool.sampling_probability[0] == info["sampling_probability"] == 24 / n_0
    assert pool.steps[0] == info["steps"] and pool.info["steps_per_epoch"][0] == info["steps_per_epoch"]
    assert pool.target["sampling_probability"] == 24 / n and pool.target["steps"] == 3 * (n // 24)
    for a, b in zip(weights, pool.weights, strict=True):
        np.testing.assert_allclose(b[0], a, atol=1e-5, rtol=0)
    assert pool.history["loss"][0, -1] == pytest.approx(info["history"][-1]["loss"], rel=1e-5)
    assert pool.history["accuracy"][0, -1] == pytest.approx(info["history"][-1]["accuracy"], rel=1e-5)


@pytest.mark.parametrize("mechanism", ["baseline", "dpsgd"])
def test_one_model_alone_equals_its_slice_of_the_stack(mechanism):
    x, y = _data(2)
    params = _recipe(mechanism)
    pool = R.train_reference_models(x, y, params, n_members=120, count=4, seed=9, return_weights=True)
    alone = R.train_reference_models(x, y, params, n_members=120, inclusion=pool.inclusion[2:3],
                                     seeds=pool.seeds[2:3], return_weights=True)
    for a, b in zip(alone.weights, pool.weights, strict=True):
        np.testing.assert_allclose(a[0], b[2], atol=1e-5, rtol=0)
    np.testing.assert_allclose(alone.logits[0], pool.logits[2], atol=1e-5)
    # the inclusion bits: a fixed seed, about half of P per model
    np.testing.assert_array_equal(pool.inclusion, R.inclusion_matrix(9, 4, 240))
    assert abs(pool.inclusion.mean() - 0.5) < 0.05


def test_accountant_values_equal_train_model(tmp_path):
    """σ and the target's q, steps, ε: train_model's on n = 120 members; model k's q_k, steps
    and ε_k: train_model's on model k's half at that σ (the recipe's noise multiplier)."""
    x, y = _data(4)
    x, y = x[:180], y[:180]  # |P| = 1.5 n: halves of about 90 rows
    params = _recipe("dpsgd", target_epsilon=1.5)
    pool = R.train_reference_models(x, y, params, n_members=120, count=2, seed=0)
    _, info = _train_model_weights(x, y, _exact_half(np.random.default_rng(0), 180, 120), params, 5, tmp_path)
    assert pool.noise_multiplier == info["noise_multiplier"] and pool.noise_multiplier > 0
    assert pool.target["noise_multiplier"] == info["noise_multiplier"]
    assert pool.target["epsilon"] == info["epsilon"]
    assert pool.target["sampling_probability"] == info["sampling_probability"]
    assert pool.target["steps"] == info["steps"]
    fixed = {**params, "target_epsilon": None, "noise_multiplier": pool.noise_multiplier}
    for k in range(2):
        _, own = _train_model_weights(x, y, pool.inclusion[k], fixed, pool.seeds[k], tmp_path)
        assert own["noise_multiplier"] == pool.noise_multiplier
        assert pool.sampling_probability[k] == own["sampling_probability"] and pool.steps[k] == own["steps"]
        assert pool.epsilon[k] == own["epsilon"]
        # fewer rows than the target's n: a larger rate amplifies less
        assert own["n_members"] < 120 and pool.epsilon[k] > pool.target["epsilon"]


@pytest.mark.parametrize(("accountant", "sampling"), [("rdp", "poisson"), ("pld", "poisson"), ("rdp", "shuffle")])
def test_model_epsilon_is_the_accountant_at_the_models_rate(accountant, sampling):
    """Each model's ε_k equals dpaudit.dp.accounting.dpsgd_epsilon at (σ, B/n_k, ⌊n_k/B⌋·epochs),
    exactly; with shuffled batches it is the target's (σ and epochs only)."""
    from dpaudit.dp import accounting

    params = _recipe("dpsgd", noise_multiplier=1.3, target_epsilon=None, accountant=accountant, sampling=sampling)
    acc = R.recipe_accounting(params, 120)
    sizes = [90, 91, 120, 90, 75]
    own = R.model_accounting(acc, sizes)
    assert own["training_rows"] == sizes and own["noise_multiplier"] == 1.3
    for s, q, steps, eps in zip(sizes, own["sampling_probability"], own["steps"], own["epsilon"], strict=True):
        assert q == 24 / s and steps == 3 * (s // 24)
        want = accounting.dpsgd_epsilon(1.3, 24 / s, 3 * (s // 24), 1e-5, accountant, sampling)["epsilon"]
        assert eps == want
    assert own["epsilon"][2] == acc["epsilon"]  # n_k = n: the target's own call
    if sampling == "shuffle":
        assert own["epsilon"] == [acc["epsilon"]] * len(sizes)
    else:
        assert own["epsilon"][4] > own["epsilon"][0] > acc["epsilon"]
    baseline = R.model_accounting(R.recipe_accounting(_recipe("baseline"), 120), sizes)
    assert baseline["epsilon"] == [math.inf] * len(sizes) and baseline["steps"][0] == 9


def test_a_half_smaller_than_the_batch_is_refused():
    acc = R.recipe_accounting(_recipe("baseline", batch_size=100), 120)
    with pytest.raises(ValueError, match="reference model 1 has 99 training rows"):
        R.model_accounting(acc, [100, 99, 101])


def test_stacked_dpsgd_matches_separate_runs_in_distribution(tmp_path):
    """Final-epoch training loss and accuracy of 8 stacked DP-SGD models against 4
    train_model runs on random halves of the same P (each row with probability ½, as the
    pool draws them; different seeds) at the recipe's σ: same law, so the means differ by
    less than 4 standard errors of the difference. |P| = 1.5·n, the default split's."""
    x, y = _data(5, n=150)
    x, y = x[:225], y[:225]
    params = _recipe("dpsgd", target_epsilon=4.0, epochs=4, batch_size=30)
    pool = R.train_reference_models(x, y, params, n_members=150, count=8, seed=1)
    fixed = {**params, "target_epsilon": None, "noise_multiplier": pool.noise_multiplier}
    rng = np.random.default_rng(7)
    sep_loss, sep_acc = [], []
    for s in range(4):
        _, info = _train_model_weights(x, y, rng.random(225) < 0.5, fixed, 100 + s, tmp_path)
        sep_loss.append(info["history"][-1]["loss"])
        sep_acc.append(info["history"][-1]["accuracy"])
    for stacked, separate in ((pool.history["loss"][:, -1], sep_loss), (pool.history["accuracy"][:, -1], sep_acc)):
        stacked, separate = np.asarray(stacked), np.asarray(separate)
        se = math.sqrt(stacked.var(ddof=1) / stacked.size + separate.var(ddof=1) / separate.size)
        assert abs(stacked.mean() - separate.mean()) < 4 * max(se, 1e-3), (stacked, separate)
    # the loss trajectory goes down in both
    assert pool.history["loss"][:, -1].mean() < pool.history["loss"][:, 0].mean()


def test_fallback_loop_is_logged_and_agrees_with_the_stack(caplog):
    x, y = _data(6)
    params = _recipe("dpsgd", noise_multiplier=0.0, target_epsilon=None)
    stacked = R.train_reference_models(x, y, params, n_members=120, count=2, seed=2, return_weights=True)
    with caplog.at_level(logging.WARNING):
        looped = R.train_reference_models(x, y, params, n_members=120, count=2, seed=2, return_weights=True,
                                          force_loop=True)
    assert not looped.vectorized and "one at a time" in caplog.text
    for a, b in zip(looped.weights, stacked.weights, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=0)
    dropout = R.train_reference_models(x, y, _recipe("baseline", dropout=0.2), n_members=120, count=2, seed=2)
    assert not dropout.vectorized and "dropout" in dropout.fallback_reason
    assert dropout.logits.shape == (2, 240, 2)


def test_power_on_an_overfit_baseline():
    """Small n, 60 epochs, 20 % label noise, no regularization: with 16 reference models,
    LiRA online and RMIA beat the loss threshold (TPR at 1 % FPR ≥ 2× and higher AUC) for
    at least 15 of the 17 leave-one-out targets of one stack of 17 (targets share the
    data and the stack, so they are not 17 independent seeds)."""
    rng = np.random.default_rng(3)
    n, d = 300, 20
    x = rng.normal(size=(2 * n, d)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64)
    flip = rng.random(2 * n) < 0.2
    y[flip] = 1 - y[flip]
    params = dict(mechanism="baseline", epochs=60, batch_size=32, learning_rate=0.05, hidden_units=[64],
                  n_classes=2)
    pool = R.train_reference_models(x, y, params, n_members=n, count=17, seed=0)
    assert pool.history["accuracy"][:, -1].min() > 0.97  # memorized, label noise included
    phi = A.logit_confidence(pool.logits, y)
    wins = {"lira_online": 0, "rmia": 0}
    for target in range(17):
        keep = np.arange(17) != target
        member = pool.inclusion[target]
        res = A.run_attacks(phi[target], phi[keep], pool.inclusion[keep], population=np.flatnonzero(~member),
                            attacks=["loss", "lira_online", "rmia"])
        got = {}
        for name, s in res.items():
            rows = A.attack_statistics(s.scores, member, delta=1e-5, seed=target)
            got[name] = (rows[rows.metric == "attack_auc"].value.iloc[0],
                         rows[(rows.metric == "tpr_at_fpr") & (rows.fpr_target == 0.01)].value.iloc[0])
        for name in wins:
            wins[name] += got[name][0] > got["loss"][0] and got[name][1] >= 2 * got["loss"][1]
    assert wins["lira_online"] >= 15 and wins["rmia"] >= 15, wins


def test_shuffle_sampling_stacks_too():
    """Fixed-size batches of each model's own half (its own step count): alone = its slice."""
    x, y = _data(8)
    params = _recipe("dpsgd", sampling="shuffle")
    pool = R.train_reference_models(x, y, params, n_members=120, count=3, seed=4, return_weights=True)
    alone = R.train_reference_models(x, y, params, n_members=120, inclusion=pool.inclusion[1:2],
                                     seeds=pool.seeds[1:2], return_weights=True)
    assert pool.vectorized and np.all(np.isfinite(pool.history["loss"]))
    for a, b in zip(alone.weights, pool.weights, strict=True):
        np.testing.assert_allclose(a[0], b[1], atol=1e-5, rtol=0)


def test_recorded_train_info_gives_sigma_and_epsilon_without_the_accountant(tmp_path, monkeypatch):
    """A recipe's train.json: its σ and ε are the pool's (no calibration); another recipe's is refused."""
    x, y = _data(4)
    params = _recipe("dpsgd", target_epsilon=1.5)
    _, info = _train_model_weights(x, y, _exact_half(np.random.default_rng(0), 240, 120), params, 5, tmp_path)
    from dpaudit.dp import accounting

    def refuse(*args, **kwargs):
        raise AssertionError("the accountant was called")

    monkeypatch.setattr(accounting, "calibrate_noise", refuse)
    monkeypatch.setattr(accounting, "dpsgd_epsilon", refuse)
    acc = R.recipe_accounting(params, 120, info)
    assert acc["noise_multiplier"] == info["noise_multiplier"] and acc["epsilon"] == info["epsilon"]
    with pytest.raises(ValueError, match="not of this recipe"):
        R.recipe_accounting({**params, "target_epsilon": 3.0}, 120, info)
    with pytest.raises(ValueError, match="not of this recipe"):
        R.recipe_accounting(params, 121, info)
