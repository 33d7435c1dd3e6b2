"""What a grown or tuned grid reruns (issue 47): the five changes of the issue, dry-run on a finished grid.

Runs a small grid for real in a throw-away project copy (synthetic, n = 400: baseline seeds 0-1,
DP-SGD ε 2 and 8 seeds 0-1, output perturbation ε 4 seeds 0-1; 8 runs, 6 canary audits, 4
reference pools; PMP with Recipe C, canaries and the attacks on, audit, profile and simulations
off), then dry-runs each change one at a time and prints, per change, the runs (or recipes) each
per-run rule would redo and the other jobs (one JSON line per change):

1. a seed added to the DP-SGD block;
2. one ε appended at the end of the DP-SGD block's list;
3. ``metrics.canary.gdp_thresholds_per_tail``;
4. ``metrics.pmp.partners_relative_standard_error``;
5. ``metrics.pmp.checkpoints``.

    python bench/bench_reruns.py [--keep]

No timing: the counts are what tests/e2e/test_rerun_matrix.py holds the workflow to on the tiny run.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

CONFIG = {
    "datasets": {"synthetic": {"n": 400, "d": 5, "classes": 2, "separation": 1.5, "seed": 3}},
    "training": {"hidden_units": [8]},
    "grid": [
        {"mechanism": ["baseline"], "epochs": [2], "batch_size": [32], "seed": [0, 1]},
        {"mechanism": ["dpsgd"], "target_epsilon": [2, 8], "clip_norm": [1.0], "epochs": [2], "batch_size": [32],
         "seed": [0, 1]},
        {"mechanism": ["output_perturbation"], "target_epsilon": [4], "seed": [0, 1]},
    ],
    "metrics": {"pmp": {"enabled": True, "recipe_c": True, "checkpoints": 2, "partners_max": 64},
                "attacks": {"enabled": True, "reference_models": 4},
                "canary": {"enabled": True, "gradient_canaries": 300, "input_canaries": 20,
                           "linear_releases": 200}},
    "audit": {"enabled": False},
    "profile": {"enabled": False},
}


def reruns(output: str) -> dict[str, list[str]]:
    """Per rule (a batch under the per-run rule it stands for) the keys its jobs redo: each per-run
    log's file name (the run or recipe) with its dataset; other jobs count once, by rule name."""
    from dpaudit.batching import rule_kind
    from tests.workflow.helpers import planned_jobs

    found: dict[str, list[str]] = defaultdict(list)
    for job in planned_jobs(output):
        keys = ["/".join(Path(log).parts[2:]).removesuffix(".log") if len(Path(log).parts) > 3 else ""
                for log in job["log"]]
        found[rule_kind(job["rule"])].extend(keys or [""])
    return {kind: sorted(keys) for kind, keys in sorted(found.items())}


def summary(plan: dict[str, list[str]], workdir: Path) -> dict[str, str]:
    """Per rule: "<redone> redone + <new> new" for a per-run (per-recipe) rule, whose redone keys
    have a log from the finished run; the job count for any other rule."""
    out = {}
    for rule, keys in plan.items():
        if any(keys):
            redone = sum((workdir / "logs" / rule / f"{key}.log").exists() for key in keys)
            out[rule] = f"{redone} redone + {len(keys) - redone} new"
        else:
            out[rule] = str(len(keys))
    return out


def main() -> None:
    from tests.workflow.helpers import finished_run, snakemake

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the project copy (printed)")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench_reruns_"))
    run = finished_run(base, CONFIG, cores=2)
    print(json.dumps({"finished": str(run["workdir"])}), flush=True)
    from tests.workflow.helpers import issue47_changes

    for name, changed in issue47_changes(CONFIG).items():
        path = base / f"{re.sub(r'[^a-z0-9]+', '_', name)}.yaml"
        path.write_text(yaml.safe_dump(changed))
        result = snakemake(run["workdir"], "-n", "--configfile", str(path), env=run["env"], root=run["project"])
        plan = reruns(result.stdout)
        print(json.dumps({"change": name, "jobs": summary(plan, run["workdir"])}), flush=True)
    if not args.keep:
        import shutil

        shutil.rmtree(base, ignore_errors=True)
    else:
        print(json.dumps({"kept": str(base)}))


if __name__ == "__main__":
    main()
