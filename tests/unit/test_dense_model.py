"""Extraction's numpy reader of saved models (dpaudit.extract.dense_model) against Keras itself:
the weights it reads equal ``load_model(...).get_weights()`` exactly, its logits equal the
Keras logits model's to float32 rounding (rtol 1e-6, atol 1e-6), and its per-example
gradients equal TensorFlow's (float32 vectors of entries up to ~3: rtol 1e-4, atol 1e-5) and a float64 numpy backprop."""

import numpy as np
import pytest

from dpaudit import _tf
from dpaudit.extract.dense_model import read_dense_model
from dpaudit.training.models import build_linear, build_mlp, load_model, logits_model, save_model

from .test_training import numpy_per_example_grads
from .tf_gradients import tf_per_example_gradients

tf = _tf.tf


def _perturbed(model, seed):
    """Nonzero biases and non-initial weights, so every weight array is exercised."""
    rng = np.random.default_rng(seed)
    model.set_weights([w + 0.3 * rng.standard_normal(w.shape).astype(np.float32) for w in model.get_weights()])
    return model


MODELS = {
    "relu_two_hidden_dropout": lambda: _perturbed(build_mlp(
        5, {"hidden_units": [7, 4], "activation": "relu", "dropout": 0.3, "n_classes": 3}, seed=1), 0),
    "tanh_one_hidden": lambda: _perturbed(build_mlp(
        5, {"hidden_units": [6], "activation": "tanh", "dropout": 0.0, "n_classes": 2}, seed=2), 1),
    "softmax_regression": lambda: _perturbed(build_mlp(
        5, {"hidden_units": [], "activation": "relu", "dropout": 0.0, "n_classes": 4}, seed=3), 2),
    "linear_release": lambda: build_linear(np.linspace(-2.0, 3.0, 5), feature_scale=4.5),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_reads_what_keras_loads_and_computes_what_tensorflow_computes(tmp_path, name):
    _tf.configure(1, 0)
    path = tmp_path / "model.keras"
    save_model(MODELS[name](), path)
    keras_model = load_model(path)
    net = logits_model(keras_model)
    model = read_dense_model(path)
    # the trainable weights, in Keras's order and bit for bit
    expected = net.get_weights()
    assert len(model.weights()) == len(expected)
    for ours, theirs in zip(model.weights(), expected, strict=True):
        assert ours.dtype == np.float32 and np.array_equal(ours, theirs)
    assert model.n_params == sum(w.size for w in expected)
    rng = np.random.default_rng(5)
    x = (3.0 * rng.standard_normal((257, 5))).astype(np.float32)
    x[:3] = 0.0  # a ReLU unit at exactly 0 (ReluGrad is 0 there) for the bias-free rows
    y = rng.integers(0, model.n_classes, len(x))
    np.testing.assert_allclose(model.logits(x), net(tf.constant(x), training=False).numpy(), rtol=1e-6, atol=1e-6)
    norms, flat = model.gradients(x, y)
    tf_norms, tf_flat = tf_per_example_gradients(net, x, y)
    np.testing.assert_allclose(flat, tf_flat, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(norms, tf_norms, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(model.gradient_norms(x, y), norms)
    # the factor norms are the norms of the float64 vectors
    inputs, deltas, _ = model.factors(x, y)
    vectors = np.concatenate([part for layer, a, d in zip(model.layers, inputs, deltas, strict=True)
                              for part in ((a[:, :, None] * d[:, None, :]).reshape(len(x), -1),
                                           *([d] if layer.bias is not None else []))], axis=1)
    np.testing.assert_allclose(norms, np.linalg.norm(vectors, axis=1), rtol=1e-12)
    if name == "relu_two_hidden_dropout":  # a third implementation: the float64 backprop of test_training
        ref = numpy_per_example_grads(expected, x, y)
        ref_flat = np.concatenate([g.reshape(len(x), -1) for g in ref], axis=1)
        np.testing.assert_allclose(flat, ref_flat, rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(norms, np.linalg.norm(ref_flat, axis=1), rtol=1e-10)


def test_checkpoint_weights_replace_the_final_ones_and_a_wrong_shape_is_refused(tmp_path):
    _tf.configure(1, 0)
    path = tmp_path / "model.keras"
    keras_model = build_mlp(4, {"hidden_units": [3], "n_classes": 2}, seed=0)
    save_model(keras_model, path)
    model = read_dense_model(path)
    other = [w + 1.0 for w in model.weights()]
    moved = model.with_weights(other)
    keras_model.set_weights(other)
    x = np.ones((2, 4), np.float32)
    np.testing.assert_allclose(moved.logits(x), logits_model(keras_model)(tf.constant(x)).numpy(), rtol=1e-6)
    assert np.array_equal(model.weights()[0], read_dense_model(path).weights()[0])  # the original is unchanged
    with pytest.raises(ValueError, match=r"'dense_0'.*shape \(3, 4\), expected \(4, 3\)"):
        model.with_weights([other[0].T, *other[1:]])
    with pytest.raises(ValueError, match="3 weight arrays for a model with 4"):
        model.with_weights(other[:3])


def test_a_layer_it_cannot_run_is_refused_by_name(tmp_path):
    _tf.configure(1, 0)
    keras = _tf.keras
    model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(3, name="dense_0"),
                              keras.layers.BatchNormalization(name="norm"),
                              keras.layers.Dense(2, name="logits"), keras.layers.Softmax()])
    path = tmp_path / "model.keras"
    save_model(model, path)
    with pytest.raises(ValueError, match=r"model\.keras: layer 'norm' is a BatchNormalization"):
        read_dense_model(path)
    elu = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(3, activation="elu", name="hidden"),
                            keras.layers.Dense(2, name="logits")])
    save_model(elu, path)
    with pytest.raises(ValueError, match=r"layer 'hidden' has activation 'elu'"):
        read_dense_model(path)
    no_logits = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(2, name="out")])
    save_model(no_logits, path)
    with pytest.raises(ValueError, match="no Dense layer named 'logits'"):
        read_dense_model(path)


def test_labels_outside_the_classes_are_refused(tmp_path):
    _tf.configure(1, 0)
    path = tmp_path / "model.keras"
    save_model(build_mlp(3, {"hidden_units": [2], "n_classes": 2}, seed=0), path)
    with pytest.raises(ValueError, match=r"labels must be in \[0, 2\)"):
        read_dense_model(path).gradient_norms(np.zeros((1, 3), np.float32), np.array([2]))
