"""DP-SGD training: update rule against a numpy oracle, noise scale, determinism.

Microbatch oracle: TF Privacy's num_microbatches rule written out in numpy
(np.array_split into k groups, mean gradient per group, clip each to C, sum, ÷ k).
Dropout oracle: the same backpropagation with fixed per-example masks multiplied
after each hidden activation (inverted Dropout: 0 or 1/(1 − rate)).
"""

import json
import logging
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dpaudit import _tf
from dpaudit.io import read_json, write_json
from dpaudit.training.dense_taps import dropout_mask_sampler
from dpaudit.training.models import build_mlp, logits_model
from dpaudit.training.params import normalize_params
from dpaudit.training.train import build_train_step, train_model

tf = _tf.tf
IMPLEMENTATIONS = ["fast_gradient_clipping", "masked_ghost_clipping", "vectorized_optimizer"]
SPLITS = {"members": "train", "nonmembers": "holdout", "utility": "test"}


def _softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def numpy_per_example_grads(weights, x, y, masks=None):
    """Analytic per-example CE gradients of a ReLU MLP (or linear softmax) in float64.

    weights = [W1, b1, ..., W_L, b_L] as returned by Keras get_weights(); masks =
    one [n, units] Dropout mask per hidden layer (multiplied after the ReLU), or None.
    Returns a list (per parameter array) of arrays with a leading example axis.
    """
    w = [np.asarray(a, np.float64) for a in weights]
    x = np.asarray(x, np.float64)
    n_hidden = len(w) // 2 - 1
    masks = [np.ones((len(x), w[2 * i].shape[1])) for i in range(n_hidden)] if masks is None else masks
    masks = [np.asarray(m, np.float64) for m in masks]
    acts, pre = [x], []
    for i in range(0, len(w) - 2, 2):
        a = acts[-1] @ w[i] + w[i + 1]
        pre.append(a)
        acts.append(np.maximum(a, 0.0) * masks[i // 2])
    z = acts[-1] @ w[-2] + w[-1]
    delta = _softmax(z)
    delta[np.arange(len(y)), y] -= 1.0  # dCE/dz = p − onehot(y)
    grads = [None] * len(w)
    for layer in range(len(w) // 2 - 1, -1, -1):
        grads[2 * layer] = acts[layer][:, :, None] * delta[:, None, :]
        grads[2 * layer + 1] = delta.copy()
        if layer > 0:
            delta = (delta @ w[2 * layer].T) * masks[layer - 1] * (pre[layer - 1] > 0)
    return grads


def numpy_clipped_sum(weights, x, y, clip, masks=None):
    grads = numpy_per_example_grads(weights, x, y, masks)
    norms = np.sqrt(sum(np.sum(g.reshape(len(x), -1) ** 2, axis=1) for g in grads))
    factor = np.minimum(1.0, clip / norms)
    return [np.tensordot(factor, g, axes=1) for g in grads], norms


def numpy_microbatch_clipped_sum(weights, x, y, clip, k):
    """Σ_j clip_C(mean gradient of group j) over np.array_split groups, and the group norms.

    Empty groups (fewer examples than k) are skipped: they have no gradient.
    """
    grads = numpy_per_example_grads(weights, x, y)
    groups = [g for g in np.array_split(np.arange(len(x)), k) if len(g)]
    means = [[g[idx].mean(axis=0) for g in grads] for idx in groups]
    norms = np.array([math.sqrt(sum(float(np.sum(a**2)) for a in mean)) for mean in means])
    factor = np.minimum(1.0, clip / norms)
    return [sum(f * mean[i] for f, mean in zip(factor, means, strict=True)) for i in range(len(grads))], norms


def _data(n=6, d=3, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.normal(size=(n, d)) * 2.0).astype(np.float32)
    y = rng.integers(0, 3, size=n).astype(np.int64)
    return x, y


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("hidden", [[], [5]])
def test_noiseless_dp_step_equals_numpy_clipped_sum_over_expected_batch(implementation, hidden):
    _tf.configure(2, 0)
    x, y = _data()
    model = build_mlp(3, {"hidden_units": hidden, "n_classes": 3}, seed=3)
    net = logits_model(model)
    w0 = net.get_weights()
    _, norms = numpy_clipped_sum(w0, x, y, 1.0)
    # Clip at the median norm so both branches of the clip are exercised.
    lr, clip, expected_b = 0.5, float(np.median(norms)), 8.0  # |b| = 6 ≠ B = 8
    step, _, _ = build_train_step(
        net, mechanism="dpsgd", optimizer="sgd", learning_rate=lr, clip_norm=clip,
        noise_multiplier=0.0, expected_batch_size=expected_b, implementation=implementation,
    )
    clipped, norms = numpy_clipped_sum(w0, x, y, clip)
    assert np.any(norms > clip * 1.01) and np.any(norms < clip * 0.99)
    _, _, fraction = step(tf.constant(x), tf.constant(y))
    for before, after, g in zip(w0, net.get_weights(), clipped, strict=True):
        # SGD: θ' = θ − lr·(Σ clip(g_i))/B. float32 training vs float64 oracle: 1e-5.
        np.testing.assert_allclose(after, before - lr * g / expected_b, rtol=1e-4, atol=1e-5)
    # No norm lies within 1% of C (checked above), so float32 vs float64 cannot flip a
    # count; the fraction itself is a float32 ratio (rel 1e-6).
    assert float(fraction) == pytest.approx(np.mean(norms > clip), rel=1e-6)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_noiseless_masked_ghost_step_under_fixed_dropout_masks_equals_numpy(optimizer):
    """σ = 0, fixed masks: θ' = θ − lr·Σ_i clip_C(g_i)/B with every g_i taken under its own mask.

    The masks enter both the norms and the update; the oracle is float64 backprop
    with the same masks (numpy_per_example_grads), independent of TensorFlow.
    """
    _tf.configure(2, 0)
    rate, n = 0.5, 8
    x, y = _data(n=n, seed=11)
    model = build_mlp(3, {"hidden_units": [6, 5], "dropout": rate, "n_classes": 3}, seed=7)
    net = logits_model(model)
    w0 = net.get_weights()
    rng = np.random.default_rng(4)
    masks = [(rng.random((n, units)) >= rate).astype(np.float32) / (1 - rate) for units in (6, 5)]
    masks[0][0] = 0.0  # example 0 loses every unit of layer 1: only biases after it move
    clipped, norms = numpy_clipped_sum(w0, x, y, 1.0, masks)
    lr, clip, expected_b = 0.3, float(np.median(norms)), 10.0  # |b| = 8 ≠ B = 10
    clipped, norms = numpy_clipped_sum(w0, x, y, clip, masks)
    assert np.any(norms > clip * 1.01) and np.any(norms < clip * 0.99)
    unmasked, _ = numpy_clipped_sum(w0, x, y, clip)
    # The masks change the answer, so a step that ignored them would fail below.
    assert max(np.max(np.abs(a - b)) for a, b in zip(clipped, unmasked, strict=True)) > 1e-2
    fixed = [tf.constant(m) for m in masks]
    step, _, _ = build_train_step(
        net, mechanism="dpsgd", optimizer=optimizer, learning_rate=lr, clip_norm=clip,
        noise_multiplier=0.0, expected_batch_size=expected_b, implementation="masked_ghost_clipping",
        dropout_masks=lambda m: fixed,
    )
    _, _, fraction = step(tf.constant(x), tf.constant(y))
    for before, after, g in zip(w0, net.get_weights(), clipped, strict=True):
        mean_gradient = g / expected_b
        if optimizer == "sgd":
            expected = before - lr * mean_gradient
        else:
            # Adam's first step (Kingma & Ba 2015 with Keras' un-corrected ε = 1e-7,
            # β2 = 0.999): θ − lr·ĝ/(|ĝ| + ε/√(1 − β2)).
            expected = before - lr * mean_gradient / (np.abs(mean_gradient) + 1e-7 / math.sqrt(1 - 0.999))
        # float32 training vs float64 oracle: rtol 1e-4, atol 1e-5 (Adam: only entries
        # with |ĝ| ≫ ε̂ are sign-stable, so compare those).
        keep = np.abs(mean_gradient) > 1e-4 if optimizer == "adam" else np.ones_like(before, bool)
        np.testing.assert_allclose(after[keep], expected[keep], rtol=1e-4, atol=1e-5)
    assert float(fraction) == pytest.approx(np.mean(norms > clip), rel=1e-6)


def test_noiseless_masked_ghost_step_with_its_own_sampler_equals_numpy_under_those_masks():
    """The default path end to end: the masks the step draws itself (seeded) are the ones
    its norms and its update use; a second sampler with the same seed replays them."""
    _tf.configure(2, 0)
    rate, n, seed = 0.4, 9, 21
    x, y = _data(n=n, seed=12)
    model = build_mlp(3, {"hidden_units": [6, 5], "dropout": rate, "n_classes": 3}, seed=8)
    net = logits_model(model)
    w0 = net.get_weights()
    masks = [a.numpy() for a in dropout_mask_sampler([(rate, 6), (rate, 5)], seed)(tf.constant(n))]
    _, norms = numpy_clipped_sum(w0, x, y, 1.0, masks)
    ordered = np.sort(norms)
    # C between two norms (n is odd: the median would equal one norm exactly).
    lr, clip, expected_b = 0.3, float(0.5 * (ordered[3] + ordered[4])), 9.0
    clipped, norms = numpy_clipped_sum(w0, x, y, clip, masks)
    assert np.all(np.abs(norms / clip - 1.0) > 0.01) and np.any(norms > clip)
    step, _, _ = build_train_step(
        net, mechanism="dpsgd", optimizer="sgd", learning_rate=lr, clip_norm=clip,
        noise_multiplier=0.0, expected_batch_size=expected_b, implementation="masked_ghost_clipping",
        dropout_seed=seed,
    )
    _, _, fraction = step(tf.constant(x), tf.constant(y))
    for before, after, g in zip(w0, net.get_weights(), clipped, strict=True):
        # float32 training vs float64 oracle: rtol 1e-4, atol 1e-5.
        np.testing.assert_allclose(after, before - lr * g / expected_b, rtol=1e-4, atol=1e-5)
    assert float(fraction) == pytest.approx(np.mean(norms > clip), rel=1e-6)


def test_dropout_mask_sampler_has_inverted_dropout_law_and_is_seeded():
    _tf.configure(2, 0)
    layers = [(0.3, 50), (0.5, 40)]
    m = 400
    masks = [a.numpy() for a in dropout_mask_sampler(layers, seed=5)(tf.constant(m))]
    again = [a.numpy() for a in dropout_mask_sampler(layers, seed=5)(tf.constant(m))]
    other = [a.numpy() for a in dropout_mask_sampler(layers, seed=6)(tf.constant(m))]
    for (rate, width), mask, same, different in zip(layers, masks, again, other, strict=True):
        assert mask.shape == (m, width)
        np.testing.assert_array_equal(mask, same)
        assert not np.array_equal(mask, different)
        values = np.unique(mask)
        np.testing.assert_allclose(values, [0.0, 1.0 / (1.0 - rate)], rtol=1e-6)
        kept = int(np.count_nonzero(mask))
        # Keep count ~ Binomial(m·width, 1 − rate): two-sided test at α = 1e-3 (seeded).
        assert stats.binomtest(kept, mask.size, 1.0 - rate).pvalue > 1e-3
    # Successive draws (successive steps) give new masks.
    sample = dropout_mask_sampler(layers, seed=5)
    first, second = sample(tf.constant(m))[0].numpy(), sample(tf.constant(m))[0].numpy()
    assert not np.array_equal(first, second)


def test_dropout_dpsgd_trains_with_masked_ghost_clipping(tmp_path):
    info = train_model(_frame(), SPLITS, _dp_params(epochs=1, dropout=0.3), tmp_path / "m.keras",
                       threads=2, log=LOG)
    assert info["dp_implementation"] == "masked_ghost_clipping"
    assert info["optimizer_class"] == "tf_keras.SGD"
    assert info["seeds"]["dropout_masks"] == [3, 2]
    assert 0.0 <= info["clipped_fraction"] <= 1.0
    with pytest.raises(ValueError, match="not exact with Dropout"):
        train_model(_frame(), SPLITS, _dp_params(dropout=0.3, dp_implementation="fast_gradient_clipping"),
                    "unused.keras", threads=2, log=LOG)


def test_batch_size_above_member_count_is_refused_with_key_run_and_count(tmp_path):
    df = _frame()  # 120 members
    from dpaudit.logs import InputRefusal

    # a Refusal: the job prints one line, no traceback (dpaudit.logs.job_logging, issue 46)
    with pytest.raises(InputRefusal, match=r"run 'batch_size~121': batch_size=121 exceeds the 120 members "
                                         r"\(training examples\) of dataset toy; write batch_size <= 120"):
        train_model(df, SPLITS, _dp_params(batch_size=121), tmp_path / "m.keras", threads=2, log=LOG,
                    run="batch_size~121", dataset="toy")
    assert not (tmp_path / "m.keras").exists()
    # B = n is allowed (q = 1) and recorded as given.
    info = train_model(df, SPLITS, {"mechanism": "baseline", "epochs": 1, "batch_size": 120, "hidden_units": []},
                       tmp_path / "full.keras", threads=2, log=LOG, run="batch_size~120")
    assert info["batch_size"] == 120 and info["sampling_probability"] == 1.0


# (m, k): uneven groups 3/2/2; the batch-mean (k = 1, as in Negoescu et al. 2023); k divides m
# (TF Privacy's reshape rows); and m < k, which leaves two groups empty.
@pytest.mark.parametrize(("m", "k"), [(7, 3), (6, 1), (6, 2), (2, 4)])
@pytest.mark.parametrize("hidden", [[], [5]])
def test_noiseless_microbatch_step_equals_numpy_clipped_group_means_over_k(m, k, hidden):
    _tf.configure(2, 0)
    x, y = _data(n=m, seed=m + k)
    model = build_mlp(3, {"hidden_units": hidden, "n_classes": 3}, seed=5)
    net = logits_model(model)
    w0 = net.get_weights()
    _, norms = numpy_microbatch_clipped_sum(w0, x, y, 1.0, k)
    ordered = np.sort(norms)
    # With ≥ 2 groups, C between the two smallest norms clips all groups but one;
    # the single batch-mean group is clipped to half its norm.
    clip = float(0.5 * (ordered[0] + ordered[1])) if len(norms) > 1 else float(0.5 * norms[0])
    lr = 0.5
    step, _, _ = build_train_step(
        net, mechanism="dpsgd", optimizer="sgd", learning_rate=lr, clip_norm=clip,
        noise_multiplier=0.0, expected_batch_size=100.0,  # ignored: the divisor is k
        implementation="microbatch_group_gradients", microbatches=k,
    )
    clipped, norms = numpy_microbatch_clipped_sum(w0, x, y, clip, k)
    assert np.all(np.abs(norms / clip - 1.0) > 0.01)
    _, _, fraction = step(tf.constant(x), tf.constant(y))
    for before, after, g in zip(w0, net.get_weights(), clipped, strict=True):
        # SGD: θ' = θ − lr·(Σ_j clip(ḡ_j))/k. float32 training vs float64 oracle: 1e-5.
        np.testing.assert_allclose(after, before - lr * g / k, rtol=1e-4, atol=1e-5)
    # Over the min(m, k) non-empty groups; float32 ratio, rel 1e-6.
    assert float(fraction) == pytest.approx(np.mean(norms > clip), rel=1e-6)


@pytest.mark.parametrize(
    ("implementation", "microbatches"),
    [(impl, None) for impl in IMPLEMENTATIONS] + [("microbatch_group_gradients", 3)],
)
def test_noise_std_is_sigma_c_over_divisor(implementation, microbatches):
    _tf.configure(2, 0)
    tf.random.set_seed(123)
    x, y = _data(n=4)
    model = build_mlp(3, {"hidden_units": [], "n_classes": 3}, seed=1)
    net = logits_model(model)
    sigma, clip, expected_b, lr = 2.0, 0.5, 5.0, 1.0
    step, _, _ = build_train_step(
        net, mechanism="dpsgd", optimizer="sgd", learning_rate=lr, clip_norm=clip,
        noise_multiplier=sigma, expected_batch_size=expected_b, implementation=implementation,
        microbatches=microbatches,
    )
    w0 = net.get_weights()
    if microbatches is None:
        clipped, _ = numpy_clipped_sum(w0, x, y, clip)
        divisor = expected_b  # per-example DP-SGD divides by B
    else:
        clipped, _ = numpy_microbatch_clipped_sum(w0, x, y, clip, microbatches)
        divisor = microbatches  # TF Privacy divides by the number of microbatches
    mean_update = np.concatenate([g.ravel() for g in clipped]) / divisor
    draws = 150
    noise = []
    for _ in range(draws):
        net.set_weights(w0)
        step(tf.constant(x), tf.constant(y))
        update = np.concatenate([(b - a).ravel() for a, b in zip(net.get_weights(), w0, strict=True)]) / lr
        noise.append(update - mean_update)
    noise = np.concatenate(noise)
    scale = sigma * clip / divisor
    # Σ (noise/scale)² ~ χ²(k) with k = draws × 12 parameters if the noise is
    # N(0, (σC/divisor)²). Two-sided test at α = 1e-3 (seeded, so deterministic).
    k = noise.size
    statistic = float(np.sum((noise / scale) ** 2))
    assert stats.chi2.ppf(5e-4, k) < statistic < stats.chi2.ppf(1 - 5e-4, k)
    assert abs(noise.mean()) < 4 * scale / math.sqrt(k)


def _frame(n_train=120, n_hold=60, n_test=60, d=5, seed=0):
    rng = np.random.default_rng(seed)
    n = n_train + n_hold + n_test
    x = rng.normal(size=(n, d)).astype(np.float32)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int64)
    split = np.array(["train"] * n_train + ["holdout"] * n_hold + ["test"] * n_test)
    return pd.DataFrame({"example_id": np.arange(n, dtype=np.int64) + 100, "split": split, "label": y, "x": list(x)})


LOG = logging.getLogger("test_training")


def test_train_info_and_saved_model(tmp_path):
    df = _frame()
    params = {
        "mechanism": "dpsgd", "epochs": 2, "batch_size": 20, "learning_rate": 0.1, "optimizer": "sgd",
        "momentum": 0.9, "hidden_units": [8], "activation": "relu", "dropout": 0.0, "clip_norm": 1.0,
        "target_epsilon": 5.0, "delta": 1e-3, "accountant": "rdp", "sampling": "poisson", "seed": 4,
    }
    info = train_model(df, SPLITS, params, tmp_path / "model.keras", threads=2, log=LOG)
    assert info["epsilon"] <= 5.0 and info["epsilon"] > 4.9
    assert info["noise_multiplier"] > 0 and info["sampling_probability"] == 20 / 120
    assert info["steps"] == 12 and info["expected_batch_size"] == 20.0
    assert info["neighbouring_relation"] == "add_or_remove_one" and info["accountant"] == "rdp"
    assert info["optimizer_class"] == "tf_keras.SGD" and info["dp_implementation"] == "fast_gradient_clipping"
    assert len(info["history"]) == 2 and {"loss", "accuracy", "seconds"} <= set(info["history"][0])
    assert info["microbatches"] is None and info["accounting_note"] is None
    assert 0.0 <= info["clipped_fraction"] <= 1.0
    assert all(0.0 <= r["clipped_fraction"] <= 1.0 for r in info["history"])
    assert set(info["versions"]) == {"tensorflow", "tf_keras", "tensorflow_privacy", "dp_accounting", "numpy"}
    write_json(tmp_path / "train.json", info)
    assert read_json(tmp_path / "train.json")["steps"] == 12
    # Loads with no custom objects and no optimizer.
    loaded = _tf.keras.models.load_model(tmp_path / "model.keras")
    assert loaded.optimizer is None
    assert loaded.get_layer("logits") is not None


def test_baseline_info_has_infinite_epsilon(tmp_path):
    df = _frame()
    info = train_model(
        df, SPLITS, {"mechanism": "baseline", "epochs": 1, "batch_size": 30, "hidden_units": [4], "seed": 1,
                  "learning_rate": 0.5},  # 4 steps: enough to beat the constant predictor (no divergence flag)
        tmp_path / "m.keras", threads=2, log=LOG,
    )
    assert info["epsilon"] == math.inf and info["noise_multiplier"] == 0.0
    assert info["clipped_fraction"] is None and info["microbatches"] is None
    assert info["loss_diverged"] is False and info["warnings"] == []
    json.dumps(info, default=str)  # plain Python values only (inf is handled by io.write_json)


def test_empty_poisson_batches_get_noise_only_updates(tmp_path):
    df = _frame(n_train=20)
    info = train_model(
        df, SPLITS,
        {"mechanism": "dpsgd", "epochs": 3, "batch_size": 1, "hidden_units": [], "clip_norm": 1.0,
         "noise_multiplier": 1.0, "delta": 1e-3, "seed": 2},
        tmp_path / "m.keras", threads=2, log=LOG,
    )
    # q = 1/20, 60 steps: P(no empty batch) = (1 − 0.95^20)^60 ≈ 1e-12.
    assert info["empty_batches"] > 0
    weights = _tf.keras.models.load_model(tmp_path / "m.keras").get_weights()
    assert all(np.all(np.isfinite(w)) for w in weights)


def _dp_params(**overrides):
    return {"mechanism": "dpsgd", "epochs": 2, "batch_size": 20, "hidden_units": [6], "clip_norm": 1.0,
            "noise_multiplier": 1.0, "delta": 1e-3, "seed": 3, **overrides}


def test_microbatch_train_json_records_microbatches_note_and_clipped_fraction(tmp_path):
    df = _frame()
    params = _dp_params(microbatches=4, target_epsilon=5.0, noise_multiplier=None)
    info = train_model(df, SPLITS, params, tmp_path / "m.keras", threads=2, log=LOG)
    write_json(tmp_path / "train.json", info)
    saved = read_json(tmp_path / "train.json")
    assert saved["microbatches"] == 4 and saved["hyperparameters"]["microbatches"] == 4
    assert saved["dp_implementation"] == "microbatch_group_gradients"
    assert "2C" in saved["accounting_note"] and "not a proven" in saved["accounting_note"]
    # The accountant ignores microbatching: same calibration as per-example clipping.
    per_example = train_model(df, SPLITS, {**params, "microbatches": None}, tmp_path / "p.keras",
                              threads=2, log=LOG)
    assert saved["noise_multiplier"] == per_example["noise_multiplier"]
    assert saved["epsilon"] == per_example["epsilon"]
    assert 0.0 <= saved["clipped_fraction"] <= 1.0
    assert all(0.0 <= r["clipped_fraction"] <= 1.0 for r in saved["history"])
    assert saved["microbatch_dropped_examples"] == 0  # Poisson: groups of unequal size, nothing dropped


def test_shuffle_microbatches_drop_the_remainder(tmp_path):
    df = _frame()  # n = 120, B = 20, k = 3: 2 examples dropped per step, 6 steps per epoch
    info = train_model(df, SPLITS, _dp_params(sampling="shuffle", microbatches=3), tmp_path / "m.keras",
                       threads=2, log=LOG)
    assert info["steps"] == 12 and info["microbatch_dropped_examples"] == 12 * 2
    assert [r["examples_seen"] for r in info["history"]] == [6 * 18, 6 * 18]


@pytest.mark.parametrize("microbatches", [None, 2])
def test_clipped_fraction_is_zero_for_huge_c_and_one_for_tiny_c(tmp_path, microbatches):
    df = _frame()
    fractions = [
        train_model(df, SPLITS, _dp_params(epochs=1, clip_norm=c, microbatches=microbatches),
                    tmp_path / f"{c}.keras", threads=2, log=LOG)["clipped_fraction"]
        for c in (1e6, 1e-6)
    ]
    # CE gradients of a softmax model are nonzero and far below 1e6.
    assert fractions == [0.0, 1.0]


def test_microbatches_param_validation():
    base = {"mechanism": "dpsgd", "clip_norm": 1.0, "noise_multiplier": 1.0, "delta": 1e-3}
    assert normalize_params(base)["microbatches"] is None
    assert normalize_params({**base, "microbatches": math.nan})["microbatches"] is None
    assert normalize_params({**base, "microbatches": 32.0})["microbatches"] == 32
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="microbatches"):
            normalize_params({**base, "microbatches": bad})
    # dpsgd-only, like target_epsilon: a baseline ignores a dataset-wide value.
    assert normalize_params({"mechanism": "baseline", "microbatches": 32})["microbatches"] is None
    with pytest.raises(ValueError, match="exceeds the batch size"):
        train_model(_frame(), SPLITS, _dp_params(microbatches=21), "unused.keras", threads=2, log=LOG)
    with pytest.raises(ValueError, match="dp_implementation"):
        train_model(_frame(), SPLITS, _dp_params(microbatches=2, dp_implementation="vectorized_optimizer"),
                    "unused.keras", threads=2, log=LOG)


@pytest.mark.parametrize(("dropout", "microbatches"), [(0.0, None), (0.3, None), (0.3, 4)])
def test_same_seed_gives_identical_models(tmp_path, dropout, microbatches):
    df = _frame()
    params = {"mechanism": "dpsgd", "epochs": 2, "batch_size": 20, "hidden_units": [6], "dropout": dropout,
              "clip_norm": 1.0, "noise_multiplier": 1.0, "delta": 1e-3, "seed": 9, "microbatches": microbatches}
    train_model(df, SPLITS, params, tmp_path / "a.keras", threads=2, log=LOG)
    train_model(df, SPLITS, params, tmp_path / "b.keras", threads=2, log=LOG)
    train_model(df, SPLITS, {**params, "seed": 10}, tmp_path / "c.keras", threads=2, log=LOG)
    load = _tf.keras.models.load_model
    wa, wb, wc = (load(tmp_path / f"{k}.keras").get_weights() for k in "abc")
    assert all(np.array_equal(a, b) for a, b in zip(wa, wb, strict=True))
    assert not all(np.array_equal(a, c) for a, c in zip(wa, wc, strict=True))


# ---------------------------------------------------------------- defaults, non-finite values, divergence


def test_library_defaults_equal_the_schema_defaults():
    from dpaudit.config_schema import load_schema
    from dpaudit.training.linear import DEFAULT_REGULARIZATION
    from dpaudit.training.params import DEFAULTS

    schema = load_schema()
    shared = {k: v["default"] for k, v in schema["properties"]["training"]["properties"].items() if "default" in v}
    grid = {k: v["default"] for k, v in schema["$defs"]["grid"]["items"]["properties"].items() if "default" in v}
    # Exceptions (documented at DEFAULTS): a baseline has no clip_norm; the library takes
    # the resolved numeric δ; linear_regularization None means DEFAULT_REGULARIZATION;
    # allow_large_delta is a prepare_dataset check.
    assert shared.pop("linear_regularization") == DEFAULT_REGULARIZATION and DEFAULTS["linear_regularization"] is None
    assert shared.pop("delta") == "auto" and DEFAULTS["delta"] is None
    assert grid.pop("clip_norm") == [1.0] and DEFAULTS["clip_norm"] is None
    shared.pop("allow_large_delta")
    compared = {**shared, **{k: v[0] for k, v in grid.items()}}
    assert {k: DEFAULTS[k] for k in compared} == compared
    assert set(compared) >= {"learning_rate", "momentum", "optimizer", "epochs", "batch_size", "seed"}


@pytest.mark.parametrize(("key", "value"), [("momentum", math.nan), ("dropout", math.nan),
                                            ("learning_rate", math.nan), ("learning_rate", math.inf),
                                            ("clip_norm", math.nan), ("noise_multiplier", math.inf),
                                            ("momentum", 1.0), ("dropout", -0.1), ("learning_rate", 0.0)])
def test_non_finite_or_out_of_range_hyperparameters_are_refused_naming_them(key, value):
    base = {"mechanism": "dpsgd", "clip_norm": 1.0, "noise_multiplier": 1.0, "delta": 1e-3}
    # (a NaN clip_norm is NA, i.e. missing, which dpsgd refuses as "dpsgd needs clip_norm > 0")
    with pytest.raises(ValueError, match=rf"^({key} must be a finite number|dpsgd needs {key} > 0)"):
        normalize_params({**base, key: value})


def test_nan_delta_for_dpsgd_is_refused():
    with pytest.raises(ValueError, match="delta"):
        normalize_params({"mechanism": "dpsgd", "clip_norm": 1.0, "noise_multiplier": 1.0, "delta": math.nan})


def test_non_finite_training_loss_fails_naming_run_and_learning_rate(tmp_path):
    df = _frame(n_train=20, n_hold=4, n_test=4, d=2)
    df["x"] = [row * np.float32(1e30) for row in df["x"]]
    params = {"mechanism": "baseline", "epochs": 2, "batch_size": 10, "hidden_units": [], "learning_rate": 1e10,
              "sampling": "shuffle"}
    with pytest.raises(ValueError, match=r"run 'lr~1e10' \(dataset toy\): training loss became non-finite .*"
                                         r"learning_rate=1e\+10"):
        train_model(df, SPLITS, params, tmp_path / "m.keras", threads=2, log=LOG, run="lr~1e10", dataset="toy")
    assert not (tmp_path / "m.keras").exists()
