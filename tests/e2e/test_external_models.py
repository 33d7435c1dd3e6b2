"""Models trained outside dpaudit through the whole DAG (issue 44).

* The shipped example (config/trained_elsewhere.yaml with the files examples/trained_elsewhere/train.py
  wrote): both models on the overview, their dossiers saying what was and was not checked, the
  families that need the training not applicable with the reason, the verdict from the black-box bound.
* Equivalence: a DP-SGD model dpaudit trained itself, audited again as an outputs file with its
  split's ids and its accountant's inputs as the promise, gives the very rows of every family the
  two share (mia, ε*, privacy card, identifiability).
"""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest
import yaml

from dpaudit.config import dataset_grids, recipe_lookup, run_lookup, validate_config
from dpaudit.contract import paths as P
from dpaudit.io import read_json, read_parquet
from tests.workflow.helpers import ROOT, copy_project, snakemake

SHIPPED = ROOT / "config" / "trained_elsewhere.yaml"
MODELS = ("keras_file", "outputs_parquet")


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    base = tmp_path_factory.mktemp("trained_elsewhere")
    project = copy_project(base / "project")
    workdir = base / "work"
    shutil.copytree(ROOT / "examples", workdir / "examples")  # the config's paths are relative to the working dir
    result = snakemake(workdir, "--cores", "2", "--configfile", str(project / "config" / "trained_elsewhere.yaml"),
                       env={"PYTHONPATH": str(project / "src")}, root=project)
    return {"workdir": workdir, "log": result}


def test_the_overview_shows_both_models_trained_elsewhere(shipped):
    page = (shipped["workdir"] / P.OVERVIEW).read_text()
    for run in MODELS:
        assert f"{run} (trained elsewhere)" in page
        assert f"dossiers/breast_cancer/{run}.html" in page
    assert "2 models on 1 dataset" in page
    assert "trained outside dpaudit" in page  # the mechanism checks' reason


def test_each_dossier_says_what_was_and_was_not_checked(shipped):
    for run in MODELS:
        page = (shipped["workdir"] / P.DOSSIER.format(dataset="breast_cancer", run=run)).read_text()
        assert "Trained outside dpaudit." in page and "<strong>Checked.</strong>" in page
        assert "<strong>Not checked</strong>" in page
        for what in ("the canary audit twin", "the noise certificate", "the accounting check"):
            assert what in page
        # the model file's gradients at its final weights give PMP Recipe A (its promise states C); the outputs
        # file gives neither
        pmp = ("PMP Recipe A (Lowy et al. 2024): one full-batch DP-SGD step", "PMP Recipe B (per-example gradients "
               "along the training trajectory)") if run == "keras_file" else (None, "PMP Recipes A and B")
        assert pmp[1] in page and (pmp[0] is None or pmp[0] in page)
        assert "Verdict: audit too weak to say: trained elsewhere" in page or "Verdict: consistent" in page \
            or "Verdict: measured above" in page
    keras = (shipped["workdir"] / P.DOSSIER.format(dataset="breast_cancer", run="keras_file")).read_text()
    assert "recomputed by dpaudit&#x27;s rdp accountant" in keras or "recomputed by dpaudit's rdp accountant" in keras


def test_the_rows_of_a_model_trained_elsewhere(shipped):
    table = read_parquet(shipped["workdir"] / P.METRICS_TABLE)
    assert set(table["run"].dropna()) == set(MODELS)
    assert (table["mechanism"] == "external").all()
    for run in MODELS:
        rows = table[table["run"] == run]
        pmp = rows[rows["family"] == "pmp"]
        recipe_a = pmp["method"] == "gauss_single_step"
        if run == "keras_file":  # Recipe A at the final weights; Recipes B and C need the training
            assert (pmp[recipe_a]["status"] == "ok").all() and recipe_a.sum() > 2
            pmp = pmp[~recipe_a]
        assert len(pmp) and pmp["note"].str.contains("trained outside dpaudit").all()
        canary = rows[rows["family"] == "canary"]
        checks = canary[canary["metric"].isin(["noise_check_passed", "accounting_reproduced"])]
        assert len(checks) == 2 and (~checks["applicable"].astype(bool)).all()
        flag = canary[canary["metric"] == "measured_above_promise"].iloc[0]
        assert flag["decided_by"] in ("black_box_bound", "black_box_ceiling")
        bound = rows[(rows["metric"] == "epsilon_lower_bound") & (rows["family"] == "mia")]["value"].item()
        assert (flag["verdict"] == "above_promise") == (bound > rows["accountant_epsilon"].iloc[0])
        for family in ("mia", "epsilon_star", "privacy_card", "identifiability"):
            assert (rows["family"] == family).any(), family
    train = read_json(shipped["workdir"] / P.TRAIN_INFO.format(dataset="breast_cancer", run="keras_file"))
    # the example's promise is tensorflow-privacy's printed statement: the recomputation agrees to 3 decimals
    assert f"{train['epsilon']:.3f}" == "6.466" and train["promise"]["mismatch"] is False
    assert train["source"]["format"] == "keras"
    assert train["per_example_gradients"]["available"] and train["clip_norm"] == 1.0
    gradients = read_parquet(shipped["workdir"] / P.GRADIENTS.format(dataset="breast_cancer", run="keras_file"))
    assert len(gradients) == 569 and (gradients["clipped_norm"] <= 1.0).all()
    assert not (shipped["workdir"] / P.GRADIENTS.format(dataset="breast_cancer", run="outputs_parquet")).exists()


def test_the_model_file_and_its_outputs_file_are_the_same_model(shipped):
    """dpaudit's safe-mode load of model.keras on the dataset's features gives the logits train.py wrote."""
    frames = [read_parquet(shipped["workdir"] / P.OUTPUTS.format(dataset="breast_cancer", run=run)) for run in MODELS]
    assert np.array_equal(np.stack(frames[0]["logits"].to_numpy()), np.stack(frames[1]["logits"].to_numpy()))
    rows = [read_parquet(shipped["workdir"] / P.metric("mia").format(dataset="breast_cancer", run=run)) for run in MODELS]
    shared = [r[r["metric"] != "accountant_epsilon"].drop(columns="run").reset_index(drop=True) for r in rows]
    pd.testing.assert_frame_equal(*shared)
    # one model (same_model_as): the budget ledger lists both entries and composes the model once
    ledger = read_parquet(shipped["workdir"] / P.BUDGET_LEDGER).set_index("run")
    totals = read_parquet(shipped["workdir"] / P.BUDGET_TOTALS).set_index("dataset").loc["breast_cancer"]
    assert set(MODELS) <= set(ledger.index) and int(ledger.loc[list(MODELS), "counted_in_totals"].sum()) == 1
    assert totals["n_runs"] == 1 and totals["basic_epsilon"] == pytest.approx(ledger.loc[list(MODELS), "epsilon"].max())


# ------------------------------------------------------------------ equivalence with a run dpaudit trained


TINY = {
    "datasets": {"synthetic": {"n": 400, "d": 5, "classes": 2, "separation": 1.5, "seed": 3}},
    "training": {"hidden_units": [8]},
    "grid": [{"mechanism": ["dpsgd"], "target_epsilon": [4], "clip_norm": [1.0], "epochs": [2], "batch_size": [32],
              "seed": [0]}],
    "metrics": {"identifiability": {"enabled": True}, "attacks": {"enabled": True, "reference_models": 4},
                "pmp": {"enabled": True, "partners_max": 32},
                "epsilon_star": {"grid_size": 10000, "bootstrap": {"resamples": 20, "grid_size": 1000}}},
}
SHARED = ("mia", "epsilon_star", "privacy_card", "identifiability")  # the families both run


def test_a_model_dpaudit_trained_audited_again_as_an_outputs_file_gives_identical_rows(tmp_path):
    project = copy_project(tmp_path / "project")
    workdir = tmp_path / "work"
    workdir.mkdir()
    env = {"PYTHONPATH": str(project / "src")}
    first = tmp_path / "first.yaml"
    first.write_text(yaml.safe_dump(TINY))
    runs = run_lookup(dataset_grids(validate_config(TINY))["synthetic"])  # the grid's one run and its recipe
    ((run, _),), ((recipe, _),) = runs.items(), recipe_lookup(runs).items()
    keys = {"dataset": "synthetic", "run": run}
    pool_path = workdir / P.REFERENCE_POOL.format(dataset="synthetic", recipe=recipe)
    snakemake(workdir, P.OUTPUTS.format(**keys), P.TRAIN_INFO.format(**keys), str(pool_path.relative_to(workdir)),
              "--cores", "2", "--configfile", str(first), env=env, root=project)
    # the recipe's reference models, handed over as a practitioner's reference outputs (LiRA's convention)
    read_parquet(pool_path, columns=["example_id", "model", "included", "logits"]).to_parquet(
        tmp_path / "references.parquet", index=False)
    outputs = read_parquet(workdir / P.OUTPUTS.format(**keys))
    train = read_json(workdir / P.TRAIN_INFO.format(**keys))
    info = read_json(workdir / P.DATASET_INFO.format(dataset="synthetic"))
    # what a practitioner would hand over: the logits per example id, the ids of each role, the DP-SGD inputs
    pd.DataFrame({"example_id": outputs["example_id"], "logits": outputs["logits"]}).to_parquet(
        tmp_path / "outputs.parquet", index=False)
    files = {}
    for role, split in (("members", "members"), ("held_out", "nonmembers"), ("utility", "utility")):
        ids = outputs.loc[outputs["split"] == info["splits"][split], "example_id"]
        pd.DataFrame({"example_id": ids}).to_csv(tmp_path / f"{role}.csv", index=False)
        files[role] = str(tmp_path / f"{role}.csv")
    accounted = train["accountant_inputs"] if "accountant_inputs" in train else train
    promise = {"noise_multiplier": float(train["noise_multiplier"]),
               "sampling_probability": float(accounted["sampling_probability"]), "steps": int(accounted["steps"]),
               "delta": float(train["delta"]), "sampling": train["sampling"], "accountant": train["accountant"]}
    # "file": the very model file dpaudit saved, audited as a practitioner's .keras file
    model_file = tmp_path / "model.keras"
    shutil.copyfile(workdir / P.MODEL.format(**keys), model_file)
    second = tmp_path / "second.yaml"
    # "recipe": the same model with its training recipe instead: dpaudit trains its reference pool (external~recipe)
    block = TINY["grid"][0]
    recipe = {"mechanism": "dpsgd", "epochs": block["epochs"][0], "batch_size": block["batch_size"][0],
              "learning_rate": 0.05}  # the grid's default learning rate (config.schema.yaml)
    second.write_text(yaml.safe_dump({**TINY, "external_models": {"again": {
        "dataset": "synthetic", "outputs": str(tmp_path / "outputs.parquet"), **files, "promise": promise,
        "reference_outputs": str(tmp_path / "references.parquet")}, "recipe": {
        "dataset": "synthetic", "outputs": str(tmp_path / "outputs.parquet"), **files,
        "promise": {**promise, "clip_norm": block["clip_norm"][0]}, "reference_recipe": recipe}, "file": {
        "dataset": "synthetic", "model": str(model_file), **files,
        "promise": {**promise, "clip_norm": block["clip_norm"][0]}}}}))
    snakemake(workdir, P.METRICS_TABLE, "--cores", "2", "--configfile", str(second), env=env, root=project)
    record = read_json(workdir / P.TRAIN_INFO.format(dataset="synthetic", run="again"))
    assert record["epsilon"] == train["epsilon"]  # the accountant's own ε, recomputed from its inputs
    for family in SHARED:
        internal = read_parquet(workdir / P.METRIC.format(family=family, dataset="synthetic", run=run))
        external = read_parquet(workdir / P.METRIC.format(family=family, dataset="synthetic", run="again"))
        assert len(internal) > 0
        pd.testing.assert_frame_equal(external.drop(columns="run"), internal.drop(columns="run"), obj=family)
    # the pool dpaudit trained from the entry's recipe, DP-matched by the promise's σ and C on the entry's
    # members and held-out rows, is the grid recipe's pool (same seeds, population, σ): the given outputs
    recipe_pool = read_parquet(workdir / P.REFERENCE_POOL.format(dataset="synthetic", recipe="external~recipe"))
    pd.testing.assert_frame_equal(recipe_pool, read_parquet(pool_path))
    pool_info = read_json(workdir / P.REFERENCE_POOL_INFO.format(dataset="synthetic", recipe="external~recipe"))
    # (the record names its recipe, not its runs: issue 47)
    assert pool_info["recipe_name"] == "external~recipe" and pool_info["noise_multiplier"] == train["noise_multiplier"]
    # LiRA and RMIA from the given reference outputs and from the entry's recipe equal LiRA and RMIA from
    # the grid recipe's pool they are
    for pattern in (P.ATTACK_METRIC, P.ATTACK_SCORES):
        internal = read_parquet(workdir / pattern.format(dataset="synthetic", run=run))
        assert len(internal) > 0
        for name in ("again", "recipe"):
            external = read_parquet(workdir / pattern.format(dataset="synthetic", run=name))
            pd.testing.assert_frame_equal(external.drop(columns="run", errors="ignore"),
                                          internal.drop(columns="run", errors="ignore"), obj=f"{name} {pattern}")
    # the model file's per-example gradients and PMP Recipe A at its final weights are the extraction's
    internal = read_parquet(workdir / P.GRADIENTS.format(**keys)).sort_values("example_id", ignore_index=True)
    external = read_parquet(workdir / P.GRADIENTS.format(dataset="synthetic", run="file"))
    assert external["example_id"].tolist() == internal["example_id"].tolist()
    np.testing.assert_allclose(external["grad_norm"], internal["grad_norm"], rtol=1e-12)
    np.testing.assert_allclose(external["clipped_norm"], internal["clipped_norm"], rtol=1e-12)
    rows = [read_parquet(workdir / P.metric("pmp").format(dataset="synthetic", run=name)) for name in (run, "file")]
    recipe_a = [r[r["method"] == "gauss_single_step"].drop(columns="run").reset_index(drop=True) for r in rows]
    assert len(recipe_a[0]) > 2 and (recipe_a[0]["status"] == "ok").all()
    pd.testing.assert_frame_equal(recipe_a[1], recipe_a[0], obj="PMP Recipe A")
    again = read_parquet(workdir / P.OUTPUTS.format(dataset="synthetic", run="again"))
    assert np.array_equal(np.stack(again["logits"].to_numpy()), np.stack(outputs["logits"].to_numpy()))
