"""Adapters of the identifiability family (Bernau et al. 2021) with a fake snakemake object."""

import math

import pytest

from dpaudit.io import read_parquet, write_json
from dpaudit.metrics.identifiability import noise_multiplier_for_rho_beta
from tests.scripts.fake import FakeSnakemake, named, run_script


def _run(tmp_path, train, name):
    path = tmp_path / f"{name}.json"
    write_json(path, train)
    out = tmp_path / f"{name}.parquet"
    run_script("metric_identifiability", FakeSnakemake(
        "metric_identifiability", input={"train": path}, output=named([out]),
        wildcards={"dataset": "toy", "run": name}, log=[tmp_path / f"{name}.log"]))
    return read_parquet(out)


def test_metric_identifiability_rows_for_dpsgd_and_baseline(tmp_path):
    dp = _run(tmp_path, {"mechanism": "dpsgd", "epsilon": 2.197, "delta": 0.01, "noise_multiplier": 1.1,
                         "steps": 300, "sampling_probability": 0.05, "accountant": "rdp", "sampling": "poisson",
                         "neighbouring_relation": "add_or_remove_one"}, "dp")
    assert set(dp["family"]) == {"identifiability"} and set(dp["run"]) == {"dp"}
    values = dp.set_index("metric")["value"]
    # Paper's parameter table: ε = 2.2, δ = 0.01 → ρ_β = 0.9, ρ_α = 0.28.
    assert values["rho_beta"] == pytest.approx(0.9, abs=1e-4)
    assert round(values["rho_alpha_thm2"], 2) == 0.28
    assert math.isnan(values["rho_alpha_rdp"])  # mini-batch run: not applicable, not invented
    assert set(dp["conversion"]) == {"dp_accounting"}  # the conversion recorded with every number
    base = _run(tmp_path, {"mechanism": "baseline", "epsilon": math.inf, "delta": None}, "base")
    assert not base["applicable"].any() and base["value"].isna().all()


def test_audit_adapters_chain_on_digits(tmp_path):
    """audit_neighbours → audit_block → audit_aggregate → plot_identifiability on digits."""
    from dpaudit.data.datasets import prepare_dataset
    from dpaudit.io import write_parquet
    from dpaudit.metrics.identifiability_grid import audit_configs

    table, info = prepare_dataset("digits", {}, {})
    examples, info_path = tmp_path / "examples.parquet", tmp_path / "dataset.json"
    write_parquet(examples, table)
    write_json(info_path, info)
    options = {"n": 30, "delta": 0.01, "rho_beta": [0.9], "distance": "ssim", "image_shape": [8, 8],
               "data_range": 16, "hidden_units": [8], "output": "softmax", "learning_rate": 0.005,
               "test_size": 200, "pool": "nonmembers"}
    shared = {"neighbourhoods": ["bounded", "unbounded"], "modes": ["ls", "gs"], "pairs": ["max1"], "runs": 6,
              "block_size": 4, "steps": 5, "clip_norm": 3.0, "optimizer": "adam", "conversion": "legacy",
              "true_dataset": "D", "vector_runs": 1, "seed": 0}
    neighbours = tmp_path / "neighbours.parquet"
    run_script("audit_neighbours", FakeSnakemake(
        "audit_neighbours", input={"examples": examples, "info": info_path}, output=named([neighbours]),
        params={"options": options, "top": 3}, wildcards={"dataset": "digits"}, log=[tmp_path / "n.log"]))
    table = read_parquet(neighbours)
    bounded = table[table["neighbourhood"] == "bounded"]
    # 1 − SSIM of the chosen pairs recomputed with scikit-image itself.
    assert (bounded["score"] - bounded["ssim_check"]).abs().max() < 1e-9
    runs, steps = [], []
    for name, params in audit_configs(options, shared).items():
        for block in (0, 1):
            out = {k: tmp_path / f"{name}.{block}.{k}.parquet" for k in ("runs", "steps", "vectors")}
            run_script("audit_block", FakeSnakemake(
                "audit_block", input={"examples": examples, "info": info_path, "neighbours": neighbours},
                output=out, params={"options": options, "audit": shared, "config": params},
                wildcards={"dataset": "digits", "audit_config": name, "block": str(block)},
                log=[tmp_path / f"{name}.{block}.log"]))
            runs.append(out["runs"])
            steps.append(out["steps"])
    tables = {k: tmp_path / f"audit_{k}.parquet" for k in ("runs", "steps", "summary")}
    run_script("audit_aggregate", FakeSnakemake(
        "audit_aggregate", input={"runs": [str(p) for p in runs], "steps": [str(p) for p in steps]},
        output=tables, params={"alpha": 0.05}, log=[tmp_path / "agg.log"]))
    summary = read_parquet(tables["summary"])
    assert len(summary) == 4 and (summary["runs"] == 6).all()  # blocks of 4 + 2 runs
    assert (summary["ls_violations"] == 0).all()
    all_runs = read_parquet(tables["runs"])
    assert sorted(all_runs.groupby("config")["run_id"].apply(list).iloc[0]) == list(range(6))
    figures = {f"fig{i}": tmp_path / f"f{i}.png" for i in range(1, 7)}
    figures |= {f"fig{i}_pdf": tmp_path / f"f{i}.pdf" for i in range(1, 7)}
    figures |= {"audit_digits": tmp_path / "a.png", "audit_digits_pdf": tmp_path / "a.pdf",
                "tables": tmp_path / "t.html", "parameters": tmp_path / "p.parquet"}
    run_script("plot_identifiability", FakeSnakemake(
        "plot_identifiability", input=tables, output=figures,
        params={"datasets": {"digits": options}, "steps": 5, "conversion": "legacy"}, log=[tmp_path / "p.log"]))
    assert all(path.stat().st_size > 0 for path in figures.values())
    parameters = read_parquet(figures["parameters"])
    assert parameters["noise_multiplier"].iloc[0] == pytest.approx(noise_multiplier_for_rho_beta(0.9, 5, 0.01))
    assert "Health checks" in figures["tables"].read_text()
