"""Models trained outside dpaudit (issue 44): an outputs file with its members and held-out ids,
read, refused or audited like a trained run.

Oracles: scikit-learn's ``roc_curve`` on the negated losses (what tensorflow-privacy's threshold
attack computes) for the loss-threshold AUC and TPR at fixed FPR; tensorflow-privacy's own
``compute_dp_sgd_privacy_statement`` for the ε recomputed from DP-SGD inputs; the extraction's
own per-example columns for the equivalence of an internal run's outputs read back as a file;
closed forms for the black-box verdict's ceiling and the identifiability rows of a stated promise.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from scipy import special
from sklearn import metrics as skm

from dpaudit.config import ConfigError, validate_config
from dpaudit.contract.external import run_splits
from dpaudit.data.datasets import prepare_dataset_ids
from dpaudit.external.importer import external_outputs
from dpaudit.external.outputs_file import ExternalModelError
from dpaudit.external.promise import promise_record
from dpaudit.losses import per_example_losses
from dpaudit.metrics.canary.outside import outside_rows
from dpaudit.metrics.epsilon_star import epsilon_star_run_metrics
from dpaudit.metrics.identifiability import run_identifiability
from dpaudit.metrics.mia import mia_metrics

N, CLASSES = 200, 3
SYNTHETIC = {"n": N, "d": 3, "classes": CLASSES, "separation": 1.0, "seed": 0}


@pytest.fixture(scope="module")
def dataset():
    """The built-in synthetic dataset as prepare_dataset writes it: examples, ids, dataset.json."""
    table, info, ids = prepare_dataset_ids("synthetic", {}, SYNTHETIC)
    info["delta"] = {"resolved": 1e-4}
    return {"examples": table.to_pandas(), "ids": ids.to_pandas(), "info": info}


def _logits(rng, n=N, classes=CLASSES, decimals=None):
    values = rng.normal(size=(n, classes)).astype(np.float32)
    return np.round(values, decimals).astype(np.float32) if decimals is not None else values


def write_outputs(path, ids, *, logits=None, probs=None, loss=None, extra=None):
    columns = {"example_id": np.asarray(ids)}
    if logits is not None:
        columns["logits"] = pa.FixedSizeListArray.from_arrays(pa.array(np.asarray(logits, np.float32).reshape(-1)),
                                                              np.asarray(logits).shape[1])
    if probs is not None:
        columns.update({f"probs_{k}": probs[:, k] for k in range(probs.shape[1])})
    if loss is not None:
        columns["loss"] = loss
    columns.update(extra or {})
    if str(path).endswith(".parquet"):
        import pyarrow.parquet as pq

        pq.write_table(pa.table(columns), path)
    else:
        pd.DataFrame({k: v for k, v in columns.items() if k != "logits"}).to_csv(path, index=False)
    return str(path)


def write_ids(path, ids):
    pd.DataFrame({"example_id": np.asarray(ids)}).to_csv(path, index=False)
    return str(path)


def halves(n=N, seed=1):
    order = np.random.default_rng(seed).permutation(n)
    return np.sort(order[: n // 2]), np.sort(order[n // 2:])


def entry(tmp_path, **overrides):
    members, held_out = halves()
    logits = _logits(np.random.default_rng(0))
    base = {"dataset": "synthetic", "outputs": write_outputs(tmp_path / "outputs.parquet", np.arange(N), logits=logits),
            "members": write_ids(tmp_path / "members.csv", members),
            "held_out": write_ids(tmp_path / "held_out.csv", held_out)}
    return {**base, **overrides}


def config(model):
    return {"datasets": {"synthetic": dict(SYNTHETIC)}, "grid": [], "external_models": {"m": model}}


def refused(model) -> str:
    with pytest.raises(ConfigError) as error:
        validate_config(config(model))
    return str(error.value)


def imported(model, dataset, delta="auto", **options):
    return external_outputs(model, name="m", dataset="synthetic", examples=dataset["examples"], ids=dataset["ids"],
                            dataset_info=dataset["info"], delta=delta, **options)


def mia_rows(frame, record, info, **options):
    splits = run_splits(info, record)
    return mia_metrics(frame, members_split=splits["members"], nonmembers_split=splits["nonmembers"],
                       utility_split=splits["utility"], delta=float(record["delta"]),
                       accountant_epsilon=float(record["epsilon"]), seed=0, **options)


# ------------------------------------------------------------------ the oracle: scikit-learn's ROC


@pytest.mark.parametrize("decimals", [None, 1])  # 1 decimal: many tied losses
def test_loss_threshold_auc_and_tpr_at_fpr_equal_sklearn_roc_curve_on_negated_losses(tmp_path, dataset, decimals):
    members, held_out = halves()
    logits = _logits(np.random.default_rng(3), decimals=decimals)
    logits[members] += 0.8 * np.eye(CLASSES, dtype=np.float32)[dataset["examples"]["label"].to_numpy()[members]]
    model = entry(tmp_path, outputs=write_outputs(tmp_path / "o.parquet", np.arange(N), logits=logits))
    frame, record = imported(model, dataset)
    targets = (0.01, 0.05, 0.1, 0.3)
    rows = mia_rows(frame, record, dataset["info"], fpr_targets=targets)
    # tensorflow-privacy's threshold attack: roc_curve(is_member, -loss); every threshold kept
    fpr, tpr, _ = skm.roc_curve(frame["is_member"].to_numpy(int), -frame["loss_ce"].to_numpy(), drop_intermediate=False)
    auc = rows.loc[rows["metric"] == "attack_auc", "value"].item()
    assert auc == pytest.approx(skm.auc(fpr, tpr), abs=1e-12)
    assert auc == pytest.approx(skm.roc_auc_score(frame["is_member"], -frame["loss_ce"]), abs=1e-12)
    for target in targets:
        row = rows[(rows["metric"] == "tpr_at_fpr") & (rows["fpr_target"] == target)].iloc[0]
        feasible = fpr <= target + 1e-15
        best = tpr[feasible].max()
        assert row["value"] == pytest.approx(best, abs=1e-12)
        assert row["fpr_realized"] == pytest.approx(fpr[feasible & (tpr == best)].min(), abs=1e-12)


# ------------------------------------------------------------------ equivalence with the extraction


def test_an_internal_runs_outputs_read_back_as_a_file_give_identical_rows(tmp_path, dataset):
    """The extraction's outputs (float32 logits, float64 losses from them, the dataset's split) written as
    an outputs file with the split's ids: the same per-example table and the same metric rows."""
    examples, info = dataset["examples"], dataset["info"]
    split = examples["split"].astype(str).to_numpy()
    ids, labels = examples["example_id"].to_numpy(np.int64), examples["label"].to_numpy(np.int64)
    logits = _logits(np.random.default_rng(7))
    internal = pd.DataFrame({"example_id": ids, "split": split, "is_member": split == info["splits"]["members"],
                             "label": labels, **per_example_losses(logits.astype(np.float64), labels, ids)})
    files = {role: write_ids(tmp_path / f"{role}.csv", ids[split == info["splits"][key]])
             for role, key in (("members", "members"), ("held_out", "nonmembers"), ("utility", "utility"))}
    model = {"dataset": "synthetic", "outputs": write_outputs(tmp_path / "o.parquet", ids, logits=logits), **files}
    frame, record = imported(model, dataset, delta=1e-4)
    pd.testing.assert_frame_equal(frame.drop(columns="logits"), internal, check_dtype=False)
    assert np.array_equal(np.stack(frame["logits"].to_numpy()), logits)
    assert run_splits(info, record) == info["splits"]
    internal_rows = mia_metrics(internal, members_split="train", nonmembers_split="holdout", utility_split="test",
                                delta=1e-4, accountant_epsilon=math.inf, seed=0)
    pd.testing.assert_frame_equal(mia_rows(frame, record, info), internal_rows)
    star = {"members_split": "train", "nonmembers_split": "holdout", "utility_split": "test", "classes": CLASSES,
            "delta": 1e-4, "grid_size": 1000, "alpha": 1.0, "empirical_filter": 0.001}
    pd.testing.assert_frame_equal(epsilon_star_run_metrics(frame, **star), epsilon_star_run_metrics(internal, **star))
    assert record["epsilon"] == math.inf and record["delta"] == 1e-4


def test_probabilities_and_loss_give_the_logits_losses(tmp_path, dataset):
    """softmax(logits) as probs, and the cross-entropy alone (with correct): the losses of the logits."""
    logits = _logits(np.random.default_rng(2))
    from_logits, _ = imported(entry(tmp_path, outputs=write_outputs(tmp_path / "l.parquet", np.arange(N),
                                                                    logits=logits)), dataset)
    probs = special.softmax(logits.astype(np.float64), axis=1)
    from_probs, _ = imported(entry(tmp_path, outputs=write_outputs(tmp_path / "p.parquet", np.arange(N), probs=probs)),
                             dataset)
    labels = dataset["examples"]["label"].to_numpy()
    loss = -np.log(probs[np.arange(N), labels])
    correct = probs.argmax(axis=1) == labels
    from_loss, _ = imported(entry(tmp_path, outputs=write_outputs(tmp_path / "c.csv", np.arange(N), loss=loss,
                                                                  extra={"correct": correct})), dataset)
    for other in (from_probs, from_loss):
        for column in ("loss_ce", "loss_logit", "p_true"):
            np.testing.assert_allclose(other[column], from_logits[column], rtol=1e-9, atol=1e-12)
        assert (other["correct"] == from_logits["correct"]).all()


# ------------------------------------------------------------------ the promise


@pytest.mark.parametrize(("n", "batch", "epochs", "sigma", "delta"),
                         [(284, 32, 15, 1.3, 1e-5), (60000, 256, 60, 1.1, 1e-5), (1000, 100, 3, 0.8, 1e-4)])
def test_recomputed_epsilon_equals_tensorflow_privacy_statement(n, batch, epochs, sigma, delta):
    sys.skip_tf_privacy_import = True  # the package __init__ imports tf.estimator; this module needs no TensorFlow
    from tensorflow_privacy.privacy.analysis.compute_dp_sgd_privacy_lib import (  # noqa: TID251 (the oracle)
        compute_dp_sgd_privacy_statement,
    )

    statement = compute_dp_sgd_privacy_statement(number_of_examples=n, batch_size=batch, num_epochs=epochs,
                                                 noise_multiplier=sigma, delta=delta, used_microbatching=False)
    printed = statement.split("Epsilon assuming Poisson sampling (*):")[1].split()[0]
    q = batch / n
    record = promise_record({"noise_multiplier": sigma, "sampling_probability": q, "steps": math.ceil(epochs / q),
                             "delta": delta, "epsilon": float(printed)}, n, "promise")
    assert f"{record['epsilon']:.3f}" == printed  # to its printed precision
    assert record["promise"]["mismatch"] is False and record["accountant"] == "rdp"


def test_a_stated_epsilon_below_the_recomputed_one_is_a_stated_mismatch():
    record = promise_record({"noise_multiplier": 1.0, "sampling_probability": 0.01, "steps": 1000, "delta": 1e-5,
                             "epsilon": 0.5}, 1000, "promise")
    assert record["promise"]["mismatch"] is True and record["epsilon"] > 0.5 * 1.01
    assert "claims more privacy than these inputs give" in record["promise"]["sentence"]


# ------------------------------------------------------------------ refusals before any job


def test_the_example_entry_validates(tmp_path):
    validate_config(config(entry(tmp_path)))


def test_ids_not_in_the_dataset_are_refused_naming_file_and_rows(tmp_path):
    ids = np.arange(N)
    ids[[5, 9]] = [900, 901]
    outputs = write_outputs(tmp_path / "o.parquet", ids, logits=_logits(np.random.default_rng(0)))
    members = write_ids(tmp_path / "m.csv", [i for i in halves()[0] if i not in (5, 9)])
    held_out = write_ids(tmp_path / "h.csv", [i for i in halves()[1] if i not in (5, 9)])
    message = refused(entry(tmp_path, outputs=outputs, members=members, held_out=held_out))
    assert f"config.external_models.m: {outputs}: 2 id(s) are not in dataset synthetic: rows 5 (id 900), 9 (id 901)" \
        in message and "write the dataset's example ids" in message


def test_ids_of_an_ids_file_missing_from_the_outputs_file_are_refused(tmp_path):
    outputs = write_outputs(tmp_path / "o.parquet", np.arange(N - 1), logits=_logits(np.random.default_rng(0), N - 1))
    message = refused(entry(tmp_path, outputs=outputs))
    assert "id(s) of" in message and f"are not in the outputs file {outputs}: {N - 1}" in message


def test_members_also_held_out_are_refused(tmp_path):
    members, held_out = halves()
    both = write_ids(tmp_path / "h2.csv", np.concatenate([held_out, members[:3]]))
    message = refused(entry(tmp_path, held_out=both))
    assert "3 id(s) are both members" in message and f"{', '.join(map(str, members[:3]))}" in message
    assert "remove them from one file" in message


def test_output_width_other_than_the_classes_is_refused(tmp_path):
    outputs = write_outputs(tmp_path / "o.parquet", np.arange(N), logits=_logits(np.random.default_rng(0), classes=4))
    message = refused(entry(tmp_path, outputs=outputs))
    assert f"{outputs}: logits has 4 values per row but dataset synthetic has 3 classes" in message


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_outputs_are_refused_naming_rows(tmp_path, bad):
    logits = _logits(np.random.default_rng(0))
    logits[17, 1] = bad
    outputs = write_outputs(tmp_path / "o.parquet", np.arange(N), logits=logits)
    assert f"{outputs}: NaN or inf in column 'logits' at row 17 (id 17)" in refused(entry(tmp_path, outputs=outputs))


def test_probabilities_not_summing_to_one_are_refused(tmp_path):
    probs = special.softmax(_logits(np.random.default_rng(0)).astype(np.float64), axis=1)
    probs[[3, 8]] *= 1.1
    outputs = write_outputs(tmp_path / "o.csv", np.arange(N), probs=probs)
    message = refused(entry(tmp_path, outputs=outputs))
    assert f"{outputs}: probabilities that do not sum to 1 (±0.001) at rows 3 (id 3), 8 (id 8)" in message


def test_a_missing_file_is_refused_naming_it(tmp_path):
    assert f"outputs file {tmp_path / 'nope.parquet'} does not exist" in refused(
        entry(tmp_path, outputs=str(tmp_path / "nope.parquet")))
    assert f"config.external_models.m.held_out: ids file {tmp_path / 'no.csv'} does not exist" in refused(
        entry(tmp_path, held_out=str(tmp_path / "no.csv")))


def test_a_promise_with_delta_at_least_one_over_n_is_refused(tmp_path):
    message = refused(entry(tmp_path, promise={"epsilon": 1.0, "delta": 0.02}))  # n = 100 members
    assert "config.external_models.m.promise.delta: delta=0.02 >= 1/n = 0.01 (n = 100 members)" in message


def test_same_model_as_names_another_entry_of_the_dataset_that_names_none(tmp_path):
    one = entry(tmp_path)
    good = {"datasets": {"synthetic": dict(SYNTHETIC)}, "grid": [],
            "external_models": {"m": one, "again": {**one, "same_model_as": "m"}}}
    validate_config(good)
    for models, expected in (
            ({"m": {**one, "same_model_as": "m"}}, "same_model_as: names the entry itself"),
            ({"m": one, "again": {**one, "same_model_as": "gone"}}, "same_model_as: 'gone' is not an entry of "
                                                                   "external_models (m)"),
            ({"m": {**one, "same_model_as": "again"}, "again": {**one, "same_model_as": "m"}},
             "'again' names 'm' itself")):
        with pytest.raises(ConfigError) as error:
            validate_config({**good, "external_models": models})
        assert expected in str(error.value), str(error.value)


def test_an_empty_grid_is_refused_unless_an_external_model_audits_the_dataset():
    with pytest.raises(ConfigError, match=r"config.grid: empty, so dataset synthetic would have no model"):
        validate_config({"datasets": {"synthetic": dict(SYNTHETIC)}, "grid": []})


def test_an_object_array_in_an_npz_file_is_refused_not_unpickled(tmp_path):
    path = tmp_path / "o.npz"
    np.savez(path, example_id=np.arange(N), logits=np.array([object()] * N, dtype=object))
    message = refused(entry(tmp_path, outputs=str(path)))
    assert "nothing in it is unpickled" in message


def test_probabilities_that_round_the_label_to_one_are_refused_by_the_job(tmp_path, dataset):
    labels = dataset["examples"]["label"].to_numpy()
    probs = np.full((N, CLASSES), 0.0)
    probs[np.arange(N), labels] = 1.0
    model = entry(tmp_path, outputs=write_outputs(tmp_path / "p.parquet", np.arange(N), probs=probs))
    with pytest.raises(ExternalModelError, match=r"p\(label\) rounds to 1 at rows 0 \(id 0\).*write logits"):
        imported(model, dataset)


# ------------------------------------------------------------------ the families that read the record


def test_the_black_box_verdict_and_its_ceiling():
    """ceiling = Clopper–Pearson bound at TP = n_m, FP = 0: max(ln((α^(1/n_m) − δ)/(1 − α^(1/n_n))),
    ln((α^(1/n_n) − δ)/(1 − α^(1/n_m)))), the closed form of the one-sided intervals at 0 and n successes."""
    n_m, n_n, alpha, delta = 40, 60, 0.05, 1e-5
    closed = max(math.log((alpha ** (1 / n_m) - delta) / (1 - alpha ** (1 / n_n))),
                 math.log((alpha ** (1 / n_n) - delta) / (1 - alpha ** (1 / n_m))))
    mia = pd.DataFrame([{"metric": "epsilon_lower_bound", "value": 0.7, "n_members": n_m, "n_nonmembers": n_n,
                         "delta": delta, "alpha": alpha}])
    rows = outside_rows({"epsilon": 0.5, "delta": delta}, mia)
    flag = rows[rows["metric"] == "measured_above_promise"].iloc[0]
    assert (flag["verdict"], flag["decided_by"]) == ("above_promise", "black_box_bound")
    assert flag["ceiling_max"] == pytest.approx(closed, rel=1e-9)
    weak = outside_rows({"epsilon": closed + 0.1, "delta": delta}, mia.assign(value=0.0))
    assert tuple(weak.iloc[-1][["verdict", "decided_by"]]) == ("too_weak", "black_box_ceiling")
    fine = outside_rows({"epsilon": closed - 0.1, "delta": delta}, mia.assign(value=0.0))
    assert tuple(fine.iloc[-1][["verdict", "decided_by"]]) == ("consistent", "black_box_bound")
    none = outside_rows({"epsilon": math.inf, "delta": delta}, mia)
    assert not bool(none.iloc[-1]["applicable"]) and pd.isna(none.iloc[-1]["verdict"])
    assert rows[rows["metric"] != "measured_above_promise"]["note"].str.contains("trained outside dpaudit").all()


def test_identifiability_of_a_stated_promise_holds_for_any_mechanism():
    eps, delta = 2.0, 1e-5
    rows = run_identifiability({"mechanism": "external", "epsilon": eps, "delta": delta, "accountant": "stated"})
    value = dict(zip(rows["metric"], rows["value"], strict=True))
    assert value["rho_beta"] == pytest.approx(1 / (1 + math.exp(-eps)), rel=1e-12)
    assert value["advantage_bound_any_dp"] == pytest.approx((math.exp(eps) - 1 + 2 * delta) / (math.exp(eps) + 1))
    assert math.isnan(value["rho_alpha_thm2"]) and math.isnan(value["rho_alpha_rdp"])


def test_identifiability_of_dpsgd_inputs_is_that_of_a_dpsgd_run():
    promise = promise_record({"noise_multiplier": 1.0, "sampling_probability": 0.05, "steps": 200, "delta": 1e-5},
                             1000, "promise")
    external = run_identifiability({"mechanism": "external", **promise})
    internal = run_identifiability({"mechanism": "dpsgd", **{k: promise[k] for k in (
        "epsilon", "delta", "accountant", "sampling", "neighbouring_relation", "noise_multiplier",
        "sampling_probability", "steps")}})
    pd.testing.assert_frame_equal(external, internal)


# ------------------------------------------------------------------ a Keras model file, read as data


def _keras_archive(path, layers, compile_config=None):
    """A .keras archive's config.json as Keras writes it (no weights: enough for the parse-time checks)."""
    import json
    import zipfile

    config = {"module": "keras", "class_name": "Sequential", "config": {"name": "s", "layers": layers}}
    if compile_config is not None:
        config["compile_config"] = compile_config
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("config.json", json.dumps(config))
    return str(path)


def _input(d):
    return {"module": "keras.layers", "class_name": "InputLayer", "config": {"batch_input_shape": [None, d]}}


def _dense(units, **extra):
    return {"module": "keras.layers", "class_name": "Dense", "config": {"name": "dense", "units": units, **extra}}


def model_entry(tmp_path, model):
    members, held_out = halves()
    return {"dataset": "synthetic", "model": model, "members": write_ids(tmp_path / "members.csv", members),
            "held_out": write_ids(tmp_path / "held_out.csv", held_out)}


def test_a_model_file_with_a_lambda_layer_is_refused_before_any_job(tmp_path):
    lam = {"module": "keras.layers", "class_name": "Lambda", "config": {"name": "shift", "function": "4wEAAAAA"}}
    path = _keras_archive(tmp_path / "m.keras", [_input(3), lam, _dense(3)])
    message = refused(model_entry(tmp_path, path))
    assert f"{path}: layer 'shift' is a Lambda layer, whose function is code" in message and "safe mode" in message


def test_a_custom_layer_loads_only_from_the_module_the_config_names(tmp_path):
    custom = {"module": "my_layers", "class_name": "Scale", "config": {"name": "scale"}}
    path = _keras_archive(tmp_path / "m.keras", [_input(3), custom, _dense(3)])
    assert "Scale (layer 'scale') comes from module 'my_layers'; custom objects are loaded only from the module " \
           "the config names: write custom_objects_module: my_layers" in refused(model_entry(tmp_path, path))
    other = refused({**model_entry(tmp_path, path), "custom_objects_module": "their_layers"})
    assert "not from custom_objects_module 'their_layers'" in other
    validate_config(config({**model_entry(tmp_path, path), "custom_objects_module": "my_layers"}))
    # an optimizer of another library in compile_config is never deserialized (compile=False): not refused
    dp = {"optimizer": {"module": "tensorflow_privacy.privacy.optimizers.dp_optimizer_keras", "class_name": "DP"}}
    validate_config(config(model_entry(tmp_path, _keras_archive(tmp_path / "c.keras", [_input(3), _dense(3)], dp))))


def test_a_model_file_of_another_input_shape_or_format_is_refused(tmp_path):
    path = _keras_archive(tmp_path / "m.keras", [_input(7), _dense(3)])
    assert f"{path} expects input shape [7] (7 features) but dataset synthetic has d = 3 features" in refused(
        model_entry(tmp_path, path))
    h5 = tmp_path / "m.h5"
    h5.write_bytes(b"\x89HDF")
    assert "only .keras model files are read (.h5 and SavedModel files can carry code)" in refused(
        model_entry(tmp_path, str(h5)))
    broken = tmp_path / "b.keras"
    broken.write_bytes(b"not a zip")
    assert f"{broken} does not load: not a .keras archive with a config.json" in refused(
        model_entry(tmp_path, str(broken)))
    both = {**model_entry(tmp_path, path), "outputs": "o.parquet"}
    assert "give the model as outputs: <outputs file> or as model: <file.keras>, exactly one" in refused(both)


def test_a_model_file_is_run_in_safe_mode_on_the_datasets_features(tmp_path, dataset):
    """The job's outputs are the model's own predictions on examples.parquet's x (oracle: Keras' predict)."""
    from dpaudit import _tf
    from dpaudit.training.models import features

    keras = _tf.keras
    model = keras.Sequential([keras.Input(shape=(3,)), keras.layers.Dense(4, activation="relu"), keras.layers.Dense(3)])
    path = tmp_path / "m.keras"
    model.save(path)
    x = features(dataset["examples"])
    frame, record = imported(model_entry(tmp_path, str(path)), dataset)
    expected = model.predict(x, verbose=0)
    at = dataset["examples"].set_index("example_id").index.get_indexer(frame["example_id"])
    np.testing.assert_array_equal(np.stack(frame["logits"].to_numpy()), expected[at].astype(np.float32))
    assert record["source"]["format"] == "keras" and record["source"]["outputs_kind"] == "logits"
    # a softmax head: its outputs are read as probabilities
    soft = keras.Sequential([keras.Input(shape=(3,)), keras.layers.Dense(3, activation="softmax")])
    soft.save(tmp_path / "s.keras")
    _, record = imported(model_entry(tmp_path, str(tmp_path / "s.keras")), dataset)
    assert record["source"]["outputs_kind"] == "probs"


# ------------------------------------------------------------------ reference outputs (LiRA's convention)


@pytest.mark.parametrize("suffix", [".parquet", ".npz"])
def test_lira_from_given_reference_outputs_equals_lira_from_the_pool_they_are(tmp_path, dataset, suffix):
    """A recipe pool's table (dpaudit.reference.pool.pool_frame, what reference_pool writes) handed over as
    reference outputs gives the same pool table, hence the same LiRA and RMIA rows and scores."""
    from dpaudit.external.importer import external_references
    from dpaudit.metrics.attack_rows import attack_rows
    from dpaudit.reference.pool import pool_frame

    rng = np.random.default_rng(11)
    model = entry(tmp_path)
    frame, record = imported(model, dataset)
    population = frame[frame["split"].isin(["train", "holdout"])]
    ids, labels = population["example_id"].to_numpy(), population["label"].to_numpy()
    k = 6
    logits = rng.normal(size=(k, len(ids), CLASSES)).astype(np.float32)
    inclusion = rng.random((k, len(ids))) < 0.5
    pool = pool_frame(logits, inclusion, ids, labels)
    path = tmp_path / f"refs{suffix}"
    if suffix == ".npz":
        np.savez(path, example_id=ids, logits=logits, keep=inclusion)
    else:
        pool[["example_id", "model", "included", "logits"]].sample(frac=1.0, random_state=0).to_parquet(path)
    given, info = external_references({**model, "reference_outputs": str(path)}, name="m", dataset="synthetic",
                                      ids=dataset["ids"], outputs=frame)
    pd.testing.assert_frame_equal(given.reset_index(drop=True), pool)
    assert info["runs"] == ["m"] and info["models"] == k
    options = validate_config(config(model))["metrics"]["attacks"]
    ours = attack_rows(frame, given, options, delta=float(record["delta"]), accountant_epsilon=math.inf)
    theirs = attack_rows(frame, pool, options, delta=float(record["delta"]), accountant_epsilon=math.inf)
    for a, b in zip(ours, theirs, strict=True):
        pd.testing.assert_frame_equal(a, b)
    assert {"lira_online", "rmia"} <= set(ours[0]["attack"])


def test_reference_outputs_on_rows_the_model_is_not_audited_on_are_refused(tmp_path):
    members, held_out = halves()
    keep = members[:-10]  # ten members left out of the membership
    model = entry(tmp_path, members=write_ids(tmp_path / "m2.csv", keep))
    ids = np.arange(N)
    path = tmp_path / "refs.npz"
    np.savez(path, example_id=ids, logits=np.zeros((2, N, CLASSES)), keep=np.zeros((2, N), bool))
    message = refused({**model, "reference_outputs": str(path)})
    assert "reference_outputs" in message and "10 example(s) are neither members nor held out" in message
    np.savez(path, example_id=ids, logits=np.zeros((2, N, 4)), keep=np.zeros((2, N), bool))
    assert "4 logits per row but the dataset has 3 classes" in refused(entry(tmp_path, reference_outputs=str(path)))


def test_utility_rows_apart_from_members_and_held_out(tmp_path, dataset):
    members, held_out = halves()
    model = entry(tmp_path, members=write_ids(tmp_path / "m3.csv", members[:80]),
                  held_out=write_ids(tmp_path / "h3.csv", held_out[:80]),
                  utility=write_ids(tmp_path / "u3.csv", np.concatenate([members[80:], held_out[80:]])))
    frame, record = imported(model, dataset)
    assert record["membership"]["n_utility"] == N - 160 and "splits" not in record
    assert (frame["split"] == "test").sum() == N - 160 and not frame.loc[frame["split"] == "test", "is_member"].any()
    overlap = entry(tmp_path, utility=write_ids(tmp_path / "u4.csv", held_out[:5]))
    assert "5 held-out id(s) are also utility rows" in refused(overlap)


# ------------------------------------------------------------------ reference models from a training recipe

DPSGD_PROMISE = {"noise_multiplier": 1.1, "sampling_probability": 0.32, "steps": 10, "delta": 1e-3}
RECIPE = {"mechanism": "dpsgd", "epochs": 2, "batch_size": 32, "learning_rate": 0.05}


def attacked(model):
    return {**config(model), "metrics": {"attacks": {"enabled": True}}}


def refused_attacked(model) -> str:
    with pytest.raises(ConfigError) as error:
        validate_config(attacked(model))
    return str(error.value)


def test_a_reference_recipe_that_cannot_be_dp_matched_is_refused(tmp_path):
    where = "config.external_models.m.reference_recipe"
    stated = refused_attacked(entry(tmp_path, promise={"epsilon": 1.0, "delta": 1e-3}, reference_recipe=RECIPE))
    assert f"{where}: mechanism dpsgd trains the reference models with the promise's σ" in stated
    assert f"{where}: mechanism dpsgd needs the clip norm C; give promise.clip_norm" in stated
    both = refused_attacked(entry(tmp_path, promise={**DPSGD_PROMISE, "clip_norm": 1.0}, reference_recipe=RECIPE,
                         reference_outputs=str(tmp_path / "refs.npz")))
    assert f"{where}: the entry also gives reference_outputs" in both
    off = refused(entry(tmp_path, promise={**DPSGD_PROMISE, "clip_norm": 1.0}, reference_recipe=RECIPE))
    assert f"{where}: reference models serve LiRA and RMIA only, and metrics.attacks.enabled is false" in off
    assert "clip norm" not in off and "σ" not in off
    clipped = refused_attacked(entry(tmp_path, reference_recipe={**RECIPE, "mechanism": "baseline", "clip_norm": 1.0}))
    assert f"{where}.clip_norm: a baseline recipe clips nothing" in clipped
    with pytest.raises(ConfigError, match="reference_recipe"):  # the schema: its keys and required keys
        validate_config(attacked(entry(tmp_path, reference_recipe={"mechanism": "dpsgd", "epochs": 2})))
    with pytest.raises(ConfigError, match="clip_norm"):  # C is a DP-SGD input: not beside a stated (ε, δ)
        validate_config(attacked(entry(tmp_path, promise={"epsilon": 1.0, "delta": 1e-3, "clip_norm": 1.0})))


def test_a_recipe_takes_sigma_clip_norm_and_delta_from_the_promise(tmp_path):
    from dpaudit.config import external_recipes

    model = entry(tmp_path, promise={**DPSGD_PROMISE, "clip_norm": 0.5, "sampling": "shuffle"}, reference_recipe=RECIPE)
    recipes = external_recipes(validate_config(attacked(model)), "synthetic")
    assert recipes == {"external~m": {"runs": ["m"], "params": {
        **RECIPE, "noise_multiplier": 1.1, "clip_norm": 0.5, "delta": 1e-3, "sampling": "shuffle", "accountant": "rdp"}}}
    baseline = entry(tmp_path, reference_recipe={**RECIPE, "mechanism": "baseline", "model": "mlp"})
    assert external_recipes(validate_config(attacked(baseline)), "synthetic")["external~m"]["params"] == {
        **RECIPE, "mechanism": "baseline", "model": "mlp"}


def test_the_recipe_pools_population_is_the_entrys_members_and_held_out_rows(tmp_path, dataset):
    """P of a model trained elsewhere: its members and held-out rows (not the dataset's split), in
    examples.parquet order, is_member from its membership; its utility rows are not in P."""
    from dpaudit.reference.pool import audit_population

    members, held_out = halves()
    model = entry(tmp_path, members=write_ids(tmp_path / "m5.csv", members[:70]),
                  held_out=write_ids(tmp_path / "h5.csv", held_out[:60]),
                  utility=write_ids(tmp_path / "u5.csv", held_out[60:]))
    frame, _ = imported(model, dataset)
    population = audit_population(dataset["examples"], dataset["info"]["splits"], frame)
    expected = np.sort(np.concatenate([members[:70], held_out[:60]]))  # synthetic: example_id = row
    order = dataset["examples"]["example_id"].to_numpy()
    assert np.array_equal(population["example_id"].to_numpy(), order[np.isin(order, expected)])
    assert np.array_equal(population["is_member"].to_numpy(), np.isin(population["example_id"], members[:70]))


def test_a_recipe_of_a_model_trained_elsewhere_is_named_in_the_reference_accuracy_figure():
    from dpaudit.plots.attacks import recipe_tick

    pool = {"recipe_name": "external~m", "runs": ["m"], "recipe": {"mechanism": "dpsgd", "noise_multiplier": 1.1}}
    assert recipe_tick(pool) == "m (trained elsewhere)\nDP-SGD σ = 1.1"
    assert recipe_tick({**pool, "recipe": {"mechanism": "baseline"}}) == "m (trained elsewhere)\nbaseline"
    grid = {"recipe_name": "mechanism~dpsgd_target_epsilon~4", "runs": ["r"],
            "recipe": {"mechanism": "dpsgd", "target_epsilon": 4.0}}
    assert recipe_tick(grid) == "DP-SGD\nε = 4"
