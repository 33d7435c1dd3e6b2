"""Issue 36: batching many runs per job keeps the rerun granularity per family.

The rerun matrix: on the tiny run's finished results, each family's config key is changed in
turn and a dry run lists what would rerun. A family key reruns that family's jobs and what reads
their files (the metrics table, figures, dossiers, the overview), never training; a training key
reruns training and everything after it. And a batched job that fails on one run names that run
and keeps none of its outputs (Snakemake deletes every output of a failed job).
"""

import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml

from tests.workflow.helpers import run_counts, snakemake

# make test's xdist workers (--dist loadgroup): every test of the shared fixture on one worker
pytestmark = pytest.mark.xdist_group("tiny_run")

# The per-run (and per-recipe) rules of the tiny run: what a change may rerun.
PER_RUN = {"train_model", "extract_per_example", "metric_mia", "metric_epsilon_star", "metric_pmp",
           "privacy_card", "canary_scores", "metric_canary", "reference_pool"}
# Jobs over every run of a dataset or the whole grid; any change to a run's rows reruns them.
SUMMARIES = {"aggregate_metrics", "budget_ledger", "pmp_report", "plot_privacy_utility",
             "plot_epsilon_star_landscape", "plot_audit", "plot_model_figures", "plot_canary",
             "dossier_synthetic", "dossier_tiny_table", "overview", "check_results", "all"}

# key path -> new value, and the per-run rules that change must rerun (what reads their files
# follows by modification time: the card shows the mia rows and the canary ladder, PMP Recipe C
# reads the reference pool).
MATRIX = {
    "training.momentum": (0.8, PER_RUN),
    "metrics.mia.alpha": (0.1, {"metric_mia", "privacy_card"}),
    "metrics.epsilon_star.alpha": (0.5, {"metric_epsilon_star"}),
    "metrics.pmp.alpha": (0.1, {"metric_pmp"}),
    "metrics.canary.confidence": (0.9, {"canary_scores", "metric_canary", "privacy_card"}),
    "metrics.attacks.seed": (1, {"reference_pool", "metric_pmp"}),
    "guidance.advantage": (0.3, set()),
    # docs/architecture.md, "Batches": another batch size changes every batched job's input list
    "workflow.runs_per_job": (1, PER_RUN),
}


def _changed(config: dict, key: str, value) -> dict:
    changed = yaml.safe_load(yaml.safe_dump(config))
    node = changed
    *parents, last = key.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return changed


def test_each_config_key_reruns_only_its_family_and_what_reads_it(tiny_run, tmp_path):
    config = yaml.safe_load(tiny_run["config"].read_text())

    def dry_run(key):
        path = tmp_path / f"{key}.yaml"
        path.write_text(yaml.safe_dump(_changed(config, key, MATRIX[key][0])))
        result = snakemake(tiny_run["workdir"], "-n", "--configfile", str(path), env=tiny_run["env"],
                           root=tiny_run["project"])
        return key, run_counts(result.stdout)

    with ThreadPoolExecutor(2) as pool:
        plans = dict(pool.map(dry_run, MATRIX))
    for key, (_, expected) in MATRIX.items():
        counts = plans[key]
        assert set(counts) & PER_RUN == expected, (key, counts)
        assert set(counts) - PER_RUN <= SUMMARIES, (key, counts)
        assert "prepare_dataset" not in counts, (key, counts)
    # a training key reruns every run's every per-run job: 3 runs trained, 1 DP-SGD twin, 2 pools
    assert plans["training.momentum"]["train_model"] == 3 and plans["training.momentum"]["canary_scores"] == 1
    # the guidance only reaches the pages that show it
    assert set(plans["guidance.advantage"]) <= {"dossier_synthetic", "dossier_tiny_table", "overview",
                                                "check_results", "all"}, plans["guidance.advantage"]


def test_a_batch_that_fails_on_one_run_names_it_and_keeps_none_of_its_outputs(tiny_run, tmp_path):
    workdir = tmp_path / "work"
    shutil.copytree(tiny_run["workdir"], workdir, symlinks=True)  # copy2 keeps modification times
    outputs = sorted(workdir.glob("results/per_example/synthetic/*/outputs.parquet"))
    # grid order: the baseline run first, then the DP-SGD run; one metric_mia batch holds both
    assert [path.parent.name.split("_")[0] for path in outputs] == ["mechanism~baseline", "mechanism~dpsgd"]
    first, damaged = (path.parent.name for path in outputs)
    data = outputs[1].read_bytes()
    outputs[1].write_bytes(data[: len(data) // 2])
    rows = {run: workdir / "results" / "metrics" / "mia" / "synthetic" / f"{run}.parquet" for run in (first, damaged)}
    assert all(path.exists() for path in rows.values())

    failed = snakemake(workdir, str(rows[first].relative_to(workdir)), "--cores", "1", "--configfile",
                       str(tiny_run["config"]), env=tiny_run["env"], root=tiny_run["project"], check=False)
    said = failed.stdout + failed.stderr
    assert failed.returncode != 0, said[-3000:]
    assert f"metric_mia__synthetic_0 dataset=synthetic run={damaged}" in said, said[-4000:]
    assert "cannot be read" in said and "delete it and run again" in said
    # the run before it was done (its log says so), yet Snakemake removed every output of the failed job
    first_log = workdir / "logs" / "metric_mia" / "synthetic" / f"{first}.log"
    assert "done in" in first_log.read_text().splitlines()[-1]
    assert not rows[first].exists() and not rows[damaged].exists()
