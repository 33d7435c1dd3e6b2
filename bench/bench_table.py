"""Preparing a user table (issue 25): time and peak memory at 10^6 rows x 50 mixed columns.

Writes a CSV (and a Parquet copy) of ``--rows`` rows: 30 numeric, 15 categorical
(10 levels), 4 boolean columns and a binary label; then, in a fresh child process per
file, runs what ``prepare_dataset`` does (``dpaudit.data.datasets.prepare_dataset`` and
the Parquet write) and prints one JSON line: seconds, peak RSS (``ru_maxrss``) and the
``mem_mb`` ``dpaudit.resources.prepare_resources`` declares from the file. Not a test
(no timing assertions).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

NUMERIC, CATEGORICAL, BOOLEAN = 30, 15, 4


def _chunk(rng: np.random.Generator, rows: int) -> pa.Table:
    columns = {f"num{k}": rng.normal(k, 1 + k, rows).round(4) for k in range(NUMERIC)}
    levels = np.array([f"level_{k}" for k in range(10)])
    columns |= {f"cat{k}": levels[rng.integers(0, 10, rows)] for k in range(CATEGORICAL)}
    columns |= {f"flag{k}": rng.random(rows) < 0.3 for k in range(BOOLEAN)}
    columns["label"] = np.where(rng.random(rows) < 0.4, "yes", "no")
    return pa.table(columns)


def write_files(folder: Path, rows: int) -> dict[str, Path]:
    rng = np.random.default_rng(0)
    csv_path, parquet_path = folder / "table.csv", folder / "table.parquet"
    step = 100_000
    first = _chunk(rng, min(step, rows))
    with pa_csv.CSVWriter(str(csv_path), first.schema) as csv_out, \
            pq.ParquetWriter(str(parquet_path), first.schema) as parquet_out:
        chunk, done = first, 0
        while True:
            csv_out.write_table(chunk)
            parquet_out.write_table(chunk)
            done += chunk.num_rows
            if done >= rows:
                break
            chunk = _chunk(rng, min(step, rows - done))
    return {"csv": csv_path, "parquet": parquet_path}


def child(path: Path, out: Path) -> None:
    from dpaudit.data.datasets import prepare_dataset
    from dpaudit.data.table import inspect_table
    from dpaudit.io import write_parquet
    from dpaudit.resources import prepare_resources

    params = {"source": "table", "path": str(path), "label": "label"}
    start = time.perf_counter()
    sketch = inspect_table("bench", params)
    inspected = time.perf_counter() - start
    table, info = prepare_dataset("bench", {"table": path}, params)
    write_parquet(out, table)
    seconds = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"file": path.name, "bytes": path.stat().st_size, "rows": info["n"], "d": info["d"],
                      "parse_time_inspection_s": round(inspected, 2), "seconds": round(seconds, 1),
                      "peak_rss_mb": round(peak_mb), "declared_mem_mb": prepare_resources(sketch)["mem_mb"],
                      "estimated_features": sketch.features}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(Path(args.child[0]), Path(args.child[1]))
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        files = write_files(folder, args.rows)
        for kind, path in files.items():
            result = subprocess.run([sys.executable, __file__, "--child", str(path), str(folder / f"{kind}.out")],
                                    capture_output=True, text=True, check=False)
            print(result.stdout.strip() or result.stderr[-2000:], flush=True)


if __name__ == "__main__":
    main()
