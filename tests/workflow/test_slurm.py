"""The tiny end-to-end workflow on a real single-node SLURM cluster (issue 12).

One module fixture starts SLURM (tests/slurm_cluster.py), runs the tiny workflow
of tests/e2e/test_tiny_run.py in a throw-away copy of the project with
profiles/slurm while the same workflow runs locally, and cancels one training job
with `scancel` once SLURM reports it RUNNING (the fault case). The tests then read
what the scheduler recorded and compare the two runs' outputs.

Needs root (CI runs the suite as root): without it every test here fails with the
command to run it; it is never skipped.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from bench.bench_slurm import rule_names, slurm_plan
from dpaudit.batching import combined_resources, rule_kind
from dpaudit.contract import paths as P
from dpaudit.io import read_parquet
from dpaudit.resources import mlp_parameters, train_resources
from tests.e2e.conftest import TINY_CONFIG
from tests.slurm_cluster import ClusterError, SlurmCluster, require_root
from tests.workflow.helpers import ROOT, copy_project, snakemake, snakemake_command

# make test's xdist workers (--dist loadgroup): every test of the shared fixture on one worker
pytestmark = pytest.mark.xdist_group("slurm_cluster")

STARTED_JOB = re.compile(r"(?:sched: Allocate|sched/backfill: _start_job: Started) JobId=(\d+)")
RUN_TIMEOUT = 900  # seconds for the whole SLURM run; a hung scheduler fails the test
FAULT_TIMEOUT = 300  # seconds to see a training job RUNNING before giving up on the fault case
# What a site profile would hold (profiles/slurm/site-example), set for this cluster:
# Debian's SLURM 22.05 needs no account and squeue for status polling (docs/stack.md, SLURM and GPUs);
# a 2 s first status check keeps the tiny run short.
TEST_SITE_PROFILE = {
    "slurm-no-account": True,
    "slurm-status-command": "squeue",
    "slurm-init-seconds-before-status-checks": 2,
    "slurm-keep-successful-logs": True,
    "default-resources": {"slurm_partition": "debug", "mem_mb": 1000, "runtime": 10},
}


def _cancel_first_training_job(cluster: SlurmCluster, stop: threading.Event, record: dict) -> None:
    deadline = time.monotonic() + FAULT_TIMEOUT
    while not stop.is_set() and time.monotonic() < deadline:
        for job in cluster.queue():
            if job["comment"].startswith("rule_train_model") and job["state"] == "RUNNING":
                # Let the job step start training so the kill lands mid-job.
                time.sleep(3)
                result = subprocess.run(["scancel", job["job_id"]], capture_output=True, text=True,
                                        timeout=30)
                record.update(job_id=job["job_id"], comment=job["comment"],
                              scancel=result.returncode, stderr=result.stderr)
                return
        time.sleep(0.5)
    record["error"] = f"no train_model job seen RUNNING within {FAULT_TIMEOUT} s"


def _slurm_logs(workdir: Path, tail: int = 3000) -> str:
    parts = []
    for path in sorted((workdir / ".snakemake" / "slurm_logs").rglob("*.log")):
        parts.append(f"--- {path.relative_to(workdir)} ---\n{path.read_text(errors='replace')[-tail:]}")
    return "\n".join(parts[-8:])


@pytest.fixture(scope="module")
def slurm_run(tmp_path_factory):
    try:
        require_root()
    except ClusterError as error:
        pytest.fail(str(error))
    started = time.monotonic()
    base = tmp_path_factory.mktemp("slurm")
    project = copy_project(base / "project")
    config = base / "tiny.yaml"
    config.write_text(yaml.safe_dump(TINY_CONFIG))
    site = base / "site"
    site.mkdir()
    (site / "config.yaml").write_text(yaml.safe_dump(TEST_SITE_PROFILE))
    env = {"PYTHONPATH": str(project / "src")}
    local_dir, slurm_dir = base / "local", base / "slurm"
    local_dir.mkdir()
    slurm_dir.mkdir()

    cluster = SlurmCluster(base / "cluster")
    try:
        cluster.start()
    except ClusterError as error:
        cluster.stop()
        pytest.fail(f"could not start the test SLURM cluster: {error}")
    record: dict = {}
    stop = threading.Event()
    local = None
    local_log = base / "local_run.log"
    try:
        # The local reference run shares the machine with the SLURM run; both use 2 cores.
        # Its output goes to a file: a full pipe would block it.
        # Issue 36: the local run holds one run per job (the SLURM profile's 4 puts a dataset's
        # runs in one batch, as the workstation's default 8 does): the outputs are compared byte
        # for byte below. It makes the metrics table and what it is computed from, not the figures.
        with local_log.open("w") as sink:
            local = subprocess.Popen(
                snakemake_command(
                    local_dir, "--cores", "2",
                    # the metrics table and everything it is made from: every run's models, per-example
                    # tables, pools, canary scores and metric rows (the figures' data are drawn from it)
                    P.METRICS_TABLE,
                    "--configfile", str(config), "--config", "workflow={runs_per_job: 1}", root=project),
                stdout=sink, stderr=subprocess.STDOUT, env={**os.environ, **env})
        fault = threading.Thread(target=_cancel_first_training_job, args=(cluster, stop, record), daemon=True)
        fault.start()
        command = snakemake_command(slurm_dir, "--profile", str(site), "--configfile", str(config),
                                    root=project, profile="slurm")
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT,
                                    env={**os.environ, **env})
        except subprocess.TimeoutExpired as timeout:
            pytest.fail(f"SLURM run did not finish within {RUN_TIMEOUT} s\n{(timeout.stdout or b'')[-4000:]!r}\n"
                        f"{(timeout.stderr or b'')[-6000:]!r}\n{_slurm_logs(slurm_dir)}\n{cluster.logs()}")
        stop.set()
        fault.join(10)
        try:
            local.wait(timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the local reference run did not finish within {RUN_TIMEOUT} s")
        if local.returncode != 0:
            pytest.fail(f"local reference run failed ({local.returncode}):\n{local_log.read_text()[-6000:]}")
        if result.returncode != 0:
            pytest.fail(f"SLURM run failed ({result.returncode}): {' '.join(command)}\n"
                        f"--- stdout ---\n{result.stdout[-4000:]}\n--- stderr ---\n{result.stderr[-8000:]}\n"
                        f"{_slurm_logs(slurm_dir)}\n{cluster.logs()}")
        completed = cluster.completed_jobs()
        controller_log = (cluster.state / "slurmctld.log").read_text(errors="replace")
        diagnostics = f"{result.stderr[-8000:]}\n{cluster.logs()}"
    finally:
        stop.set()
        if local is not None and local.poll() is None:
            local.kill()
            local.wait(30)
        cluster.stop()
    plan = slurm_plan(config, root=project, env=env)
    profile = yaml.safe_load((project / "profiles" / "slurm" / "config.yaml").read_text())
    print(f"SLURM test wall time: {time.monotonic() - started:.0f} s; setup: {cluster.setup_notes}")
    return {"local": local_dir, "slurm": slurm_dir, "fault": record, "jobs": completed,
            "controller_log": controller_log, "plan": plan, "profile": profile,
            "stderr": result.stderr, "diagnostics": diagnostics, "config": config, "env": env,
            "project": project}


def _minutes(limit: str) -> int:
    """A time limit as the jobcomp file records it: minutes, or [D-]HH:MM:SS."""
    if limit.isdigit():
        return int(limit)
    days, _, clock = limit.rpartition("-")
    hours, minutes, _seconds = (int(x) for x in clock.split(":"))
    return (int(days) if days else 0) * 1440 + hours * 60 + minutes


def _memory_mb(job: dict[str, str]) -> int:
    """The memory SLURM allocated to a job, from the jobcomp record's Tres (e.g. mem=4000M)."""
    tres = dict(item.split("=", 1) for item in job["Tres"].split(","))
    value = tres["mem"]
    return int(float(value[:-1]) * 1024) if value.endswith("G") else int(value.rstrip("M"))


def test_every_remote_job_went_through_the_scheduler(slurm_run):
    jobs, plan = slurm_run["jobs"], slurm_run["plan"]
    states = [job["JobState"] for job in jobs]
    # The dry-run's plan (bench_slurm, the scale figures' method) names the submissions: with
    # profiles/slurm's 4 runs per job (issue 36) a batch could hold both runs of the tiny grid, but
    # a baseline and a DP-SGD run that keeps PMP checkpoints read different settings and never share
    # one (issue 47): one job per run of training, extraction, the mia, ε*, card and PMP rows, and
    # prepare_dataset, the DP-SGD recipe's reference pool (PMP Recipe C), the DP-SGD run's PMP pairs
    # and canary audit twin; plus the one resubmission of the cancelled training job. metric_canary
    # is a local rule.
    assert plan.single_submissions == {"prepare_dataset": 1, "train_model": 2, "extract_per_example": 2,
                                       "metric_mia": 2, "metric_epsilon_star": 2, "privacy_card": 2,
                                       "reference_pool": 1, "pmp_pairs": 1, "metric_pmp": 2,
                                       "canary_scores": 1}, plan.describe()
    assert plan.group_submissions == {}, plan.describe()
    assert states.count("COMPLETED") == plan.submissions, (states, slurm_run["diagnostics"])
    assert states.count("CANCELLED") == 1, (states, slurm_run["diagnostics"])
    assert len(jobs) == plan.submissions + 1
    # slurmctld starts a job from its main scheduler ("sched: Allocate JobId=N") or from the
    # backfill scheduler ("sched/backfill: _start_job: Started JobId=N"); which one is timing.
    started = set(STARTED_JOB.findall(slurm_run["controller_log"]))
    assert started == {job["JobId"] for job in jobs}, slurm_run["controller_log"][-3000:]
    # Every SLURM job ran under this run's name (the plugin's run id) from the run's directory.
    assert len({job["Name"] for job in jobs}) == 1
    assert {job["WorkDir"] for job in jobs} == {str(slurm_run["slurm"])}


def test_cancelled_training_job_was_retried_with_more_time(slurm_run):
    fault, jobs = slurm_run["fault"], slurm_run["jobs"]
    assert "error" not in fault and fault.get("scancel") == 0, fault
    cancelled = [job for job in jobs if job["JobState"] == "CANCELLED"]
    assert [job["JobId"] for job in cancelled] == [fault["job_id"]]
    # train_model's resources come from its rule (dpaudit.resources, issue 19), times the
    # attempt; each of the two training jobs holds one run (issue 47), whichever was cancelled.
    limits = {run: [(_tiny_training_batch(attempt, run)["runtime"], _tiny_training_batch(attempt, run)["mem_mb"])
                    for attempt in (1, 2)] for run in range(len(TINY_CONFIG["grid"]))}
    first = (_minutes(cancelled[0]["TimeLimit"]), _memory_mb(cancelled[0]))
    run = next((run for run, pair in limits.items() if pair[0] == first), None)
    assert run is not None, (first, limits)
    runtime, memory = limits[run][1]
    retried = [job for job in jobs if job["JobState"] == "COMPLETED"
               and _minutes(job["TimeLimit"]) == runtime and _memory_mb(job) == memory
               and int(job["JobId"]) > int(fault["job_id"])]
    assert len(retried) >= 1, [(j["JobId"], j["JobState"], j["TimeLimit"]) for j in jobs]
    assert fault["job_id"] in slurm_run["stderr"], "Snakemake did not report the cancelled SLURM job"


def _tiny_training_batch(attempt: int = 1, block: int = 0) -> dict[str, int]:
    """The declared resources of the tiny grid's training job of grid block ``block`` (its one run:
    the baseline and the DP-SGD run never share a batch, issue 47)."""
    dataset = TINY_CONFIG["datasets"]["synthetic"]
    n_params = mlp_parameters(dataset["d"], TINY_CONFIG["training"]["hidden_units"], dataset["classes"])
    grid = TINY_CONFIG["grid"][block]
    run = {"mechanism": grid["mechanism"][0], **{k: v[0] for k, v in grid.items() if k != "mechanism"}}
    return combined_resources([train_resources(dataset["n"], dataset["d"], n_params, run, attempt=attempt)])


def _parquet_files(root: Path) -> list[Path]:
    return sorted(p.relative_to(root) for p in (root / "results").rglob("*.parquet"))


def test_outputs_equal_the_local_run(slurm_run):
    local, slurm = slurm_run["local"], slurm_run["slurm"]
    files = _parquet_files(local)
    # the local run made the metrics table and its inputs; the cluster's run made all of them too
    assert set(files) <= set(_parquet_files(slurm))
    assert any("per_example" in str(f) for f in files) and Path(P.METRICS_TABLE) in files
    for kind in ("/metrics/mia/", "/metrics/pmp/", "/metrics/canary/", "/canary/", "/attacks/", "/pmp/"):
        assert any(kind in f"/{f}" for f in files), kind
    for name in files:
        # Training is seeded with deterministic TF ops and one thread (dpaudit._tf), so a job
        # computes the same bits in a SLURM job step as in a local process, and a run trained after
        # another in one process (the SLURM run's batches) as one trained alone (the local run's
        # one run per job, issue 36): byte for byte.
        pd.testing.assert_frame_equal(read_parquet(slurm / name), read_parquet(local / name),
                                      check_exact=True, obj=str(name))
        assert (slurm / name).read_bytes() == (local / name).read_bytes(), name
    for figure in ("privacy_utility.png", "epsilon_star_landscape_synthetic.png", "teaching_f5.png"):
        assert (slurm / "results" / "figures" / figure).stat().st_size > 0


def test_rerun_after_the_cluster_run_has_nothing_to_do(slurm_run):
    # Nothing lost or half-written: the same workflow, run again locally, finds every
    # output of the SLURM run (with its retried job) up to date.
    result = snakemake(slurm_run["slurm"], "-n", "--configfile", str(slurm_run["config"]),
                       env=slurm_run["env"], root=slurm_run["project"])
    assert "Nothing to be done" in result.stdout + result.stderr, result.stdout[-3000:]


def _resources_per_rule(dry_run_stdout: str) -> dict[str, str]:
    """The `resources:` line of the first job of each rule in a dry-run's listing."""
    resources, rule = {}, None
    for line in dry_run_stdout.splitlines():
        stripped = line.strip()
        if stripped.startswith(("rule ", "localrule ")) and stripped.endswith(":"):
            rule = rule_kind(stripped.split()[1].rstrip(":"))
        elif stripped.startswith("resources:") and rule is not None:
            resources.setdefault(rule, stripped.removeprefix("resources:").strip())
    return resources


def test_site_profile_adds_account_and_partition_and_keeps_rule_resources(tmp_path):
    # No scheduler needed: the dry-run shows each job's resources as SLURM would get them.
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(TINY_CONFIG))
    result = snakemake(tmp_path, "-n", "--workflow-profile", str(ROOT / "profiles" / "slurm"),
                       "--profile", str(ROOT / "profiles" / "slurm" / "site-example"),
                       "--configfile", str(config), env={"DPAUDIT_SLURM_TRAIN_GPUS": "1"})
    resources = _resources_per_rule(result.stdout)
    train = resources["train_model"]
    # mem_mb and runtime of training come from the rule (dpaudit.resources), not a profile; a training
    # job holds one run here (issue 47: the first listed, either), cpus_per_task and gpu declared by the rule.
    declared = [_tiny_training_batch(1, block) for block in range(len(TINY_CONFIG["grid"]))]
    assert any(f"mem_mb={one['mem_mb']}," in train and f"runtime={one['runtime']}," in train for one in declared), train
    for expected in ("slurm_account=my_account", "slurm_partition=compute", "cpus_per_task=1", "gpu=1"):
        assert expected in train, train
    # A rule the project profile does not list takes the site's defaults.
    assert "mem_mb=2000" in resources["aggregate_metrics"] and "runtime=60" in resources["aggregate_metrics"]
    assert "gpu" not in resources["prepare_dataset"]
    # the PMP jobs' BLAS threads (PMP_THREADS) reach SLURM as cpus_per_task
    assert "cpus_per_task=2" in resources["metric_pmp"] and "cpus_per_task=2" in resources["pmp_pairs"]
    assert "cpus_per_task=1" in resources["extract_per_example"]


def test_without_root_the_slurm_tests_fail_saying_how_to_run_them(monkeypatch):
    # The fixture turns this error into pytest.fail: never a skip.
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(ClusterError, match=r"needs root.*sudo \.venv/bin/python -m pytest tests/workflow/test_slurm\.py"):
        require_root()


def test_every_cluster_rule_has_resources_in_the_slurm_profile():
    # A rule missing from set-resources gets no time limit and memory guessed from its
    # input size on a real cluster (profiles/slurm/config.yaml); every rule that is
    # submitted under the paper configs (all families on) needs an entry.
    profile = yaml.safe_load((ROOT / "profiles" / "slurm" / "config.yaml").read_text())
    every, local = rule_names(ROOT / "config" / "paper" / "epsilon_star.yaml")
    # the batched rules (issue 36: generated names, which no profile can list) declare
    # cpus_per_task themselves (rules/common.smk, batch_resources)
    every = {rule for rule in every if rule_kind(rule) == rule}
    missing = sorted(every - local - set(profile["set-resources"]))
    assert not missing, f"rules submitted to SLURM without set-resources: {missing}"
    assert not set(profile["set-resources"]) - every, "set-resources names a rule that does not exist"

