"""Issues 36 and 47: what a changed config reruns, on the tiny run's finished results.

The rerun matrix: each family's config key is changed in turn and a dry run lists what would
rerun. A family key reruns that family's jobs and what reads their files (the metrics table,
figures, dossiers, the overview), never training; a training key reruns training and everything
after it; another batch size reruns nothing (issue 47: a batch keeps its runs).

Issue 47's five changes of a grid, each dry-run: a seed added to the DP-SGD block, an ε appended
to it, ``metrics.canary.gdp_thresholds_per_tail``, ``metrics.pmp.partners_relative_standard_error``
and ``metrics.pmp.checkpoints`` rerun exactly the per-run jobs whose outputs change: the new
runs' (and a new recipe's pool), the DP-SGD run's canary rows (and its card, which shows them),
its PMP pairs and rows, and for the checkpoints the DP-SGD run's training and what follows it,
never the baseline's. Then the grown and tuned grid is run for real, and every file of a job the
dry run did not name keeps its bytes and its modification time.

And a batched job that fails on one run names that run and keeps none of its outputs (Snakemake
deletes every output of a failed job).
"""

import copy
import hashlib
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from dpaudit.batching import rule_kind
from tests.workflow.helpers import config_with, issue47_changes, planned_jobs, run_counts, snakemake

# make test's xdist workers (--dist loadgroup): every test of the shared fixture on one worker
pytestmark = pytest.mark.xdist_group("tiny_run")

# The per-run (and per-recipe) rules of the tiny run: what a change may rerun.
PER_RUN = {"train_model", "extract_per_example", "pmp_pairs", "metric_mia", "metric_epsilon_star", "metric_pmp",
           "privacy_card", "canary_scores", "metric_canary", "reference_pool"}
# The per-run rules every run of the tiny synthetic DP-SGD block has (its recipe's pool apart).
RUN_RULES = PER_RUN - {"reference_pool"}
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
    # issue 47: a batch keeps its runs (docs/architecture.md, "Batches that keep their runs")
    "workflow.runs_per_job": (1, set()),
}


def _dry_run(tiny_run, path: Path, config: dict, *targets: str, workdir: Path | None = None) -> str:
    path.write_text(yaml.safe_dump(config))
    return snakemake(workdir or tiny_run["workdir"], "-n", *targets, "--configfile", str(path), env=tiny_run["env"],
                     root=tiny_run["project"]).stdout


def per_run_plan(output: str) -> dict[str, set[str]]:
    """Per per-run rule, the keys (``<dataset>/<run or recipe>``, from each run's log) its jobs redo."""
    plan: dict[str, set[str]] = {}
    for job in planned_jobs(output):
        kind = rule_kind(job["rule"])
        if kind in PER_RUN:
            plan.setdefault(kind, set()).update("/".join(Path(log).parts[2:]).removesuffix(".log") for log in job["log"])
    return plan


def test_each_config_key_reruns_only_its_family_and_what_reads_it(tiny_run, tmp_path):
    config = yaml.safe_load(tiny_run["config"].read_text())

    def dry_run(key):
        output = _dry_run(tiny_run, tmp_path / f"{key}.yaml", config_with(config, key, MATRIX[key][0]))
        return key, run_counts(output)

    with ThreadPoolExecutor(2) as pool:
        plans = dict(pool.map(dry_run, MATRIX))
    for key, (_, expected) in MATRIX.items():
        counts = plans[key]
        assert set(counts) & PER_RUN == expected, (key, counts)
        assert set(counts) - PER_RUN <= SUMMARIES, (key, counts)
        assert "prepare_dataset" not in counts, (key, counts)
    # a training key reruns every run's every per-run job: 3 runs trained, 1 DP-SGD twin, 2 pools
    assert plans["training.momentum"]["train_model"] == 3 and plans["training.momentum"]["canary_scores"] == 1
    # the guidance only reaches the pages that show it, another batch size nothing at all
    assert set(plans["guidance.advantage"]) <= {"dossier_synthetic", "dossier_tiny_table", "overview",
                                                "check_results", "all"}, plans["guidance.advantage"]
    assert not plans["workflow.runs_per_job"], plans["workflow.runs_per_job"]


def _grid(config: dict):
    from dpaudit import config as dpconfig

    runs = dpconfig.run_lookup(dpconfig.dataset_grids(dpconfig.validate_config(copy.deepcopy(config)))["synthetic"])
    return runs, dpconfig.recipe_lookup(runs)


def test_the_issue_47_changes_rerun_exactly_the_jobs_whose_outputs_change(tiny_run, tmp_path):
    config = yaml.safe_load(tiny_run["config"].read_text())
    runs, recipes = _grid(config)
    dpsgd = next(f"synthetic/{run}" for run, params in runs.items() if params["mechanism"] == "dpsgd")
    dpsgd_recipe = next(f"synthetic/{name}" for name, recipe in recipes.items()
                        if recipe["params"]["mechanism"] == "dpsgd")
    changes = issue47_changes(config)
    expected = {}
    for name in ("seed added", "epsilon appended"):
        grown_runs, grown_recipes = _grid(changes[name])
        new_runs = {f"synthetic/{run}" for run in set(grown_runs) - set(runs)}
        new_recipes = {f"synthetic/{recipe}" for recipe in set(grown_recipes) - set(recipes)}
        assert len(new_runs) == 1 and len(new_recipes) == (name == "epsilon appended")
        expected[name] = {kind: new_runs for kind in RUN_RULES} | ({"reference_pool": new_recipes} if new_recipes
                                                                   else {})
    # the thresholds change the DP-SGD twin's rows (and its card, which shows them), never its scores
    expected["metrics.canary.gdp_thresholds_per_tail"] = {"metric_canary": {dpsgd}, "privacy_card": {dpsgd}}
    # the pairs are redrawn and the PMP rows follow; no extraction, and the baseline's rows read no such option
    expected["metrics.pmp.partners_relative_standard_error"] = {"pmp_pairs": {dpsgd}, "metric_pmp": {dpsgd}}
    # the DP-SGD run retrains (one job writes its model and checkpoints) and its later jobs follow by
    # modification time, its recipe's pool too (it reads the run's train.json); the baselines never
    expected["metrics.pmp.checkpoints"] = {kind: {dpsgd} for kind in RUN_RULES} | {"reference_pool": {dpsgd_recipe}}

    def dry_run(name):
        output = _dry_run(tiny_run, tmp_path / f"{re.sub(r'[^a-z0-9]+', '_', name)}.yaml", changes[name])
        return name, output

    with ThreadPoolExecutor(2) as pool:
        outputs = dict(pool.map(dry_run, changes))
    for name, output in outputs.items():
        assert per_run_plan(output) == expected[name], name
        assert set(run_counts(output)) - PER_RUN <= SUMMARIES | {"exposed_rows"}, name


@pytest.fixture(scope="module")
def grown(tiny_run, tmp_path_factory):
    """The tiny run grown by two DP-SGD seeds (one batch of two new runs) and tuned (the canary rows'
    thresholds, the PMP pairs' precision), dry-run and then run for real up to the metrics table in
    a copy; every result file's hash and modification time before the run."""
    base = tmp_path_factory.mktemp("grown")
    workdir = base / "work"
    shutil.copytree(tiny_run["workdir"], workdir, symlinks=True)  # copy2 keeps modification times
    config = yaml.safe_load(tiny_run["config"].read_text())
    config["grid"][1]["seed"] = [0, 1, 2]
    config["metrics"]["canary"]["gdp_thresholds_per_tail"] = 20
    config["metrics"]["pmp"]["partners_relative_standard_error"] = 0.02
    path = base / "grown.yaml"
    target = "results/tables/metrics.parquet"
    plan = _dry_run(tiny_run, path, config, target, workdir=workdir)
    before = {file: (hashlib.sha256(file.read_bytes()).hexdigest(), file.stat().st_mtime_ns)
              for file in (workdir / "results").rglob("*") if file.is_file()}
    snakemake(workdir, "--cores", "2", target, "--configfile", str(path), env=tiny_run["env"], root=tiny_run["project"])
    return {"workdir": workdir, "config": path, "plan": plan, "before": before, "runs": _grid(config)[0]}


def test_a_grown_and_tuned_grid_leaves_every_file_the_dry_run_does_not_name_as_it_was(grown, tiny_run):
    workdir, plan = grown["workdir"], grown["plan"]
    runs, _ = _grid(yaml.safe_load(tiny_run["config"].read_text()))
    dpsgd = next(f"synthetic/{run}" for run, params in runs.items() if params["mechanism"] == "dpsgd")
    new = {f"synthetic/{run}" for run in set(grown["runs"]) - set(runs)}
    assert len(new) == 2
    expected = {kind: set(new) for kind in RUN_RULES}
    for kind in ("metric_canary", "privacy_card", "pmp_pairs", "metric_pmp"):
        expected[kind].add(dpsgd)
    assert per_run_plan(plan) == expected
    # the two new runs share each rule's batch; the old runs' batches are not in the plan at all
    assert all(len(job["log"]) == len(new) for job in planned_jobs(plan) if rule_kind(job["rule"]) in
               {"train_model", "extract_per_example", "metric_mia", "canary_scores"})
    written = {workdir / file for job in planned_jobs(plan) for file in job["output"]}
    kept = changed = 0
    for file, (digest, mtime) in grown["before"].items():
        now = (hashlib.sha256(file.read_bytes()).hexdigest(), file.stat().st_mtime_ns) if file.exists() else None
        if file in written:
            assert now is not None and now[1] != mtime, file  # rewritten by the job the plan named
            changed += 1
        else:
            assert now == (digest, mtime), file  # untouched: the same bytes, never rewritten
            kept += 1
    # the old runs' models, twins, extractions and every baseline file are among the kept ones
    assert kept > 50 and changed >= 5, (kept, changed)
    done = _dry_run(tiny_run, grown["config"], yaml.safe_load(grown["config"].read_text()),
                    "results/tables/metrics.parquet", workdir=workdir)
    assert "Nothing to be done" in done, done[-3000:]


def test_a_batch_that_fails_on_one_run_names_it_and_keeps_none_of_its_outputs(grown, tiny_run, tmp_path):
    workdir = tmp_path / "work"
    shutil.copytree(grown["workdir"], workdir, symlinks=True)  # copy2 keeps modification times
    # the two new DP-SGD runs share one metric_mia batch, in grid order
    first, damaged = sorted(run for run in grown["runs"] if run.endswith(("seed~1", "seed~2")))
    batch = next(job for job in planned_jobs(grown["plan"])
                 if rule_kind(job["rule"]) == "metric_mia" and len(job["log"]) == 2)
    assert [Path(log).stem for log in batch["log"]] == [first, damaged]
    outputs = workdir / "results" / "per_example" / "synthetic" / damaged / "outputs.parquet"
    data = outputs.read_bytes()
    outputs.write_bytes(data[: len(data) // 2])
    rows = {run: workdir / "results" / "metrics" / "mia" / "synthetic" / f"{run}.parquet" for run in (first, damaged)}
    assert all(path.exists() for path in rows.values())

    failed = snakemake(workdir, str(rows[first].relative_to(workdir)), "--cores", "1", "--configfile",
                       str(grown["config"]), env=tiny_run["env"], root=tiny_run["project"], check=False)
    said = failed.stdout + failed.stderr
    assert failed.returncode != 0, said[-3000:]
    assert f"{batch['rule']} dataset=synthetic run={damaged}" in said, said[-4000:]
    assert "cannot be read" in said and "delete it and run again" in said
    # the run before it was done (its log says so), yet Snakemake removed every output of the failed job
    first_log = workdir / "logs" / "metric_mia" / "synthetic" / f"{first}.log"
    assert "done in" in first_log.read_text().splitlines()[-1]
    assert not rows[first].exists() and not rows[damaged].exists()
