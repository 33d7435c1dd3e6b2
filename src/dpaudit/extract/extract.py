"""Per-example outputs and gradients of a trained model (one model load per run)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from dpaudit.io import reading
from dpaudit.losses import per_example_losses
from dpaudit.training.models import features, logits_model, predict_logits

# Per-example gradients of one chunk are held as a chunk × n_params float32 array;
# this bounds it to about 256 MB.
_GRAD_CHUNK_FLOATS = 2**26


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
    from dpaudit import _tf

    tf = _tf.tf
    n_params = int(sum(int(np.prod(v.shape)) for v in net.trainable_variables))
    fn = make_per_example_gradient_fn(net)
    chunk = max(1, min(4096, _GRAD_CHUNK_FLOATS // max(n_params, 1)))
    norms = np.empty(len(x), dtype=np.float64)
    flat = np.empty((len(x), n_params), dtype=np.float32) if keep else None
    for start in range(0, len(x), chunk):
        stop = min(start + chunk, len(x))
        nrm, g = fn(tf.constant(x[start:stop]), tf.constant(y[start:stop]))
        norms[start:stop] = nrm.numpy()
        if keep:
            flat[start:stop] = g.numpy()
    return norms, flat


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

    outputs: example_id, split, is_member, label, loss_ce, loss_logit, p_true, correct
    (inference mode, float64 metric math on float32 logits).
    gradients: example_id, is_member, grad_norm, clipped_norm [, gradient].
    """
    from dpaudit import _tf

    _tf.configure(threads, seed)
    model = load_model(model_path)
    net = logits_model(model)

    ids = examples["example_id"].to_numpy(dtype=np.int64)
    split = examples["split"].astype(str).to_numpy()
    labels = examples["label"].to_numpy(dtype=np.int64)
    is_member = split == splits["members"]
    x = features(examples)

    logits = predict_logits(net, x)
    metrics = per_example_losses(logits.astype(np.float64), labels, ids)
    outputs = pd.DataFrame(
        {
            "example_id": ids,
            "split": split,
            "is_member": is_member,
            "label": labels,
            "loss_ce": metrics["loss_ce"],
            "loss_logit": metrics["loss_logit"],
            "p_true": metrics["p_true"],
            "correct": metrics["correct"],
        }
    )

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
