"""Benchmark: peak memory of extract_per_example against the mem_mb it declares (issue 19).

Run: ``.venv/bin/python bench/bench_memory.py [--case full_gradients|large_n]``. Each case
writes an examples file and an (untrained) d = 100, 64-unit MLP, then runs the
extraction the way ``scripts/extract_per_example.py`` does in a fresh process and
prints one JSON line: its peak RSS (``ru_maxrss``) and ``dpaudit.resources``'
declared ``mem_mb`` for the same job. Cases: ``full_gradients`` (n = 10^5 with
every per-example gradient vector; 5,207 MB before gradients were streamed, target
<= 1,735 MB) and ``large_n`` (n = 10^6, norms only; 2,827 MB before).

Case ``canary_twin`` (issue 26): the audit twin of a DP-SGD run (``canary_scores``) at the
schema's maximum of 100,000 gradient canaries, n = 2,000 (members 1,000), d = 20, the
grid's default hyperparameters (10 epochs, batch 64, 64 hidden units), against
``dpaudit.resources.canary_twin_resources`` (the issue's tour measured 1,424 MB (canaries as first-layer inputs then; 1,168 MB peak for 2,700 MB declared since issue 22) when
1,000 MB were declared from the released model's width).
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
    "canary_twin": {"n": 2_000, "d": 20, "gradient_canaries": 100_000, "input_canaries": 100},
}
TWIN_RUN = {"mechanism": "dpsgd", "target_epsilon": 1.0, "clip_norm": 1.0, "epochs": 10, "batch_size": 64,
            "learning_rate": 0.05, "seed": 0, "delta": 1e-5}
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
            clip_norm=1.0, full_gradients=full_gradients,
        )
        write_parquet(folder / "outputs.parquet", outputs)
        write_parquet(folder / "gradients.parquet", gradients)
    else:
        extract.write_per_example(
            folder / "model.keras", folder / "examples.parquet", SPLITS,
            folder / "outputs.parquet", folder / "gradients.parquet",
            clip_norm=1.0, full_gradients=full_gradients,
        )
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"peak_mb": round(peak_mb), "seconds": round(time.perf_counter() - start, 1)}))


def _twin_examples(n: int, d: int):
    import pandas as pd

    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, d)).astype(np.float32)
    split = np.array(["train"] * (n // 2) + ["holdout"] * (n // 4) + ["test"] * (n - n // 2 - n // 4))
    return pd.DataFrame({"example_id": np.arange(n, dtype=np.int64), "split": split,
                         "label": (x[:, 0] > 0).astype(np.int64), "x": list(x)})


def _twin_child(n: int, d: int, gradient_canaries: int, input_canaries: int) -> None:
    """The twin as ``scripts/canary_scores.py`` runs it, in a process of its own."""
    import logging

    from dpaudit.audit.twin import run_canary_twin

    start = time.perf_counter()
    run_canary_twin(_twin_examples(n, d), SPLITS, {**TWIN_RUN, "hidden_units": HIDDEN},
                    gradient_canaries=gradient_canaries, input_canaries=input_canaries, gradient_norm_factor=1.0,
                    seed=0, threads=1, log=logging.getLogger("bench"))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"peak_mb": round(peak_mb), "seconds": round(time.perf_counter() - start, 1)}))


def run_twin_case() -> dict:
    from dpaudit.resources import canary_twin_resources

    case = CASES["canary_twin"]
    result = subprocess.run(
        [sys.executable, __file__, "--twin-child", *(str(case[k]) for k in ("n", "d", "gradient_canaries",
                                                                             "input_canaries"))],
        capture_output=True, text=True, check=True,
    )
    measured = json.loads(result.stdout.strip().splitlines()[-1])
    declared = canary_twin_resources(case["n"], case["d"], 2, {"hidden_units": HIDDEN}, TWIN_RUN,
                                     gradient_canaries=case["gradient_canaries"],
                                     input_canaries=case["input_canaries"])
    record = {"bench": "canary_twin_memory", "case": "canary_twin", **case, **measured,
              "declared_mem_mb": declared["mem_mb"], "declared_runtime_min": declared["runtime"]}
    print(json.dumps(record), flush=True)
    return record


def run_case(name: str, before: bool = False) -> dict:
    from dpaudit.resources import extract_resources, mlp_parameters

    if name == "canary_twin":
        return run_twin_case()
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
    parser.add_argument("--twin-child", nargs=4, type=int, help=argparse.SUPPRESS)
    parser.add_argument("--before", action="store_true",
                        help="measure the in-memory extraction this bench replaced (for comparison)")
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.full, args.before)
        return
    if args.twin_child:
        _twin_child(*args.twin_child)
        return
    for name in args.case or list(CASES):
        run_case(name, before=args.before)


if __name__ == "__main__":
    main()
