"""Adapters of the identifiability family (Bernau et al. 2021) with a fake snakemake object."""

import math

import pytest

from dpaudit.io import read_parquet, write_json
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
                         "steps": 300, "sampling_probability": 0.05, "accountant": "rdp"}, "dp")
    assert set(dp["family"]) == {"identifiability"} and set(dp["run"]) == {"dp"}
    values = dp.set_index("metric")["value"]
    # Paper's parameter table: ε = 2.2, δ = 0.01 → ρ_β = 0.9, ρ_α = 0.28.
    assert values["rho_beta"] == pytest.approx(0.9, abs=1e-4)
    assert round(values["rho_alpha_thm2"], 2) == 0.28
    assert math.isnan(values["rho_alpha_rdp"])  # mini-batch run: not applicable, not invented
    base = _run(tmp_path, {"mechanism": "baseline", "epsilon": math.inf, "delta": None}, "base")
    assert not base["applicable"].any() and base["value"].isna().all()
