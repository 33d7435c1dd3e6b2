"""The ``layerwise_clipping`` DP-SGD step on a CNN against one tape per example."""

import numpy as np
import pytest

from dpaudit import _tf
from dpaudit.training import layer_clipping as lc
from dpaudit.training.steps import NORM_CHECK_RTOL, MechanismPolicy, build_train_step

tf, keras = _tf.tf, _tf.keras


def _cnn(dropout=0.0, seed=0):
    layers = [keras.Input(shape=(36,)), keras.layers.Reshape((6, 6, 1)),
              keras.layers.Conv2D(4, 3, strides=1, padding="same", activation="relu",
                                  kernel_initializer=keras.initializers.GlorotUniform(seed),
                                  bias_initializer=keras.initializers.RandomNormal(0.0, 0.1, seed=seed + 1)),
              keras.layers.MaxPooling2D(2),
              keras.layers.Conv2D(6, 2, strides=2, activation="tanh",
                                  kernel_initializer=keras.initializers.GlorotUniform(seed + 2)),
              keras.layers.GroupNormalization(groups=2),
              keras.layers.Flatten()]
    if dropout:
        layers.append(keras.layers.Dropout(dropout))
    layers.append(keras.layers.Dense(3, kernel_initializer=keras.initializers.GlorotUniform(seed + 3)))
    return keras.Sequential(layers)


def _tape_clipped_sum(net, x, y, clip, masks=None):
    """(Σ_i clip_C(g_i) in float64, ‖g_i‖) from one tape per example."""
    chain = lc.model_chain(net)
    total, norms = [np.zeros(v.shape) for v in net.trainable_variables], []
    for i in range(len(y)):
        with tf.GradientTape() as tape:
            xi = x[i:i + 1]
            logits = net(xi, training=True) if masks is None else lc.reference_forward(
                chain, xi, [m[i:i + 1] for m in masks])
            loss = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(y[i:i + 1], logits))
        grads = [g.numpy().astype(np.float64) for g in tape.gradient(loss, net.trainable_variables)]
        norm = np.sqrt(sum(np.sum(g ** 2) for g in grads))
        norms.append(norm)
        total = [t + g * min(1.0, clip / norm) for t, g in zip(total, grads, strict=True)]
    return total, np.array(norms)


def _data(n=6, seed=0):
    rng = np.random.default_rng(seed)
    return (tf.constant(rng.normal(size=(n, 36)).astype(np.float32)),
            tf.constant(rng.integers(0, 3, n), tf.int64))


@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_noiseless_layerwise_step_on_a_cnn_equals_the_clipped_sum_of_per_example_tapes(dropout):
    _tf.configure(2, 0)
    net = _cnn(dropout)
    x, y = _data()
    masks = None
    if dropout:
        chain = lc.model_chain(net)
        masks = lc.dropout_mask_sampler(lc.chain_dropouts(chain), 5)(6)
    _, norms = _tape_clipped_sum(net, x, y, 1.0, masks)
    clip, lr, expected_b = float(np.median(norms)), 0.5, 8.0  # |b| = 6 ≠ B = 8
    assert np.any(norms > clip * 1.01) and np.any(norms < clip * 0.99)
    w0 = [w.copy() for w in net.get_weights()]
    clipped, _ = _tape_clipped_sum(net, x, y, clip, masks)
    step, _, _ = build_train_step(
        net, mechanism="dpsgd", optimizer="sgd", learning_rate=lr, momentum=0.0, clip_norm=clip,
        noise_multiplier=0.0, expected_batch_size=expected_b, implementation="layerwise_clipping",
        dropout_masks=(lambda m: masks) if dropout else None)
    _, _, fraction = step(x, y)
    for before, after, g in zip(w0, net.get_weights(), clipped, strict=True):
        # SGD: θ' = θ − lr·Σ clip_C(g_i)/B; float32 step vs float64 sum of float32 tapes.
        np.testing.assert_allclose(after, before - lr * g / expected_b, rtol=1e-4, atol=1e-6)
    assert float(fraction) == pytest.approx(np.mean(norms > clip), rel=1e-6)


@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_norm_check_agrees_on_a_correct_cnn_and_catches_a_planted_half_norm(dropout):
    _tf.configure(2, 0)
    x, y = _data(8, seed=1)
    ratios = {}
    for factor in (1.0, 0.5):
        net = _cnn(dropout, seed=4)
        step, _, _ = build_train_step(
            net, mechanism="dpsgd", optimizer="sgd", learning_rate=0.1, clip_norm=1.0, noise_multiplier=1.0,
            expected_batch_size=8.0, implementation="layerwise_clipping", gradient_canaries=2,
            check_norms=True, policy=MechanismPolicy(norm_factor=factor), dropout_seed=3)
        rows = []
        for position in range(8):
            out = step(x, y, tf.constant([1.0, 0.0]), tf.constant([position], tf.int32))
            # loss, correct, fraction, canary state (weights; plain SGD keeps no slot), then the norm
            # check's clip norm, norm of the summed gradient, norm alone and logits gap
            assert len(out) == 8 and out[3].shape == (1, 2)
            fast, batched, alone, gap = (float(t[0]) for t in out[4:])
            assert abs(batched / alone - 1) < NORM_CHECK_RTOL and gap < 1e-5
            rows.append(fast / batched)
        ratios[factor] = np.array(rows)
    np.testing.assert_allclose(ratios[1.0], 1.0, rtol=NORM_CHECK_RTOL)
    np.testing.assert_allclose(ratios[0.5], 0.5, rtol=NORM_CHECK_RTOL)
    assert np.all(np.abs(ratios[0.5] - 1.0) > NORM_CHECK_RTOL)  # the twin's comparison would stop


@pytest.mark.parametrize("model", ["cnn", "keras:tests.unit.user_builders:small_cnn", "mlp"])
def test_the_logits_view_of_every_model_kind_trains_exactly_with_layerwise_clipping(model):
    from dpaudit.training.architectures import build_model
    from dpaudit.training.models import logits_model

    _tf.configure(2, 0)
    params = {"model": model, "n_classes": 3, "image_shape": [6, 6, 1], "hidden_units": [5],
              "conv_filters": [4, 4], "group_norm_groups": 2, "dropout": 0.2 if model == "cnn" else 0.0}
    net = logits_model(build_model(36, params, seed=2))
    x, y = _data(5, seed=3)
    masks = None
    if model == "cnn":  # Dropout after the Dense layer: the masks are fixed and replayed
        masks = lc.dropout_mask_sampler(lc.chain_dropouts(lc.model_chain(net)), 1)(5)
    _, norms = _tape_clipped_sum(net, x, y, 1.0, masks)
    clip = float(np.median(norms))
    w0 = [w.copy() for w in net.get_weights()]
    clipped, _ = _tape_clipped_sum(net, x, y, clip, masks)
    step, _, _ = build_train_step(
        net, mechanism="dpsgd", optimizer="sgd", learning_rate=0.3, momentum=0.0, clip_norm=clip,
        noise_multiplier=0.0, expected_batch_size=5.0, implementation="layerwise_clipping",
        dropout_masks=(lambda m: masks) if masks is not None else None)
    step(x, y)
    for before, after, g in zip(w0, net.get_weights(), clipped, strict=True):
        np.testing.assert_allclose(after, before - 0.3 * g / 5.0, rtol=1e-4, atol=1e-6)
