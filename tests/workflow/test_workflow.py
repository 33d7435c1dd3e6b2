"""Workflow-level checks: lint, dry-runs with hand-counted jobs, config isolation, bad configs."""

import os
import subprocess
import sys

import pytest
import yaml

from tests.workflow.helpers import (
    ROOT,
    SHIPPED_CONFIGS,
    job_wildcards,
    run_counts,
    shipped_dry_run,
    snakemake,
)

CONFIGS = sorted((ROOT / "config").rglob("*.yaml"))
ACCEPTED_LINT = "Specify a conda environment or container for each rule."
MIXED_LINT = "Mixed rules and functions in same snakefile."


def test_lint_has_only_the_accepted_conda_finding(tmp_path):
    # make lint's filter (dpaudit.lint) over Snakemake's JSON lints, on this checkout
    from dpaudit.lint import ACCEPTED, classify, workflow_lints

    lints = workflow_lints(ROOT / "Snakefile", ROOT / "config" / "config.yaml")
    accepted, unexpected = classify(lints)
    # Guard against a parser that reads nothing: every rule gets the conda finding, and every
    # family's rule file holding its input functions the mixed-rules-and-functions one (issue 23).
    assert accepted[ACCEPTED_LINT] >= 7 and accepted[MIXED_LINT] >= 7
    assert set(accepted) == set(ACCEPTED) == {ACCEPTED_LINT, MIXED_LINT}
    assert not unexpected, unexpected


def test_make_lint_fails_on_a_new_finding_naming_the_rule(tmp_path):
    # a rule without log: in a throw-away copy is a finding make lint reports, exit 1
    from tests.workflow.helpers import copy_project

    project = copy_project(tmp_path / "project")
    rules = project / "rules" / "check.smk"
    text = rules.read_text()
    rules.write_text(text.replace('    log:\n        P.log("check_results"),\n', ""))
    assert rules.read_text() != text
    result = subprocess.run([sys.executable, "-m", "dpaudit.lint", "--snakefile", str(project / "Snakefile"),
                             "--configfile", str(project / "config" / "config.yaml")],
                            capture_output=True, text=True, timeout=600, cwd=project,
                            env={**os.environ, "PYTHONPATH": str(project / "src")})
    assert result.returncode == 1, result.stdout + result.stderr
    assert "rule check_results" in result.stderr and "log" in result.stderr.lower()
    assert "accepted note on" in result.stdout  # the conda note: one line, with the reason
    assert result.stdout.count("Specify a conda environment") == 1


def test_lint_findings_are_classified_from_the_json():
    from dpaudit.lint import classify

    lints = {"snakefiles": [{"for": {"snakefile": "Snakefile"}, "lints": [{"title": "Mixed rules and functions",
                                                                          "body": "b"}]}],
             "rules": [{"for": {"rule": "a", "line": 3, "snakefile": "r.smk"},
                        "lints": [{"title": ACCEPTED_LINT, "body": "x"}, {"title": "No log directive defined",
                                                                           "body": "y"}]}]}
    accepted, unexpected = classify(lints)
    assert accepted == {ACCEPTED_LINT: 1}
    assert unexpected == ["snakefile Snakefile: Mixed rules and functions b",
                          "rule a (r.smk:3): No log directive defined y"]


@pytest.mark.xdist_group(SHIPPED_CONFIGS)
@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_config_dry_runs(config):
    result = shipped_dry_run(str(config.relative_to(ROOT)))
    counts = run_counts(result.stdout)  # config/trained_elsewhere.yaml trains nothing: it audits models (issue 44)
    assert counts["train_model"] > 0 or counts["external_outputs"] > 0


@pytest.mark.xdist_group(SHIPPED_CONFIGS)
def test_trained_elsewhere_job_counts():
    # issue 44: two models trained elsewhere on breast_cancer, nothing trained: one job reads both
    counts = run_counts(shipped_dry_run("config/trained_elsewhere.yaml").stdout)
    assert counts["external_outputs"] == 2 and counts["metric_mia"] == 2 and counts["metric_canary"] == 2
    for trained in ("train_model", "extract_per_example", "canary_scores", "reference_pool"):
        assert counts[trained] == 0, trained


def test_models_trained_elsewhere_keep_their_verdict_with_the_canary_family_disabled(tmp_path):
    # issue 44: their canary rows (the black-box verdict) need no audit: metric_canary runs for them alone
    import shutil

    config = yaml.safe_load((ROOT / "config" / "trained_elsewhere.yaml").read_text())
    config["metrics"]["canary"]["enabled"] = False
    config["grid"] = [{"mechanism": ["baseline"], "epochs": [1]}]  # a trained run: no canary rows for it
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    counts = run_counts(snakemake(tmp_path, "-n", "--configfile", str(tmp_path / "c.yaml")).stdout)
    assert counts["metric_canary"] == 2 and counts["external_outputs"] == 2 and counts["train_model"] == 1
    assert counts["canary_scores"] == 0


@pytest.mark.xdist_group(SHIPPED_CONFIGS)
def test_default_config_job_counts(tmp_path):
    result = shipped_dry_run("config/config.yaml")
    # 3 offline datasets × (2 baseline seeds + 3 ε × 2 seeds DP-SGD) = 24 runs.
    assert run_counts(result.stdout) == {
        "prepare_dataset": 3,
        "train_model": 24,
        "extract_per_example": 24,
        "metric_mia": 24,
        "metric_epsilon_star": 24,
        "metric_identifiability": 24,
        "metric_pmp": 24,
        # issue 47: the PMP pairs of each DP-SGD run, a rule of its own (no longer the extraction's)
        "pmp_pairs": 18,
        "pmp_report": 1,
        "privacy_card": 24,
        "audit_neighbours": 1,
        "audit_block": 2,  # digits: bounded × {LS, GS} × ρ_β 0.9, 40 runs in one block each
        "audit_aggregate": 1,
        "plot_identifiability": 1,
        "budget_ledger": 1,
        "teaching_figures": 1,
        "aggregate_metrics": 1,
        "plot_privacy_utility": 1,
        "plot_epsilon_star_landscape": 3,
        "plot_audit": 3,
        "plot_model_figures": 3,
        # Privacy profile: 2 breast_cancer views, Figs 1/8 on the 100-row one.
        "profile_base": 2,
        "profile_exact": 2,
        "profile_single": 2,
        "profile_typical": 2,
        "plot_profile": 2,
        "profile_samples": 1,
        "plot_profile_samples": 1,
        # Canary audits: a twin per DP-SGD run, rows per run, two figures per dataset (one job).
        "canary_scores": 18,
        "metric_canary": 24,
        "plot_canary": 3,
        # Reference-model attacks (issue 24): a pool of 16 models per recipe (3 datasets × 4
        # recipes), LiRA and RMIA rows per run, three figures per dataset (one job).
        "reference_pool": 12,
        "metric_attacks": 24,
        "plot_attacks": 3,
        "exposed_rows": 3,  # the rows most exposed across each dataset's grid
        # One dossier job per dataset (issue 23): every model's dossier and the guidance page.
        # It was a job per model (24) and a guidance job per dataset (3); the rule is declared
        # once per dataset (rules/dossier.smk), so each dataset's job has its own name.
        "dossier_breast_cancer": 1,
        "dossier_digits": 1,
        "dossier_synthetic": 1,
        # issue 34: results/index.html, every model's row under each dataset's ladder small multiples
        "overview": 1,
        "check_results": 1,
        "all": 1,
    }


@pytest.mark.xdist_group(SHIPPED_CONFIGS)
def test_paper_privacy_profile_config_job_counts(tmp_path):
    result = shipped_dry_run("config/paper/privacy_profile.yaml")
    counts = run_counts(result.stdout)
    # Views adult_2f, adult_6f (no figures), adult_2f_first100 (Figs 1/8); one shared adult.data download.
    profile = {rule: n for rule, n in counts.items() if "profile" in rule}
    assert profile == {"download_profile_data": 1, "profile_base": 3, "profile_exact": 3, "profile_typical": 3,
                       "profile_single": 2, "plot_profile": 2, "profile_samples": 1, "plot_profile_samples": 1}
    views = {job["view"] for job in job_wildcards(result.stdout) if "view" in job}
    assert views == {"adult_2f", "adult_6f", "adult_2f_first100"}


@pytest.mark.xdist_group(SHIPPED_CONFIGS)
def test_adult_config_replaces_default_datasets(tmp_path):
    result = shipped_dry_run("config/adult.yaml")
    counts = run_counts(result.stdout)
    assert counts["download_dataset"] == 2  # adult.data and adult.test
    assert counts["train_model"] == 8
    datasets = {job["dataset"] for job in job_wildcards(result.stdout) if "dataset" in job}
    assert datasets == {"adult"}


def test_invalid_config_stops_before_any_job(tmp_path):
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["grid"][1]["target_epsilon"] = [0]
    config["training"]["delta"] = 1.5
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    result = snakemake(tmp_path, "-n", "--configfile", str(path), check=False)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "config.grid[1].target_epsilon[0]" in output and "config.training.delta" in output
    assert "Job stats" not in output
    assert not (tmp_path / "results").exists()
    # one line per problem naming the config file, without the frame of rules/common.smk (issue 46)
    refused = [line for line in output.splitlines() if line.startswith(f"dpaudit refused (config {path}): ")]
    assert any("config.grid[1].target_epsilon[0]" in line for line in refused), output
    assert any("config.training.delta" in line for line in refused), output
    assert "common.smk" not in output and "File \"" not in output and "WorkflowError" not in output, output


def test_unreachable_audit_target_stops_before_any_job(tmp_path):
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["audit"]["datasets"]["digits"].update(delta=0.001, rho_beta=[0.52])
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    result = snakemake(tmp_path, "-n", "--configfile", str(path), check=False)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "config.audit.datasets.digits.rho_beta[0]" in output and "unreachable" in output
    assert "Job stats" not in output


def test_unquoted_delta_and_non_finite_values_as_yaml_writes_them(tmp_path):
    """Through Snakemake's own YAML loading: `delta: 1e-5` (a string in YAML 1.1) dry-runs
    as the number; `.nan` for a momentum stops before any job, naming the key."""
    text = (ROOT / "config" / "config.yaml").read_text()
    assert "  delta: auto\n" in text and "  momentum: 0.9\n" in text
    good = tmp_path / "delta.yaml"
    good.write_text(text.replace("  delta: auto\n", "  delta: 1e-5\n"))
    result = snakemake(tmp_path, "-n", "--configfile", str(good))
    assert run_counts(result.stdout)["train_model"] > 0
    bad = tmp_path / "nan.yaml"
    bad.write_text(text.replace("  momentum: 0.9\n", "  momentum: .nan\n"))
    result = snakemake(tmp_path, "-n", "--configfile", str(bad), check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "config.training.momentum: nan is not a finite number" in output
    assert "Job stats" not in output


@pytest.mark.xdist_group(SHIPPED_CONFIGS)
def test_paper_epsilon_star_config_job_counts(tmp_path):
    result = shipped_dry_run("config/paper/epsilon_star.yaml")
    counts = run_counts(result.stdout)
    # Negoescu et al. 2023, Sec. 4: Adult 4 + 4·3·2·2 = 52 strategies, Purchase-100 3 + 48 = 51, 5 seeds each.
    assert counts["train_model"] == 52 * 5 + 51 * 5
    assert counts["metric_epsilon_star"] == 515 and counts["plot_epsilon_star_landscape"] == 2
    assert counts["simulate_epsilon_star"] == 1 and counts["epsilon_star_ks_fit"] == 1
    trained = [job["dataset"] for job in job_wildcards(result.stdout)
               if "run" in job and "dataset" in job]
    # each run appears once per per-run rule (train, extract, mia, epsilon_star, privacy_card); its
    # dossier is written by its dataset's one dossier job since issue 23 (was a sixth per-run job)
    assert trained.count("adult") == 260 * 5 and trained.count("purchase100") == 255 * 5
    assert counts["dossier_adult"] == counts["dossier_purchase100"] == 1 and "dossier" not in counts


@pytest.mark.xdist_group(SHIPPED_CONFIGS)
def test_lite_epsilon_star_config_job_counts(tmp_path):
    result = shipped_dry_run("config/paper/epsilon_star_lite.yaml")
    counts = run_counts(result.stdout)
    # 4 baseline epochs + 2 DP ε, 2 seeds each
    assert counts["train_model"] == 12 and counts["download_dataset"] == 2


@pytest.mark.xdist_group(SHIPPED_CONFIGS)
def test_paper_identifiability_config_job_counts(tmp_path):
    result = shipped_dry_run("config/paper/identifiability.yaml")
    counts = run_counts(result.stdout)
    # 3 datasets × {bounded, unbounded} × {LS, GS} × (1,000 runs at ρ_β = 0.9 in blocks of 50 = 20
    # + 3 targets × 250 runs = 15 blocks) = 140, plus Fig. 4's 5 extra pairs × 5 blocks = 25: 165 each.
    assert counts["audit_block"] == 3 * (2 * 2 * (20 + 3 * 5) + 5 * 5) == 495
    assert counts["audit_neighbours"] == 3 and counts["plot_identifiability"] == 1
    assert counts["download_dataset"] == 4 + 1 + 2  # MNIST IDX files, Purchase-100 tgz, Adult
    assert counts["train_model"] == counts["metric_identifiability"] == 12
    blocks = [w for w in job_wildcards(result.stdout) if "audit_config" in w]
    assert sum(w["audit_config"] == "bounded-ls-rho0.9-max1" for w in blocks) == 3 * 20


@pytest.mark.xdist_group(SHIPPED_CONFIGS)
def test_lite_identifiability_config_job_counts(tmp_path):
    result = shipped_dry_run("config/paper/identifiability_lite.yaml")
    counts = run_counts(result.stdout)
    # Adult and digits × bounded × {LS, GS} × ρ_β {0.75, 0.9} × 100 runs in blocks of 50.
    assert counts["audit_block"] == 2 * 2 * 2 * 2
    assert counts["audit_neighbours"] == 2 and counts["download_dataset"] == 2


@pytest.mark.xdist_group(SHIPPED_CONFIGS)
def test_paper_pmp_config_job_counts(tmp_path):
    result = shipped_dry_run("config/paper/pmp.yaml")
    counts = run_counts(result.stdout)
    # 1 baseline + 3 DP-SGD runs, each trained once; Recipe C reads one reference pool per
    # DP-SGD recipe (3; the baseline's rows are not applicable), built although the attacks
    # are disabled: no attack rows, no attack figures.
    assert counts["train_model"] == 4 and counts["extract_per_example"] == 4
    assert counts["reference_pool"] == 3 and counts["metric_pmp"] == 4 and counts["pmp_pairs"] == 3
    assert "metric_attacks" not in counts and "plot_attacks" not in counts and "pmp_gather_shadows" not in counts
    assert counts["simulate_pmp"] == 1 and counts["pmp_report"] == 1
    assert counts["metric_mia"] == 4 and counts["privacy_card"] == 4
    pools = [job for job in job_wildcards(result.stdout) if "recipe" in job]
    assert len(pools) == 3 and all(job["recipe"].startswith("mechanism~dpsgd_") for job in pools)
    assert not any("_pmpshadow~" in job.get("run", "") for job in job_wildcards(result.stdout))


@pytest.mark.xdist_group(SHIPPED_CONFIGS)
def test_lite_pmp_config_job_counts(tmp_path):
    result = shipped_dry_run("config/paper/pmp_lite.yaml")
    counts = run_counts(result.stdout)
    assert counts["train_model"] == 2 and counts["reference_pool"] == 1 and "metric_attacks" not in counts
    assert counts["simulate_pmp"] == 1 and counts["metric_pmp"] == 2 and counts["pmp_pairs"] == 1


def test_pmp_without_recipe_c_builds_no_pool(tmp_path):
    # recipe_c off and attacks off: no reference models at all (Recipes A and B only).
    config = yaml.safe_load((ROOT / "config" / "paper" / "pmp_lite.yaml").read_text())
    config["metrics"]["pmp"]["recipe_c"] = False
    config["simulations"]["pmp"]["enabled"] = False
    path = tmp_path / "no_c.yaml"
    path.write_text(yaml.safe_dump(config))
    counts = run_counts(snakemake(tmp_path, "-n", "--configfile", str(path)).stdout)
    assert "reference_pool" not in counts and counts["metric_pmp"] == 2 and counts["train_model"] == 2
    assert counts["pmp_pairs"] == 1


LINEAR_GRID_CONFIG = {
    "datasets": {"synthetic": {"n": 200, "d": 3}},
    "grid": [
        {"mechanism": ["baseline"], "epochs": [1]},
        {"mechanism": ["dpsgd"], "target_epsilon": [4], "epochs": [1]},
        {"mechanism": ["output_perturbation", "objective_perturbation"], "target_epsilon": [1, 10], "seed": [0, 1]},
    ],
    "metrics": {"identifiability": {"enabled": True}, "pmp": {"enabled": True, "recipe_c": True},
                "attacks": {"reference_models": 4}},
}


def test_linear_mechanism_grid_job_counts(tmp_path):
    path = tmp_path / "linear.yaml"
    path.write_text(yaml.safe_dump(LINEAR_GRID_CONFIG))
    result = snakemake(tmp_path, "-n", "--configfile", str(path))
    counts = run_counts(result.stdout)
    # 1 baseline + 1 DP-SGD + 2 mechanisms × 2 ε × 2 seeds = 10 runs; PMP Recipe C's
    # reference pool only for the DP-SGD recipe.
    runs = 1 + 1 + 2 * 2 * 2
    assert counts["train_model"] == counts["extract_per_example"] == runs
    for rule in ("metric_mia", "metric_epsilon_star", "metric_identifiability", "metric_pmp", "privacy_card"):
        assert counts[rule] == runs, rule
    assert counts["reference_pool"] == 1 and counts["budget_ledger"] == 1 and counts["aggregate_metrics"] == 1
    assert counts["pmp_pairs"] == 1  # the DP-SGD run's only (issue 47)
    linear = {job["run"] for job in job_wildcards(result.stdout)
              if job.get("run", "").startswith(("mechanism~output_perturbation", "mechanism~objective_perturbation"))}
    assert len(linear) == 8
    assert all("_clip_norm~NA_microbatches~NA_epochs~NA_batch_size~NA_learning_rate~NA_" in run for run in linear)


def test_linear_mechanism_on_a_multiclass_dataset_stops_before_any_job(tmp_path):
    config = {**LINEAR_GRID_CONFIG, "datasets": {"synthetic": {"n": 200, "d": 3}, "digits": {}}}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    result = snakemake(tmp_path, "-n", "--configfile", str(path), check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "Job stats" not in output
    assert "config.datasets.digits" in output and "10 classes" in output and "output_perturbation" in output


@pytest.mark.parametrize(("text", "what"), [("{}\n", "is empty ({})"),
                                            ("training:\n  optimizer: sgd\n", "has its default value")])
def test_empty_or_all_default_config_file_stops_before_any_job(tmp_path, text, what):
    # Snakemake alone would run config/config.yaml for {} (issue 26)
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    result = snakemake(tmp_path, "-n", "--configfile", str(path), check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert f"{path}: the config file {what}" in output or (f"{path}: every key" in output and what in output)
    assert "copy config/config.yaml" in output
    assert "Job stats" not in output and "train_model" not in output


def test_attacks_enabled_job_counts(tmp_path):
    # issue 24: one reference pool per training recipe (a grid row without its seed), shared by
    # both seeds; one metric_attacks job per run; one figure job per dataset. K given explicitly.
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["metrics"]["attacks"] = {"enabled": True, "reference_models": 16}
    path = tmp_path / "attacks.yaml"
    path.write_text(yaml.safe_dump(config))
    result = snakemake(tmp_path, "-n", "--configfile", str(path))
    counts = run_counts(result.stdout)
    # 3 datasets × (1 baseline + 3 DP-SGD ε) recipes; 3 × 8 runs
    assert counts["reference_pool"] == 12 and counts["metric_attacks"] == 24 and counts["plot_attacks"] == 3
    assert counts["train_model"] == 24 and counts["aggregate_metrics"] == 1
    # issue 24, items 4-5: one exposed-rows page per dataset; the dossiers rank by the attack scores
    assert counts["exposed_rows"] == 3 and counts["dossier_synthetic"] == 1
    pools = [job for job in job_wildcards(result.stdout) if "recipe" in job]
    assert len(pools) == 12 and not any("seed" in job["recipe"] for job in pools)
    dossier = _job_inputs(result.stdout, "dossier_synthetic")
    scores = [path for path in dossier if path.startswith("results/attacks/synthetic/") and path.endswith("scores.parquet")]
    assert len(scores) == 8
    assert len([path for path in _job_inputs(result.stdout, "exposed_rows") if path.endswith("scores.parquet")]) == 8
    assert "results/tables/audit_runs.parquet" in _job_inputs(result.stdout, "dossier_digits")
    assert "results/tables/audit_runs.parquet" not in dossier


def _job_inputs(output, rule):
    """The input files of the first job of ``rule`` a dry run lists."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(f"rule {rule}:"))
    for line in lines[start + 1:]:
        if line.strip().startswith("input:"):
            return [path.strip() for path in line.strip()[len("input:"):].split(",")]
        if line.strip().startswith("rule "):
            return []
    return []


def test_attacks_off_dossiers_read_no_attack_scores(tmp_path):
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["metrics"]["attacks"] = {"enabled": False}
    path = tmp_path / "attacks_off.yaml"
    path.write_text(yaml.safe_dump(config))
    result = snakemake(tmp_path, "-n", "--configfile", str(path))
    assert "exposed_rows" not in run_counts(result.stdout)
    for dataset in ("synthetic", "digits", "breast_cancer"):
        assert not any("/attacks/" in path for path in _job_inputs(result.stdout, f"dossier_{dataset}"))


def test_attacks_cover_the_linear_mechanisms(tmp_path):
    # every run gets attack rows: the linear recipes get reference pools too (no exclusion, no warning)
    config = {**LINEAR_GRID_CONFIG, "metrics": {**LINEAR_GRID_CONFIG["metrics"], "attacks": {"enabled": True}}}
    path = tmp_path / "linear_attacks.yaml"
    path.write_text(yaml.safe_dump(config))
    result = snakemake(tmp_path, "-n", "--configfile", str(path))
    counts = run_counts(result.stdout)
    # recipes: 1 baseline + 1 DP-SGD + 2 mechanisms × 2 ε; runs: 10 (no PMP shadow model)
    assert counts["reference_pool"] == 6 and counts["metric_attacks"] == 10 and counts["plot_attacks"] == 1
    assert "no reference models" not in result.stdout + result.stderr


def test_the_workstation_profile_rate_limit_parses_and_never_binds():
    # profiles/default/config.yaml sets max-jobs-per-timespan to the marker that the Snakefile's
    # onstart handler drops (dpaudit.scheduling: Snakemake's limiter cost ~60 s of scheduler CPU
    # on the default run, issue 23). Should the drop ever not happen, the value must still be a
    # limit no run reaches (≥ 100 jobs a second) with a short timespan, and it must be valid for
    # Snakemake's own parser (a typo would fail every `make run`).
    from snakemake.settings.types import MaxJobsPerTimespan

    from dpaudit.scheduling import UNLIMITED_JOB_RATE

    profile = yaml.safe_load((ROOT / "profiles" / "default" / "config.yaml").read_text())
    limit = MaxJobsPerTimespan.parse_choice(profile["max-jobs-per-timespan"])
    assert (limit.max_jobs, float(limit.timespan)) == UNLIMITED_JOB_RATE
    assert limit.timespan == 3
    assert limit.max_jobs / limit.timespan >= 100
    assert "drop_unbinding_rate_limit(workflow)" in (ROOT / "Snakefile").read_text()
