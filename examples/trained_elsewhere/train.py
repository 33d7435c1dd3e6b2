"""A model trained outside dpaudit, as a practitioner's own script would (README, "Audit a model you already trained").

Trains a small Keras MLP on breast cancer rows with tensorflow-privacy's DP-SGD optimizer in
``model.fit``, then writes what dpaudit audits (config/trained_elsewhere.yaml):

* ``model.keras``: the model file (Keras' own format: architecture as data, weights), with
  ``members.csv`` and ``held_out.csv``, the ids it trained on and the ids it never saw;
* ``outputs.parquet``: the same model's logits, one row per example id, with a ``member`` column:
  the convention of tensorflow-privacy's membership-inference ``AttackInputData`` (logits, probs
  or loss per example), as a PyTorch or JAX user would write it with pandas;
* ``promise.json``: the DP-SGD inputs and tensorflow-privacy's own privacy statement for them.

The features are those dpaudit prepares for its built-in breast_cancer dataset (scikit-learn's
rows, standardized; example_id = the row of ``load_breast_cancer()``): dpaudit runs a model file on
them, so a model file must be trained on them (an outputs file may come from any features).

Run from the repository root: ``.venv/bin/python examples/trained_elsewhere/train.py [OUT_DIR]``
(default: this folder; about 10 s on one core). The files in this folder were written by it.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

# tensorflow-privacy's optimizers need Keras 2 (tf_keras): TensorFlow uses it only when this is set
# before its first import. The package's own __init__ imports tf.estimator (gone since TF 2.16), so it
# is skipped and the submodules are imported directly, as dpaudit._tf does.
os.environ["TF_USE_LEGACY_KERAS"] = "1"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.skip_tf_privacy_import = True

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402
from tensorflow_privacy.privacy.analysis.compute_dp_sgd_privacy_lib import (  # noqa: E402
    compute_dp_sgd_privacy_statement,
)
from tensorflow_privacy.privacy.optimizers.dp_optimizer_keras import DPKerasSGDOptimizer  # noqa: E402

from dpaudit.data.datasets import prepare_dataset_ids  # noqa: E402  (the features dpaudit runs a model file on)

BATCH, EPOCHS, NOISE, CLIP, LEARNING_RATE, DELTA, SEED = 32, 15, 1.3, 1.0, 0.1, 1e-5, 0


def train(out: Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    keras.utils.set_random_seed(SEED)
    tf.config.experimental.enable_op_determinism()
    table, _, _ = prepare_dataset_ids("breast_cancer", {}, {})
    ids = table.column("example_id").to_numpy()
    y = table.column("label").to_numpy().astype(np.int64)
    features = np.stack(table.column("x").to_numpy(zero_copy_only=False)).astype(np.float32)
    rng = np.random.default_rng(SEED)  # this script's own split: half the rows are members
    order = rng.permutation(len(y))
    members, held_out = np.sort(order[: len(y) // 2]), np.sort(order[len(y) // 2:])

    model = keras.Sequential([keras.Input(shape=(features.shape[1],)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(2)])
    # per-example clipping: one microbatch per example; the loss must stay per example (no reduction)
    optimizer = DPKerasSGDOptimizer(l2_norm_clip=CLIP, noise_multiplier=NOISE, num_microbatches=BATCH,
                                    learning_rate=LEARNING_RATE)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=keras.losses.Reduction.NONE)
    model.compile(optimizer=optimizer, loss=loss, metrics=["accuracy"])
    batches = (tf.data.Dataset.from_tensor_slices((features[members], y[members])).shuffle(len(members), seed=SEED)
               .batch(BATCH, drop_remainder=True))  # every batch holds num_microbatches examples
    model.fit(batches, epochs=EPOCHS, verbose=0)

    model.save(out / "model.keras")
    logits = model.predict(features, verbose=0).astype(np.float32)
    pd.DataFrame({"example_id": members}).to_csv(out / "members.csv", index=False)
    pd.DataFrame({"example_id": held_out}).to_csv(out / "held_out.csv", index=False)
    pd.DataFrame({"example_id": ids, "logits": list(logits), "member": np.isin(ids, members)}).to_parquet(
        out / "outputs.parquet", index=False)

    # tensorflow-privacy's statement of this training: its "Poisson sampling" line is the ε of
    # q = batch / n over ceil(epochs / q) steps, RDP accounting (dpaudit recomputes it from these inputs)
    n = int(members.size)
    statement = compute_dp_sgd_privacy_statement(number_of_examples=n, batch_size=BATCH, num_epochs=EPOCHS,
                                                 noise_multiplier=NOISE, delta=DELTA, used_microbatching=False)
    poisson = float(statement.split("Epsilon assuming Poisson sampling (*):")[1].split()[0])
    q = BATCH / n
    promise = {"noise_multiplier": NOISE, "sampling_probability": q, "steps": math.ceil(EPOCHS / q),
               "delta": DELTA, "sampling": "poisson", "accountant": "rdp", "epsilon": poisson,
               "statement": statement, "accuracy_held_out": float((logits[held_out].argmax(1) == y[held_out]).mean())}
    (out / "promise.json").write_text(json.dumps(promise, indent=1) + "\n")
    return promise


if __name__ == "__main__":
    result = train(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent)
    print(result["statement"])
    print(f"promise for the config: {json.dumps({k: v for k, v in result.items() if k != 'statement'})}")
