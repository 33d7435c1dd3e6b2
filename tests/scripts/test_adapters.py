"""Each thin adapter runs with a fake ``snakemake`` object and writes its outputs and log."""

import math

import numpy as np
import pandas as pd
import pytest

from dpaudit.io import read_json, read_parquet, write_json, write_parquet
from tests.scripts.fake import FakeSnakemake, named, run_script

RUNS = {
    "toy": {
        "mechanism~baseline_run": {"mechanism": "baseline", "target_epsilon": None, "clip_norm": None,
                                   "epochs": 1, "batch_size": 8, "learning_rate": 0.1, "seed": 0},
        "mechanism~dpsgd_run": {"mechanism": "dpsgd", "target_epsilon": 2.0, "clip_norm": 1.0,
                                "epochs": 1, "batch_size": 8, "learning_rate": 0.1, "seed": 0},
    }
}
# (dataset, run) of each train.json the aggregation reads: keys come from params, not paths
RUN_KEYS = [("toy", run) for run in RUNS["toy"]]
MIA_OPTIONS = {"alpha": 0.05, "fpr_targets": [0.01, 0.1], "ci_method": "split", "loss": "loss_ce", "seed": 0}


def test_prepare_dataset_writes_examples_info_and_resolved_delta(tmp_path):
    fake = FakeSnakemake(
        "prepare_dataset",
        input=named(),
        output={"examples": tmp_path / "examples.parquet", "info": tmp_path / "dataset.json",
                "ids": tmp_path / "ids.parquet"},
        params={"dataset": {"n": 200, "d": 3, "classes": 2, "separation": 1.0, "seed": 0, "split_seed": 0},
                "delta": "auto", "allow_large_delta": False},
        wildcards={"dataset": "synthetic"},
        log=[tmp_path / "prepare.log"],
    )
    run_script("prepare_dataset", fake)
    info = read_json(tmp_path / "dataset.json")
    n = info["n_members"]
    assert math.isclose(info["delta"]["resolved"], 1 / (n * math.log(n)), rel_tol=1e-12)
    assert len(read_parquet(tmp_path / "examples.parquet")) == 200
    assert "synthetic" in (tmp_path / "prepare.log").read_text()


def _outputs(rng, n_members, n_nonmembers, shift):
    splits = ["train"] * n_members + ["holdout"] * n_nonmembers + ["test"] * n_nonmembers
    loss = np.concatenate([rng.exponential(1.0, n_members) / shift, rng.exponential(1.0, 2 * n_nonmembers)])
    return pd.DataFrame({
        "example_id": np.arange(len(splits), dtype=np.int64),
        "split": splits,
        "is_member": np.array(splits) == "train",
        "label": rng.integers(0, 2, len(splits)),
        "loss_ce": loss,
        "loss_logit": np.log(np.expm1(loss)),
        "p_true": np.exp(-loss),
        "correct": loss < math.log(2),
    })


@pytest.fixture
def metric_files(tmp_path):
    rng = np.random.default_rng(0)
    write_json(tmp_path / "dataset.json", {"splits": {"members": "train", "nonmembers": "holdout", "utility": "test"}})
    paths, trains = [], []
    for run, params in RUNS["toy"].items():
        write_parquet(tmp_path / f"{run}.outputs.parquet", _outputs(rng, 300, 200, 2.0))
        epsilon = math.inf if params["mechanism"] == "baseline" else 2.0
        # no results/models/{dataset}/{run}/ layout: the jobs take the run keys from params
        train = tmp_path / "models" / f"model{len(trains)}.train.json"
        history = [{"epoch": e, "loss": 1 / e, "accuracy": 1 - 0.5 / e} for e in (1, 2)]
        write_json(train, {"epsilon": epsilon, "delta": 1e-3, "noise_multiplier": None if epsilon == math.inf else 1.3,
                           "accountant": "rdp", "sampling": "poisson", "history": history})
        out = tmp_path / "metrics" / f"{run}.parquet"
        fake = FakeSnakemake(
            "metric_mia",
            input={"outputs": tmp_path / f"{run}.outputs.parquet", "info": tmp_path / "dataset.json", "train": train},
            output=named([out]),
            params={"mia": MIA_OPTIONS},
            wildcards={"dataset": "toy", "run": run},
            log=[tmp_path / f"{run}.log"],
        )
        run_script("metric_mia", fake)
        paths.append(out)
        trains.append(train)
    return paths, trains


def test_metric_mia_writes_keyed_long_rows(metric_files):
    frame = read_parquet(metric_files[0][0])
    assert {"dataset", "run", "family", "metric", "value"} <= set(frame.columns)
    assert set(frame["family"]) == {"mia"} and set(frame["dataset"]) == {"toy"}
    assert {"attack_auc", "tpr_at_fpr", "epsilon_lower_bound", "accountant_epsilon"} <= set(frame["metric"])
    assert frame["value"].dtype == "float64" and frame["value_bool"].isna().all()


def test_aggregate_and_plot_adapters(tmp_path, metric_files):
    paths, trains = metric_files
    fake = FakeSnakemake(
        "aggregate_metrics",
        input={"metrics": [str(p) for p in paths], "train": [str(p) for p in trains]},
        output={"table": tmp_path / "tables" / "metrics.parquet", "runs": tmp_path / "tables" / "runs.html"},
        params={"runs": RUNS, "run_keys": RUN_KEYS},
        log=[tmp_path / "aggregate.log"],
    )
    run_script("aggregate_metrics", fake)
    table = read_parquet(tmp_path / "tables" / "metrics.parquet")
    assert table[["dataset", "run", "family", "metric"]].notna().all().all()
    from dpaudit.contract.metrics import SCHEMA_VERSION, read_schema_version

    assert read_schema_version(tmp_path / "tables" / "metrics.parquet") == SCHEMA_VERSION
    by_mechanism = table.drop_duplicates("run").set_index("mechanism")["accountant_epsilon"]
    assert by_mechanism["baseline"] == math.inf and by_mechanism["dpsgd"] == 2.0
    html = (tmp_path / "tables" / "runs.html").read_text()
    assert all(run in html for run in RUNS["toy"]) and "∞" in html

    plot = FakeSnakemake(
        "plot_privacy_utility",
        input=named([tmp_path / "tables" / "metrics.parquet"]),
        output={"png": tmp_path / "fig.png", "pdf": tmp_path / "fig.pdf"},
        log=[tmp_path / "plot.log"],
    )
    run_script("plot_privacy_utility", plot)
    assert (tmp_path / "fig.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "fig.pdf").stat().st_size > 1000

    from dpaudit.plots.models import FIGURES

    figures = {}
    for name in FIGURES:
        figures[name] = tmp_path / "models_fig" / f"{name}.png"
        figures[f"{name}_pdf"] = tmp_path / "models_fig" / f"{name}.pdf"
    models = FakeSnakemake(
        "plot_model_figures",
        input={"table": tmp_path / "tables" / "metrics.parquet",
               "outputs": [str(tmp_path / f"{run}.outputs.parquet") for run in RUNS["toy"]],
               "train": [str(p) for p in trains], "info": tmp_path / "dataset.json"},
        output=figures,
        params={"runs": list(RUNS["toy"]), "loss": "loss_ce"},
        wildcards={"dataset": "toy"},
        log=[tmp_path / "models.log"],
    )
    run_script("plot_model_figures", models)
    assert all(path.read_bytes()[:4] in (b"\x89PNG", b"%PDF") for path in figures.values())
    assert "figures over 2 models" in (tmp_path / "models.log").read_text()
