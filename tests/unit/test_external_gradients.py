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


# ------------------------------------------------------------------ membership from a column of the dataset's table


def _table(tmp_path, n=200, drop=("member",), **extra):
    rng = np.random.default_rng(0)
    role = np.array(["true", "false", ""], dtype=object)[rng.integers(0, 3, n)]
    frame = {"rid": [f"r{i:04d}" for i in range(n)], "a": rng.normal(size=n), "b": rng.normal(size=n),
             "y": np.array(["no", "yes"])[rng.integers(0, 2, n)], "member": role}
    import pandas as pd

    pd.DataFrame(frame).to_csv(tmp_path / "rows.csv", index=False)
    params = {"source": "table", "path": str(tmp_path / "rows.csv"), "label": "y", "id": "rid", "drop": list(drop),
              **extra}
    return params, frame


def test_membership_from_a_column_of_the_datasets_table(tmp_path):
    """The roles are the column's (true member, false held out, empty neither), by the table's ids; the job
    prepares the table and audits the rows of those roles (oracle: the column itself)."""
    import pandas as pd

    from dpaudit.config import validate_config
    from dpaudit.data.datasets import prepare_dataset_ids
    from dpaudit.external.importer import external_outputs
    from tests.unit.test_external import write_outputs

    params, frame = _table(tmp_path)
    n = len(frame["rid"])
    outputs = write_outputs(tmp_path / "o.parquet", np.array(frame["rid"]),
                            logits=np.random.default_rng(1).normal(size=(n, 2)))
    entry = {"dataset": "rows", "outputs": outputs, "membership_table_column": "member"}
    config = validate_config({"datasets": {"rows": params}, "grid": [], "external_models": {"m": entry}})
    table, info, ids = prepare_dataset_ids("rows", {"table": params["path"]}, config["datasets"]["rows"])
    info["delta"] = {"resolved": 1e-4}
    result, record = external_outputs(entry, name="m", dataset="rows", examples=table.to_pandas(), ids=ids.to_pandas(),
                                      dataset_info=info, delta="auto", dataset_params=config["datasets"]["rows"])
    role = pd.Series(frame["member"], index=frame["rid"])
    by_id = ids.to_pandas().set_index("example_id")["id"]
    chosen = role.loc[by_id.loc[result["example_id"]].to_numpy()].to_numpy()
    assert np.array_equal(result["is_member"].to_numpy(), chosen == "true")
    assert set(chosen) == {"true", "false"}  # the empty rows are neither
    assert record["membership"]["n_members"] == int((role == "true").sum())
    assert record["membership"]["members"] == {"table_column": "member", "file": params["path"]}


def test_a_membership_table_column_that_is_a_feature_or_not_a_table_is_refused(tmp_path):
    from dpaudit.config import ConfigError, validate_config
    from tests.unit.test_external import entry as outputs_entry

    params, frame = _table(tmp_path, drop=())
    ids = np.array(frame["rid"])
    from tests.unit.test_external import write_outputs

    outputs = write_outputs(tmp_path / "o.parquet", ids, logits=np.zeros((len(ids), 2)))
    entry = {"dataset": "rows", "outputs": outputs, "membership_table_column": "member"}
    with pytest.raises(ConfigError, match=r"config.external_models.m.membership_table_column: column 'member' must not "
                                          r"be a feature of dataset rows; add it to config.datasets.rows.drop"):
        validate_config({"datasets": {"rows": params}, "grid": [], "external_models": {"m": entry}})
    synthetic = {**outputs_entry(tmp_path), "membership_table_column": "member"}
    synthetic.pop("members"), synthetic.pop("held_out")
    with pytest.raises(ConfigError, match="dataset synthetic is not a table"):
        validate_config({"datasets": {"synthetic": dict(SYNTHETIC)}, "grid": [], "external_models": {"m": synthetic}})
    with pytest.raises(ConfigError, match="give one of membership_column, membership_table_column or members"):
        validate_config({"datasets": {"synthetic": dict(SYNTHETIC)}, "grid": [], "external_models": {
            "m": {**outputs_entry(tmp_path), "membership_table_column": "member"}}})


def test_a_model_files_inference_runs_on_the_jobs_threads(tmp_path, dataset, monkeypatch):
    """The job's thread count reaches TensorFlow before the file is loaded (unconfigured, TensorFlow
    takes every core of a shared node)."""
    from dpaudit import _tf

    _, path = _saved(tmp_path, [_tf.keras.layers.Dense(SYNTHETIC["classes"])])
    calls = []
    real = _tf.configure
    monkeypatch.setattr(_tf, "configure", lambda threads, seed: calls.append(threads) or real(threads, seed))
    imported(_entry(tmp_path, path), dataset, threads=2)
    assert calls == [2]
