"""Builders of ``training.model: keras:tests.unit.user_builders:<name>`` for the architecture tests."""

from dpaudit import _tf

keras = _tf.keras


def small_cnn(input_shape, n_classes, params, seed):
    """A documented-signature builder: Conv2D → GroupNormalization → pooling → logits."""
    return keras.Sequential([
        keras.Input(shape=input_shape),
        keras.layers.Conv2D(int(params.get("filters", 4)), 3, padding="same",
                            kernel_initializer=keras.initializers.GlorotUniform(seed)),
        keras.layers.GroupNormalization(2),
        keras.layers.Activation("relu"),
        keras.layers.AveragePooling2D(2),
        keras.layers.Flatten(),
        keras.layers.Dense(n_classes, kernel_initializer=keras.initializers.GlorotUniform(seed + 1)),
    ])


def ends_in_softmax(input_shape, n_classes, params, seed):
    return keras.Sequential([keras.Input(shape=input_shape), keras.layers.Flatten(),
                             keras.layers.Dense(n_classes, activation="softmax",
                                                kernel_initializer=keras.initializers.GlorotUniform(seed))])


def wrong_width(input_shape, n_classes, params, seed):
    return keras.Sequential([keras.Input(shape=input_shape), keras.layers.Flatten(),
                             keras.layers.Dense(n_classes + 1, kernel_initializer=keras.initializers.GlorotUniform(seed))])


def with_batch_norm(input_shape, n_classes, params, seed):
    return keras.Sequential([keras.Input(shape=input_shape), keras.layers.Conv2D(2, 3, kernel_initializer=keras.initializers.GlorotUniform(seed)),
                             keras.layers.BatchNormalization(), keras.layers.Flatten(),
                             keras.layers.Dense(n_classes, kernel_initializer=keras.initializers.GlorotUniform(seed))])


def with_depthwise(input_shape, n_classes, params, seed):
    return keras.Sequential([keras.Input(shape=input_shape),
                             keras.layers.DepthwiseConv2D(3, depthwise_initializer=keras.initializers.GlorotUniform(seed)),
                             keras.layers.Flatten(),
                             keras.layers.Dense(n_classes, kernel_initializer=keras.initializers.GlorotUniform(seed))])


def ignores_seed(input_shape, n_classes, params, seed):
    return keras.Sequential([keras.Input(shape=input_shape), keras.layers.Flatten(), keras.layers.Dense(n_classes)])


def not_a_model(input_shape, n_classes, params, seed):
    return lambda x: x


NOT_CALLABLE = 3


def keras3_sequential(input_shape, n_classes, params, seed):
    """A builder written for Keras 3 (``import keras``), which dpaudit's tf_keras cannot train."""
    import keras as keras3  # noqa: TID251  (the Keras 3 import this builder reproduces)

    return keras3.Sequential([keras3.Input(shape=input_shape), keras3.layers.Flatten(),
                              keras3.layers.Dense(n_classes, kernel_initializer=keras3.initializers.GlorotUniform(seed))])
