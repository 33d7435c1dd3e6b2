"""`make bench`: every speed figure the issues ask for, printed in one run.

Not part of the test suite (these machines are noisy; no timing assertions).
Flags: --skip-workflow to leave out the full default workflow (about 10 minutes).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def dag_dry_run(rows: int = 1000) -> None:
    """`snakemake -n` wall time for a grid of `rows` training runs and every per-run rule."""
    side = round(rows ** (1 / 3))
    assert side**3 == rows, "rows must be a cube"
    config = {
        "datasets": {"synthetic": {"n": 400}},
        "grid": [{
            "mechanism": ["dpsgd"],
            "target_epsilon": [round(0.5 + i, 2) for i in range(side)],
            "clip_norm": [round(0.1 * (i + 1), 2) for i in range(side)],
            "seed": list(range(side)),
        }],
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "grid.yaml"
        path.write_text(yaml.safe_dump(config))
        start = time.perf_counter()
        result = subprocess.run(
            [str(BIN / "snakemake"), "-n", "--quiet", "rules", "--snakefile", str(ROOT / "Snakefile"),
             "--directory", tmp, "--workflow-profile", str(ROOT / "profiles" / "default"),
             "--configfile", str(path)],
            capture_output=True, text=True, check=True,
        )
        elapsed = time.perf_counter() - start
    total = next((line.split()[-1] for line in result.stdout.splitlines() if line.startswith("total")), "?")
    print(f"dag_dry_run training_runs={rows} jobs={total} seconds={elapsed:.2f} (target <= 20 s)")


def default_workflow() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        subprocess.run(
            [str(BIN / "snakemake"), "--snakefile", str(ROOT / "Snakefile"), "--directory", tmp,
             "--workflow-profile", str(ROOT / "profiles" / "default"), "--cores", "2",
             "--configfile", str(ROOT / "config" / "config.yaml")],
            capture_output=True, text=True, check=True,
        )
        elapsed = time.perf_counter() - start
    print(f"default_workflow cores=2 seconds={elapsed:.1f} (target <= 600 s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--skip-workflow", action="store_true")
    args = parser.parse_args()
    for script in sorted((ROOT / "bench").glob("bench_*.py")):
        print(f"== {script.name}", flush=True)
        subprocess.run([sys.executable, str(script)], check=True)
    print("== workflow", flush=True)
    dag_dry_run()
    if not args.skip_workflow:
        default_workflow()


if __name__ == "__main__":
    main()
