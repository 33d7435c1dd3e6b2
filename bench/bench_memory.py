"""Benchmark: peak memory of extract_per_example against the mem_mb it declares (issue 19).

Run: ``.venv/bin/python bench/bench_memory.py [--case full_gradients|large_n]``. Each case
writes an examples file and an (untrained) d = 100, 64-unit MLP, then runs the
extraction the way ``scripts/extract_per_example.py`` does in a fresh process and
prints one JSON line: its peak RSS (``ru_maxrss``) and ``dpaudit.resources``'
declared ``mem_mb`` for the same job. Cases: ``full_gradients`` (n = 10^5 with
every per-example gradient vector; 5,207 MB before gradients were streamed, target
<= 1,735 MB) and ``large_n`` (n = 10^6, norms only; 2,827 MB before).
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

CASES = {
    "full_gradients": {"n": 100_000, "d": 100, "full_gradients": True},
    "large_n": {"n": 1_000_000, "d": 100, "full_gradients": False},
}
HIDDEN = [64]
SPLITS = {"members": "train", "nonmembers": "holdout", "utility": "test"}


def _prepare(folder: Path, n: int, d: int) -> None:
    import pyarrow as pa

    from dpaudit import _tf
    from dpaudit.io import write_parquet
    from dpaudit.training.models import build_mlp, save_model

    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, d)).astype(np.float32)
    table = pa.table({
        "example_id": pa.array(np.arange(n, dtype=np.int64)),
        "split": pa.array(np.array(["train", "holdout", "test"])[rng.integers(0, 3, n)]),
        "label": pa.array(rng.integers(0, 2, n).astype(np.int64)),
        "x": pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), d),
    })
    write_parquet(folder / "examples.parquet", table)
    _tf.configure(1, 0)
    save_model(build_mlp(d, {"hidden_units": HIDDEN, "n_classes": 2}, seed=0), folder / "model.keras")


def _child(folder: Path, full_gradients: bool, before: bool) -> None:
    """What the adapter does, in a process of its own (``before``: the in-memory adapter of 8427fd3)."""
    from dpaudit.extract import extract

    start = time.perf_counter()
    if before:
        from dpaudit.io import read_parquet, write_parquet

        outputs, gradients = extract.extract_per_example(
            folder / "model.keras", read_parquet(folder / "examples.parquet"), SPLITS,
            clip_norm=1.0, full_gradients=full_gradients, threads=1, seed=0,
        )
        write_parquet(folder / "outputs.parquet", outputs)
        write_parquet(folder / "gradients.parquet", gradients)
    else:
        extract.write_per_example(
            folder / "model.keras", folder / "examples.parquet", SPLITS,
            folder / "outputs.parquet", folder / "gradients.parquet",
            clip_norm=1.0, full_gradients=full_gradients, threads=1, seed=0,
        )
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"peak_mb": round(peak_mb), "seconds": round(time.perf_counter() - start, 1)}))


def run_case(name: str, before: bool = False) -> dict:
    from dpaudit.resources import extract_resources, mlp_parameters

    case = CASES[name]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _prepare(folder, case["n"], case["d"])
        result = subprocess.run(
            [sys.executable, __file__, "--child", str(folder), *(["--full"] if case["full_gradients"] else []),
             *(["--before"] if before else [])],
            capture_output=True, text=True, check=True,
        )
        measured = json.loads(result.stdout.strip().splitlines()[-1])
        gradients_mb = (folder / "gradients.parquet").stat().st_size / 2**20
    n_params = mlp_parameters(case["d"], HIDDEN, 2)
    declared = extract_resources(case["n"], case["d"], n_params, full_gradients=case["full_gradients"])
    record = {"bench": "extract_memory", "case": name, "code": "before" if before else "streamed", **case, "n_params": n_params, **measured,
              "declared_mem_mb": declared["mem_mb"], "declared_runtime_min": declared["runtime"],
              "gradients_file_mb": round(gradients_mb)}
    print(json.dumps(record), flush=True)
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--case", choices=sorted(CASES), action="append")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--full", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--before", action="store_true",
                        help="measure the in-memory extraction this bench replaced (for comparison)")
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.full, args.before)
        return
    for name in args.case or list(CASES):
        run_case(name, before=args.before)


if __name__ == "__main__":
    main()
