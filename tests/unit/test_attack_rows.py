"""metric_attacks' rows (dpaudit.metrics.attack_rows) are mia-family rows the vocabulary accepts,
joined with metric_mia's loss rows without a duplicate (issue 24)."""

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from dpaudit.contract.metrics import ATTACK_NAMES, check_metric_table, loss_attack_rows, metric_rows
from dpaudit.metrics.attack_rows import attack_rows, pool_arrays, rmia_population
from dpaudit.metrics.mia import mia_metrics
from dpaudit.reference.pool import POOL_COLUMNS, pool_frame

OPTIONS = {"attacks": list(ATTACK_NAMES), "seed": 0, "alpha": 0.05, "fpr_targets": [0.001, 0.01, 0.1],
           "lira": {"global_variance_below": 64},
           "rmia": {"gamma": 1.0, "offline_a": None, "temperature": 1.0, "population_size": 100}}


def _list_column(matrix):
    column = pa.FixedSizeListArray.from_arrays(pa.array(matrix.astype(np.float32).reshape(-1)), matrix.shape[1])
    return pd.Series(pd.arrays.ArrowExtensionArray(column))


def _case(seed=0, k=8, n_members=300, n_non=300, n_utility=100, classes=3):
    """A target whose members' true-class logit is raised, and reference models that do the same on IN rows."""
    rng = np.random.default_rng(seed)
    n = n_members + n_non + n_utility
    labels = rng.integers(0, classes, n)
    split = np.array(["train"] * n_members + ["holdout"] * n_non + ["test"] * n_utility)
    base = rng.normal(0, 1, (n, classes))
    hard = rng.normal(0, 1.5, n)  # per-example difficulty the reference models share
    bump = np.zeros((n, classes))
    bump[np.arange(n), labels] = 1.0
    target = base + bump * (hard + 1.5 * (split == "train"))[:, None]
    ids = np.arange(100, 100 + n)
    outputs = pd.DataFrame({"example_id": ids, "split": split, "is_member": split == "train", "label": labels,
                            "correct": target.argmax(1) == labels})
    outputs["loss_ce"] = -(target[np.arange(n), labels] - np.log(np.exp(target).sum(1)))
    outputs["logits"] = _list_column(target)
    p = n_members + n_non
    inclusion = rng.random((k, p)) < 0.5
    ref = rng.normal(0, 1, (k, p, classes)) + bump[None, :p] * (hard[:p] + 1.5 * inclusion)[:, :, None]
    pool = pool_frame(ref, inclusion, ids[:p], labels[:p])
    return outputs, pool


def test_pool_frame_round_trips_and_has_its_columns():
    outputs, pool = _case()
    assert tuple(pool.columns) == POOL_COLUMNS
    arrays = pool_arrays(pool.sample(frac=1.0, random_state=1))
    assert arrays["inclusion"].shape == (8, 600) and arrays["logits"].shape == (8, 600, 3)
    np.testing.assert_array_equal(arrays["example_id"], np.arange(100, 700))


def test_rows_pass_metric_rows_and_join_the_loss_rows_without_duplicates():
    outputs, pool = _case()
    rows, scores = attack_rows(outputs, pool, OPTIONS, delta=1e-5, accountant_epsilon=float("inf"))
    assert set(rows["attack"]) == {"lira_online", "lira_offline", "rmia"}
    attacks = metric_rows("mia", rows, dataset="synthetic", run="r0")
    loss = metric_rows("mia", mia_metrics(outputs, members_split="train", nonmembers_split="holdout",
                                          utility_split="test", delta=1e-5, accountant_epsilon=float("inf"),
                                          seed=0, alpha=0.05), dataset="synthetic", run="r0")
    table = pd.concat([loss, attacks], ignore_index=True)
    check_metric_table(table)
    keyed = table[table["metric"].isin(["attack_auc", "tpr_at_fpr", "epsilon_lower_bound"])]
    assert not keyed.duplicated(["metric", "attack", "fpr_target"]).any()
    assert set(keyed["attack"]) == set(ATTACK_NAMES)
    # the loss rung keeps one row per metric for the readers that want it
    assert (loss_attack_rows(table)["metric"] == "attack_auc").sum() == 1
    verdict = table[table["metric"] == "epsilon_lower_bound_exceeds_accountant"]
    assert len(verdict) == 3 and not verdict["value_bool"].any()
    auc = table[table["metric"] == "attack_auc"].set_index("attack")["value"]
    assert auc["lira_online"] > auc["loss"] > 0.5  # the reference models know each example's difficulty
    params = json.loads(table.loc[table["attack"] == "rmia", "attack_params"].iloc[0])
    assert params["mode"] == "online" and params["population_size"] == 100
    assert (attacks["reference_models"] == 8).all()
    # scores: one column per attack (higher = member), the population flag, P's rows only
    assert len(scores) == 600 and scores["rmia_population"].sum() == 100
    assert not scores["rmia_population"][scores["is_member"]].any()
    assert set(ATTACK_NAMES) <= set(scores.columns)


def test_temperature_and_tuned_offline_a_are_recorded():
    outputs, pool = _case(seed=1)
    options = {**OPTIONS, "rmia": {**OPTIONS["rmia"], "offline_a": "tune", "temperature": 2.0}}
    rows, _ = attack_rows(outputs, pool, options, delta=1e-5, accountant_epsilon=1.0)
    params = json.loads(rows.loc[rows["attack"] == "rmia", "attack_params"].iloc[0])
    assert params["mode"] == "offline" and 0 <= params["offline_a"] <= 1 and params["temperature"] == 2.0


def test_a_pool_of_another_dataset_is_refused():
    outputs, pool = _case()
    other = outputs.assign(label=(outputs["label"] + 1) % 3)
    with pytest.raises(ValueError, match="labels differ"):
        attack_rows(other, pool, OPTIONS, delta=1e-5, accountant_epsilon=1.0)
    with pytest.raises(ValueError, match="lack"):
        attack_rows(outputs.iloc[10:], pool, OPTIONS, delta=1e-5, accountant_epsilon=1.0)


def test_rmia_population_is_seeded_non_members():
    member = np.r_[np.ones(50, bool), np.zeros(50, bool)]
    a, b = rmia_population(member, 20, 3), rmia_population(member, 20, 3)
    np.testing.assert_array_equal(a, b)
    assert (a >= 50).all() and len(a) == 20
    assert len(rmia_population(member, 1000, 3)) == 50
