"""Extraction of a model that is not a Dense stack (a CNN, a user's builder): the same columns as
an MLP run's, per-example gradients equal to TensorFlow's one-example gradients (the
``tf.vectorized_map`` oracle of ``tests/unit/tf_gradients.py``; float32 vectors: rtol 1e-4,
atol 1e-5), and the PMP pairs' factor form giving the exact inner products of those gradients."""

import logging

import numpy as np
import pandas as pd
import pytest

from dpaudit import _tf
from dpaudit.audit.mechanism_checks import MechanismObserver
from dpaudit.extract.extract import extract_per_example, write_pmp_pairs_of_model
from dpaudit.extract.keras_model import KerasModel, read_model
from dpaudit.extract.pmp_pairs import clipped_distances, read_pmp_pairs
from dpaudit.training.models import features, load_model, logits_model
from dpaudit.training.train import train_model

from .tf_gradients import tf_per_example_gradients

tf = _tf.tf
SPLITS = {"members": "train", "nonmembers": "holdout", "utility": "test"}
LOG = logging.getLogger("test_extract_models")
CNN = {"model": "cnn", "image_shape": [6, 6, 1], "conv_filters": [4, 6], "group_norm_groups": 2,
       "hidden_units": [8], "dropout": 0.25}


def _frame(seed=0, n=(80, 40, 30)):
    rng = np.random.default_rng(seed)
    total = sum(n)
    y = rng.integers(0, 3, size=total).astype(np.int64)
    x = (rng.normal(size=(total, 36)) + y[:, None] * np.linspace(-1, 1, 36)).astype(np.float32)
    split = np.repeat(["train", "holdout", "test"], n)
    return pd.DataFrame({"example_id": np.arange(total, dtype=np.int64) * 2 + 5, "split": split, "label": y,
                         "x": list(x)})


def _train(tmp_path, params, name):
    path = tmp_path / f"{name}.keras"
    base = {"epochs": 2, "batch_size": 20, "learning_rate": 0.1, "seed": 1}
    info = train_model(_frame(), SPLITS, {**base, **params}, path, threads=2, log=LOG, checkpoints=3,
                       checkpoint_path=tmp_path / f"{name}.npz", observer=MechanismObserver())
    return path, info


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("models")
    dp = {"mechanism": "dpsgd", "clip_norm": 0.5, "noise_multiplier": 0.8, "delta": 1e-4}
    return {"mlp": _train(tmp, {"mechanism": "baseline", "hidden_units": [8]}, "mlp"),
            "cnn": _train(tmp, {**dp, **CNN}, "cnn"),
            "user": _train(tmp, {**dp, "model": "keras:tests.unit.user_builders:small_cnn",
                                 "image_shape": [6, 6, 1]}, "user"),
            "tmp": tmp}


def test_a_cnn_and_a_user_model_are_read_in_tensorflow_an_mlp_in_numpy(runs):
    assert type(read_model(runs["mlp"][0])).__name__ == "DenseModel"
    assert isinstance(read_model(runs["cnn"][0]), KerasModel)
    assert isinstance(read_model(runs["user"][0]), KerasModel)


def test_train_json_of_a_cnn_and_a_user_model_records_the_model_and_its_checks(runs):
    mlp, cnn, user = runs["mlp"][1], runs["cnn"][1], runs["user"][1]
    assert set(mlp) <= set(cnn) and set(cnn) == set(user)  # the MLP's keys, accounting included
    for key in ("model", "hidden_units", "activation", "dropout"):
        assert mlp[key] == {"model": "mlp", "hidden_units": [8], "activation": "relu", "dropout": 0.0}[key]
    assert "conv_filters" not in mlp and "image_shape" not in mlp
    assert {key: cnn[key] for key in ("model", "conv_filters", "group_norm_groups", "image_shape", "dropout")} == \
        {"model": "cnn", "conv_filters": [4, 6], "group_norm_groups": 2, "image_shape": [6, 6, 1], "dropout": 0.25}
    assert user["model"] == "keras:tests.unit.user_builders:small_cnn"
    for info in (cnn, user):
        assert info["dp_implementation"] == "layerwise_clipping"
        assert info["noise_check"]["passed"] is True and info["accounting_check"]["reproduced"] is True


@pytest.mark.parametrize("kind", ["cnn", "user"])
def test_per_example_files_of_other_models_have_the_mlp_columns_and_tensorflow_gradients(runs, kind):
    df = _frame()
    mlp_out, mlp_grads = extract_per_example(runs["mlp"][0], df, SPLITS, clip_norm=None, full_gradients=True)
    path, info = runs[kind]
    outputs, grads = extract_per_example(path, df, SPLITS, clip_norm=0.5, full_gradients=True)
    assert list(outputs.columns) == list(mlp_out.columns)
    assert list(grads.columns) == list(mlp_grads.columns)
    assert [str(t) for t in outputs.dtypes] == [str(t) for t in mlp_out.dtypes]
    net = logits_model(load_model(path))
    x, y = features(df), df["label"].to_numpy()
    # oracle: TensorFlow's gradient of each example alone, inference mode (Dropout off)
    norms, flat = tf_per_example_gradients(net, x, y)
    np.testing.assert_allclose(np.stack(grads["gradient"].to_numpy()), flat, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(grads["grad_norm"], norms, rtol=1e-4)
    np.testing.assert_allclose(grads["clipped_norm"], np.minimum(norms, 0.5), rtol=1e-4)
    assert info["n_trainable_parameters"] == flat.shape[1]
    z = net(tf.constant(x), training=False).numpy()
    np.testing.assert_allclose(np.stack(outputs["logits"].to_numpy()), z, rtol=1e-6, atol=1e-6)


def test_pmp_pairs_of_a_cnn_hold_the_exact_clipped_distances_of_its_per_example_gradients(runs):
    df = _frame()
    path, info = runs["cnn"]
    model = read_model(path)
    out = runs["tmp"] / "pairs.parquet"
    parent = {"parent_seed": 0, "nonmember_pool": "nonmembers", "partners_relative_standard_error": 0.01,
              "partners_max": 64, "seed": 2}
    rows = write_pmp_pairs_of_model(model, df[["example_id", "split", "label"]], features(df), SPLITS, path=out,
                                    train=info, checkpoints_path=runs["tmp"] / "cnn.npz", parent=parent)
    pairs = read_pmp_pairs(out)
    assert rows == len(pairs["example_id"]) and pairs["metadata"]["checkpoints"] == 3
    position = pd.Series(np.arange(len(df)), index=df["example_id"].to_numpy())
    at = position.loc[pairs["example_id"]].to_numpy()
    net = logits_model(load_model(path))
    norms, flat = tf_per_example_gradients(net, features(df)[at], df["label"].to_numpy()[at])
    np.testing.assert_allclose(pairs["grad_norm"], norms, rtol=1e-4)
    # oracle: the pairwise distances of the clipped TensorFlow gradients themselves
    g = flat.astype(np.float64) * np.minimum(1.0, 0.5 / norms)[:, None]
    direct = np.sqrt(np.maximum(((g[:, None, :] - g[None, :, :]) ** 2).sum(axis=2), 0.0))
    ours = clipped_distances(pairs["inputs"], pairs["deltas"], pairs["grad_norm"], pairs["metadata"]["layers"], 0.5)
    np.testing.assert_allclose(ours, direct, rtol=1e-4, atol=1e-5)
    assert np.all(np.isfinite(pairs["total"])) and np.all(pairs["total"] >= 0)
