"""Reference pools of a CNN recipe (issue 33): the K models train one after another with
``build_model`` (conv layers are not stacked), and model k is the run ``train_model`` releases
on model k's half with seed k (oracle: ``train_model`` itself; DP-SGD at σ = 0, the noise being
the one part drawn from another generator, as in tests/unit/test_reference_models.py)."""

import logging

import numpy as np
import pytest

from dpaudit.reference import pool_training as R

from .test_reference_models import _train_model_weights

LOG = logging.getLogger("test_reference_cnn")


@pytest.mark.parametrize("mechanism", ["baseline", "dpsgd"])
def test_a_cnn_pool_trains_in_a_loop_and_its_model_equals_the_train_model_run(mechanism, tmp_path):
    rng = np.random.default_rng(4)
    y = rng.integers(0, 3, 150).astype(np.int64)
    x = (rng.normal(size=(150, 36)) + y[:, None] * np.linspace(-1, 1, 36)).astype(np.float32)
    params = dict(mechanism=mechanism, model="cnn", image_shape=[6, 6, 1], conv_filters=[3, 4], hidden_units=[6],
                  epochs=2, batch_size=16, learning_rate=0.1, n_classes=3)
    if mechanism == "dpsgd":
        params.update(clip_norm=1.0, delta=1e-5, noise_multiplier=0.0)
    inc, seeds = R.inclusion_matrix(1, 2, 150), R.reference_seeds(1, 2)
    pool = R.train_reference_models(x, y, params, n_members=100, inclusion=inc, seeds=seeds, return_weights=True,
                                    log=LOG)
    assert not pool.vectorized and pool.fallback_reason.startswith("model cnn")
    assert pool.logits.shape == (2, 150, 3) and np.all(np.isfinite(pool.logits))
    weights, info = _train_model_weights(x, y, inc[1], params, seeds[1], tmp_path)
    assert info["model"] == "cnn" and info["n_members"] == int(inc[1].sum())
    assert len(weights) == len(pool.weights)
    for a, b in zip(weights, pool.weights, strict=True):
        np.testing.assert_allclose(b[1], a, atol=1e-5, rtol=0)
