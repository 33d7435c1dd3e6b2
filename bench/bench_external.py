"""Issue 44: a model trained elsewhere, an outputs file of 200,000 rows (10 classes, logits) with its
members and held-out ids files: the parse-time checks (every Snakefile parse reads the files) and
the external_outputs job's work (the per-example table and the record, ε recomputed from DP-SGD
inputs), best of 3. The issue asks every job ≤ 30 s on 2 cores without reference models; the
metric jobs that follow are the mia and ε* families' (bench_mia.py, bench_epsilon_star.py).
Measured (2026-11-29, shared 2-core machine): parse-time checks 0.8-1.1 s, the job 1.0 s.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from timing import best_of  # bench/timing.py (a script's folder is on its path)

from dpaudit.config import validate_config
from dpaudit.data.datasets import prepare_dataset_ids
from dpaudit.external.importer import external_outputs

ROWS, CLASSES = 200_000, 10


def main() -> None:
    params = {"n": ROWS, "d": 5, "classes": CLASSES}
    table, info, ids = prepare_dataset_ids("synthetic", {}, params)
    info["delta"] = {"resolved": 1e-6}
    examples, ids = table.to_pandas()[["example_id", "label"]], ids.to_pandas()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        logits = rng.normal(size=(ROWS, CLASSES)).astype(np.float32)
        pq.write_table(pa.table({"example_id": np.arange(ROWS), "logits": pa.FixedSizeListArray.from_arrays(
            pa.array(logits.reshape(-1)), CLASSES)}), folder / "outputs.parquet")
        order = rng.permutation(ROWS)
        for name, part in (("members", order[: ROWS // 2]), ("held_out", order[ROWS // 2:])):
            pd.DataFrame({"example_id": np.sort(part)}).to_csv(folder / f"{name}.csv", index=False)
        entry = {"dataset": "synthetic", "outputs": str(folder / "outputs.parquet"),
                 "members": str(folder / "members.csv"), "held_out": str(folder / "held_out.csv"),
                 "promise": {"noise_multiplier": 1.0, "sampling_probability": 0.001, "steps": 10_000, "delta": 1e-6}}
        config = {"datasets": {"synthetic": params}, "grid": [], "external_models": {"m": entry}}
        print(f"external_parse_checks rows={ROWS} seconds={best_of(3, lambda: validate_config(config)):.2f}")
        seconds = best_of(3, lambda: external_outputs(entry, name="m", dataset="synthetic", examples=examples,
                                                      ids=ids, dataset_info=info, delta="auto"))
        print(f"external_outputs_job rows={ROWS} seconds={seconds:.2f} (target <= 30 s)")


if __name__ == "__main__":
    main()
