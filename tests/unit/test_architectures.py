"""``training.model``: the CNN and the user's Keras builder, and the refusals of ``check_model``."""

import numpy as np
import pytest

from dpaudit import _tf
from dpaudit.training.architectures import build_model, check_model, image_shape_of
from dpaudit.training.models import logits_model

tf, keras = _tf.tf, _tf.keras
USER = "keras:tests.unit.user_builders:"


def _params(model, **extra):
    return {"model": model, "n_classes": 3, "image_shape": [8, 8, 1], "hidden_units": [8], **extra}


def test_cnn_has_reshape_conv_blocks_dense_logits_and_probs():
    net = build_model(64, _params("cnn", conv_filters=[4, 6], group_norm_groups=2, pooling="avg"), seed=1)
    assert [layer.name for layer in net.layers] == [
        "image", "conv_0", "group_norm_0", "act_0", "pool_0", "conv_1", "group_norm_1", "act_1", "pool_1",
        "flatten", "dense_0", "logits", "probs"]
    kinds = [type(layer).__name__ for layer in net.layers]
    assert kinds == ["Reshape", "Conv2D", "GroupNormalization", "Activation", "AveragePooling2D", "Conv2D",
                     "GroupNormalization", "Activation", "AveragePooling2D", "Flatten", "Dense", "Dense", "Softmax"]
    assert net.get_layer("conv_1").filters == 6 and net.input_shape == (None, 64)
    assert logits_model(net).output_shape == (None, 3)
    # seeded: the same seed gives the same weights, another seed others
    same = build_model(64, _params("cnn", conv_filters=[4, 6], group_norm_groups=2, pooling="avg"), seed=1)
    other = build_model(64, _params("cnn", conv_filters=[4, 6], group_norm_groups=2, pooling="avg"), seed=2)
    assert all(np.array_equal(a, b) for a, b in zip(net.get_weights(), same.get_weights(), strict=True))
    assert not np.array_equal(net.get_weights()[0], other.get_weights()[0])
    assert check_model(64, _params("cnn"))[:2] == ["image", "conv_0"]


def test_cnn_needs_an_image_shape_holding_the_features():
    with pytest.raises(ValueError, match="training.model: cnn needs an image dataset"):
        build_model(64, _params("cnn", image_shape=None), 0)
    with pytest.raises(ValueError, match=r"H·W·C must equal d"):
        image_shape_of([8, 8, 3], 64)
    assert image_shape_of([8, 8], 64) == (8, 8, 1)
    with pytest.raises(ValueError, match="does not divide conv_filters"):
        build_model(64, _params("cnn", conv_filters=[5], group_norm_groups=2), 0)


def test_the_user_builder_gets_the_image_shape_and_is_wrapped_with_logits_and_probs():
    net = build_model(64, _params(USER + "small_cnn", filters=6), seed=3)
    assert net.input_shape == (None, 64) and net.output_shape == (None, 3)
    x = np.random.default_rng(0).normal(size=(5, 64)).astype(np.float32)
    z = logits_model(net)(x).numpy()
    np.testing.assert_allclose(net(x).numpy(), np.exp(z) / np.exp(z).sum(1, keepdims=True), rtol=1e-5)
    assert "conv2d" in " ".join(check_model(64, _params(USER + "small_cnn", filters=6)))


@pytest.mark.parametrize(("model", "words"), [
    ("keras:tests.unit.no_such_module:f", ["training.model", "no_such_module", "PYTHONPATH"]),
    (USER + "missing", ["training.model", "no function 'missing'"]),
    (USER + "NOT_CALLABLE", ["no function 'NOT_CALLABLE'"]),
    ("keras:tests.unit.user_builders", ["keras:package.module:function"]),
    (USER + "not_a_model", ["returned function, not a tf_keras model", "import tf_keras as keras"]),
    # issue 46: a builder written for Keras 3 is told to build with tf_keras, not to return what it returned
    (USER + "keras3_sequential", ["training.model", "returned a Keras 3 Sequential", "the builder imports keras",
                                  "'import tf_keras as keras'", "instead of 'import keras'"]),
    (USER + "ends_in_softmax", ["training.model", "logits", "drop the final softmax"]),
    (USER + "wrong_width", ["training.model", "not [batch, 3] logits"]),
    (USER + "with_batch_norm", ["BatchNormalization", "mixes", "use GroupNormalization"]),
    (USER + "with_depthwise", ["DepthwiseConv2D", "no exact per-example gradient path"]),
    (USER + "ignores_seed", ["training.model", "same seed", "pass seed"]),
    ("resnet", ["training.model", "mlp, cnn or keras:package.module:function"]),
])
def test_user_builder_refusals_name_the_key_and_the_fix(model, words):
    with pytest.raises(ValueError) as err:
        check_model(64, _params(model))
    for word in words:
        assert word in str(err.value)


def test_batch_normalization_passes_outside_dp_sgd():
    check_model(64, _params(USER + "with_batch_norm"), dpsgd=False)


def test_mlp_stays_build_mlp():
    net = build_model(5, {"n_classes": 2, "hidden_units": [4]}, seed=0)
    assert [type(layer).__name__ for layer in net.layers] == ["Dense", "Dense", "Softmax"]
