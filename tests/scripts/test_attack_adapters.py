"""Adapters of the reference-model attacks (issue 24) with a fake ``snakemake`` object."""

import math

import numpy as np
import pandas as pd

from dpaudit.contract.metrics import ATTACK_NAMES, check_metric_table
from dpaudit.io import read_json, read_parquet, write_json, write_parquet
from tests.scripts.fake import FakeSnakemake, run_script
from tests.unit.test_attack_rows import OPTIONS, _case

RUN = "mechanism~baseline_seed~0"
RECIPE = "mechanism~baseline"


def _metric_attacks(tmp_path, recipe=RECIPE):
    outputs, pool = _case()
    paths = {name: tmp_path / f"{name}.parquet" for name in ("outputs", "pool")}
    write_parquet(paths["outputs"], outputs)
    write_parquet(paths["pool"], pool)
    write_json(tmp_path / "train.json", {"epsilon": "inf", "delta": 1e-5, "accountant": "rdp"})
    write_json(tmp_path / "pool.json", {"recipe_name": RECIPE, "reference_models": 8})
    fake = FakeSnakemake(
        "metric_attacks",
        input={"pool": paths["pool"], "pool_info": tmp_path / "pool.json", "outputs": paths["outputs"],
               "train": tmp_path / "train.json"},
        output={"rows": tmp_path / "rows.parquet", "scores": tmp_path / "scores.parquet"},
        params={"options": {**OPTIONS, "reference_models": 8}, "recipe": recipe},
        wildcards={"dataset": "synthetic", "run": RUN},
        log=[tmp_path / "metric_attacks.log"],
    )
    run_script("metric_attacks", fake)
    return outputs


def test_metric_attacks_writes_declared_mia_rows_and_scores(tmp_path):
    _metric_attacks(tmp_path)
    rows = read_parquet(tmp_path / "rows.parquet")
    check_metric_table(rows)
    assert set(rows["family"]) == {"mia"} and set(rows["run"]) == {RUN}
    assert set(rows["attack"]) == {"lira_online", "lira_offline", "rmia"}
    scores = read_parquet(tmp_path / "scores.parquet")
    assert set(ATTACK_NAMES) <= set(scores.columns) and len(scores) == 600


def test_metric_attacks_refuses_the_pool_of_another_recipe(tmp_path):
    import pytest

    # the pool's record names its recipe (issue 47: not its runs, which a seed added would change)
    with pytest.raises(ValueError, match="is the pool of recipe 'mechanism~baseline', not of run"):
        _metric_attacks(tmp_path, recipe="another_recipe")


def test_plot_attacks_writes_three_figures(tmp_path):
    outputs = _metric_attacks(tmp_path)
    rows = read_parquet(tmp_path / "rows.parquet")
    loss = rows[rows["attack"] == "lira_online"].assign(attack="loss")  # stands in for metric_mia's rows
    accuracy = pd.DataFrame({"dataset": "synthetic", "run": RUN, "family": "mia",
                             "metric": ["train_accuracy", "test_accuracy"], "value": [0.9, 0.7]})
    table = pd.concat([rows, loss, accuracy], ignore_index=True)
    table["mechanism"], table["target_epsilon"], table["seed"] = "baseline", math.nan, 0
    write_parquet(tmp_path / "metrics.parquet", table)
    write_json(tmp_path / "recipe.json", {"recipe": {"mechanism": "baseline", "target_epsilon": None},
                                          "in_accuracy": [0.9, 0.95, None],
                                          "out_accuracy": [0.7, 0.72, 0.69]})
    figures = {kind: tmp_path / f"{kind}.png" for kind in ("roc", "tpr", "reference_accuracy")}
    fake = FakeSnakemake(
        "plot_attacks",
        input={"table": tmp_path / "metrics.parquet", "scores": [tmp_path / "scores.parquet"],
               "pools": [tmp_path / "recipe.json"]},
        output={**figures, **{f"{k}_pdf": p.with_suffix(".pdf") for k, p in figures.items()}},
        params={"runs": [RUN], "run_params": {RUN: {"mechanism": "baseline", "target_epsilon": None, "seed": 0}},
                "recipes": {"recipe": [RUN]}, "attacks": list(ATTACK_NAMES)},
        wildcards={"dataset": "synthetic"},
        log=[tmp_path / "plot.log"],
    )
    run_script("plot_attacks", fake)
    for path in figures.values():
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.with_suffix(".pdf").stat().st_size > 0
    assert np.isfinite(len(outputs))


def test_exposed_rows_writes_the_page_and_figure_of_a_dataset(tmp_path):
    # issue 24, item 5: one job per dataset over its attacked runs' scores and the metrics table's AUCs
    _metric_attacks(tmp_path)
    rows = read_parquet(tmp_path / "rows.parquet")
    other = "mechanism~dpsgd_target_epsilon~1.0_seed~0"
    table = pd.concat([rows, rows.assign(run=other)], ignore_index=True)
    write_parquet(tmp_path / "metrics.parquet", table)
    scores = read_parquet(tmp_path / "scores.parquet")
    write_parquet(tmp_path / "scores2.parquet", scores.assign(lira_online=scores["lira_online"][::-1].to_numpy()))
    outputs = {"page": tmp_path / "exposed.html", "png": tmp_path / "exposed.png", "pdf": tmp_path / "exposed.pdf"}
    fake = FakeSnakemake(
        "exposed_rows",
        input={"table": tmp_path / "metrics.parquet", "scores": [tmp_path / "scores.parquet", tmp_path / "scores2.parquet"],
               "records": [], "audit_runs": []},
        output=outputs,
        params={"runs": [RUN, other], "audited": [],
                "run_params": {RUN: {"mechanism": "baseline", "target_epsilon": None, "seed": 0},
                               other: {"mechanism": "dpsgd", "target_epsilon": 1.0, "seed": 0}}},
        wildcards={"dataset": "synthetic"},
        log=[tmp_path / "exposed.log"],
    )
    run_script("exposed_rows", fake)
    page = outputs["page"].read_text()
    assert page.rstrip().endswith("</html>") and "∞ (baseline)" in page and "The same rows at every ε?" in page
    assert outputs["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and outputs["pdf"].stat().st_size > 0
    assert "exposed rows of 2 models written" in (tmp_path / "exposed.log").read_text()


def test_reference_pool_adapter_trains_a_linear_recipe(tmp_path):
    # a linear recipe: no TensorFlow, one exact fit per model; every run of the recipe is listed
    rng = np.random.default_rng(0)
    x = rng.normal(size=(120, 3)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    split = np.array(["train"] * 50 + ["holdout"] * 50 + ["test"] * 20)
    write_parquet(tmp_path / "examples.parquet", pd.DataFrame({"example_id": np.arange(120), "split": split,
                                                               "label": y, "x": list(x)}))
    write_json(tmp_path / "dataset.json", {"splits": {"members": "train", "nonmembers": "holdout", "utility": "test"},
                                           "delta": {"resolved": 1e-3}, "classes": 2})
    write_json(tmp_path / "train.json", {"mechanism": "output_perturbation", "epsilon": 2.0})
    recipe = {"mechanism": "output_perturbation", "target_epsilon": 2.0, "clip_norm": None, "microbatches": None,
              "epochs": None, "batch_size": None, "learning_rate": None}
    fake = FakeSnakemake(
        "reference_pool",
        input={"examples": tmp_path / "examples.parquet", "info": tmp_path / "dataset.json",
               "train": tmp_path / "train.json"},
        output={"outputs": tmp_path / "pool.parquet", "info": tmp_path / "pool.json"},
        params={"recipe": recipe, "training": {"linear_regularization": 1.0},
                "reference_models": 4, "seed": 0, "code": ""},
        wildcards={"dataset": "synthetic", "recipe": "r"},
        log=[tmp_path / "pool.log"],
    )
    run_script("reference_pool", fake)
    pool = read_parquet(tmp_path / "pool.parquet")
    assert len(pool) == 4 * 100 and set(pool["model"]) == {0, 1, 2, 3}
    info = read_json(tmp_path / "pool.json")
    # the recipe names the pool; its runs are no param of the job (issue 47: a seed added reruns no pool)
    assert "runs" not in info and info["recipe_name"] == "r"
    assert info["target_epsilon"] == 2.0 and info["noise_multiplier"] is None
    assert info["reference_epsilon"] == [2.0] * 4 and info["reference_epsilon_max"] == 2.0
    assert info["reference_sampling_probability"] is None and info["reference_steps"] is None
    assert sum(info["training_rows"]) == int(np.round(info["inclusion_rate"] * 4 * 100))
    assert not info["vectorized"] and "linear" in info["fallback_reason"] and len(info["in_accuracy"]) == 4
