"""Per-example gradients of a model file trained elsewhere and PMP Recipe A at its final weights (issue 44).

Oracles: the closed form of a softmax regression's per-example cross-entropy gradient, ‖g‖² =
(‖x‖² + 1)·‖softmax(xW + b) − e_y‖² (kernel x ⊗ (p − e_y), bias p − e_y); TensorFlow's GradientTape,
one example at a time, for a model with a hidden layer (float32: rtol 1e-4).
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from scipy import special

from dpaudit.external.gradients import external_gradients, gradient_problem
from dpaudit.training.models import features
from tests.unit.test_external import SYNTHETIC, halves, imported, write_ids

PROMISE = {"noise_multiplier": 1.1, "sampling_probability": 0.32, "steps": 10, "delta": 1e-3}
PMP = {"parent_seed": 0, "nonmember_pool": "nonmembers_and_utility", "partners_relative_standard_error": 0.01,
       "partners_max": 64, "seed": 0}


@pytest.fixture(scope="module")
def dataset():
    """The built-in synthetic dataset as prepare_dataset writes it (test_external's)."""
    from dpaudit.data.datasets import prepare_dataset_ids

    table, info, ids = prepare_dataset_ids("synthetic", {}, SYNTHETIC)
    info["delta"] = {"resolved": 1e-4}
    return {"examples": table.to_pandas(), "ids": ids.to_pandas(), "info": info}


def _entry(tmp_path, path, **extra):
    members, held_out = halves()
    return {"dataset": "synthetic", "model": str(path), "members": write_ids(tmp_path / "members.csv", members),
            "held_out": write_ids(tmp_path / "held_out.csv", held_out), **extra}


def _saved(tmp_path, layers, name="m.keras"):
    from dpaudit import _tf

    keras = _tf.keras
    model = keras.Sequential([keras.Input(shape=(SYNTHETIC["d"],)), *layers])
    path = tmp_path / name
    model.save(path)
    return model, path


def _gradients(tmp_path, dataset, entry, **kwargs):
    frame, record = imported(entry, dataset)
    return frame, record, external_gradients(entry, frame, dataset["examples"], record, where="m",
                                             splits=dataset["info"]["splits"], **kwargs)


def test_gradients_of_a_softmax_regression_file_equal_the_closed_form(tmp_path, dataset):
    from dpaudit import _tf

    model, path = _saved(tmp_path, [_tf.keras.layers.Dense(SYNTHETIC["classes"], activation="softmax")])
    entry = _entry(tmp_path, path, promise={**PROMISE, "clip_norm": 0.4})
    frame, record, table = _gradients(tmp_path, dataset, entry)
    assert record["source"]["outputs_kind"] == "probs" and record["per_example_gradients"]["available"]
    kernel, bias = (w.astype(np.float64) for w in model.get_weights())
    x = features(dataset["examples"].set_index("example_id").loc[frame["example_id"]].reset_index()).astype(np.float64)
    residual = special.softmax(x @ kernel + bias, axis=1)
    residual[np.arange(len(x)), frame["label"].to_numpy()] -= 1.0
    expected = np.sqrt((np.sum(x * x, axis=1) + 1.0) * np.sum(residual * residual, axis=1))
    np.testing.assert_allclose(table["grad_norm"], expected, rtol=1e-6)
    np.testing.assert_array_equal(table["clipped_norm"], np.minimum(table["grad_norm"], 0.4))
    assert table["example_id"].tolist() == frame["example_id"].tolist()
    assert table["is_member"].tolist() == frame["is_member"].tolist()


def test_gradients_of_a_hidden_layer_file_equal_tensorflows(tmp_path, dataset):
    from dpaudit import _tf

    keras, tf = _tf.keras, _tf.tf
    model, path = _saved(tmp_path, [keras.layers.Dense(5, activation="tanh"), keras.layers.Dense(SYNTHETIC["classes"])])
    frame, record, table = _gradients(tmp_path, dataset, _entry(tmp_path, path))
    x = features(dataset["examples"].set_index("example_id").loc[frame["example_id"]].reset_index())
    labels = frame["label"].to_numpy()
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    for row in range(0, len(x), 17):  # the oracle: one GradientTape per example
        with tf.GradientTape() as tape:
            value = loss(labels[row:row + 1], model(x[row:row + 1], training=False))
        grads = tape.gradient(value, model.trainable_variables)
        norm = float(np.sqrt(sum(np.sum(np.asarray(g, np.float64) ** 2) for g in grads)))
        np.testing.assert_allclose(table["grad_norm"].iloc[row], norm, rtol=1e-4)
    assert (table["clipped_norm"] == table["grad_norm"]).all()  # no promise: no clip norm


def test_a_model_file_that_is_not_a_dense_stack_has_no_gradients_and_says_why(tmp_path, dataset):
    from dpaudit import _tf

    keras = _tf.keras
    _, path = _saved(tmp_path, [keras.layers.Dense(4), keras.layers.BatchNormalization(),
                                keras.layers.Dense(SYNTHETIC["classes"])])
    problem = gradient_problem({"model": str(path)})
    assert "Sequential stack of Dense layers" in problem and "BatchNormalization" in problem
    _, record = imported(_entry(tmp_path, path), dataset)
    assert record["per_example_gradients"] == {"available": False, "reason": problem}
    assert gradient_problem({"outputs": "o.parquet"}) == "the model is given as its outputs, not as a model file"


def _pmp(tmp_path, dataset, promise):
    from dpaudit import _tf
    from dpaudit.metrics.pmp.run import pmp_run_metrics

    keras = _tf.keras
    _, path = _saved(tmp_path, [keras.layers.Dense(4, activation="relu"), keras.layers.Dense(SYNTHETIC["classes"])])
    entry = _entry(tmp_path, path, promise=promise)
    frame, record = imported(entry, dataset, pmp=True)
    pairs = tmp_path / "pairs.parquet"
    external_gradients(entry, frame, dataset["examples"], record, where="m", splits=dataset["info"]["splits"],
                       pmp=PMP, pairs_path=pairs)
    rows, _ = pmp_run_metrics(frame, dataset["info"]["splits"], record, gradients_path=pairs, options=PMP,
                              log=logging.getLogger("test"))
    return record, rows


def test_pmp_recipe_a_runs_at_the_final_weights_under_a_dpsgd_promise_with_its_clip_norm(tmp_path, dataset):
    record, rows = _pmp(tmp_path, dataset, {**PROMISE, "clip_norm": 1.0})
    a = rows[rows["method"] == "gauss_single_step"]
    assert (a["status"] == "ok").all() and np.isfinite(a[a["metric"] == "epsilon_pmp"]["value"]).all()
    # the parent set: the entry's members and as many of its held-out rows (not the dataset's split)
    assert int(a["n_parent"].iloc[0]) == 2 * record["membership"]["n_members"]
    for method in ("dpsgd_clt", "empirical_lira"):
        other = rows[rows["method"] == method]
        assert (other["status"] == "not_applicable").all() and other["note"].str.contains("trained outside").all()
    assert any(item.startswith("PMP Recipe A") for item in record["checked"])
    assert [item["what"] for item in record["not_checked"]][-1].startswith("PMP Recipe B")


@pytest.mark.parametrize(("promise", "reason"), [
    ({**PROMISE}, "Recipe A needs the clip norm C, and the promise does not state it; add promise.clip_norm"),
    ({"epsilon": 2.0, "delta": 1e-3}, "the promise states no DP-SGD inputs"),
])
def test_pmp_recipe_a_is_refused_without_a_dpsgd_promise_or_its_clip_norm(tmp_path, dataset, promise, reason):
    record, rows = _pmp(tmp_path, dataset, promise)
    assert (rows["status"] == "not_applicable").all() and rows["note"].str.contains(reason, regex=False).all()
    assert not any(item.startswith("PMP Recipe A") for item in record["checked"])
