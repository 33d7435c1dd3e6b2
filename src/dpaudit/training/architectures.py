"""The model of a run: ``training.model`` is ``mlp`` (the default), ``cnn`` or ``keras:<module>:<function>``.

Every model takes the FLAT feature vector [batch, d] (d = H·W·C for images) and ends in a
layer named ``logits`` (a Dense, or an identity after a user's model), then a ``Softmax`` named ``probs``,
so ``models.logits_model``, extraction's feature reading and the canary coordinates stay
those of the MLP. A CNN (and a user's model given an image shape) starts with a Keras
``Reshape`` to (H, W, C).

* ``mlp``: ``models.build_mlp`` (``hidden_units``, ``activation``, ``dropout``).
* ``cnn``: one block per entry of ``conv_filters``: Conv2D(filters, ``conv_kernel_size``,
  ``conv_strides``, ``conv_padding``), then GroupNormalization(``group_norm_groups``) if set,
  the ``activation``, then ``pooling`` (max or avg, 2×2, "same" padding; none to skip); then
  Flatten, the Dense ``hidden_units`` (with ``dropout``) and the logits. Needs ``image_shape``.
* ``keras:package.module:function``: the user's builder, called as
  ``function(input_shape, n_classes, params, seed)`` with ``input_shape`` the tuple (H, W, C)
  of an image dataset or (d,), ``params`` the run's training parameters (grid values
  included) and ``seed`` the run's seed; it returns a Keras model whose output is the
  [batch, n_classes] LOGITS (no softmax). It is wrapped as Input(d) → Reshape → it → logits →
  probs.

``check_model`` builds a model once on the given shape and refuses, naming ``training.model``
and the fix: a missing module or function, a builder that does not return a Keras model or
whose output is not [batch, n_classes] logits, a builder that ignores its seed, and, under
DP-SGD, a layer no exact per-example path covers (``layer_clipping.model_chain``: a layer
mixing examples such as BatchNormalization, a trainable layer of another kind).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import numpy as np

from dpaudit.training.layer_clipping import model_chain
from dpaudit.training.models import LOGITS_LAYER, build_mlp

__all__ = ["CNN_DEFAULTS", "KEY", "MODELS", "build_model", "check_model", "image_shape_of", "load_builder",
           "needs_layerwise_path", "shaping_keys"]

KEY = "training.model"
MODELS = ("mlp", "cnn")
KERAS_PREFIX = "keras:"
CNN_DEFAULTS: dict[str, Any] = {
    "conv_filters": [16, 32],
    "conv_kernel_size": 3,
    "conv_strides": 1,
    "conv_padding": "same",
    "pooling": "max",
    "group_norm_groups": None,
}


def shaping_keys(model: str) -> tuple[str, ...]:
    """The training parameters that shape a model of this kind (train.json records each).

    A user's builder is handed every parameter, so every model key is recorded for it.
    """
    kind = model_kind(model)
    mlp = ("model", "hidden_units", "activation", "dropout")
    if kind == "mlp":
        return mlp
    return (*mlp, *CNN_DEFAULTS, "image_shape")


def model_kind(model: str) -> str:
    """``mlp``, ``cnn`` or ``keras``; anything else is refused naming the key."""
    model = str(model)
    if model in MODELS:
        return model
    if model.startswith(KERAS_PREFIX):
        return "keras"
    raise ValueError(f"{KEY}: {model!r} is not a model; write mlp, cnn or keras:package.module:function")


def needs_layerwise_path(model: str) -> bool:
    """True unless the model is the MLP (whose Dense paths stay those of ``gradient_paths``)."""
    return model_kind(model) != "mlp"


def image_shape_of(image_shape, input_dim: int) -> tuple[int, int, int]:
    """(H, W, C) from a dataset's ``image_shape`` ([H, W] or [H, W, C]) checked against d."""
    if image_shape is None:
        raise ValueError(f"{KEY}: cnn needs an image dataset (dataset.json image_shape [H, W, C]); this one has "
                         "none: use model mlp, or a dataset with images (digits, synthetic_images, source: arrays)")
    shape = [int(s) for s in image_shape]
    if len(shape) == 2:
        shape.append(1)
    if len(shape) != 3 or min(shape) < 1 or int(np.prod(shape)) != int(input_dim):
        raise ValueError(f"image_shape {list(image_shape)} does not hold the dataset's {input_dim} features "
                         "(H·W·C must equal d)")
    return tuple(shape)


def load_builder(model: str) -> Callable:
    """The user's builder function of ``keras:package.module:function``."""
    spec = str(model)[len(KERAS_PREFIX):]
    module_name, sep, function = spec.partition(":")
    if not sep or not module_name or not function:
        raise ValueError(f"{KEY}: {model!r} must read keras:package.module:function (module path, a colon, "
                         "the builder's name)")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        raise ValueError(f"{KEY}: module {module_name!r} of {model!r} is not importable ({err}); install its "
                         "package or put its folder on PYTHONPATH") from err
    builder = getattr(module, function, None)
    if not callable(builder):
        raise ValueError(f"{KEY}: module {module_name!r} has no function {function!r}; name the builder "
                         "function defined in it")
    return builder


def _seeded(seed: int, i: int, keras):
    return keras.initializers.GlorotUniform(seed=seed * 1009 + i)


def _build_cnn(input_dim: int, params: dict, seed: int):
    from dpaudit import _tf

    keras = _tf.keras
    p = {**CNN_DEFAULTS, **{k: v for k, v in params.items() if k in CNN_DEFAULTS and v is not None}}
    shape = image_shape_of(params.get("image_shape"), input_dim)
    activation = params.get("activation", "relu")
    dropout = float(params.get("dropout") or 0.0)
    n_classes = int(params["n_classes"])
    if p["pooling"] not in ("max", "avg", "none"):
        raise ValueError(f"training.pooling must be max, avg or none, got {p['pooling']!r}")
    if p["conv_padding"] not in ("same", "valid"):
        raise ValueError(f"training.conv_padding must be same or valid, got {p['conv_padding']!r}")
    layers = [keras.Input(shape=(int(input_dim),), dtype="float32", name="x"), keras.layers.Reshape(shape, name="image")]
    groups = p["group_norm_groups"]
    for i, filters in enumerate(int(f) for f in p["conv_filters"]):
        if groups is not None and filters % int(groups):
            raise ValueError(f"training.group_norm_groups={groups} does not divide conv_filters[{i}]={filters}")
        layers.append(keras.layers.Conv2D(
            filters, int(p["conv_kernel_size"]), strides=int(p["conv_strides"]), padding=p["conv_padding"],
            activation=None if groups else activation, kernel_initializer=_seeded(seed, 2 * i, keras),
            name=f"conv_{i}"))
        if groups:
            layers += [keras.layers.GroupNormalization(int(groups), name=f"group_norm_{i}"),
                       keras.layers.Activation(activation, name=f"act_{i}")]
        if p["pooling"] != "none":
            pool = keras.layers.MaxPooling2D if p["pooling"] == "max" else keras.layers.AveragePooling2D
            layers.append(pool(2, padding="same", name=f"pool_{i}"))
    layers.append(keras.layers.Flatten(name="flatten"))
    hidden = [int(h) for h in (params.get("hidden_units") or [])]
    offset = 2 * len(p["conv_filters"])
    for i, units in enumerate(hidden):
        layers.append(keras.layers.Dense(units, activation=activation, name=f"dense_{i}",
                                         kernel_initializer=_seeded(seed, offset + 2 * i, keras)))
        if dropout > 0:
            layers.append(keras.layers.Dropout(dropout, seed=seed * 1009 + offset + 2 * i + 1, name=f"dropout_{i}"))
    layers += [keras.layers.Dense(n_classes, name=LOGITS_LAYER,
                                  kernel_initializer=_seeded(seed, offset + 2 * len(hidden), keras)),
               keras.layers.Softmax(name="probs")]
    return keras.Sequential(layers, name="cnn")


def _not_a_model(model: str, inner) -> str:
    """Why a builder's return value is refused; a Keras 3 model (``import keras``) is named as such,
    since dpaudit trains with Keras 2 (tf_keras: tensorflow-privacy's optimizers need it)."""
    kind = type(inner)
    module = kind.__module__ or ""
    if module == "keras" or (module.startswith("keras.") and hasattr(inner, "layers")):
        return (f"{KEY}: {model!r} returned a Keras 3 {kind.__name__} ({module}: the builder imports keras); dpaudit "
                "trains with tf_keras (Keras 2, which tensorflow-privacy needs): build it with "
                "'import tf_keras as keras' (or 'from dpaudit._tf import keras') instead of 'import keras'")
    return (f"{KEY}: {model!r} returned {kind.__name__}, not a tf_keras model; return a tf_keras keras.Model "
            "or keras.Sequential ('import tf_keras as keras')")


def _build_user(model: str, input_dim: int, params: dict, seed: int):
    from dpaudit import _tf

    keras = _tf.keras
    builder = load_builder(model)
    n_classes = int(params["n_classes"])
    image = params.get("image_shape")
    shape = image_shape_of(image, input_dim) if image is not None else (int(input_dim),)
    inner = builder(shape, n_classes, dict(params), int(seed))
    if not isinstance(inner, keras.Model):
        raise ValueError(_not_a_model(model, inner))
    out_shape = tuple(inner.output_shape) if not isinstance(inner.output_shape, list) else None
    if out_shape is None or len(out_shape) != 2 or out_shape[1] != n_classes:
        raise ValueError(f"{KEY}: {model!r} outputs shape {inner.output_shape}, not [batch, {n_classes}] "
                         f"logits; end the model with Dense({n_classes}) and no activation")
    last = inner.layers[-1]
    activation = getattr(getattr(last, "activation", None), "__name__", None)
    if type(last).__name__ == "Softmax" or activation in ("softmax", "sigmoid"):
        raise ValueError(f"{KEY}: {model!r} ends in a {activation or 'softmax'} ({last.name!r}); it must output "
                         "logits: drop the final softmax (dpaudit adds its own after the logits)")
    x = keras.Input(shape=(int(input_dim),), dtype="float32", name="x")
    h = keras.layers.Reshape(shape, name="image")(x) if len(shape) > 1 else x
    logits = keras.layers.Activation("linear", name=LOGITS_LAYER)(inner(h))
    return keras.Model(x, keras.layers.Softmax(name="probs")(logits), name="user_model")


def build_model(input_dim: int, params: dict[str, Any], seed: int):
    """The run's Keras model (flat input, ``logits`` then ``probs``) for ``params["model"]``."""
    model = params.get("model") or "mlp"
    kind = model_kind(model)
    if kind == "mlp":
        return build_mlp(input_dim, params, seed)
    if kind == "cnn":
        return _build_cnn(input_dim, params, seed)
    return _build_user(model, input_dim, params, seed)


def check_model(input_dim: int, params: dict[str, Any], seed: int = 0, dpsgd: bool = True) -> list[str]:
    """Build the model once and refuse what training could not use; returns its layer names.

    Logits: on random inputs the outputs must not be probabilities (every row in [0, 1]
    summing to 1). Seed: two builds with the same seed must have the same weights (a builder
    that ignores it would make runs irreproducible).
    """
    from dpaudit import _tf
    from dpaudit.training.models import logits_model

    model = params.get("model") or "mlp"
    net = build_model(input_dim, params, seed)
    logits = logits_model(net)
    x = np.random.default_rng(0).normal(size=(4, int(input_dim))).astype(np.float32)
    z = logits(_tf.tf.constant(x), training=False).numpy()
    if z.shape != (4, int(params["n_classes"])) or not np.all(np.isfinite(z)):
        raise ValueError(f"{KEY}: {model!r} gives logits of shape {z.shape} (or non-finite) on a [4, {input_dim}] "
                         "input; the model must map [batch, features] to finite [batch, n_classes] logits")
    if np.all((z >= 0) & (z <= 1)) and np.allclose(z.sum(axis=1), 1.0, atol=1e-5):
        raise ValueError(f"{KEY}: {model!r} outputs probabilities (rows in [0, 1] summing to 1), not logits; "
                         "drop the final softmax")
    if model_kind(model) == "keras":
        again = build_model(input_dim, params, seed).get_weights()
        if any(not np.array_equal(a, b) for a, b in zip(net.get_weights(), again, strict=True)):
            raise ValueError(f"{KEY}: {model!r} builds different weights for the same seed; pass seed to every "
                             "initializer (and Dropout) of the model")
    chain = model_chain(logits, dpsgd=dpsgd) if dpsgd else []
    return [layer.name for layer in chain]
