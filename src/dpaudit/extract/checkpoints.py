"""Per-example gradients at a run's weight checkpoints, for the pmp family (Lowy et al. 2024).

Recipes A and B of ``dpaudit.metrics.pmp`` need the per-example CE gradients of the
parent set X at the final weights (Recipe A) and at every checkpoint training wrote
to ``checkpoints.npz`` (Recipe B). ``extract_per_example`` computes them in its one
TensorFlow process (``dpaudit.extract.extract.write_checkpoint_gradients``) and
writes ``checkpoint_gradients.parquet``; ``metric_pmp`` reads them here and starts
no TensorFlow. This module imports no TensorFlow: the metric's code depends on it.

One row per (weights, example of X): ``checkpoint`` (``FINAL`` = -1 for the final
weights, else the index k of the checkpoint), ``start_step`` and ``steps`` (the
steps checkpoint k stands for; the final weights: the run's step count and 0),
``example_id``, ``is_member`` and ``gradient``, the unclipped float32 gradient
exactly as TensorFlow returned it (clipping and any projection are the metric's, in
float64, so the metric's numbers are those it computed when it ran TensorFlow
itself). Final weights first, then the checkpoints in order; rows in X's order.
A run the recipes do not apply to (``not_applicable``), or a Recipe C shadow model,
gets the schema with no rows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dpaudit.io import reading

__all__ = ["FINAL", "load_checkpoints", "not_applicable", "read_checkpoint_gradients", "schema"]

FINAL = -1


def schema(n_params: int) -> pa.Schema:
    return pa.schema([("checkpoint", pa.int32()), ("start_step", pa.int64()), ("steps", pa.int64()),
                      ("example_id", pa.int64()), ("is_member", pa.bool_()),
                      ("gradient", pa.list_(pa.float32(), int(n_params)))])


def not_applicable(train: Mapping) -> str | None:
    """Why Recipes A, B and C do not apply to a run (its ``train.json``), or None when they do."""
    eps = float(train["epsilon"])
    if not math.isfinite(eps):
        return ("not applicable: non-private run (epsilon = inf); PMP bounds need the Gaussian noise of DP-SGD, "
                "and a finite PMP value for it would be made up")
    if train.get("mechanism") != "dpsgd":
        return (f"not applicable: mechanism {train.get('mechanism')} (epsilon = {eps:g}) is not DP-SGD; "
                "Recipes A, B and C bound DP-SGD's Gaussian noise on clipped gradients")
    if train.get("microbatches"):
        return ("not applicable: microbatches clip group means, not examples; Recipes A and B assume "
                "per-example clipping")
    return None


def load_checkpoints(path) -> list[dict]:
    """The weights of ``checkpoints.npz`` (``dpaudit.training.train``): start step, steps represented, arrays."""
    with reading(path), np.load(path) as data:
        starts = data["start_step"]
        steps = data["steps_represented"]
        out = []
        for k in range(starts.size):
            keys = sorted((key for key in data.files if key.startswith(f"w{k}_")),
                          key=lambda key: int(key.split("_")[1]))
            out.append({"start_step": int(starts[k]), "steps": int(steps[k]),
                        "weights": [data[key] for key in keys]})
    return out


def read_checkpoint_gradients(path) -> list[dict]:
    """The file's weight sets in file order: dicts with ``checkpoint``, ``start_step``, ``steps``,
    ``example_id`` (int64) and ``gradients`` (rows × P float32, unclipped). Empty for a run
    written without rows."""
    with reading(path):
        table = pq.read_table(path)
    if table.num_rows == 0:
        return []
    n_params = table.schema.field("gradient").type.list_size
    checkpoint = table.column("checkpoint").to_numpy()
    vectors = table.column("gradient").combine_chunks().flatten().to_numpy().reshape(-1, n_params)
    out = []
    for k in dict.fromkeys(checkpoint.tolist()):
        rows = np.flatnonzero(checkpoint == k)
        out.append({"checkpoint": int(k), "start_step": int(table.column("start_step")[int(rows[0])].as_py()),
                    "steps": int(table.column("steps")[int(rows[0])].as_py()),
                    "example_id": table.column("example_id").to_numpy()[rows],
                    "gradients": vectors[rows]})
    return out
