"""Per-example gradients of a model file trained elsewhere, and PMP Recipe A's pairs at its final
weights (issue 44).

A ``.keras`` file that is a Sequential stack of Dense layers (dpaudit's MLP, or a user's) is read as
data by ``dpaudit.extract.dense_model`` (its config.json and weights, nothing deserialized; the last
Dense layer gives the logits, its pre-activation when it ends in softmax) and run in numpy: the
per-example cross-entropy gradients of its audited rows at its final weights, as the extraction of a
dpaudit run computes them (``P.GRADIENTS``: ``grad_norm`` and ``clipped_norm`` at the promise's
clip norm). Its logits are checked against the outputs Keras' safe-mode load gave (the job's
``P.OUTPUTS``): a file the numpy reader runs differently is refused, never audited with another
model's gradients.

With the pmp family on, the same job writes the parent set's gradient factors at the final weights
(``dpaudit.extract.extract.write_pmp_pairs_of_model`` without checkpoints): PMP Recipe A (one
full-batch step at the final weights) then runs on them when the promise is DP-SGD and states its
clip norm C (``dpaudit.extract.checkpoints.external_problem`` says why not otherwise). Recipe B needs
the training trajectory and Recipe C reference models trained by its recipe's code: not applicable.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import special

from dpaudit.external.outputs_file import ExternalModelError

__all__ = ["external_gradients", "gradient_problem"]

# Largest |softmax difference| between the numpy reader's and Keras' outputs of the same file (float32
# matrix products in two orders: ~1e-7; a misread layer differs by far more).
PROBABILITY_TOLERANCE = 1e-4


def gradient_problem(entry: Mapping) -> str | None:
    """Why dpaudit does not compute the per-example gradients of the entry's model (None when it does)."""
    if "model" not in entry:
        return "the model is given as its outputs, not as a model file"
    from dpaudit.extract.dense_model import read_dense_model

    try:
        read_dense_model(entry["model"], logits_layer=None)
    except (ValueError, KeyError, OSError) as error:
        return (f"per-example gradients are computed for a Sequential stack of Dense layers, read as data: "
                f"{str(error).strip().splitlines()[0]}")
    return None


def external_gradients(entry: Mapping, frame: pd.DataFrame, examples: pd.DataFrame, record: Mapping, *,
                       where: str, splits: Mapping[str, str] | None = None, pmp: Mapping | None = None,
                       pairs_path: str | Path | None = None) -> pd.DataFrame:
    """``P.GRADIENTS`` of the audited rows ``frame`` (the job's ``P.OUTPUTS``; ``examples``: the dataset's
    example_id and x), and with ``pairs_path`` the pmp pairs at the final weights (``pmp``: the pmp options
    ``PMP_PAIR_OPTIONS``, ``record``: the model's record, in place of train.json)."""
    from dpaudit.extract.dense_model import read_dense_model
    from dpaudit.extract.extract import (
        model_logits,
        per_example_gradients,
        write_pmp_pairs_of_model,
    )
    from dpaudit.training.models import features

    path = entry["model"]
    x = features(examples.set_index("example_id").loc[frame["example_id"].to_numpy(np.int64)].reset_index())
    model = read_dense_model(path, logits_layer=None)
    labels = frame["label"].to_numpy(np.int64)
    ours = special.softmax(model_logits(model, x).astype(np.float64), axis=1)
    theirs = special.softmax(np.stack(frame["logits"].to_numpy()).astype(np.float64), axis=1)
    gap = float(np.max(np.abs(ours - theirs), initial=0.0))
    if gap > PROBABILITY_TOLERANCE:
        raise ExternalModelError(f"{where}: {path}: its Dense layers read as data give probabilities up to {gap:.3g} "
                                 "away from Keras' load of the file; its gradients would be another model's. Give "
                                 "the model's outputs file instead")
    norms, _ = per_example_gradients(model, x, labels, keep=False)
    clip = record.get("clip_norm")
    clipped = norms if clip is None else np.minimum(norms, float(clip))
    if pairs_path is not None:
        keys = frame[["example_id", "split", "label"]].reset_index(drop=True)
        write_pmp_pairs_of_model(model, keys, np.ascontiguousarray(x, dtype=np.float32), splits,
                                 path=pairs_path, train=record, checkpoints_path=None, parent=pmp)
    return pd.DataFrame({"example_id": frame["example_id"].to_numpy(np.int64),
                         "is_member": frame["is_member"].to_numpy(bool), "grad_norm": norms, "clipped_norm": clipped})
