"""Reference models of the linear mechanisms (output and objective perturbation).

A linear run is one exact fit of L2-regularized logistic regression plus its mechanism's
noise (``dpaudit.training.linear``). Its reference models run the same code on their
own halves of the audit population P, one after another in one process (no TensorFlow:
each release is a Newton fit, plus an L-BFGS solve for objective perturbation, a few
milliseconds to a few hundred on the datasets this workflow trains them on):

* the rows of model k (``inclusion[k]``) are divided by their own largest row norm
  (``linear.feature_scale``, as ``train_linear`` divides a run's members by theirs);
* ``linear.release_weights`` releases w with the recipe's ε and Λ and the noise generator
  ``default_rng([seeds[k], 3])`` (``train_linear``'s ``[seed, 3]``), so model k is the
  run ``train_model`` would release with seed ``seeds[k]`` on those rows;
* its logits on P are the saved Keras model's (``models.build_linear``): (0, w·x/scale).

Every model carries the recipe's pure ε claim (δ = 0, replace-one neighbours).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from dpaudit.training import linear

__all__ = ["train_linear_references"]


def train_linear_references(x: np.ndarray, y: np.ndarray, p: dict[str, Any], *, inclusion: np.ndarray,
                            seeds: np.ndarray, log: logging.Logger):
    """(logits [K, |P|, 2] float32, history {"loss", "accuracy"} [K, 1], weights [w [K, d]], seconds)."""
    labels = np.asarray(y, dtype=np.int64)
    if not np.isin(labels, (0, 1)).all():
        raise ValueError(f"mechanism {p['mechanism']} is binary logistic regression, but P has labels "
                         f"{sorted(np.unique(labels).tolist())[:10]}")
    x64 = np.asarray(x, dtype=np.float64)
    k_models = inclusion.shape[0]
    logits = np.zeros((k_models, x64.shape[0], 2), np.float32)
    loss = np.full((k_models, 1), np.nan)
    accuracy = np.full((k_models, 1), np.nan)
    weights = np.zeros((k_models, x64.shape[1]))
    t0 = time.perf_counter()
    for k in range(k_models):
        rows = np.flatnonzero(inclusion[k])
        if rows.size < 2:
            raise ValueError(f"reference model {k} has {rows.size} training rows")
        scale = linear.feature_scale(x64[rows])
        scaled = x64[rows] / scale
        w, _ = linear.release_weights(scaled, 2.0 * labels[rows] - 1.0, p["mechanism"], p["target_epsilon"],
                                      p["linear_regularization"], np.random.default_rng([int(seeds[k]),
                                                                                         linear.NOISE_SEED_STREAM]))
        z = scaled @ w  # train_linear's training loss and accuracy
        loss[k, 0] = float(np.mean(np.logaddexp(0.0, -(2.0 * labels[rows] - 1.0) * z)))
        accuracy[k, 0] = float(np.mean((z >= 0) == (labels[rows] == 1)))
        weights[k] = w
        logits[k, :, 1] = (x64 / scale) @ w
    seconds = time.perf_counter() - t0
    log.info("%d %s reference models released one after another in %.2fs (ε=%g, Λ=%g)", k_models,
             p["mechanism"], seconds, p["target_epsilon"], p["linear_regularization"])
    return logits, {"loss": loss, "accuracy": accuracy}, [weights], seconds
