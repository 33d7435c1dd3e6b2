"""Per-example outputs and gradients of a trained model (one model load per run).

``write_per_example`` is what the workflow runs: it streams per-example gradient
vectors to Parquet one chunk (one row group) at a time, so its peak memory does not
grow with N × P (issue 19; ``bench/bench_memory.py``). ``extract_per_example``
returns the same rows as in-memory frames, for tests and small data.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from dpaudit.io import atomic_path, reading, write_parquet
from dpaudit.losses import per_example_losses
from dpaudit.training.models import features, logits_model, predict_logits

# Per-example gradients of one chunk are held as a chunk × n_params float32 array;
# this bounds it to about 256 MB (TensorFlow's float64 norms of it take twice that).
_GRAD_CHUNK_FLOATS = 2**26
# Chunks whose vectors are kept (written to gradients.parquet, one row group each) are
# 4x smaller: about 64 MB of vectors, held as TF output, numpy and Arrow copies and a
# compressed row group. Values depend on the chunk (batched kernels round differently),
# so each mode keeps one chunk size: norms-only files stay those of earlier versions.
_KEPT_CHUNK_FLOATS = 2**24


def load_model(model_path: str | os.PathLike):
    """Load a saved model (no optimizer, no custom objects); a damaged file names itself and the fix."""
    from dpaudit import _tf

    with reading(model_path) as path:
        return _tf.keras.models.load_model(path, compile=False)


def make_per_example_gradient_fn(net):
    """``fn(x, y) -> (norms, flat_grads)``: per-example CE gradients over all trainable weights.

    Uses ``tf.vectorized_map`` over single-example gradients (DESIGN §9: the fast
    path; ``GradientTape.jacobian`` is far slower). Inference mode, so gradients
    belong to the same deterministic function the losses are computed from.
    """
    from dpaudit import _tf

    tf = _tf.tf
    d = int(net.input_shape[-1])
    variables = net.trainable_variables

    def one(args):
        xi, yi = args
        with tf.GradientTape() as tape:
            logits = net(xi[None, :], training=False)
            loss = tf.nn.sparse_softmax_cross_entropy_with_logits(yi[None], logits)[0]
        grads = tape.gradient(loss, variables, unconnected_gradients=tf.UnconnectedGradients.ZERO)
        return tf.concat([tf.reshape(g, [-1]) for g in grads], axis=0)

    @tf.function(
        input_signature=[tf.TensorSpec([None, d], tf.float32), tf.TensorSpec([None], tf.int64)],
        autograph=False,
    )
    def fn(x, y):
        flat = tf.vectorized_map(one, (x, y))
        # reduce_sum(square) rather than tf.norm/global_norm: their L2Loss op has no
        # vectorized converter and would fall back to a while_loop.
        norms = tf.sqrt(tf.reduce_sum(tf.square(tf.cast(flat, tf.float64)), axis=1))
        return norms, flat

    return fn


def per_example_gradients(
    net, x: np.ndarray, y: np.ndarray, *, keep: bool
) -> tuple[np.ndarray, np.ndarray | None]:
    """L2 norms (float64) and, if ``keep``, the N × P float32 gradient matrix."""
    n_params = _n_params(net)
    norms = np.empty(len(x), dtype=np.float64)
    flat = np.empty((len(x), n_params), dtype=np.float32) if keep else None
    for start, stop, nrm, g in gradient_chunks(net, x, y, keep=keep):
        norms[start:stop] = nrm
        if keep:
            flat[start:stop] = g.numpy()
    return norms, flat


def _n_params(net) -> int:
    return int(sum(int(np.prod(v.shape)) for v in net.trainable_variables))


def gradient_chunks(net, x: np.ndarray, y: np.ndarray, *, keep: bool = False, fn=None):
    """Yield ``(start, stop, norms, flat)`` per chunk of at most 4096 rows and 2^26 floats
    (2^24 when the caller ``keep``s the vectors).

    ``norms`` is float64 numpy; ``flat`` the chunk's float32 gradients as a TF tensor
    (``.numpy()`` copies it only when the caller keeps the vectors). ``fn``: a
    ``make_per_example_gradient_fn(net)`` to reuse (traced once for several weight sets).
    """
    from dpaudit import _tf

    tf = _tf.tf
    n_params = _n_params(net)
    fn = fn or make_per_example_gradient_fn(net)
    floats = _KEPT_CHUNK_FLOATS if keep else _GRAD_CHUNK_FLOATS
    chunk = max(1, min(4096, floats // max(n_params, 1)))
    for start in range(0, len(x), chunk):
        stop = min(start + chunk, len(x))
        nrm, g = fn(tf.constant(x[start:stop]), tf.constant(y[start:stop]))
        yield start, stop, nrm.numpy(), g


def extract_per_example(
    model_path: str | os.PathLike,
    examples: pd.DataFrame,
    splits: dict[str, str],
    *,
    clip_norm: float | None,
    full_gradients: bool,
    threads: int,
    seed: int,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return (outputs, gradients) frames for every example of every split.

    outputs: example_id, split, is_member, label, loss_ce, loss_logit, p_true, correct, logits
    (inference mode, float64 metric math on the float32 logits, which are kept as a
    fixed-size list column).
    gradients: example_id, is_member, grad_norm, clipped_norm [, gradient].
    """
    net = _load(model_path, threads, seed)
    x = features(examples)
    outputs = _outputs(net, examples, x, splits)
    ids, labels = outputs["example_id"].to_numpy(), outputs["label"].to_numpy()
    is_member = outputs["is_member"].to_numpy()
    norms, flat = per_example_gradients(net, x, labels, keep=full_gradients)
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
    threads: int,
    seed: int,
    pmp_pairs: Mapping[str, Any] | None = None,
) -> int:
    """Write ``extract_per_example``'s two tables; returns the number of examples.

    The examples' features are read as one Arrow buffer (no per-row objects). Without
    full gradients both files are byte for byte what writing the frames gives; with
    them, ``gradients.parquet`` gets one row group per gradient chunk (the same rows,
    types and values), and at most one chunk of vectors is in memory.
    ``pmp_pairs`` (the pmp family): keyword arguments of ``write_pmp_pairs_of_model``
    but the model and examples, run in the same process.
    """
    from dpaudit.data.examples import features as arrow_features

    net = _load(model_path, threads, seed)
    with reading(examples_path):
        table = pq.read_table(examples_path, columns=["example_id", "split", "label", "x"])
    # The key columns convert exactly as dpaudit.io.read_parquet converts them.
    keys = table.drop_columns(["x"]).to_pandas(ignore_metadata=True)
    x = np.ascontiguousarray(arrow_features(table), dtype=np.float32)
    del table
    outputs = _outputs(net, keys, x, splits)
    write_parquet(outputs_path, outputs)
    if pmp_pairs is not None:
        write_pmp_pairs_of_model(net, keys, x, splits, **pmp_pairs)
    ids, labels = outputs["example_id"].to_numpy(), outputs["label"].to_numpy()
    is_member = outputs["is_member"].to_numpy()
    if not full_gradients:
        norms, _ = per_example_gradients(net, x, labels, keep=False)
        clipped = norms if clip_norm is None else np.minimum(norms, float(clip_norm))
        write_parquet(gradients_path, pd.DataFrame(
            {"example_id": ids, "is_member": is_member, "grad_norm": norms, "clipped_norm": clipped}
        ))
        return len(outputs)
    n_params = _n_params(net)
    schema = pa.schema([("example_id", pa.int64()), ("is_member", pa.bool_()), ("grad_norm", pa.float64()),
                        ("clipped_norm", pa.float64()), ("gradient", pa.list_(pa.float32(), n_params))])
    with atomic_path(gradients_path, suffix=".parquet") as tmp, \
            pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
        for start, stop, norms, flat in gradient_chunks(net, x, labels, keep=True):
            clipped = norms if clip_norm is None else np.minimum(norms, float(clip_norm))
            vectors = pa.FixedSizeListArray.from_arrays(pa.array(flat.numpy().reshape(-1)), n_params)
            writer.write_table(pa.Table.from_arrays(
                [pa.array(ids[start:stop]), pa.array(is_member[start:stop]), pa.array(norms),
                 pa.array(clipped), vectors], schema=schema,
            ))
        if len(x) == 0:
            writer.write_table(schema.empty_table())
    return len(outputs)


def write_pmp_pairs_of_model(
    net,
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

    ``net``: the logits model at the final weights (its weights are replaced by each
    checkpoint's in turn, then restored); ``examples`` (example_id, split, label) and ``x``
    (float32 rows) in the same order; ``parent``: the pmp options ``parent_seed``,
    ``nonmember_pool``, ``partners`` and ``seed`` (None: no rows). A run the
    recipes do not apply to gets the schema with no rows. One traced gradient function serves
    every weight set; of each weight set only the Dense-layer factors stay in memory
    (2n × Σ(inputs + units) floats, not 2n × P), one chunk of gradient vectors at a time.
    """
    from dpaudit.extract.checkpoints import load_checkpoints, not_applicable
    from dpaudit.extract.pmp_pairs import trajectory_chi_sums_from_factors, write_pmp_pairs
    from dpaudit.training.parent_set import build_parent_set

    if parent is None or not_applicable(train) is not None:
        return write_pmp_pairs(path)
    chosen = build_parent_set(examples, splits, seed=int(parent["parent_seed"]), pool=parent["nonmember_pool"])
    ids, is_member = chosen["ids"], chosen["is_member"]
    position = pd.Series(np.arange(len(examples)), index=examples["example_id"].to_numpy(np.int64))
    rows_of_x = position.loc[ids].to_numpy()
    xs = np.ascontiguousarray(x[rows_of_x])
    ys = examples["label"].to_numpy(np.int64)[rows_of_x]
    clip, z = float(train["clip_norm"]), float(train["noise_multiplier"])
    layers, bias_slices, forward = _dense_factors(net)
    fn = make_per_example_gradient_fn(net)

    def factors() -> dict:
        """The parent set's Dense-layer factors at the model's current weights: the layers' inputs
        (a forward pass), the bias coordinates of each chunk of per-example gradients (the rest of
        the chunk is dropped) and TensorFlow's float64 norms of the whole vectors."""
        deltas = np.empty((len(xs), sum(b - a for a, b in bias_slices)), dtype=np.float32)
        norms = np.empty(len(xs))
        for start, stop, nrm, flat in gradient_chunks(net, xs, ys, keep=True, fn=fn):
            chunk = flat.numpy()
            deltas[start:stop] = np.concatenate([chunk[:, a:b] for a, b in bias_slices], axis=1)
            norms[start:stop] = nrm
        inputs = np.concatenate([np.asarray(t, np.float32).reshape(len(xs), -1) for t in forward(xs)], axis=1) \
            if len(xs) else np.zeros((0, sum(a for a, _ in layers)), np.float32)
        return {"inputs": inputs, "deltas": deltas, "norms": norms, "layers": layers}

    final_weights = net.get_weights()
    final = factors()
    trajectory = None
    checkpoints = [] if checkpoints_path is None else load_checkpoints(checkpoints_path)

    def checkpoint_factors():
        for k, ckpt in enumerate(checkpoints):
            if len(ckpt["weights"]) != len(final_weights):
                raise ValueError(f"{checkpoints_path}: checkpoint {k} has {len(ckpt['weights'])} weight arrays, "
                                 f"the model {len(final_weights)}")
            net.set_weights(ckpt["weights"])
            yield {"steps": ckpt["steps"], **factors()}

    try:
        if checkpoints:
            trajectory = trajectory_chi_sums_from_factors(checkpoint_factors(), noise_multiplier=z, clip=clip,
                                                          n_partners=int(parent["partners"]), seed=int(parent["seed"]))
    finally:
        net.set_weights(final_weights)  # the caller's model keeps its final weights
    metadata = {"clip_norm": clip, "noise_multiplier": z, "steps": int(train["steps"]),
                "checkpoint_steps": [int(c["steps"]) for c in checkpoints],
                **{key: parent[key] for key in ("parent_seed", "nonmember_pool", "partners", "seed")}}
    return write_pmp_pairs(path, example_id=ids, is_member=is_member, grad_norm=final["norms"],
                           inputs=final["inputs"], deltas=final["deltas"], layers=layers, trajectory=trajectory,
                           metadata=metadata)


def _dense_factors(net):
    """([(inputs, units)] per Dense layer, the bias coordinates of each in the flat gradient,
    ``forward(x) -> [layer inputs]``): a per-example kernel gradient is input ⊗ bias gradient.
    Refuses a model with other trainable weights (Recipe A's factors would not add up)."""
    from dpaudit import _tf

    dense, offset, slices = [], 0, []
    for layer in net.layers:
        weights = layer.trainable_weights
        if not weights:
            continue
        if not isinstance(layer, _tf.keras.layers.Dense) or not layer.use_bias or len(weights) != 2:
            raise ValueError(f"layer {layer.name!r}: PMP pairs need a model of Dense layers with biases")
        kernel, bias = (int(np.prod(w.shape)) for w in weights)
        slices.append((offset + kernel, offset + kernel + bias))
        offset += kernel + bias
        dense.append(layer)
    if offset != _n_params(net):
        raise ValueError(f"the Dense layers hold {offset} of the model's {_n_params(net)} trainable parameters")
    layers = [(int(layer.kernel.shape[0]), int(layer.kernel.shape[1])) for layer in dense]
    view = _tf.keras.Model(net.inputs, [layer.input for layer in dense])

    def forward(x, batch_size: int = 8192):
        parts = []
        for start in range(0, len(x), batch_size):
            out = view(_tf.tf.constant(x[start:start + batch_size]), training=False)
            parts.append([t.numpy() for t in (out if isinstance(out, list | tuple) else [out])])
        return [np.concatenate(columns) for columns in zip(*parts, strict=True)]

    return layers, slices, forward


def _load(model_path, threads: int, seed: int):
    from dpaudit import _tf

    _tf.configure(threads, seed)
    return logits_model(load_model(model_path))


def _outputs(net, examples: pd.DataFrame, x: np.ndarray, splits: dict[str, str]) -> pd.DataFrame:
    ids = examples["example_id"].to_numpy(dtype=np.int64)
    split = examples["split"].astype(str).to_numpy()
    labels = examples["label"].to_numpy(dtype=np.int64)
    is_member = split == splits["members"]
    logits = predict_logits(net, x)
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
