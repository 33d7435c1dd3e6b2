"""Table datasets in the workflow (issue 25): the example config, refusals before any job,
and a changed table file rerunning its preparation."""

import os

import numpy as np
import pandas as pd
import pytest
import yaml

from tests.workflow.helpers import ROOT, SHIPPED_CONFIGS, run_counts, shipped_dry_run, snakemake

GRID = [{"mechanism": ["baseline"], "epochs": [1], "batch_size": [16], "seed": [0]}]


def _table(path, n=200, bad_row=None):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"amount": rng.normal(size=n).round(4).astype(object), "city": rng.choice(["a", "b"], n),
                          "churn": rng.choice(["no", "yes"], n)})
    if bad_row is not None:
        frame.loc[bad_row, "amount"] = "twelve"
    frame.to_csv(path, index=False)


def _config(tmp_path, **entry):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"datasets": {"churn": {"source": "table", "path": "churn.csv",
                                                           "label": "churn", **entry}}, "grid": GRID}))
    return str(path)


@pytest.mark.xdist_group(SHIPPED_CONFIGS)
def test_own_table_config_runs_every_model_family_on_the_downloaded_adult_file():
    result = shipped_dry_run("config/own_table.yaml")
    counts = run_counts(result.stdout)
    # adult.data is fetched by download_dataset and read through the table source; 6 baseline/DP-SGD
    # seeds x settings + 6 more DP-SGD + 4 linear = 12 runs, each with its dossier, all written by
    # the dataset's one dossier job since issue 23 (was "dossier": 12, a job per model)
    assert counts["download_dataset"] == 1 and counts["prepare_dataset"] == 1
    assert counts["train_model"] == 12 and counts["dossier_adult_table"] == 1 and "dossier" not in counts
    for rule in ("metric_mia", "metric_epsilon_star", "metric_identifiability", "metric_pmp", "metric_canary"):
        assert counts[rule] == 12, rule
    assert counts["audit_block"] >= 1


def test_a_bad_header_is_refused_before_any_job(tmp_path):
    _table(tmp_path / "churn.csv")
    result = snakemake(tmp_path, "--cores", "1", "--configfile", _config(tmp_path, label="target"), check=False)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "table churn.csv: label column 'target' does not exist; columns: amount, city, churn" in output
    assert not (tmp_path / "results").exists() and not (tmp_path / "logs").exists()


def test_a_late_bad_cell_is_refused_before_any_job_in_one_line(tmp_path):
    _table(tmp_path / "churn.csv", n=150_000, bad_row=149_000)  # beyond the first block pyarrow infers from
    config = _config(tmp_path)
    result = snakemake(tmp_path, "--cores", "1", "--configfile", config, check=False)
    assert result.returncode != 0, result.stdout[-3000:]
    terminal = result.stdout + result.stderr
    words = "table churn.csv: column 'amount' is numeric in 149,999 rows but data row 149001 holds 'twelve'"
    # issue 46: every cell is read before any job, and the refusal is one line naming the config file
    assert f"dpaudit refused (config {config}): config.datasets.churn: {words}" in terminal, terminal[-3000:]
    assert "Traceback" not in terminal and "common.smk" not in terminal, terminal[-4000:]
    assert not (tmp_path / "results").exists() and not (tmp_path / "logs").exists()


def test_a_value_prepare_cannot_standardize_stops_prepare_dataset_and_nothing_after_it(tmp_path):
    _table(tmp_path / "churn.csv")
    frame = pd.read_csv(tmp_path / "churn.csv")
    frame["amount"] = np.linspace(1e301, 5e301, len(frame))  # finite, but its variance is not in float64
    frame.to_csv(tmp_path / "churn.csv", index=False)
    result = snakemake(tmp_path, "--cores", "1", "--configfile", _config(tmp_path), check=False)
    assert result.returncode != 0, result.stdout[-3000:]
    log = (tmp_path / "logs" / "prepare_dataset" / "churn.log").read_text()
    words = "table churn.csv: column 'amount' cannot be standardized in float64"
    assert words in log and "data row 200 holds 5e+301" in log and "Traceback" not in log
    # one clear line on the terminal, no traceback (issue 35)
    terminal = result.stdout + result.stderr
    assert f"dpaudit refused (prepare_dataset dataset=churn): config.datasets.churn: {words}" in terminal, terminal
    assert "Traceback" not in terminal, terminal[-4000:]
    assert not (tmp_path / "results" / "data" / "churn" / "examples.parquet").exists()
    assert not (tmp_path / "logs" / "train_model").exists()


def test_drop_rows_keeps_the_input_canary_check_before_any_job(tmp_path):
    _table(tmp_path / "churn.csv")
    frame = pd.read_csv(tmp_path / "churn.csv")
    frame.loc[frame.index % 2 == 0, "city"] = None  # drop_rows keeps 100 of 200 rows: 25 non-members
    frame.to_csv(tmp_path / "churn.csv", index=False)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"datasets": {"churn": {"source": "table", "path": "churn.csv", "label": "churn",
                                                           "missing": "drop_rows"}}, "grid": GRID,
                                    "metrics": {"canary": {"enabled": True, "input_canaries": 40}}}))
    result = snakemake(tmp_path, "-n", "--configfile", str(path), check=False)
    terminal = result.stdout + result.stderr
    assert result.returncode != 0 and "Job stats" not in terminal
    from dpaudit.data.examples import _share

    kept = frame.dropna()["churn"].value_counts()  # oracle: the holdout of the rows drop_rows keeps
    holdout = sum(_share(0.25, int(n)) for n in kept)
    assert 20 <= holdout <= 30
    assert (f"dpaudit refused (config {path}): config.metrics.canary.input_canaries: 40 input canaries are drawn from "
            f"the non-members of table churn.csv (dataset churn), which has {holdout}; write input_canaries <= "
            f"{holdout}") in terminal, terminal[-3000:]
    assert not (tmp_path / "logs").exists()


def test_a_decision_from_the_file_is_recorded_and_printed_once(tmp_path):
    _table(tmp_path / "churn.csv")
    frame = pd.read_csv(tmp_path / "churn.csv")
    frame.insert(0, "customer", [f"{i:06d}" for i in range(len(frame))])  # zero-padded ids: kept as text
    frame.to_csv(tmp_path / "churn.csv", index=False)
    config = _config(tmp_path, id="customer")
    result = snakemake(tmp_path, "--cores", "1", "--configfile", config, "--until", "prepare_dataset")
    terminal = result.stdout + result.stderr
    decision = "id column 'customer': ids kept as written, as text (e.g. '000000')"
    assert terminal.count(decision) == 1, terminal[-3000:]
    info = yaml.safe_load((tmp_path / "results" / "data" / "churn" / "dataset.json").read_text())
    assert any(d.startswith(decision) for d in info["table"]["decisions"])


def test_a_changed_table_reruns_its_preparation(tmp_path):
    _table(tmp_path / "churn.csv")
    config = _config(tmp_path, fit_on="holdout")
    snakemake(tmp_path, "--cores", "1", "--configfile", config, "--until", "prepare_dataset")
    assert run_counts(snakemake(tmp_path, "-n", "--configfile", config, "--until", "prepare_dataset").stdout) == {}
    _table(tmp_path / "churn.csv", n=201)
    later = os.stat(tmp_path / "results" / "data" / "churn" / "dataset.json").st_mtime + 5
    os.utime(tmp_path / "churn.csv", (later, later))
    rerun = snakemake(tmp_path, "-n", "--configfile", config, "--until", "prepare_dataset")
    assert run_counts(rerun.stdout) == {"prepare_dataset": 1}


def _readme_table_block() -> dict:
    """The YAML block of README's "Audit your own data" section, as a user copies it."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Audit your own data", 1)[1].split("\n## ", 1)[0]
    return yaml.safe_load(section.split("```yaml", 1)[1].split("```", 1)[0])


def test_the_readme_recipe_works_on_the_first_try(tmp_path):
    """A user follows README's "Audit your own data" word for word: copies config/config.yaml,
    replaces its datasets block by the README's, removes the audit and profile blocks, puts a
    table with the README's columns at the README's path, and runs. Parse-time checks and
    prepare_dataset's cell checks both pass, and the whole default DAG is planned on it."""
    block = _readme_table_block()
    (name, entry), = block["datasets"].items()
    rng = np.random.default_rng(0)
    n = 400
    table = pd.DataFrame({"customer_id": np.arange(1000, 1000 + n), "name": [f"n{i}" for i in range(n)],
                          "email": [f"e{i}@x" for i in range(n)], "income": rng.normal(size=n).round(3),
                          "region": rng.choice(["north", "south", "east"], n),
                          entry["label"]: rng.choice(["no", "yes"], n)})
    (tmp_path / os.path.dirname(entry["path"])).mkdir(parents=True, exist_ok=True)
    table.to_csv(tmp_path / entry["path"], index=False)
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["datasets"] = block["datasets"]
    config.pop("audit"), config.pop("profile")
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(config))
    planned = run_counts(snakemake(tmp_path, "-n", "--configfile", str(path)).stdout)
    runs = planned["train_model"]
    assert runs == 8 and planned["prepare_dataset"] == 1 and planned[f"dossier_{name}"] == 1
    for rule in ("metric_mia", "metric_epsilon_star", "metric_pmp", "metric_canary"):
        assert planned[rule] == runs, rule
    snakemake(tmp_path, "--cores", "1", "--configfile", str(path), "--until", "prepare_dataset")
    info = yaml.safe_load((tmp_path / "results" / "data" / name / "dataset.json").read_text())
    assert info["n"] == n
