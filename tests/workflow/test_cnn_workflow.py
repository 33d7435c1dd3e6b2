"""config/cnn.yaml (issue 33): every family on a small CNN, in a dry run."""

import pytest

from tests.workflow.helpers import SHIPPED_CONFIGS, job_wildcards, run_counts, shipped_dry_run


@pytest.mark.xdist_group(SHIPPED_CONFIGS)
def test_cnn_config_runs_every_family_on_the_cnn_runs(tmp_path):
    result = shipped_dry_run("config/cnn.yaml")
    counts = run_counts(result.stdout)
    # digits: one baseline and two DP-SGD runs (ε 1, 4), each its own recipe with a reference pool;
    # an audit twin per DP-SGD run; every per-run metric family on all three
    assert counts["train_model"] == 3 and counts["extract_per_example"] == 3
    assert counts["reference_pool"] == 3 and counts["canary_scores"] == 2
    for rule in ("metric_mia", "metric_epsilon_star", "metric_identifiability", "metric_pmp", "metric_canary",
                 "metric_attacks", "privacy_card"):
        assert counts[rule] == 3, rule
    assert counts["dossier_digits"] == 1 and counts["audit_block"] >= 1
    runs = {job["run"] for job in job_wildcards(result.stdout) if "run" in job}
    assert len(runs) == 3 and all(run.endswith("_model~cnn") for run in runs)
