"""Keras (tf_keras) model builders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from dpaudit.io import atomic_path

LOGITS_LAYER = "logits"


def build_mlp(input_dim: int, params: dict[str, Any], seed: int):
    """MLP: hidden Dense layers (+ Dropout), a ``logits`` Dense layer, then Softmax.

    The softmax is its own layer so the pre-activation logits stay retrievable
    (``logits_model``) for numerically stable losses and training from logits.
    Every initializer and Dropout layer gets its own seed derived from ``seed``.
    """
    from dpaudit import _tf

    keras = _tf.keras
    hidden = [int(h) for h in (params.get("hidden_units") or [])]
    activation = params.get("activation", "relu")
    dropout = float(params.get("dropout") or 0.0)
    n_classes = int(params["n_classes"])
    if n_classes < 2:
        raise ValueError(f"n_classes must be >= 2 (softmax output), got {n_classes}")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout}")

    layers = [keras.Input(shape=(int(input_dim),), dtype="float32", name="x")]
    for i, units in enumerate(hidden):
        layers.append(
            keras.layers.Dense(
                units,
                activation=activation,
                kernel_initializer=keras.initializers.GlorotUniform(seed=seed * 1009 + 2 * i),
                bias_initializer="zeros",
                name=f"dense_{i}",
            )
        )
        if dropout > 0:
            layers.append(keras.layers.Dropout(dropout, seed=seed * 1009 + 2 * i + 1, name=f"dropout_{i}"))
    layers.append(
        keras.layers.Dense(
            n_classes,
            kernel_initializer=keras.initializers.GlorotUniform(seed=seed * 1009 + 2 * len(hidden)),
            bias_initializer="zeros",
            name=LOGITS_LAYER,
        )
    )
    layers.append(keras.layers.Softmax(name="probs"))
    return keras.Sequential(layers, name="mlp")


def build_linear(weights: np.ndarray, feature_scale: float):
    """The released weights w of a binary linear model as a Keras model.

    ``Rescaling(1/feature_scale)`` divides raw rows as training did, then a bias-free
    ``logits`` Dense(2) with kernel columns (0, w) gives logits (0, w·x̃), so the
    Softmax output is P(y = 1 | x) = σ(w·x̃) and the cross-entropy is the logistic
    loss. Standard layers only: it loads without custom objects, and extraction
    reads it like any MLP (the scale travels inside the model). The per-example
    gradient over the 2-column kernel has √2 times the norm of the logistic-loss
    gradient over w (the two columns get opposite copies of it).
    """
    from dpaudit import _tf

    keras = _tf.keras
    weights = np.asarray(weights, dtype=np.float64).ravel()
    if not (np.isfinite(feature_scale) and feature_scale > 0):
        raise ValueError(f"feature_scale must be finite and positive, got {feature_scale!r}")
    d = weights.size
    model = keras.Sequential(
        [
            keras.Input(shape=(d,), dtype="float32", name="x"),
            keras.layers.Rescaling(1.0 / float(feature_scale), name="feature_scale"),
            keras.layers.Dense(2, use_bias=False, name=LOGITS_LAYER),
            keras.layers.Softmax(name="probs"),
        ],
        name="linear",
    )
    kernel = np.column_stack([np.zeros(d), weights]).astype(np.float32)
    model.get_layer(LOGITS_LAYER).set_weights([kernel])
    return model


def save_model(model, model_path: str | Path) -> None:
    """Save ``model`` atomically, without an optimizer, as .keras or .h5 (by the path's suffix).

    A model saved with a DP optimizer does not load without custom objects (DESIGN §9);
    only the logits view is ever compiled, never the saved Sequential, so the .keras
    format (which has no include_optimizer switch) stores no optimizer either.
    """
    model_path = Path(model_path)
    with atomic_path(model_path, suffix=model_path.suffix) as tmp:
        if model_path.suffix == ".h5":
            model.save(tmp, include_optimizer=False)
        else:
            model.save(tmp)


def load_model(model_path: str | Path):
    """Load a saved model (no optimizer, no custom objects); a damaged file names itself and the fix."""
    from dpaudit import _tf
    from dpaudit.io import reading

    with reading(model_path) as path:
        return _tf.keras.models.load_model(path, compile=False)


def logits_model(model):
    """A model sharing ``model``'s weights whose output is the ``logits`` layer."""
    from dpaudit import _tf

    return _tf.keras.Model(model.inputs, model.get_layer(LOGITS_LAYER).output, name="logits_view")


def features(frame) -> np.ndarray:
    """The ``x`` column of an examples frame as an N×d float32 matrix, without a per-row Python loop."""
    col = frame["x"]
    if isinstance(col.dtype, pd.ArrowDtype):
        arr = pa.array(col)
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        if len(arr) == 0:
            return np.zeros((0, 0), dtype=np.float32)
        flat = arr.flatten().to_numpy(zero_copy_only=False)
        return np.ascontiguousarray(flat.reshape(len(arr), -1), dtype=np.float32)
    if len(col) == 0:
        return np.zeros((0, 0), dtype=np.float32)
    return np.stack(col.to_numpy()).astype(np.float32, copy=False)


def predict_logits(net, x: np.ndarray, batch_size: int = 8192) -> np.ndarray:
    """float32 logits of a logits-output model in inference mode (``training=False``)."""
    from dpaudit import _tf

    tf = _tf.tf
    out = [
        net(tf.constant(x[i : i + batch_size]), training=False).numpy()
        for i in range(0, len(x), batch_size)
    ]
    if not out:
        return np.zeros((0, int(net.output_shape[-1])), dtype=np.float32)
    return np.concatenate(out).astype(np.float32, copy=False)
