"""Memory (MB) and wall time (minutes) of the jobs that grow with the data (issue 19).

Pure functions of the job's size: examples ``n``, features ``d``, classes, model
parameters ``P``, full gradients or not. The rules call them through
``rules/common.smk`` (``resources: mem_mb=<callable>``), which reads ``n, d`` from the
job's ``dataset.json`` input once it exists and from the config before (synthetic
sets give them; bundled sets have known sizes, ``BUNDLED_SHAPES``). The SLURM profile
sets no mem_mb or runtime for these rules, so the rule's value is the one a job gets
(a profile can only hold expressions of ``attempt``, not of the data).

Every value is a declared upper bound calibrated by ``bench/bench_memory.py`` (peak
RSS of extraction at n = 10^5 with full gradients and at n = 10^6, d = 100) with a
25 % margin, multiplied by the attempt number so a job the scheduler killed for memory
or time gets more on its retry.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

# (n, d, classes) upper bounds of the bundled datasets before the config subsamples them
# (adult: one-hot columns of the 1994 census; purchase100: the published 197,324 x 600).
BUNDLED_SHAPES = {
    "breast_cancer": (569, 30, 2),
    "digits": (1797, 64, 10),
    "adult": (48_842, 110, 2),
    "purchase100": (197_324, 600, 100),
    "mnist": (70_000, 784, 10),
}

MB = 2**20
# A Python process with TensorFlow, Keras and the project imported, a small model built.
TF_BASE_MB = 900
# A Python process with numpy, pandas, pyarrow and scipy imported (metric and audit jobs).
NUMPY_BASE_MB = 300
# Rows of per-example gradients extraction holds at once (dpaudit.extract: at most
# 4096 rows and 2^26 floats per chunk); the chunk exists as TF output, numpy copy,
# float64 norms and an Arrow row group.
GRADIENT_CHUNK_FLOATS = 2**26
KEPT_CHUNK_FLOATS = 2**24
GRADIENT_CHUNK_ROWS = 4096
MARGIN = 1.25


def dataset_shape(info: Mapping[str, Any] | None, dataset: str, params: Mapping[str, Any]) -> tuple[int, int, int]:
    """(n, d, classes) from a ``dataset.json`` payload, else from the config, else the bundled size."""
    if info is not None:
        return int(info["n"]), int(info["d"]), int(info["classes"])
    if "d" in params:  # synthetic
        return int(params["n"]), int(params["d"]), int(params.get("classes", 2))
    n, d, classes = BUNDLED_SHAPES.get(dataset, (200_000, 1000, 100))
    return min(n, int(params.get("n") or n)), d, classes


def mlp_parameters(d: int, hidden_units: Sequence[int], classes: int) -> int:
    """Trainable parameters of the MLP (weights and biases); the linear mechanisms' model is 2d."""
    sizes = [int(d), *(int(h) for h in hidden_units), int(classes)]
    return sum(a * b + b for a, b in zip(sizes[:-1], sizes[1:], strict=True))


def model_parameters(d: int, classes: int, training: Mapping[str, Any], mechanism: str) -> int:
    if mechanism in ("output_perturbation", "objective_perturbation"):
        return 2 * int(d)
    return mlp_parameters(d, training.get("hidden_units") or [], classes)


def _mb(nbytes: float, base: int, attempt: int) -> int:
    """base + bytes with the margin, rounded up to 100 MB, times the attempt."""
    once = int(math.ceil((base + MARGIN * nbytes / MB) / 100.0) * 100)
    return once * max(int(attempt), 1)


def _minutes(seconds: float, floor: int, attempt: int) -> int:
    return int(max(floor, math.ceil(2 * seconds / 60))) * max(int(attempt), 1)


def gradient_chunk_rows(n_params: int, *, keep: bool = False) -> int:
    floats = KEPT_CHUNK_FLOATS if keep else GRADIENT_CHUNK_FLOATS
    return max(1, min(GRADIENT_CHUNK_ROWS, floats // max(int(n_params), 1)))


def extract_resources(n: int, d: int, n_params: int, *, full_gradients: bool, attempt: int = 1) -> dict[str, int]:
    """mem_mb and runtime of ``extract_per_example`` (gradients streamed in row groups)."""
    rows = min(int(n), gradient_chunk_rows(n_params, keep=full_gradients))
    # examples (Arrow column, pandas, the float32 matrix), outputs and norms (~12 float64
    # columns with their pandas/Arrow copies), one chunk of gradients in TensorFlow's
    # temporaries and, when kept, its numpy, Arrow and row-group copies. bench_memory
    # (P = 6,594; peaks vary by ~20 % between runs): 1,426-1,521 MB measured at n = 10^5
    # with vectors (1,900 declared), 2,128-2,533 MB at n = 10^6 without (3,500 declared);
    # a tiny job peaks near 720 MB (1,000 declared).
    per_row = 4 * 4 * d + 12 * 8 * 3
    chunk = rows * n_params * 36 if full_gradients else rows * n_params * 8
    memory = _mb(n * per_row + chunk, TF_BASE_MB, attempt)
    # bench_memory on one core: 136 s at n = 10^6, P = 6,594 without vectors (2e-8 s per
    # example and parameter), 118 s at n = 10^5 with them (compressing the vectors)
    per_value = 2e-7 if full_gradients else 3e-8
    runtime = _minutes(30 + per_value * n * max(n_params, 1000), 10, attempt)
    return {"mem_mb": memory, "runtime": runtime}


def pmp_metric_resources(n: int, n_params: int, *, checkpoints: int, attempt: int = 1) -> dict[str, int]:
    """mem_mb and runtime of ``metric_pmp`` (numpy only): the parent set's (≤ n rows) float32
    gradients at the final weights and ``checkpoints`` checkpoints, each clipped in float64,
    and Recipe A's 2n × 2n distances."""
    weight_sets = int(checkpoints) + 1
    memory = _mb(weight_sets * n * max(n_params, 1) * (4 + 8) + 3 * 8 * n * n, NUMPY_BASE_MB, attempt)
    runtime = _minutes(30 + 2e-8 * weight_sets * n * max(n_params, 1000) + 5e-8 * n * n, 10, attempt)
    return {"mem_mb": max(memory, 1000 * max(int(attempt), 1)), "runtime": runtime}


def train_resources(n: int, d: int, n_params: int, run: Mapping[str, Any], attempt: int = 1) -> dict[str, int]:
    """mem_mb and runtime of ``train_model`` for one run (``run``: its grid row)."""
    batch = int(_number(run.get("batch_size"), 64))
    epochs = int(_number(run.get("epochs"), 10))
    dp = run.get("mechanism") == "dpsgd"
    # examples twice (frame, matrix), weights with optimizer slots and checkpoints, and
    # a DP-SGD step's per-example gradients of one batch
    working = n * (2 * 4 * d + 64) + 16 * n_params * 4 + (3 * batch * n_params * 4 if dp else 0)
    memory = _mb(working, TF_BASE_MB, attempt)
    cost = 3e-9 * epochs * n * max(n_params, 1000) * (5 if dp else 1)
    return {"mem_mb": memory, "runtime": _minutes(60 + cost, 30, attempt)}


def metric_resources(n: int, *, grid_size: int = 0, attempt: int = 1) -> dict[str, int]:
    """mem_mb and runtime of a per-run metric job over n per-example rows (numpy, float64)."""
    memory = _mb(n * 40 * 8 + grid_size * 6 * 8, NUMPY_BASE_MB, attempt)
    return {"mem_mb": max(memory, 1000 * max(int(attempt), 1)), "runtime": _minutes(30 + 1e-4 * n, 10, attempt)}


def audit_resources(n: int, d: int, *, runs: int, steps: int, attempt: int = 1) -> dict[str, int]:
    """mem_mb and runtime of an identifiability audit job: full-batch DP-Adam runs in float64."""
    memory = _mb(8 * n * d * 6 + 8 * runs * steps * 8, NUMPY_BASE_MB, attempt)
    runtime = _minutes(30 + 2e-7 * runs * steps * n * d, 10, attempt)
    return {"mem_mb": max(memory, 1000 * max(int(attempt), 1)), "runtime": runtime}


def _number(value: Any, default: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return default
    return default if math.isnan(number) else number


# prepare_dataset of a built-in dataset: Purchase-100 (197,324 x 600 float32) is ~0.5 GB in
# memory, with copies ~2 GB.
PREPARE_BUILTIN = {"mem_mb": 4000, "runtime": 30}


def prepare_resources(sketch: Any | None, attempt: int = 1) -> dict[str, int]:
    """mem_mb and runtime of ``prepare_dataset``: fixed for a built-in dataset (``sketch`` None);
    for a table (``dpaudit.data.table.TableSketch``) from its file: the rows, and the
    features after encoding estimated from the first block (a categorical column counts
    twice the levels seen there, at most ``max_levels``). The job streams the file, so it
    holds per row 8 bytes per numeric, 4 per categorical column, the float32 features
    twice (the matrix and the Arrow column written to Parquet), the label, split and id;
    bench/bench_table.py measures the peak at 10^6 rows x 50 columns against this: 2,092 MB
    (CSV, 407 MB, 16 s) and 2,171 MB (Parquet, 230 MB, 40 s on a loaded machine) peak RSS
    for 4,100 MB declared, d = 184 features after encoding (334 estimated)."""
    if sketch is None:
        return {key: value * max(int(attempt), 1) for key, value in PREPARE_BUILTIN.items()}
    rows = max(int(sketch.rows), 1)
    columns = len(sketch.columns)
    per_row = 8 * columns + 2 * 4 * int(sketch.features) + 64
    memory = _mb(rows * per_row + 4 * (1 << 22), NUMPY_BASE_MB, attempt)
    # bench_table on one core: ~2e-6 s per cell read, checked and encoded
    runtime = _minutes(30 + 2e-6 * rows * max(columns, 1) + 1e-8 * rows * int(sketch.features), 10, attempt)
    return {"mem_mb": max(memory, 1000 * max(int(attempt), 1)), "runtime": runtime}
