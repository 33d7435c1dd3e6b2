"""A saved model of Dense layers, read from its ``.keras`` file and run in numpy.

Extraction needs the model's inference-mode logits and per-example cross-entropy
gradients; every model dpaudit saves is a stack of Dense layers (``dpaudit.training.models``:
the MLP with relu or tanh hidden layers and inference-time-identity Dropout, the linear
releases behind a Rescaling layer), so both are a forward pass and one backward pass of
matrix products, here in float64 from the saved float32 weights. The extraction job
therefore starts no TensorFlow (issue 23: its start was most of the job). Any other
layer is refused with its name and the file's.

Per-example gradients stay in factors: a Dense layer's kernel gradient for example i is
the outer product of its input a_i and its bias gradient δ_i (∂loss/∂pre-activation), so
‖g_i‖² = Σ_l (‖a_li‖² + [bias]) · ‖δ_li‖² needs no N × P matrix; the flat vector (Keras
``get_weights`` order: each layer's kernel row-major, then its bias) is built only when
asked for.

The file format read here is tf_keras's ``.keras`` zip (``config.json`` and
``model.weights.h5``, a layer's variables under ``layers/<snake_case class>[_k]/vars/<i>``);
``tests/unit/test_dense_model.py`` checks the weights and outputs against
``keras.models.load_model`` for every layer kind.
"""

from __future__ import annotations

import json
import os
import re
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy import special

from dpaudit.extract.pmp_pairs import norms_sq
from dpaudit.io import reading
from dpaudit.training.models import LOGITS_LAYER

__all__ = ["DenseLayer", "DenseModel", "read_dense_model"]

_ACTIVATIONS = ("linear", "relu", "tanh")
_IDENTITY_AT_INFERENCE = ("Dropout",)


@dataclass(frozen=True)
class DenseLayer:
    kernel: np.ndarray  # (inputs, units), float32 as saved
    bias: np.ndarray | None  # (units,) or None (use_bias=False)
    activation: str
    name: str

    @property
    def n_params(self) -> int:
        return int(self.kernel.size + (0 if self.bias is None else self.bias.size))


@dataclass(frozen=True)
class DenseModel:
    """Inputs → optional Rescaling (x·scale + offset) → Dense layers, the last one the logits."""

    layers: tuple[DenseLayer, ...]
    scale: float = 1.0
    offset: float = 0.0

    @property
    def n_params(self) -> int:
        return sum(layer.n_params for layer in self.layers)

    @property
    def n_classes(self) -> int:
        return int(self.layers[-1].kernel.shape[1])

    def weights(self) -> list[np.ndarray]:
        """The trainable weights in Keras ``get_weights`` order."""
        return [w for layer in self.layers for w in (layer.kernel, layer.bias) if w is not None]

    def with_weights(self, weights: Sequence[np.ndarray]) -> DenseModel:
        """The same layers with other weights (a checkpoint's), checked shape by shape."""
        weights = list(weights)
        if len(weights) != len(self.weights()):
            raise ValueError(f"{len(weights)} weight arrays for a model with {len(self.weights())}")
        layers, k = [], 0
        for layer in self.layers:
            kernel = _shaped(weights[k], layer.kernel.shape, layer.name)
            k += 1
            bias = None
            if layer.bias is not None:
                bias = _shaped(weights[k], layer.bias.shape, layer.name)
                k += 1
            layers.append(replace(layer, kernel=kernel, bias=bias))
        return replace(self, layers=tuple(layers))

    def forward(self, x: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
        """(each Dense layer's input, the logits), float64; a hidden layer's input is the
        previous layer's activation output."""
        a = np.asarray(x, dtype=np.float64)
        if self.scale != 1.0 or self.offset != 0.0:
            a = a * self.scale + self.offset
        inputs = []
        for layer in self.layers:
            inputs.append(a)
            pre = a @ layer.kernel.astype(np.float64)
            if layer.bias is not None:
                pre += layer.bias.astype(np.float64)
            a = _activate(pre, layer.activation)
        return inputs, a

    def logits(self, x: np.ndarray) -> np.ndarray:
        """Inference-mode logits, float32 like the Keras model's."""
        return self.forward(x)[1].astype(np.float32)

    @property
    def biases(self) -> list[bool]:
        """Whether each layer has a bias (its gradient adds ‖δ_l‖² to the norm)."""
        return [layer.bias is not None for layer in self.layers]

    def factors(self, x: np.ndarray, y: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
        """(layer inputs a_l, bias gradients δ_l, logits) of the per-example cross-entropy, float64."""
        inputs, logits = self.forward(x)
        y = np.asarray(y, dtype=np.int64)
        if len(y) and (y.min() < 0 or y.max() >= self.n_classes):
            raise ValueError(f"labels must be in [0, {self.n_classes}), got {y.min()}..{y.max()}")
        delta = special.softmax(logits, axis=1)
        delta[np.arange(len(y)), y] -= 1.0  # ∂CE/∂z = softmax(z) − onehot(y)
        deltas = [delta]
        for k in range(len(self.layers) - 1, 0, -1):
            # layer k's input is layer k − 1's activation output
            delta = (delta @ self.layers[k].kernel.astype(np.float64).T) * _derivative(
                inputs[k], self.layers[k - 1].activation)
            deltas.append(delta)
        return inputs, deltas[::-1], logits

    def gradient_norms(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """‖∇_θ CE(x_i, y_i)‖₂ per example, float64, from the factors."""
        inputs, deltas, _ = self.factors(x, y)
        return np.sqrt(norms_sq(inputs, deltas, self.biases))

    def gradients(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(norms float64, the N × P float32 flat gradients in ``weights()`` order)."""
        inputs, deltas, _ = self.factors(x, y)
        n = len(inputs[0])
        parts = []
        for layer, a, d in zip(self.layers, inputs, deltas, strict=True):
            parts.append((a[:, :, None] * d[:, None, :]).reshape(n, -1))
            if layer.bias is not None:
                parts.append(d)
        flat = np.concatenate(parts, axis=1) if parts else np.zeros((n, 0))
        return np.sqrt(norms_sq(inputs, deltas, self.biases)), flat.astype(np.float32)


def _activate(pre: np.ndarray, activation: str) -> np.ndarray:
    if activation == "relu":
        return np.maximum(pre, 0.0)
    if activation == "tanh":
        return np.tanh(pre)
    return pre


def _derivative(out: np.ndarray, activation: str) -> np.ndarray:
    """The activation's derivative from its output (TensorFlow's ReluGrad is 0 at 0)."""
    if activation == "relu":
        return (out > 0).astype(np.float64)
    if activation == "tanh":
        return 1.0 - out * out
    return np.ones_like(out)


def _shaped(array, shape, name: str) -> np.ndarray:
    array = np.asarray(array, dtype=np.float32)
    if array.shape != tuple(shape):
        raise ValueError(f"layer {name!r}: weights of shape {array.shape}, expected {tuple(shape)}")
    return array


def _snake_case(name: str) -> str:
    """tf_keras ``generic_utils.to_snake_case``: the key a layer's variables are saved under."""
    intermediate = re.sub("(.)([A-Z][a-z0-9]+)", r"\1_\2", name)
    insecure = re.sub("([a-z])([A-Z])", r"\1_\2", intermediate).lower()
    return insecure if insecure[0] != "_" else "private" + insecure


def read_dense_model(path: str | os.PathLike, logits_layer: str | None = LOGITS_LAYER) -> DenseModel:
    """The model saved at ``path`` (a ``.keras`` file) as a :class:`DenseModel` up to its logits.

    A damaged file names itself (``dpaudit.io.reading``); a layer this reader does not
    know is refused by name. ``logits_layer=None`` (a model trained elsewhere, issue 44): the
    last Dense layer gives the logits, its pre-activation when its activation is softmax.
    """
    import h5py

    with reading(path) as file, zipfile.ZipFile(file) as archive:
        config = json.loads(archive.read("config.json"))
        with archive.open("model.weights.h5") as raw, h5py.File(raw, "r") as store:
            saved = {key: [np.asarray(group["vars"][k]) for k in sorted(group["vars"], key=int)]
                     for key, group in store["layers"].items()}
    # outside ``reading``: a model it cannot run is not a damaged file
    return _build(config, saved, str(path), logits_layer)


def _build(config: dict[str, Any], saved: dict[str, list[np.ndarray]], path: str,
           logits_layer: str | None = LOGITS_LAYER) -> DenseModel:
    if config.get("class_name") != "Sequential":
        raise ValueError(f"{path}: a {config.get('class_name')!r} model; extraction reads Sequential models")
    scale, offset, layers, used = 1.0, 0.0, [], {}
    done = False
    for spec in config["config"]["layers"]:
        kind, cfg = spec["class_name"], spec["config"]
        if kind == "InputLayer":
            continue
        key = _snake_case(kind)
        used[key] = used.get(key, -1) + 1
        key = key if used[key] == 0 else f"{key}_{used[key]}"
        if done:
            if kind != "Softmax":
                raise ValueError(f"{path}: layer {cfg['name']!r} ({kind}) after the logits; only Softmax may follow")
            continue
        if kind == "Softmax" and logits_layer is None and layers:  # the last Dense layer gave the logits
            done = True
            continue
        if kind in _IDENTITY_AT_INFERENCE:
            continue
        if kind == "Rescaling" and not layers:
            scale, offset = float(cfg["scale"]), float(cfg["offset"])
            continue
        if kind != "Dense":
            raise ValueError(f"{path}: layer {cfg['name']!r} is a {kind}; extraction reads Dense, Dropout, "
                             "a leading Rescaling and a final Softmax")
        activation = cfg.get("activation", "linear")
        # a model trained elsewhere may end in a softmax Dense layer: its logits are the pre-activation
        if activation not in _ACTIVATIONS and not (logits_layer is None and activation == "softmax"):
            raise ValueError(f"{path}: layer {cfg['name']!r} has activation {activation!r}, not one of {_ACTIVATIONS}")
        variables = saved.get(key, [])
        if len(variables) != (2 if cfg.get("use_bias", True) else 1):
            raise ValueError(f"{path}: layer {cfg['name']!r} has {len(variables)} saved weight arrays under {key!r}")
        kernel = np.asarray(variables[0], dtype=np.float32)
        bias = np.asarray(variables[1], dtype=np.float32) if len(variables) == 2 else None
        if kernel.ndim != 2 or kernel.shape[1] != int(cfg["units"]):
            raise ValueError(f"{path}: layer {cfg['name']!r} has a kernel of shape {kernel.shape}, "
                             f"units {cfg['units']}")
        layers.append(DenseLayer(kernel=kernel, bias=bias, activation=activation, name=cfg["name"]))
        done = cfg["name"] == logits_layer
    if logits_layer is None and layers:  # a Softmax layer or activation may only end the stack
        if any(layer.activation == "softmax" for layer in layers[:-1]):
            raise ValueError(f"{path}: a softmax activation before the last Dense layer")
        if layers[-1].activation == "softmax":
            layers[-1] = replace(layers[-1], activation="linear")
        done = True
    if not done:
        raise ValueError(f"{path}: no Dense layer named {LOGITS_LAYER!r}")
    if layers[-1].activation != "linear":
        raise ValueError(f"{path}: the logits layer has activation {layers[-1].activation!r}")
    return DenseModel(layers=tuple(layers), scale=scale, offset=offset)
