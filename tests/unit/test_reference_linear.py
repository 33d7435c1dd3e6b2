"""Reference models of the linear mechanisms (dpaudit.reference.linear).

Oracle: ``train_model`` itself. Model k of a pool, released on its half of P with seed
``seeds[k]``, is the run ``train_model`` releases on those rows with that seed: the saved
Keras model's logits on P equal the pool's.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

from dpaudit.reference import pool_training as R
from dpaudit.training.train import train_model

LOG = logging.getLogger("test_reference_linear")
SPLITS = {"members": "members", "nonmembers": "nonmembers", "utility": "utility"}


def _data(seed=0, n=100, d=5):
    rng = np.random.default_rng(seed)
    x = (3.0 * rng.normal(size=(2 * n, d))).astype(np.float32)
    y = (x[:, 0] - x[:, 1] + rng.normal(size=2 * n) > 0).astype(np.int64)
    return x, y


@pytest.mark.parametrize("mechanism", ["output_perturbation", "objective_perturbation"])
def test_linear_reference_model_is_the_train_model_release(mechanism, tmp_path):
    x, y = _data()
    params = dict(mechanism=mechanism, target_epsilon=2.0, linear_regularization=0.5, delta=1e-5, n_classes=2)
    pool = R.train_reference_models(x, y, params, n_members=100, count=3, seed=4, return_weights=True)
    assert pool.logits.shape == (3, 200, 2) and not pool.vectorized and "linear" in pool.fallback_reason
    assert np.all(pool.epsilon == 2.0) and pool.delta == 0.0 and pool.noise_multiplier is None
    assert pool.sampling_probability is None and pool.steps is None and pool.target["epsilon"] == 2.0
    k = 1
    frame = pd.DataFrame({"example_id": np.arange(200), "split": np.where(pool.inclusion[k], "members", "nonmembers"),
                          "label": y, "x": list(x)})
    frame = pd.concat([frame, frame.iloc[:4].assign(split="utility")], ignore_index=True)
    path = tmp_path / "m.keras"
    info = train_model(frame[frame.split != "nonmembers"], SPLITS, {**params, "seed": int(pool.seeds[k])}, path,
                       threads=1, log=LOG)
    from dpaudit.training.models import load_model, logits_model, predict_logits

    logits = predict_logits(logits_model(load_model(path)), x)
    np.testing.assert_allclose(pool.logits[k], logits, atol=1e-5, rtol=1e-5)
    assert pool.history["loss"][k, 0] == pytest.approx(info["history"][0]["loss"], rel=1e-9)
    assert pool.history["accuracy"][k, 0] == pytest.approx(info["history"][0]["accuracy"])
    # the models differ (own halves, own noise)
    assert not np.allclose(pool.logits[0], pool.logits[2])


def test_linear_references_refuse_multiclass_labels():
    x, y = _data()
    y[:3] = 2
    params = dict(mechanism="output_perturbation", target_epsilon=1.0, delta=1e-5)
    with pytest.raises(ValueError, match="binary"):
        R.train_reference_models(x, y, params, n_members=100, count=2, seed=0)
