"""PMP adapters (Lowy et al. 2024) with a fake ``snakemake`` object."""

import math

import numpy as np
import pandas as pd

from dpaudit.io import read_parquet, write_json, write_parquet
from dpaudit.simulations import pmp as sim
from tests.scripts.fake import FakeSnakemake, named, run_script

SPLITS = {"members": "train", "nonmembers": "holdout", "utility": "test"}


def _examples(n_train=6, n_holdout=4, n_test=3):
    splits = ["train"] * n_train + ["holdout"] * n_holdout + ["test"] * n_test
    return pd.DataFrame({"example_id": np.arange(len(splits), dtype=np.int64) + 100, "split": splits,
                         "label": np.arange(len(splits)) % 2})


def test_simulate_pmp_writes_tables_and_six_figures(tmp_path):
    # tiny grids (library options; the config only sets trial counts) to keep the test fast
    options = {"trials_expmech": 2, "trials_gauss": 2, "seed": 1, "gauss_sens_convention": "replace_2C_over_n",
               "fig1": {**sim.DEFAULTS["fig1"], "data_std": [0.1, 1]},
               "fig2": {**sim.DEFAULTS["fig2"], "clip_C": [5, 50]},
               "fig3": {**sim.DEFAULTS["fig3"], "d": [1, 5]},
               "fig4": {**sim.DEFAULTS["fig4"], "x_values": [1, 10], "n": 20},
               "fig5": {**sim.DEFAULTS["fig5"], "clip_C": [10, 100], "n": 20},
               "fig6": {**sim.DEFAULTS["fig6"], "d": [2, 20], "n": 20}}
    figs = {f"fig{k}": tmp_path / f"pmp_fig{k}.png" for k in range(1, 7)}
    fake = FakeSnakemake(
        "simulate_pmp",
        output=named(expmech=tmp_path / "e.parquet", gauss=tmp_path / "g.parquet", summary=tmp_path / "s.parquet",
                     **figs, pdfs=None),
        params={"options": options},
        log=[tmp_path / "sim.log"],
    )
    # pdfs is a list output in the rule; the fake holds it as a nested list
    fake.output.pdfs = [tmp_path / f"pmp_fig{k}.pdf" for k in range(1, 7)]
    run_script("simulate_pmp", fake)
    summary = read_parquet(tmp_path / "s.parquet")
    assert set(summary["figure_id"]) == {f"fig{k}" for k in range(1, 7)}
    assert all(path.stat().st_size > 0 for path in figs.values())
    assert all((tmp_path / f"pmp_fig{k}.pdf").stat().st_size > 0 for k in range(1, 7))
    assert read_parquet(tmp_path / "e.parquet")["ordering_ok"].all()


def test_metric_pmp_baseline_rows_and_report(tmp_path):
    # issue 47: a run the recipes do not apply to gets its train.json and the parent set's two options
    # only (rules/pmp.smk): no examples, no pmp pairs (none are computed for it)
    write_json(tmp_path / "train.json", {"mechanism": "baseline", "epsilon": math.inf, "delta": None,
                                         "accountant": None})
    fake = FakeSnakemake(
        "metric_pmp",
        input={"train": tmp_path / "train.json"},
        output={"metrics": tmp_path / "m.parquet", "per_example": tmp_path / "pe.parquet"},
        params={"options": {"parent_seed": 0, "nonmember_pool": "nonmembers_and_utility"}},
        wildcards={"dataset": "toy", "run": "mechanism~baseline"},
        log=[tmp_path / "pmp.log"],
    )
    run_script("metric_pmp", fake)
    rows = read_parquet(tmp_path / "m.parquet")
    assert set(rows["family"]) == {"pmp"} and set(rows["dataset"]) == {"toy"}
    assert (rows["status"] == "not_applicable").all() and (rows["accountant_epsilon"] == math.inf).all()
    report = FakeSnakemake("pmp_report", input={"metrics": [tmp_path / "m.parquet"]},
                           output={"table": tmp_path / "r.parquet", "html": tmp_path / "r.html"},
                           log=[tmp_path / "r.log"])
    run_script("pmp_report", report)
    table = read_parquet(tmp_path / "r.parquet")
    assert table["status"].tolist() == ["not_applicable"] and "n/a" in (tmp_path / "r.html").read_text()
    # no DP guarantee: the balanced MIA success bound at the accountant's ε = ∞ is the trivial 1
    assert table["accountant_epsilon"].tolist() == [math.inf] and table["accountant_mia_success_bound"].tolist() == [1.0]


def test_metric_pmp_reads_the_recipe_pool_columns(tmp_path):
    # The adapter reads the pool's four Recipe C columns (not the logits) and its record; a
    # baseline run's rows stay not applicable (Recipe C bounds DP-SGD runs only).
    from dpaudit.reference.pool import pool_frame

    examples = _examples()
    write_parquet(tmp_path / "examples.parquet", examples)
    write_json(tmp_path / "dataset.json", {"splits": SPLITS})
    write_json(tmp_path / "train.json", {"mechanism": "baseline", "epsilon": math.inf, "delta": None})
    population = examples["example_id"].to_numpy()[:10]
    rng = np.random.default_rng(0)
    write_parquet(tmp_path / "pool.parquet", pool_frame(rng.normal(size=(4, 10, 2)), rng.random((4, 10)) < 0.5,
                                                        population, np.arange(10) % 2))
    write_json(tmp_path / "pool.json", {"recipe_name": "r", "reference_models": 4})
    fake = FakeSnakemake(
        "metric_pmp",
        input={"examples": tmp_path / "examples.parquet", "info": tmp_path / "dataset.json",
               "train": tmp_path / "train.json", "pairs": tmp_path / "absent.parquet",
               "pool": tmp_path / "pool.parquet", "pool_info": tmp_path / "pool.json"},
        output={"metrics": tmp_path / "m.parquet", "per_example": tmp_path / "pe.parquet"},
        params={"options": {"recipe_c": True}},
        wildcards={"dataset": "toy", "run": "mechanism~baseline"},
        log=[tmp_path / "pmp.log"],
    )
    run_script("metric_pmp", fake)
    rows = read_parquet(tmp_path / "m.parquet")
    assert (rows["status"] == "not_applicable").all() and "empirical_lira" in set(rows["method"])
