"""Per-example outputs and gradients of a trained model (numpy for an MLP: no TensorFlow start).

``write_per_example`` is what the workflow runs: it reads the saved model's Dense layers
(``dpaudit.extract.dense_model``; any other model, a CNN or a user's builder, runs in
TensorFlow with the same interface and the same output columns: ``dpaudit.extract.keras_model``), computes the inference-mode logits and per-example
cross-entropy gradients in float64 chunk by chunk, and streams gradient vectors to
Parquet one chunk (one row group) at a time, so its peak memory does not grow with
N × P (issue 19; ``bench/bench_memory.py``). ``extract_per_example`` returns the same
rows as in-memory frames, for tests and small data.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from dpaudit.contract import job_options
from dpaudit.extract.dense_model import DenseModel
from dpaudit.extract.keras_model import KerasModel, read_model
from dpaudit.extract.pmp_pairs import norms_sq, sized_trajectory_chi_sums, write_pmp_pairs
from dpaudit.io import atomic_path, reading, write_parquet
from dpaudit.losses import per_example_losses
from dpaudit.progress import Progress
from dpaudit.training.models import features

# What extraction reads: a Dense stack in numpy, any other model in TensorFlow (same interface).
Model = DenseModel | KerasModel
# The pmp options the pairs file is drawn with (rules/pmp.smk's pmp_pairs passes them; metric_pmp checks them)
PMP_PAIR_OPTIONS = job_options.PMP_PAIRS
# Rows per chunk: every product is computed on chunks of this many rows, so values do not
# depend on N; a chunk's float64 factors take (inputs + units) × 8 bytes per row.
_CHUNK_ROWS = 4096
# Chunks whose vectors are kept (written to gradients.parquet, one row group each) hold at
# most about 64 MB of float32 vectors (fewer rows when P is large).
_KEPT_CHUNK_FLOATS = 2**24


def per_example_gradients(
    model: Model, x: np.ndarray, y: np.ndarray, *, keep: bool
) -> tuple[np.ndarray, np.ndarray | None]:
    """L2 norms (float64) and, if ``keep``, the N × P float32 gradient matrix."""
    norms = np.empty(len(x), dtype=np.float64)
    flat = np.empty((len(x), model.n_params), dtype=np.float32) if keep else None
    for start, stop, nrm, g in gradient_chunks(model, x, y, keep=keep):
        norms[start:stop] = nrm
        if keep:
            flat[start:stop] = g
    return norms, flat


def gradient_chunks(model: Model, x: np.ndarray, y: np.ndarray, *, keep: bool = False):
    """Yield ``(start, stop, norms, flat)`` per chunk of rows: ``norms`` float64 from the
    factors, ``flat`` the chunk's float32 gradient vectors when ``keep`` (else None)."""
    chunk = _kept_chunk_rows(model) if keep else _CHUNK_ROWS
    with Progress("per-example gradients", total=len(x), unit="rows") as progress:
        for start in range(0, len(x), chunk):
            stop = min(start + chunk, len(x))
            if keep:
                nrm, g = model.gradients(x[start:stop], y[start:stop])
            else:
                nrm, g = model.gradient_norms(x[start:stop], y[start:stop]), None
            yield start, stop, nrm, g
            progress.advance(stop - start)


def _kept_chunk_rows(model: Model) -> int:
    return max(1, min(_CHUNK_ROWS, _KEPT_CHUNK_FLOATS // max(model.n_params, 1)))


def model_logits(model: Model, x: np.ndarray) -> np.ndarray:
    """float32 inference-mode logits, chunk by chunk."""
    if len(x) == 0:
        return np.zeros((0, model.n_classes), dtype=np.float32)
    return np.concatenate([model.logits(x[i:i + _CHUNK_ROWS]) for i in range(0, len(x), _CHUNK_ROWS)])


def extract_per_example(
    model_path: str | os.PathLike,
    examples: pd.DataFrame,
    splits: dict[str, str],
    *,
    clip_norm: float | None,
    full_gradients: bool,
    threads: int = 1,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return (outputs, gradients) frames for every example of every split.

    outputs: example_id, split, is_member, label, loss_ce, loss_logit, p_true, correct, logits
    (inference mode, float64 metric math on the float32 logits, which are kept as a
    fixed-size list column).
    gradients: example_id, is_member, grad_norm, clipped_norm [, gradient].
    """
    model = read_model(model_path, threads=threads)
    x = features(examples)
    outputs = _outputs(model, examples, x, splits)
    ids, labels = outputs["example_id"].to_numpy(), outputs["label"].to_numpy()
    is_member = outputs["is_member"].to_numpy()
    norms, flat = per_example_gradients(model, x, labels, keep=full_gradients)
    clipped = norms if clip_norm is None else np.minimum(norms, float(clip_norm))
    gradients = pd.DataFrame(
        {"example_id": ids, "is_member": is_member, "grad_norm": norms, "clipped_norm": clipped}
    )
    if full_gradients:
        n_params = flat.shape[1]
        column = pa.FixedSizeListArray.from_arrays(pa.array(flat.reshape(-1)), n_params)
        gradients["gradient"] = pd.Series(pd.arrays.ArrowExtensionArray(column), index=gradients.index)
    return outputs, gradients


def write_per_example(
    model_path: str | os.PathLike,
    examples_path: str | os.PathLike,
    splits: dict[str, str],
    outputs_path: str | os.PathLike,
    gradients_path: str | os.PathLike,
    *,
    clip_norm: float | None,
    full_gradients: bool,
    threads: int = 1,
) -> int:
    """Write ``extract_per_example``'s two tables; returns the number of examples.

    The examples' features are read as one Arrow buffer (no per-row objects). Without
    full gradients both files are byte for byte what writing the frames gives; with
    them, ``gradients.parquet`` gets one row group per gradient chunk (the same rows,
    types and values), and at most one chunk of vectors is in memory.
    """
    model = read_model(model_path, threads=threads)
    keys, x = _examples(examples_path)
    outputs = _outputs(model, keys, x, splits)
    write_parquet(outputs_path, outputs)
    ids, labels = outputs["example_id"].to_numpy(), outputs["label"].to_numpy()
    is_member = outputs["is_member"].to_numpy()
    if not full_gradients:
        norms, _ = per_example_gradients(model, x, labels, keep=False)
        clipped = norms if clip_norm is None else np.minimum(norms, float(clip_norm))
        write_parquet(gradients_path, pd.DataFrame(
            {"example_id": ids, "is_member": is_member, "grad_norm": norms, "clipped_norm": clipped}
        ))
        return len(outputs)
    n_params = model.n_params
    schema = pa.schema([("example_id", pa.int64()), ("is_member", pa.bool_()), ("grad_norm", pa.float64()),
                        ("clipped_norm", pa.float64()), ("gradient", pa.list_(pa.float32(), n_params))])
    with atomic_path(gradients_path, suffix=".parquet") as tmp, \
            pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
        for start, stop, norms, flat in gradient_chunks(model, x, labels, keep=True):
            clipped = norms if clip_norm is None else np.minimum(norms, float(clip_norm))
            vectors = pa.FixedSizeListArray.from_arrays(pa.array(flat.reshape(-1)), n_params)
            writer.write_table(pa.Table.from_arrays(
                [pa.array(ids[start:stop]), pa.array(is_member[start:stop]), pa.array(norms),
                 pa.array(clipped), vectors], schema=schema,
            ))
        if len(x) == 0:
            writer.write_table(schema.empty_table())
    return len(outputs)


def _examples(examples_path: str | os.PathLike) -> tuple[pd.DataFrame, np.ndarray]:
    """(example_id, split, label) and the float32 features of ``examples.parquet``, the features read
    as one Arrow buffer (no per-row objects)."""
    from dpaudit.data.examples import features as arrow_features

    with reading(examples_path):
        table = pq.read_table(examples_path, columns=["example_id", "split", "label", "x"])
    # The key columns convert exactly as dpaudit.io.read_parquet converts them.
    keys = table.drop_columns(["x"]).to_pandas(ignore_metadata=True)
    x = np.ascontiguousarray(arrow_features(table), dtype=np.float32)
    return keys, x


def write_run_pmp_pairs(
    model_path: str | os.PathLike,
    examples_path: str | os.PathLike,
    splits: Mapping[str, str],
    *,
    path: str | os.PathLike,
    train: Mapping[str, Any],
    checkpoints_path: str | os.PathLike | None,
    parent: Mapping[str, Any] | None,
    threads: int = 1,
) -> int:
    """The ``pmp_pairs`` job of one run (issue 47: a rule of its own, so a PMP option reruns no
    extraction): ``write_pmp_pairs_of_model`` on the saved model and its examples; returns the rows."""
    model = read_model(model_path, threads=threads)
    keys, x = _examples(examples_path)
    return write_pmp_pairs_of_model(model, keys, x, splits, path=path, train=train, checkpoints_path=checkpoints_path,
                                    parent=parent)


def write_pmp_pairs_of_model(
    model: Model,
    examples: pd.DataFrame,
    x: np.ndarray,
    splits: Mapping[str, str],
    *,
    path: str | os.PathLike,
    train: Mapping[str, Any],
    checkpoints_path: str | os.PathLike | None,
    parent: Mapping[str, Any] | None,
) -> int:
    """Write what Recipes A and B need of the parent set's per-example gradients at the final
    weights and at every checkpoint (``dpaudit.extract.pmp_pairs`` describes the file);
    returns its number of rows.

    ``model``: the model at the final weights; ``examples`` (example_id, split, label) and
    ``x`` (float32 rows) in the same order; ``parent``: the pmp options ``PMP_PAIR_OPTIONS``
    (None: no rows); Recipe B's partner count comes from a pilot (``sized_trajectory_chi_sums``). A run the recipes do not
    apply to gets the schema with no rows. Of each weight set only the Dense-layer factors
    are computed (2n × Σ(inputs + units) floats, never 2n × P); a model that is not a Dense
    stack gives its exact flat per-example gradients as one factor (``KerasModel.factors``:
    2n × P floats, bounded by ``checkpoints.FLAT_GRADIENT_LIMIT``).
    """
    from dpaudit.extract.checkpoints import load_checkpoints, not_applicable
    from dpaudit.reference.parent_set import build_parent_set

    if parent is None or not_applicable(train) is not None:
        return write_pmp_pairs(path)
    for layer in model.layers:
        if layer.bias is None:
            raise ValueError(f"layer {layer.name!r}: PMP pairs need a model of Dense layers with biases")
    chosen = build_parent_set(examples, splits, seed=int(parent["parent_seed"]), pool=parent["nonmember_pool"])
    ids, is_member = chosen["ids"], chosen["is_member"]
    position = pd.Series(np.arange(len(examples)), index=examples["example_id"].to_numpy(np.int64))
    rows_of_x = position.loc[ids].to_numpy()
    xs = np.ascontiguousarray(x[rows_of_x])
    ys = examples["label"].to_numpy(np.int64)[rows_of_x]
    clip, z = float(train["clip_norm"]), float(train["noise_multiplier"])
    layers = [(int(layer.kernel.shape[0]), int(layer.kernel.shape[1])) for layer in model.layers]

    def factors(weights: Model) -> dict:
        """The parent set's Dense-layer factors at ``weights``: each layer's input and bias
        gradient (float32, as stored) and the exact float64 norms of the whole vectors."""
        inputs, deltas, norms = [], [], np.empty(len(xs))
        for start in range(0, len(xs), _CHUNK_ROWS):
            stop = min(start + _CHUNK_ROWS, len(xs))
            a, d, _ = weights.factors(xs[start:stop], ys[start:stop])
            inputs.append(np.concatenate(a, axis=1).astype(np.float32))
            deltas.append(np.concatenate(d, axis=1).astype(np.float32))
            norms[start:stop] = np.sqrt(norms_sq(a, d, weights.biases))
        width_in, width_out = sum(i for i, _ in layers), sum(u for _, u in layers)
        return {"inputs": np.concatenate(inputs) if inputs else np.zeros((0, width_in), np.float32),
                "deltas": np.concatenate(deltas) if deltas else np.zeros((0, width_out), np.float32),
                "norms": norms, "layers": layers}

    final = factors(model)
    trajectory = None
    checkpoints = [] if checkpoints_path is None else load_checkpoints(checkpoints_path)

    def checkpoint_factors():
        for k, ckpt in enumerate(checkpoints):
            try:
                weights = model.with_weights(ckpt["weights"])
            except ValueError as error:
                raise ValueError(f"{checkpoints_path}: checkpoint {k}: {error}") from error
            yield {"steps": ckpt["steps"], **factors(weights)}

    if checkpoints:
        trajectory = sized_trajectory_chi_sums(
            checkpoint_factors, n_parent=len(xs), n_checkpoints=len(checkpoints), noise_multiplier=z, clip=clip,
            seed=int(parent["seed"]), sampling_rate=float(train["sampling_probability"]), delta=float(train["delta"]),
            relative_standard_error=float(parent["partners_relative_standard_error"]),
            partners_max=int(parent["partners_max"]), log=logging.getLogger("dpaudit.extract"))
    metadata = {"clip_norm": clip, "noise_multiplier": z, "steps": int(train["steps"]),
                "checkpoint_steps": [int(c["steps"]) for c in checkpoints],
                **{key: parent[key] for key in PMP_PAIR_OPTIONS}}
    if trajectory is not None:  # the count the pilot chose (Recipe A draws as many above its exact size)
        metadata |= {"partners": trajectory["partners"], "pilot_epsilon": trajectory["pilot_epsilon"],
                     "pilot_standard_error": trajectory["pilot_standard_error"]}
    return write_pmp_pairs(path, example_id=ids, is_member=is_member, grad_norm=final["norms"],
                           inputs=final["inputs"], deltas=final["deltas"], layers=layers, trajectory=trajectory,
                           metadata=metadata)


def _outputs(model: Model, examples: pd.DataFrame, x: np.ndarray, splits: dict[str, str]) -> pd.DataFrame:
    ids = examples["example_id"].to_numpy(dtype=np.int64)
    split = examples["split"].astype(str).to_numpy()
    labels = examples["label"].to_numpy(dtype=np.int64)
    is_member = split == splits["members"]
    logits = model_logits(model, x)
    metrics = per_example_losses(logits.astype(np.float64), labels, ids)
    # the C logits themselves (float32, inference mode): the reference-model attacks read the
    # target's signal at any softmax temperature from them (dpaudit.metrics.attack_rows)
    logits = np.ascontiguousarray(logits, dtype=np.float32)
    column = pa.FixedSizeListArray.from_arrays(pa.array(logits.reshape(-1)), logits.shape[1])
    return pd.DataFrame(
        {
            "example_id": ids,
            "split": split,
            "is_member": is_member,
            "label": labels,
            "loss_ce": metrics["loss_ce"],
            "loss_logit": metrics["loss_logit"],
            "p_true": metrics["p_true"],
            "correct": metrics["correct"],
            "logits": pd.Series(pd.arrays.ArrowExtensionArray(column)),
        }
    )
