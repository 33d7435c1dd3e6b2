"""Exact per-example norms and clipped sums beyond Dense (``dpaudit.training.layer_clipping``).

Oracle: one GradientTape per example through Keras' own layer calls, in float64 (the layers'
hand-written math in ``tapped_forward`` is not shared with it). Tolerance: relative 1e-9 in
float64, where both sides are exact up to summation order.
"""

import numpy as np
import pytest

from dpaudit import _tf
from dpaudit.training import layer_clipping as lc

tf, keras = _tf.tf, _tf.keras
RTOL = 1e-9


@pytest.fixture
def float64():
    before = keras.backend.floatx()
    keras.backend.set_floatx("float64")
    yield
    keras.backend.set_floatx(before)


def _tape_oracle(net, x, y, weights, masks=None, chain=None):
    """(‖g_i‖² [n], {var ref: Σ_i w_i g_i}) from one tape per example."""
    variables = net.trainable_variables
    sq, total = [], [np.zeros(v.shape) for v in variables]
    for i in range(len(y)):
        with tf.GradientTape() as tape:
            if masks is None:
                logits = net(x[i:i + 1], training=True)
            else:
                logits = lc.reference_forward(chain, x[i:i + 1], [m[i:i + 1] for m in masks])
            loss = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(y[i:i + 1], logits))
        grads = [tf.convert_to_tensor(g).numpy() for g in tape.gradient(loss, variables)]
        sq.append(sum(float(np.sum(g ** 2)) for g in grads))
        total = [t + weights[i] * g for t, g in zip(total, grads, strict=True)]
    return np.array(sq), {v.ref(): t for v, t in zip(variables, total, strict=True)}


def _fast(net, x, y, weights, masks=None):
    chain = lc.model_chain(net)
    with tf.GradientTape() as tape:
        logits, taps = lc.tapped_forward(chain, x, masks)
        summed = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
    grads = lc.layer_gradients(taps, tape.gradient(summed, [t.z for t in taps]))
    clipped = {}
    for lg in grads:
        clipped.update(lg.clipped(tf.constant(weights)))
    return tf.add_n([lg.squared_norms for lg in grads]).numpy(), clipped, grads


def _compare(net, x, y, seed=0, masks=None):
    weights = np.random.default_rng(seed).uniform(0.1, 1.0, len(y))
    sq, clipped, grads = _fast(net, x, y, weights, masks)
    chain = lc.model_chain(net) if masks is not None else None
    sq_ref, clipped_ref = _tape_oracle(net, x, y, weights, masks, chain)
    np.testing.assert_allclose(sq, sq_ref, rtol=RTOL)
    assert set(clipped) == set(clipped_ref)
    for ref, value in clipped_ref.items():
        np.testing.assert_allclose(tf.convert_to_tensor(clipped[ref]).numpy(), value, rtol=RTOL, atol=1e-12)
    return grads


def _random_cnn(rng, seed, dilated=False):
    """A random chain of Conv2D (and GroupNormalization) layers; ``dilated``: every conv layer has
    stride 1 and a dilation of 2 or 3 along at least one axis (Keras refuses a stride > 1 with it)."""
    low = 9 if dilated else 5  # room for a dilated kernel (up to 7 wide) twice with valid padding
    h, w, c = int(rng.integers(low, low + 5)), int(rng.integers(low, low + 5)), int(rng.integers(1, 4))
    layers = [keras.Input(shape=(h * w * c,)), keras.layers.Reshape((h, w, c))]
    for j in range(int(rng.integers(1, 3))):
        kernel = (int(rng.integers(1, 4)), int(rng.integers(2 if dilated else 1, 4)))
        stride = 1 if dilated else int(rng.integers(1, 3))
        dilation = ((int(rng.integers(1, 4)), int(rng.integers(2, 4))) if dilated
                    else 2 if stride == 1 and rng.random() < 0.3 else 1)
        layers.append(keras.layers.Conv2D(
            int(rng.integers(2, 6)), kernel, strides=stride, dilation_rate=dilation,
            padding=str(rng.choice(["valid", "same"])), activation="tanh", use_bias=bool(rng.random() < 0.8),
            kernel_initializer=keras.initializers.GlorotUniform(seed=seed * 10 + j),
            bias_initializer=keras.initializers.RandomNormal(seed=seed * 10 + j + 5)))
        if rng.random() < 0.5:
            filters = layers[-1].filters
            groups = int(rng.choice([g for g in (1, 2, filters) if filters % g == 0]))
            layers.append(keras.layers.GroupNormalization(
                groups=groups, gamma_initializer=keras.initializers.RandomNormal(1.0, 0.3, seed=seed),
                beta_initializer=keras.initializers.RandomNormal(seed=seed + 1)))
    pool = rng.choice(["none", "max", "avg"])
    if pool != "none":
        layers.append((keras.layers.MaxPooling2D if pool == "max" else keras.layers.AveragePooling2D)(
            2, padding="same"))
    layers += [keras.layers.Flatten(),
               keras.layers.Dense(4, activation="tanh", kernel_initializer=keras.initializers.GlorotUniform(seed)),
               keras.layers.Dense(3, kernel_initializer=keras.initializers.GlorotUniform(seed + 1))]
    return keras.Sequential(layers), h * w * c


def _conv_grads(monkeypatch, rng, seed, branch, dilated=False):
    """A random CNN's conv layers' per-example results, checked against one tape per example
    (``_compare``), with the layer-clipping branch forced (``branch``: ghost or explicit) or chosen."""
    net, d = _random_cnn(rng, seed, dilated=dilated)
    if branch != "chosen":
        monkeypatch.setattr(lc, "_ghost_is_cheaper", lambda *_: branch == "ghost")
    x = tf.constant(rng.normal(size=(5, d)))
    y = tf.constant(rng.integers(0, 3, 5), tf.int64)
    return [g for g in _compare(net, x, y, seed) if type(g.layer).__name__ == "Conv2D"]


@pytest.mark.parametrize("branch", ["chosen", "ghost", "explicit"])
@pytest.mark.parametrize("seed", range(6))
def test_conv_norms_and_clipped_sums_equal_one_tape_per_example(float64, monkeypatch, seed, branch):
    convs = _conv_grads(monkeypatch, np.random.default_rng(seed), seed, branch)
    assert convs and all(g.ghost == (branch == "ghost") for g in convs if branch != "chosen")


@pytest.mark.parametrize("branch", ["chosen", "ghost", "explicit"])
@pytest.mark.parametrize("seed", range(3))
def test_dilated_conv_norms_and_clipped_sums_equal_one_tape_per_example(float64, monkeypatch, seed, branch):
    # issue 45: every conv layer dilated (2 or 3 along the second axis, 1 to 3 along the first), in
    # float64 (tf.nn.conv2d's CPU backprop refuses a dilation > 1 in float64; the tapped forward
    # uses Keras' own convolution op, which does not)
    convs = _conv_grads(monkeypatch, np.random.default_rng(100 + seed), seed, branch, dilated=True)
    assert convs and all(max(g.layer.dilation_rate) > 1 for g in convs)


def test_mixed_choice_takes_ghost_for_few_positions_and_explicit_for_many():
    # P(D_in + D_out) < D_in·D_out: ghost; a 28×28 first layer (P = 784, 9 → 32) is explicit.
    assert lc._ghost_is_cheaper(4, 288, 64)
    assert not lc._ghost_is_cheaper(784, 9, 32)


def test_embedding_and_layer_norm_equal_one_tape_per_example(float64):
    rng = np.random.default_rng(1)
    t, vocab = 6, 4  # few ids, so ids repeat within an example and their rows add up
    net = keras.Sequential([
        keras.Input(shape=(t,)),
        keras.layers.Embedding(vocab, 3, embeddings_initializer=keras.initializers.RandomNormal(seed=1)),
        keras.layers.LayerNormalization(gamma_initializer=keras.initializers.RandomNormal(1.0, 0.3, seed=2),
                                        beta_initializer=keras.initializers.RandomNormal(seed=3)),
        keras.layers.Dense(5, activation="relu", kernel_initializer=keras.initializers.GlorotUniform(4),
                           bias_initializer=keras.initializers.RandomNormal(seed=7)),  # Dense on [b, T, D]
        keras.layers.LayerNormalization(axis=[1, 2]),
        keras.layers.Flatten(),
        keras.layers.Dense(3, kernel_initializer=keras.initializers.GlorotUniform(5)),
    ])
    x = tf.constant(rng.integers(0, vocab, size=(7, t)).astype(np.float64))
    y = tf.constant(rng.integers(0, 3, 7), tf.int64)
    _compare(net, x, y)


def test_dropout_masks_are_shared_by_norms_clipped_sum_and_the_replaying_tape(float64):
    rng = np.random.default_rng(2)
    net = keras.Sequential([keras.Input(shape=(16,)), keras.layers.Reshape((4, 4, 1)),
                            keras.layers.Conv2D(3, 2, activation="relu",
                                                kernel_initializer=keras.initializers.GlorotUniform(0)),
                            keras.layers.Dropout(0.4), keras.layers.Flatten(),
                            keras.layers.Dense(3, kernel_initializer=keras.initializers.GlorotUniform(1))])
    chain = lc.model_chain(net)
    assert lc.chain_dropouts(chain) == [(0.4, (3, 3, 3))]
    masks = [tf.cast(m, tf.float64) for m in lc.dropout_mask_sampler(lc.chain_dropouts(chain), 3)(6)]
    kept = float(tf.reduce_mean(tf.cast(masks[0] > 0, tf.float64)))
    assert 0.2 < kept < 0.95  # both dropped and kept units
    x = tf.constant(rng.normal(size=(6, 16)))
    y = tf.constant(rng.integers(0, 3, 6), tf.int64)
    _compare(net, x, y, masks=masks)


def test_per_example_gradients_and_norms_agree_with_the_oracle(float64):
    rng = np.random.default_rng(3)
    net, d = _random_cnn(rng, 3)
    x = tf.constant(rng.normal(size=(4, d)))
    y = tf.constant(rng.integers(0, 3, 4), tf.int64)
    flat = lc.per_example_gradients(net, x, y).numpy()
    sq_ref, _ = _tape_oracle(net, x, y, np.ones(4))
    np.testing.assert_allclose(np.sum(flat ** 2, axis=1), sq_ref, rtol=RTOL)
    np.testing.assert_allclose(lc.per_example_squared_norms(net, x, y).numpy(), sq_ref, rtol=RTOL)
    # one example's flat gradient equals its own tape's, coordinate by coordinate
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(y[:1], net(x[:1], training=True)))
    one = np.concatenate([g.numpy().ravel() for g in tape.gradient(loss, net.trainable_variables)])
    np.testing.assert_allclose(flat[0], one, rtol=1e-9, atol=1e-12)


def _net(*layers, d=16):
    return keras.Sequential([keras.Input(shape=(d,)), *layers])


@pytest.mark.parametrize(("layers", "words"), [
    ([keras.layers.Reshape((4, 4, 1)), keras.layers.Conv2D(2, 2), keras.layers.BatchNormalization(),
      keras.layers.Flatten(), keras.layers.Dense(2)], ["BatchNormalization", "mixes", "GroupNormalization"]),
    ([keras.layers.Reshape((4, 4, 1)), keras.layers.DepthwiseConv2D(2), keras.layers.Flatten(),
      keras.layers.Dense(2)], ["DepthwiseConv2D", "no exact", "covered"]),
    ([keras.layers.Lambda(lambda t: t - tf.reduce_mean(t, axis=0)), keras.layers.Dense(2)],
     ["Lambda", "not known to keep the examples"]),
    ([keras.layers.Reshape((2, 4, 2)), keras.layers.Conv2D(2, 1, data_format="channels_first"),
      keras.layers.Flatten(), keras.layers.Dense(2)], ["channels_last"]),
])
def test_uncovered_layers_are_refused_naming_the_layer_and_the_fix(layers, words):
    net = _net(*layers)
    with pytest.raises(ValueError) as err:
        lc.model_chain(net)
    for word in words:
        assert word in str(err.value)


def test_batch_normalization_is_allowed_outside_dp_sgd():
    net = _net(keras.layers.Dense(3), keras.layers.BatchNormalization(), keras.layers.Dense(2))
    with pytest.raises(ValueError, match="mixes"):
        lc.model_chain(net)
    with pytest.raises(ValueError, match="no exact"):  # still trainable without a path
        lc.model_chain(net, dpsgd=False)


def test_a_model_with_a_skip_connection_is_refused_as_not_a_chain():
    inp = keras.Input(shape=(4,))
    hidden = keras.layers.Dense(4, activation="tanh")(inp)
    out = keras.layers.Dense(2)(keras.layers.Add()([inp, hidden]))
    with pytest.raises(ValueError, match="not known to keep|not a chain"):
        lc.model_chain(keras.Model(inp, out))
    # Only allowed layers, but one of them called twice: its layer list is no longer the call order.
    inp = keras.Input(shape=(4,))
    shared = keras.layers.Dense(4, activation="tanh")
    out = keras.layers.Dense(2)(shared(shared(inp)))
    with pytest.raises(ValueError, match="not a chain"):
        lc.model_chain(keras.Model(inp, out))
