"""The seeds' scale on a workstation (issue 37): every rule's time and peak memory at n rows.

Runs the default families (identifiability, PMP, canary, attacks, ε*, MIA; no audit, profile or
simulations, which do not grow with a dataset) on a synthetic dataset (d = 100, 10 classes) with
one baseline and one DP-SGD run (ε = 4, 2 epochs, batch 256, hidden 64) in a throw-away project
copy, for each n, one job at a time (``--cores 1``), and reads every job's Snakemake benchmark
(``s``, ``max_rss``) and every run's kernel peak (issue 47: ``VmHWM``, the closing line of its
log, ``dpaudit.logs``; Snakemake's ``max_rss`` samples every 30 s after the first 15 s and missed
``reference_pool``'s peak, 3.78 GB at 2·10^5 against the 2.0-2.7 GB it showed). Prints one JSON
line per (n, rule) and per run's peak, then per rule the log-log slope between the last two sizes
and its declared ``mem_mb`` (``dpaudit.resources``) against the peaks; ``--record`` keeps every
peak in ``bench/measured_peaks.json``, which tests/unit/test_measured_peaks.py holds the
declarations to;
then the projected cost of the Purchase-100 paper config (``config/paper/epsilon_star.yaml``'s
purchase100 grid: 15 baselines and 240 DP-SGD runs, hidden [100, 100, 100], 50 DP epochs)
from each rule's time at the largest n scaled by its slope to n = 197,324 and by epochs for
the rules that train; on one workstation (``--workstation-cores``) and on a 64-core SLURM
allocation (jobs in parallel, at least the longest job).

    python bench/bench_scale.py                                  # n = 10^4, 10^5, 2·10^5 (long)
    python bench/bench_scale.py --sizes 2000 5000 --rules extract_per_example metric_pmp
    python bench/bench_scale.py --sizes 10000 100000 200000 --until metric_pmp   # PMP jobs alone
    python bench/bench_scale.py --sizes 10000 100000 --record    # keep the kernel peaks (issue 47)

``--until RULE ...`` runs only those rules and what they need (Snakemake's ``--until``).
``DPAUDIT_PROGRESS_SECONDS`` is passed through: the jobs' logs show their progress lines.

Measured (issue 37) on a 2-core machine shared with other work (load 3-8, so the seconds are
noisy: several slopes come out negative), one job at a time; the largest over a rule's jobs.
Seconds / peak RSS MB at n = 10^5 and 2·10^5 (declared mem_mb at 2·10^5 after this issue):

    extract_per_example   11.5 /   877    16.4 / 1,597  (4,100)   PMP only: 10.7 → 21.2 s, slope 0.99
    metric_pmp            50.0 /   882    35.2 / 1,688  (3,000)   PMP only: 40.6 → 64.7 s, slope 0.68
    train_model           13.1 / 1,051    10.2 / 1,299  (1,600)
    canary_scores         13.5 / 1,269    13.2 / 1,636  (2,900)
    reference_pool        21.2 / 1,965    23.0 / 2,522  (3,000)
    metric_attacks        11.6 / 1,235     9.6 / 2,322  (2,700)
    metric_epsilon_star   11.1 /   477     8.8 /   508  (1,000)
    every other rule      ≤ 4 s, ≤ 600 MB

Issue 47, the kernel's peaks (VmHWM, MB; bench/measured_peaks.json) at 10^4 / 10^5 / 2·10^5, each
job its own batch (the baseline and the DP-SGD run never share one): reference_pool 1,251 / 2,115 /
3,652 (DP-SGD recipe; Snakemake's max_rss showed 1,018 / 2,085 / 1,867), metric_attacks 290 / 1,473
/ 2,327, canary_scores 930 / 1,660 / 2,049, metric_pmp 260 / 1,065 / 1,858, pmp_pairs 263 / 991 /
1,619, train_model 818 / 1,238 / 1,352, extract_per_example 215 / 449 / 692; workflow wall 102 /
109 / 244 s.

Every job ≤ 35 s at 2·10^5 in the full run (≤ 65 s for metric_pmp alone); slopes between 10^5 and
2·10^5 ≤ 0.99 (PMP-only run) and ≤ 0.5 in the full run. Before issue 37: extraction 805 s
(the issue's figure) and metric_pmp > 8 min, declared 23,600 and 18,400 MB; metric_attacks,
reference_pool and train_model were declared below their peaks (1,600, 1,800 and 1,200 MB).
At 2·10^5 Recipe B's pilot (32 partners, kept: standard error 0.0013 on ε̃ = 1.62) took 11 s,
the largest-distance search its budget (2²⁹ pairs, 19 s) and gave an upper bound (dense
inputs: ``dpaudit.extract.max_distance``), Recipe A's pilot and 234 drawn partners 23 s.
Purchase-100 projection from these slopes (per-job time at n = 197,324, training rules ×25 for
50 epochs; the d = 100, 64-unit model, not Purchase's 600 × [100, 100, 100]): 53.6 CPU hours,
26.8 h on this 2-core workstation, 0.84 h on 64 cores (training, twins and pools are 97 % of it).
"""

from __future__ import annotations

import argparse
import copy
import csv
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

PURCHASE_N = 197_324
PURCHASE_RUNS = {"baseline": 15, "dpsgd": 240}
BENCH_EPOCHS, PURCHASE_EPOCHS = 2, 50
TRAINING_RULES = {"train_model", "canary_scores", "reference_pool"}  # time grows with epochs


def config_for(n: int) -> dict:
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["datasets"] = {"synthetic": {"n": int(n), "d": 100, "classes": 10, "separation": 1.0, "seed": 0}}
    config["grid"] = [
        {"mechanism": ["baseline"], "epochs": [BENCH_EPOCHS], "batch_size": [256], "learning_rate": [0.05],
         "seed": [0]},
        {"mechanism": ["dpsgd"], "target_epsilon": [4], "clip_norm": [1.0], "epochs": [BENCH_EPOCHS],
         "batch_size": [256], "learning_rate": [0.05], "seed": [0]},
    ]
    for key in ("audit", "profile"):
        config.setdefault(key, {})["enabled"] = False
    for key in config.get("simulations", {}):
        config["simulations"][key]["enabled"] = False
    return config


# A run's log closes with its kernel peak (dpaudit.logs.job_logging, issue 47)
_PEAK = re.compile(r"done in ([0-9.]+) s; peak resident memory ([0-9]+) MB \(kernel VmHWM\)")
PEAKS_FILE = ROOT / "bench" / "measured_peaks.json"


def kernel_peaks(workdir: Path, config: dict) -> list[dict]:
    """Every job's (a batch's: every run's) kernel peak from the closing line of its log, with the
    declaration dpaudit.resources makes for it (``declared_for_job``; None for a rule that declares
    none: the local rules, which run in Snakemake's own process on a cluster)."""
    from dpaudit.config import validate_config
    from dpaudit.resources import declared_for_job

    full = validate_config(copy.deepcopy(config))
    found = []
    for path in sorted((workdir / "logs").rglob("*.log")):
        parts = path.relative_to(workdir / "logs").parts
        match = _PEAK.search(path.read_text(errors="replace").splitlines()[-1] if path.stat().st_size else "")
        if not match:
            continue
        rule = parts[0].removesuffix(".log")
        dataset = parts[1] if len(parts) == 3 else (path.stem if len(parts) == 2 else None)
        key = path.stem if len(parts) == 3 else None
        partners = _chosen_partners(workdir, dataset, key) if rule == "metric_pmp" else None
        try:
            declared = declared_for_job(rule, full, dataset=dataset, key=key, pmp_partners=partners)["mem_mb"]
        except (ValueError, KeyError, TypeError):
            declared = None
        found.append({"rule": rule, "dataset": dataset, "key": key, "seconds": float(match.group(1)),
                      "peak_mb": int(match.group(2)), "declared_mb": declared,
                      **({"pmp_partners": partners} if partners else {})})
    return found


def _chosen_partners(workdir: Path, dataset: str, run: str) -> int | None:
    """The partners per target the run's pmp pairs hold (what rules/pmp.smk declares metric_pmp from)."""
    import pyarrow.parquet as pq

    path = workdir / "results" / "per_example" / dataset / run / "pmp_pairs.parquet"
    if not path.exists():
        return None
    meta = json.loads((pq.read_schema(path).metadata or {}).get(b"dpaudit.pmp_pairs", b"{}"))
    return int(meta["partners"]) if meta.get("partners") else None


def record_peaks(n: int, config: dict, peaks: list[dict], path: Path = PEAKS_FILE) -> None:
    """Keep ``peaks`` of size ``n`` (those with a declaration) in the committed file, beside the
    other sizes' (tests/unit/test_measured_peaks.py holds dpaudit.resources to every one)."""
    data = json.loads(path.read_text()) if path.exists() else {"sizes": {}}
    data["about"] = ("Kernel peaks (VmHWM) of every job that declares memory, from bench/bench_scale.py "
                     "--record: each run's own peak, from its log's closing line (dpaudit.logs); config: "
                     "the bench's config at that size")
    data["sizes"][str(n)] = {"config": config, "measured": time.strftime("%Y-%m-%d"),
                             "peaks": [{k: v for k, v in row.items() if k not in ("declared_mb", "seconds")}
                                       | {"seconds": round(row["seconds"], 1)}
                                       for row in peaks if row["declared_mb"] is not None]}
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def run_size(n: int, base: Path, until: list[str], cores: int, record: bool = False) -> list[dict]:
    from tests.workflow.helpers import copy_project, snakemake

    folder = base / f"n{n}"
    project = copy_project(folder / "project")
    workdir = folder / "work"
    workdir.mkdir()
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config_for(n)))
    args = ["--cores", str(cores), "--configfile", str(path)]
    if until:
        args += ["--until", *until]
    start = time.perf_counter()
    snakemake(workdir, *args, env={"PYTHONPATH": str(project / "src")}, root=project, timeout=6 * 3600)
    wall = time.perf_counter() - start
    rows = []
    for table in sorted((workdir / "benchmarks").rglob("*.tsv")):
        rule = table.relative_to(workdir / "benchmarks").parts[0].removesuffix(".tsv")
        with open(table) as handle:
            record = next(csv.DictReader(handle, delimiter="\t"))
        rows.append({"n": n, "rule": rule, "job": str(table.relative_to(workdir / "benchmarks")),
                     "seconds": float(record["s"]), "max_rss_mb": _number(record.get("max_rss")),
                     "declared_mb": _declared(rule, n, table)})
    print(json.dumps({"n": n, "workflow_wall_seconds": round(wall, 1), "jobs": len(rows)}), flush=True)
    peaks = kernel_peaks(workdir, config_for(n))
    for row in peaks:
        print(json.dumps({"n": n, "kernel_peak": row}), flush=True)
    by_rule: dict[str, float] = defaultdict(float)
    declared_by_rule: dict[str, float] = {}
    for row in peaks:
        by_rule[row["rule"]] = max(by_rule[row["rule"]], row["peak_mb"])
        if row["declared_mb"] is not None:
            declared_by_rule[row["rule"]] = max(declared_by_rule.get(row["rule"], 0), row["declared_mb"])
    for row in rows:
        # the batch's declaration: the largest of its runs' (a batch is named by a hash: issue 47)
        row["kernel_peak_mb"] = by_rule.get(row["rule"], math.nan)
        row["declared_mb"] = declared_by_rule.get(row["rule"], row["declared_mb"])
    if record:
        record_peaks(n, config_for(n), peaks)
    return rows


def _number(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _declared(rule: str, n: int, table: Path) -> float:
    """The job's declared mem_mb (dpaudit.resources), for the per-run rules the bench measures."""
    from dpaudit.resources import declared

    config = config_for(n)
    training = config["training"]
    mechanism = "dpsgd" if "dpsgd" in table.name else "baseline"
    run = {**config["grid"][1 if mechanism == "dpsgd" else 0], "mechanism": mechanism}
    run = {key: (value[0] if isinstance(value, list) else value) for key, value in run.items()}
    try:
        from dpaudit.config import validate_config

        full = validate_config(config)
    except Exception:  # noqa: BLE001 - the declaration is informative here, never the measurement
        full = config
    try:
        return float(declared(rule, full, n=n, d=100, classes=10, training=training, run=run)["mem_mb"])
    except Exception:  # noqa: BLE001
        return math.nan


def slopes(rows: list[dict]) -> dict[str, dict]:
    """Per rule: seconds and peak at each n (largest over its jobs) and the log-log slope of the
    seconds between the last two sizes."""
    per = defaultdict(dict)
    for row in rows:
        best = per[row["rule"]].get(row["n"])
        if best is None or row["seconds"] > best["seconds"]:
            per[row["rule"]][row["n"]] = row
    out = {}
    for rule, by_n in per.items():
        sizes = sorted(by_n)
        slope = math.nan
        if len(sizes) >= 2:
            (n1, r1), (n2, r2) = (sizes[-2], by_n[sizes[-2]]), (sizes[-1], by_n[sizes[-1]])
            if r1["seconds"] > 0 and r2["seconds"] > 0:
                slope = math.log(r2["seconds"] / r1["seconds"]) / math.log(n2 / n1)
        last = by_n[sizes[-1]]
        out[rule] = {"sizes": sizes, "seconds": [round(by_n[s]["seconds"], 2) for s in sizes],
                     "max_rss_mb": [round(by_n[s]["max_rss_mb"], 0) for s in sizes],
                     "kernel_peak_mb": [round(by_n[s].get("kernel_peak_mb", math.nan), 0) for s in sizes],
                     "declared_mb": last["declared_mb"], "slope": round(slope, 3), "n_last": sizes[-1],
                     "seconds_last": last["seconds"]}
    return out


def projection(table: dict[str, dict], workstation_cores: int) -> dict:
    """Purchase-100 paper config: jobs × time per rule from the measured slopes (module docstring)."""
    jobs, cpu, longest = {}, 0.0, 0.0
    for rule, row in table.items():
        slope = row["slope"] if math.isfinite(row["slope"]) else 1.0
        per_job = row["seconds_last"] * (PURCHASE_N / row["n_last"]) ** max(slope, 0.0)
        if rule in TRAINING_RULES:
            per_job *= PURCHASE_EPOCHS / BENCH_EPOCHS
        count = sum(PURCHASE_RUNS.values()) if rule in ("train_model", "extract_per_example", "metric_mia",
                                                         "metric_identifiability", "metric_epsilon_star",
                                                         "metric_attacks", "privacy_card", "metric_canary") \
            else PURCHASE_RUNS["dpsgd"] if rule in ("metric_pmp", "canary_scores") else 1
        if rule == "reference_pool":
            count = PURCHASE_RUNS["dpsgd"] // 5 + PURCHASE_RUNS["baseline"] // 5  # one pool per recipe
        jobs[rule] = {"jobs": count, "seconds_per_job": round(per_job, 1)}
        cpu += count * per_job
        longest = max(longest, per_job)
    return {"rules": jobs, "cpu_hours": round(cpu / 3600, 1),
            "workstation_hours": round(cpu / 3600 / max(workstation_cores, 1), 1),
            "workstation_cores": workstation_cores,
            "slurm_64_core_hours": round(max(cpu / 64, longest) / 3600, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 200_000])
    parser.add_argument("--until", nargs="*", default=[])
    parser.add_argument("--rules", nargs="*", default=None, help="report only these rules")
    parser.add_argument("--cores", type=int, default=1)
    parser.add_argument("--workstation-cores", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--keep", action="store_true", help="keep the project copies (printed)")
    parser.add_argument("--record", action="store_true",
                        help=f"keep every job's kernel peak at each size in {PEAKS_FILE.relative_to(ROOT)}")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench_scale_"))
    rows = []
    for n in args.sizes:
        for row in run_size(n, base, args.until, args.cores, record=args.record):
            if args.rules is None or row["rule"] in args.rules:
                print(json.dumps(row), flush=True)
                rows.append(row)
    table = slopes(rows)
    for rule, row in sorted(table.items()):
        print(json.dumps({"rule": rule, **row}), flush=True)
    print(json.dumps({"purchase100_projection": projection(table, args.workstation_cores)}), flush=True)
    if args.keep:
        print(json.dumps({"kept": str(base)}))
    else:
        subprocess.run(["rm", "-rf", str(base)], check=False)


if __name__ == "__main__":
    main()
