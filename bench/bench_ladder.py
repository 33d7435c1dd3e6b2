"""Benchmark: the job time issue 34 adds to the default run (budget: <= 15 s), i.e. the ladder
figures inside each dossier job (``write_ladders``) and the ``overview`` job.

Run: .venv/bin/python bench/bench_ladder.py [results_dir]
With a finished ``results/`` (its ``tables/metrics.parquet``) the figures are drawn for its
models; without, for a table of the default run's shape (3 datasets x 8 models: 2 baselines and
DP-SGD at ε 1, 4, 16 with 2 seeds, canary, attack and ε* rows; the unit tests' builders). Prints
wall and CPU seconds: wall is what the run waits on this machine (shared cores inflate it), CPU
what the work costs.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402

from dpaudit.io import read_parquet  # noqa: E402
from dpaudit.plots.ladder import write_ladders  # noqa: E402
from dpaudit.report.overview import build_overview, landing_fragment  # noqa: E402


def default_shape_table() -> pd.DataFrame:
    from tests.unit.test_dossier import model_rows, run_name, table_of
    from tests.unit.test_ladder import attack_rows, star_rows

    aucs = {"loss": 0.52, "lira_online": 0.61, "lira_offline": 0.55, "rmia": 0.6}
    tprs = {"loss": 0.02, "lira_online": 0.05, "lira_offline": 0.03, "rmia": 0.04}
    frames = []
    for dataset in ("synthetic", "breast_cancer", "digits"):
        for mechanism, eps in [("baseline", "NA")] + [("dpsgd", e) for e in (1.0, 4.0, 16.0)]:
            for seed in (0, 1):
                run = run_name(mechanism, eps, seed)
                parts = [model_rows(mechanism, eps, seed, one_run=0.4 * seed), attack_rows(run, aucs, tprs),
                         star_rows(run)]
                # model_rows' loss attack rows carry no attack column: attack_rows' replace them
                parts = [p[~((p["family"] == "mia") & p["metric"].isin(["attack_auc", "tpr_at_fpr",
                                                                          "epsilon_lower_bound"])
                             & ("attack" not in p.columns))] for p in parts]
                frames += [p.assign(dataset=dataset) for p in parts]
    table = table_of(*frames)
    keys = table.dropna(subset=["mechanism"]).drop_duplicates(["dataset", "run"]).set_index(["dataset", "run"])
    index = pd.MultiIndex.from_frame(table[["dataset", "run"]])
    for column in ("mechanism", "target_epsilon", "seed", "accountant_epsilon", "accountant_delta"):
        table[column] = keys[column].reindex(index).to_numpy()
    table["loss_diverged"] = False
    return table


def overview_job_start() -> tuple[float, float]:
    """Wall and CPU seconds of a fresh interpreter importing what the overview job imports."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import pandas, pyarrow.parquet; import dpaudit.report.overview"],
                   check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.perf_counter() - start, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def main() -> None:
    source = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    table = read_parquet(source / "tables" / "metrics.parquet") if source else default_shape_table()
    out = Path(tempfile.mkdtemp(prefix="bench_ladder_"))
    wall = cpu = 0.0
    grids = {}
    for dataset in sorted(table["dataset"].dropna().unique()):
        runs = sorted(table.loc[(table["dataset"] == dataset) & table["run"].notna(), "run"].unique())
        start, clock = time.perf_counter(), time.process_time()
        write_ladders(table, dataset, runs, [out / f"{dataset}_{i}.png" for i in range(len(runs))],
                      [out / f"{dataset}_{i}.parquet" for i in range(len(runs))], grid_png=out / f"{dataset}.png",
                      grid_pdf=out / f"{dataset}.pdf", grid_data=out / f"{dataset}.parquet")
        w, c = time.perf_counter() - start, time.process_time() - clock
        wall, cpu = wall + w, cpu + c
        grids[dataset] = out / f"{dataset}.png"
        print(f"write_ladders dataset={dataset} models={len(runs)} wall={w:.2f}s cpu={c:.2f}s")
    start, clock = time.perf_counter(), time.process_time()
    landing_fragment(build_overview(table, grids))
    w, c = time.perf_counter() - start, time.process_time() - clock
    start_wall, start_cpu = overview_job_start()
    print(f"build_overview wall={w:.2f}s cpu={c:.2f}s; overview job start (interpreter, imports) "
          f"wall={start_wall:.2f}s cpu={start_cpu:.2f}s")
    print(f"issue 34 extra job time: wall={wall + w + start_wall:.1f}s cpu={cpu + c + start_cpu:.1f}s "
          f"(target <= 15 s; load average {Path('/proc/loadavg').read_text().split()[0]}) files in {out}")


if __name__ == "__main__":
    main()
