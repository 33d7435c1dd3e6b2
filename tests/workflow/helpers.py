"""Run Snakemake on this project in a temporary working directory (never results/)."""

from __future__ import annotations

import atexit
import copy
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path

import yaml

from dpaudit.batching import rule_kind

ROOT = Path(__file__).resolve().parents[2]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
# The environment the fork server starts from: this process's at import (collection), before any
# test patched it; each call still gets its own whole environment.
_SERVER_ENV = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}


def snakemake_command(workdir: Path, *args: str, root: Path = ROOT, profile: str = "default") -> list[str]:
    """The console script's argv for ``root``'s Snakefile in ``workdir`` with one of its workflow
    profiles (``profiles/<profile>``)."""
    return [
        SNAKEMAKE,
        "--snakefile", str(root / "Snakefile"),
        "--directory", str(workdir),
        "--workflow-profile", str(root / "profiles" / profile),
        *args,
    ]


def snakemake(workdir: Path, *args: str, check: bool = True, env: dict | None = None,
              root: Path = ROOT, timeout: int = 900, fresh_interpreter: bool = False) -> subprocess.CompletedProcess:
    """Snakemake on ``root``'s Snakefile in ``workdir``: a fork of this worker's warm server
    (tests/snakemake_fork.py), or with ``fresh_interpreter`` the console script in a new
    interpreter (its own hash seed: what a parse-order test needs)."""
    command = snakemake_command(workdir, *args, root=root)
    environment = {**os.environ, **(env or {})}
    if fresh_interpreter:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=environment)
    else:
        result = _fork_server().run(command, environment, timeout)
    if check and result.returncode != 0:
        raise AssertionError(
            f"snakemake failed ({result.returncode}): {' '.join(command)}\n"
            f"--- stdout ---\n{result.stdout[-6000:]}\n--- stderr ---\n{result.stderr[-6000:]}"
        )
    return result


class _ForkServer:
    """This process's tests/snakemake_fork.py server: each call is a fork of a process that has
    imported Snakemake already (~1.3 s of CPU a call saved), with the call's argv, environment and
    working directory; the result is what ``subprocess.run(..., capture_output=True, text=True)``
    returns, and a call past its timeout raises ``subprocess.TimeoutExpired`` after the child
    was killed."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.process = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "snakemake_fork.py")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env=_SERVER_ENV,
        )
        atexit.register(self.close)

    def run(self, command: list[str], env: dict, timeout: float) -> subprocess.CompletedProcess:
        with self.lock, tempfile.TemporaryDirectory(prefix="dpaudit-snakemake-") as folder:
            stdout, stderr = Path(folder) / "stdout", Path(folder) / "stderr"
            request = {"argv": command, "env": env, "cwd": os.getcwd(), "timeout": timeout,
                       "stdout": str(stdout), "stderr": str(stderr)}
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            answer = self.process.stdout.readline()
            if not answer:
                raise RuntimeError(f"the Snakemake fork server stopped (exit code {self.process.poll()})")
            outcome = json.loads(answer)
            output, errors = stdout.read_text(), stderr.read_text()
        if outcome.get("timeout"):
            raise subprocess.TimeoutExpired(command, timeout, output=output, stderr=errors)
        return subprocess.CompletedProcess(command, outcome["returncode"], output, errors)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait(timeout=60)


@functools.cache
def _fork_server() -> _ForkServer:
    return _ForkServer()


# make test's xdist workers (--dist loadgroup): the tests that dry-run a shipped config share one
# worker, so each config is parsed once per suite (shipped_dry_run), not once per test that reads it
SHIPPED_CONFIGS = "shipped_config_dry_runs"


@functools.cache
def shipped_dry_run(config: str) -> subprocess.CompletedProcess:
    """``snakemake -n`` of a config under ``config/`` (``"config/cnn.yaml"``) in an empty work
    directory: every job of its DAG (what ``--forceall`` would list), run once per test process."""
    with tempfile.TemporaryDirectory() as workdir:
        # the files of config/trained_elsewhere.yaml's models are read at parse time, relative to the work dir
        shutil.copytree(ROOT / "examples", Path(workdir) / "examples")
        return snakemake(Path(workdir), "-n", "--configfile", str(ROOT / config))


def planned_jobs(output: str) -> list[dict]:
    """The jobs of a dry run's listing: rule, outputs and logs of each."""
    jobs, job = [], None
    for line in output.splitlines():
        stripped = line.strip()
        header = re.match(r"^(?:local)?rule (\w+):$", stripped)
        if header:
            job = {"rule": header.group(1), "output": [], "log": []}
            jobs.append(job)
        elif job is not None and stripped.startswith(("output: ", "log: ")):
            name, _, files = stripped.partition(": ")
            job[name] = [item.split(" (")[0] for item in files.split(", ")]
    return jobs


def run_counts(output: str) -> Counter:
    """Runs (or recipes, or other units a job is per) per rule from a dry run's job listing: a batched
    job (issue 36) counts once per run it holds, read from its per-run log files; any other job
    counts once. Equal to the jobs per rule when every batch holds one run."""
    counts: Counter = Counter()
    for job in planned_jobs(output):
        counts[rule_kind(job["rule"])] += len(job["log"]) or 1
    return counts


def config_with(config: dict, key: str, value) -> dict:
    """A copy of ``config`` with the dotted ``key`` set to ``value`` (missing mappings made)."""
    changed = copy.deepcopy(config)
    node = changed
    *parents, last = key.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return changed


def issue47_changes(config: dict) -> dict[str, dict]:
    """Issue 47's five changes of ``config`` (its DP-SGD block is the grid's second): one more seed, one
    more ε, and three metric settings (tests/e2e/test_rerun_matrix.py, bench/bench_reruns.py)."""
    seed = copy.deepcopy(config)
    seed["grid"][1]["seed"] = [*seed["grid"][1]["seed"], max(seed["grid"][1]["seed"]) + 1]
    epsilon = copy.deepcopy(config)
    epsilon["grid"][1]["target_epsilon"] = [*epsilon["grid"][1]["target_epsilon"], 16]
    return {
        "seed added": seed,
        "epsilon appended": epsilon,
        "metrics.canary.gdp_thresholds_per_tail": config_with(config, "metrics.canary.gdp_thresholds_per_tail", 20),
        "metrics.pmp.partners_relative_standard_error": config_with(
            config, "metrics.pmp.partners_relative_standard_error", 0.02),
        "metrics.pmp.checkpoints": config_with(config, "metrics.pmp.checkpoints", 3),
    }


def job_counts(output: str) -> Counter:
    """Jobs per rule from a dry run's 'Job stats' table; a batched rule's jobs (issue 36:
    ``metric_mia__digits_0``, ...) count under the per-run rule they stand for."""
    counts: Counter = Counter()
    in_table = False
    for line in output.splitlines():
        if line.startswith("Job stats:"):
            in_table, counts = True, Counter()
            continue
        if in_table:
            match = re.match(r"^(\w+)\s+(\d+)\s*$", line.strip())
            if match and match.group(1) != "total":
                counts[rule_kind(match.group(1))] += int(match.group(2))
            elif line.strip().startswith("total"):
                in_table = False
    return counts


def job_wildcards(output: str) -> list[dict[str, str]]:
    """The wildcards of every job listed by a dry run; a batched job (issue 36) gives one entry per
    run it holds (per recipe for reference_pool), read from its per-run log paths
    (``logs/<rule>/<dataset>/<run>.log``)."""
    jobs = []
    batched = None
    for line in output.splitlines():
        line = line.strip()
        header = re.match(r"^(?:local)?rule (\w+):$", line)
        if header:
            batched = header.group(1) if "__" in header.group(1) else None
        elif line.startswith("wildcards:"):
            pairs = line[len("wildcards:"):].split(",")
            jobs.append(dict(p.strip().split("=", 1) for p in pairs if "=" in p))
        elif batched is not None and line.startswith("log: "):
            key = "recipe" if rule_kind(batched) == "reference_pool" else "run"
            for path in line.removeprefix("log: ").split(", "):
                dataset, name = Path(path).parts[-2], Path(path).stem
                jobs.append({"dataset": dataset, key: name})
            batched = None
    return jobs


def copy_project(destination: Path) -> Path:
    """A throw-away copy of the workflow (its own src/ goes first on PYTHONPATH in tests)."""
    destination.mkdir(parents=True)
    for name in ("Snakefile", "rules", "scripts", "workflow", "profiles", "src", "config"):
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, destination / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(source, destination / name)
    return destination
def finished_run(base: Path, config: dict, *args: str, cores: int = 2) -> dict:
    """A real run of ``config`` in a throw-away project copy under ``base``: the project,
    work directory, config file, environment and Snakemake's result."""
    project = copy_project(base / "project")
    workdir = base / "work"
    workdir.mkdir()
    path = base / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {"PYTHONPATH": str(project / "src")}
    result = snakemake(workdir, "--cores", str(cores), "--configfile", str(path), *args, env=env, root=project)
    return {"project": project, "workdir": workdir, "config": path, "env": env, "log": result}


