"""Scale dry-run of the SLURM profile (issue 12): the largest paper config's DAG with
profiles/slurm — jobs in the DAG, SLURM submissions, DAG build time.

A submission is one group job (profile `groups` + `group-components`, none since issue 36) or
one ungrouped job of a rule that is neither a local rule (`localrule: True`) nor a target-only
rule. A batched rule's jobs (issue 36: ``train_model__adult_3``) count under the per-run rule
they stand for; the profile's ``workflow.runs_per_job`` sets how many runs a job holds.
The dry-run uses the dry-run executor, so what it prints is the DAG Snakemake
would submit; tests/workflow/test_slurm.py checks this count against the
submissions a real scheduler received for the tiny workflow.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from dpaudit.batching import rule_kind

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
LARGEST_PAPER_CONFIG = ROOT / "config" / "paper" / "epsilon_star.yaml"

GROUP_HEADER = re.compile(r"Group job (\S+) \(jobs in lexicogr\. order\):")
RULE_LINE = re.compile(r"^(\s*)(?:local)?(?:rule|checkpoint) (\w+):\s*$")


@dataclass
class SlurmPlan:
    jobs: int
    jobs_per_rule: Counter
    local_jobs: int
    group_submissions: Counter
    single_submissions: Counter
    seconds: float

    @property
    def submissions(self) -> int:
        return sum(self.group_submissions.values()) + sum(self.single_submissions.values())

    def describe(self) -> str:
        groups = ", ".join(f"{g}={n}" for g, n in sorted(self.group_submissions.items()))
        singles = ", ".join(f"{r}={n}" for r, n in sorted(self.single_submissions.items()))
        return (f"jobs={self.jobs} local_jobs={self.local_jobs} slurm_submissions={self.submissions} "
                f"(groups: {groups or 'none'}; single: {singles or 'none'}) dag_seconds={self.seconds:.1f}")


def rule_names(configfile: Path, root: Path = ROOT, env: dict | None = None) -> tuple[set[str], set[str]]:
    """(every rule, the rules that run in the Snakemake process: `localrules` and target-only rules)."""
    code = (
        "import json, sys, tempfile\n"
        "from pathlib import Path\n"
        "from snakemake.api import SnakemakeApi\n"
        "from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings\n"
        "with tempfile.TemporaryDirectory() as tmp, SnakemakeApi(OutputSettings()) as api:\n"
        "    workflow = api.workflow(ResourceSettings(), ConfigSettings(configfiles=[Path(sys.argv[1])],\n"
        "        replace_workflow_config=True), snakefile=Path(sys.argv[2]), workdir=Path(tmp))._workflow\n"
        "    print(json.dumps([[r.name for r in workflow.rules],\n"
        "                      [r.name for r in workflow.rules if r.name in workflow._localrules or r.norun]]))\n"
    )
    result = subprocess.run([sys.executable, "-c", code, str(configfile), str(root / "Snakefile")],
                            capture_output=True, text=True, check=True, env={**os.environ, **(env or {})})
    every, local = json.loads(result.stdout.strip().splitlines()[-1])
    return set(every), set(local)


def local_rules(configfile: Path, root: Path = ROOT, env: dict | None = None) -> set[str]:
    """Rules that run in the Snakemake process: `localrules` and target-only rules (no script)."""
    return rule_names(configfile, root, env)[1]


def parse_dry_run(stdout: str, local: set[str], seconds: float = 0.0) -> SlurmPlan:
    jobs_per_rule: Counter = Counter()
    group_submissions: Counter = Counter()
    single_submissions: Counter = Counter()
    local_jobs = 0
    in_group = False
    for line in stdout.splitlines():
        header = GROUP_HEADER.search(line)
        if header:
            group_submissions[header.group(1)] += 1
            in_group = True
            continue
        match = RULE_LINE.match(line)
        if not match:
            continue
        indent, name = match.groups()
        rule = rule_kind(name)
        jobs_per_rule[rule] += 1
        if indent:  # a member of the group job printed just above
            if not in_group:
                raise ValueError(f"indented job of rule {rule} outside a group job")
            continue
        in_group = False
        if name in local:
            local_jobs += 1
        else:
            single_submissions[rule] += 1
    return SlurmPlan(sum(jobs_per_rule.values()), jobs_per_rule, local_jobs, group_submissions,
                     single_submissions, seconds)


def slurm_plan(configfile: Path, root: Path = ROOT, env: dict | None = None,
               extra: tuple[str, ...] = ()) -> SlurmPlan:
    """Dry-run `configfile` with profiles/slurm in an empty working directory."""
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        result = subprocess.run(
            [str(BIN / "snakemake"), "-n", "--snakefile", str(root / "Snakefile"), "--directory", tmp,
             "--workflow-profile", str(root / "profiles" / "slurm"), "--configfile", str(configfile),
             *extra],
            capture_output=True, text=True, env={**os.environ, **(env or {})},
        )
        seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(f"dry-run failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    plan = parse_dry_run(result.stdout, local_rules(configfile, root, env), seconds)
    expected = int(re.search(r"^total\s+(\d+)", result.stdout, re.M).group(1))
    if plan.jobs != expected:
        raise RuntimeError(f"parsed {plan.jobs} jobs but the dry-run's Job stats say {expected}")
    return plan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--configfile", type=Path, default=LARGEST_PAPER_CONFIG)
    args = parser.parse_args()
    plan = slurm_plan(args.configfile)
    one_run = slurm_plan(args.configfile, extra=("--config", "workflow={runs_per_job: 1}"))
    print(f"slurm_dry_run config={args.configfile} {plan.describe()}")
    print(f"slurm_dry_run one run per job: slurm_submissions={one_run.submissions} "
          f"dag_seconds={one_run.seconds:.1f}")


if __name__ == "__main__":
    main()
