"""A saved model that is not a stack of Dense layers (a CNN, a user's builder), run in TensorFlow.

``read_model`` is what extraction opens: the numpy ``DenseModel`` (``dpaudit.extract.dense_model``,
no TensorFlow start) for an MLP or linear release, this ``KerasModel`` for any other model
``dpaudit.training.architectures`` builds. It has the part of ``DenseModel``'s interface
that extraction uses, so the per-example tables and the PMP pairs are written by the same
code and have the same columns:

* ``logits``: the inference-mode logits (``models.predict_logits``);
* ``gradients`` / ``gradient_norms``: exact per-example cross-entropy gradients of every
  trainable weight in inference mode (Dropout off), from one tapped forward and one
  backward pass per chunk (``layer_clipping.per_example_gradients``: Conv2D, Dense,
  Embedding and normalization layers, refused by name when a layer has no exact path),
  flattened in ``trainable_variables`` order (the MLP's ``get_weights`` order); the norms
  are float64 sums of the float32 gradients;
* ``factors``, ``layers``, ``biases``, ``with_weights``: the PMP pairs' factor form. A
  Dense layer's gradient is stored as (input a, bias gradient δ), and every formula of
  ``dpaudit.extract.pmp_pairs`` is Σ_l (⟨a_l, a_l'⟩ + 1)·⟨δ_l, δ_l'⟩. A model that is not
  Dense gives its whole flat gradient g as ONE such factor: a = [0] (width 1) and δ = g, so
  (0 + 1)·⟨g, g'⟩ is the exact inner product of the per-example gradients, never a
  Dense-only computation applied to a conv layer. The file then holds 2n × P floats, which
  ``dpaudit.extract.checkpoints.not_applicable`` bounds (``FLAT_GRADIENT_LIMIT``).
"""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dpaudit.io import reading

__all__ = ["KerasModel", "read_model"]

# Layers the numpy reader runs (dpaudit.extract.dense_model._build).
_DENSE_STACK = {"InputLayer", "Dense", "Dropout", "Rescaling", "Softmax"}
# Float32 values of one chunk's per-example gradients (64 MB, as extraction's kept chunks).
_CHUNK_FLOATS = 2**24


def read_model(path: str | os.PathLike, *, threads: int = 1):
    """The saved model at ``path``: a ``DenseModel`` when it is a Dense stack, else a ``KerasModel``."""
    from dpaudit.extract.dense_model import read_dense_model

    with reading(path) as file, zipfile.ZipFile(file) as archive:
        config = json.loads(archive.read("config.json"))
    layers = config.get("config", {}).get("layers", [])
    if config.get("class_name") == "Sequential" and all(spec["class_name"] in _DENSE_STACK for spec in layers):
        return read_dense_model(path)
    return KerasModel.load(path, threads=threads)


@dataclass(frozen=True)
class _FlatLayer:
    """The one factor 'layer' of a flat gradient: input width 1 (a = 0), 'units' P (δ = g)."""

    kernel: np.ndarray  # shape (1, P) only; never multiplied
    bias: np.ndarray
    name: str = "flat_gradient"


class KerasModel:
    """A Keras model ending in ``logits`` (then ``probs``), for extraction (module docstring)."""

    def __init__(self, model, source: str):
        from dpaudit.training.layer_clipping import model_chain
        from dpaudit.training.models import logits_model

        self.model, self.source = model, source
        self.net = logits_model(model)
        try:
            # dpsgd=False: a baseline model may hold a layer DP-SGD refuses; the chain check stays
            self.chain = model_chain(self.net, dpsgd=False)
        except ValueError as err:
            raise ValueError(f"{source}: extraction needs per-example gradients of every trainable layer: {err}") \
                from err
        self.n_params = int(sum(int(np.prod(v.shape)) for v in self.net.trainable_variables))
        self.n_classes = int(self.net.output_shape[-1])
        self.layers = (_FlatLayer(np.zeros((1, self.n_params), np.float32), np.zeros(self.n_params, np.float32)),)
        self.biases = [True]

    @classmethod
    def load(cls, path: str | os.PathLike, *, threads: int = 1) -> KerasModel:
        from dpaudit import _tf
        from dpaudit.training.models import load_model

        _tf.configure(threads, 0)
        return cls(load_model(path), str(path))

    def logits(self, x: np.ndarray) -> np.ndarray:
        from dpaudit.training.models import predict_logits

        return predict_logits(self.net, np.asarray(x, dtype=np.float32))

    def gradients(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(norms float64, the N × P float32 per-example gradients, ``trainable_variables`` order)."""
        from dpaudit import _tf
        from dpaudit.training.layer_clipping import per_example_gradients

        tf = _tf.tf
        x = np.asarray(x, dtype=np.float32)
        y = np.asarray(y, dtype=np.int64)
        if len(y) and (y.min() < 0 or y.max() >= self.n_classes):
            raise ValueError(f"labels must be in [0, {self.n_classes}), got {y.min()}..{y.max()}")
        flat = np.empty((len(x), self.n_params), dtype=np.float32)
        rows = max(1, _CHUNK_FLOATS // max(self.n_params, 1))
        for start in range(0, len(x), rows):
            stop = min(start + rows, len(x))
            flat[start:stop] = per_example_gradients(self.net, tf.constant(x[start:stop]),
                                                     tf.constant(y[start:stop]), self.chain, inference=True).numpy()
        g64 = flat.astype(np.float64)
        return np.sqrt(np.einsum("ij,ij->i", g64, g64)), flat

    def gradient_norms(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        rows = max(1, _CHUNK_FLOATS // max(self.n_params, 1))
        out = [self.gradients(x[i:i + rows], y[i:i + rows])[0] for i in range(0, len(x), rows)]
        return np.concatenate(out) if out else np.zeros(0)

    def factors(self, x: np.ndarray, y: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
        """([a = 0, width 1], [δ = the flat gradient g, float64], logits): one factor per example whose
        every pmp_pairs formula gives the exact ⟨g, g'⟩ (module docstring)."""
        _, flat = self.gradients(x, y)
        return [np.zeros((len(x), 1))], [flat.astype(np.float64)], self.logits(x).astype(np.float64)

    def with_weights(self, weights: Sequence[np.ndarray]) -> KerasModel:
        """A copy with other weights (a checkpoint's: ``model.get_weights()`` order), checked shape by shape."""
        from dpaudit import _tf

        weights = list(weights)
        current = self.model.get_weights()
        if len(weights) != len(current):
            raise ValueError(f"{len(weights)} weight arrays for a model with {len(current)}")
        for j, (w, c) in enumerate(zip(weights, current, strict=True)):
            if np.shape(w) != c.shape:
                raise ValueError(f"weight array {j}: shape {np.shape(w)}, expected {c.shape}")
        clone = _tf.keras.models.clone_model(self.model)
        clone.set_weights(weights)
        return KerasModel(clone, self.source)
