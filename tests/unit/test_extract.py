"""Per-example extraction: inference-mode losses and per-example gradients, in numpy, against
the saved Keras model and TensorFlow's gradients (a second implementation)."""

import logging

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpaudit import _tf
from dpaudit.extract.dense_model import read_dense_model
from dpaudit.extract.extract import extract_per_example, per_example_gradients
from dpaudit.training.models import features, load_model, logits_model
from dpaudit.training.train import train_model

from .test_training import numpy_per_example_grads
from .tf_gradients import tf_per_example_gradients

tf = _tf.tf
SPLITS = {"members": "train", "nonmembers": "holdout", "utility": "test"}
LOG = logging.getLogger("test_extract")


def _frame(seed=0, n=(150, 50, 50), d=6):
    rng = np.random.default_rng(seed)
    total = sum(n)
    x = rng.normal(size=(total, d)).astype(np.float32)
    y = rng.integers(0, 3, size=total).astype(np.int64)  # random labels: members get memorized
    split = np.repeat(["train", "holdout", "test"], n)
    order = rng.permutation(total)  # interleave splits: output order must follow the input
    return pd.DataFrame(
        {"example_id": np.arange(total, dtype=np.int64)[order] * 3 + 11, "split": split[order],
         "label": y[order], "x": list(x[order])}
    )


@pytest.fixture(scope="module")
def dropout_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("extract") / "model.keras"
    df = _frame()
    train_model(
        df, SPLITS,
        {"mechanism": "baseline", "epochs": 3, "batch_size": 25, "hidden_units": [16], "dropout": 0.4,
         "learning_rate": 0.2, "seed": 3},
        path, threads=2, log=LOG,
    )
    return path, df


def test_outputs_are_inference_mode_losses(dropout_model):
    path, df = dropout_model
    outputs, grads = extract_per_example(path, df, SPLITS, clip_norm=None, full_gradients=False)
    assert list(outputs.columns) == ["example_id", "split", "is_member", "label", "loss_ce", "loss_logit", "p_true", "correct",
                                     "logits"]
    np.testing.assert_array_equal(outputs["example_id"], df["example_id"])
    np.testing.assert_array_equal(outputs["is_member"], df["split"] == "train")
    model = load_model(path)
    x = features(df)
    y = df["label"].to_numpy()
    rows = np.arange(len(y))
    # Oracle 1: the saved model's own softmax output in inference mode.
    probs = model(tf.constant(x), training=False).numpy().astype(np.float64)
    np.testing.assert_allclose(outputs["p_true"], probs[rows, y], rtol=1e-5, atol=1e-7)
    # The extracted logits are the Keras model's, to float32 rounding (numpy computes them in float64).
    z_keras = logits_model(model)(tf.constant(x), training=False).numpy().astype(np.float64)
    z = np.stack(outputs["logits"].to_numpy()).astype(np.float64)
    np.testing.assert_allclose(z, z_keras, rtol=1e-6, atol=1e-6)
    # Oracle 2: closed forms on the extracted float32 logits (Negoescu et al. 2023, footnote 1), float64.
    lse = np.log(np.exp(z).sum(axis=1))
    np.testing.assert_allclose(outputs["loss_ce"], lse - z[rows, y], rtol=1e-10, atol=1e-12)
    others = np.where(np.eye(z.shape[1], dtype=bool)[y], -np.inf, z)
    np.testing.assert_allclose(outputs["loss_logit"], np.log(np.exp(others).sum(axis=1)) - z[rows, y], rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(outputs["correct"], z.argmax(axis=1) == y)
    # Training mode (Dropout 0.4 active) gives different losses.
    z_train = logits_model(model)(tf.constant(x), training=True).numpy().astype(np.float64)
    ce_train = np.log(np.exp(z_train).sum(axis=1)) - z_train[rows, y]
    assert np.max(np.abs(ce_train - outputs["loss_ce"].to_numpy())) > 1e-3
    # Baseline: no clip, so the clipped norm is the norm.
    np.testing.assert_array_equal(grads["clipped_norm"], grads["grad_norm"])


def test_two_extractions_identical(dropout_model):
    path, df = dropout_model
    a = extract_per_example(path, df, SPLITS, clip_norm=0.5, full_gradients=True)
    b = extract_per_example(path, df, SPLITS, clip_norm=0.5, full_gradients=True)
    pd.testing.assert_frame_equal(a[0], b[0], check_exact=True)
    pd.testing.assert_frame_equal(a[1], b[1], check_exact=True)


def test_gradients_match_numpy_and_batch_gradient(dropout_model):
    path, df = dropout_model
    clip = 0.5
    _, grads = extract_per_example(path, df, SPLITS, clip_norm=clip, full_gradients=True)
    model = load_model(path)
    x, y = features(df), df["label"].to_numpy()
    # Oracle 1: analytic backprop of the ReLU MLP in numpy, float64 on the saved float32 weights
    # (Dropout is the identity at inference); extraction's float64 factor norms agree to 1e-9
    # and its float32 vectors to float32 rounding.
    ref = numpy_per_example_grads(model.get_weights(), x, y)
    ref_flat = np.concatenate([g.reshape(len(x), -1) for g in ref], axis=1)
    ref_norm = np.linalg.norm(ref_flat, axis=1)
    np.testing.assert_allclose(grads["grad_norm"], ref_norm, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(grads["clipped_norm"], np.minimum(grads["grad_norm"], clip), rtol=0, atol=0)
    table = pa.Table.from_pandas(grads, preserve_index=False)
    assert table.schema.field("gradient").type == pa.list_(pa.float32(), ref_flat.shape[1])
    flat = np.stack(grads["gradient"].to_numpy())
    np.testing.assert_allclose(flat, ref_flat, rtol=1e-6, atol=1e-9)
    # Oracle 2: TensorFlow's per-example gradients of the loaded model (float32: rtol 1e-4).
    net = logits_model(model)
    tf_norms, tf_flat = tf_per_example_gradients(net, x, y)
    np.testing.assert_allclose(grads["grad_norm"], tf_norms, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(flat, tf_flat, rtol=1e-4, atol=1e-6)
    # Oracle 3: the sum of per-example gradients is the gradient of the summed loss (GradientTape).
    with tf.GradientTape() as tape:
        z = net(tf.constant(x), training=False)
        total = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(tf.constant(y), z))
    batch = np.concatenate([g.numpy().ravel() for g in tape.gradient(total, net.trainable_variables)])
    np.testing.assert_allclose(flat.astype(np.float64).sum(axis=0), batch, rtol=1e-4, atol=1e-4)
    # Chunking does not change the values beyond float64 rounding (chunk boundaries inside the data).
    norms_small, _ = per_example_gradients(read_dense_model(path), x[:7], y[:7], keep=False)
    np.testing.assert_allclose(norms_small, grads["grad_norm"].to_numpy()[:7], rtol=1e-12)


def test_same_seed_trainings_give_identical_loss_columns(tmp_path):
    df = _frame(seed=1)
    params = {"mechanism": "dpsgd", "epochs": 2, "batch_size": 25, "hidden_units": [8], "clip_norm": 1.0,
              "noise_multiplier": 1.0, "delta": 1e-3, "accountant": "rdp", "seed": 5}
    cols = ["loss_ce", "loss_logit", "p_true", "correct"]
    results = []
    for name in ("a", "b"):
        train_model(df, SPLITS, params, tmp_path / f"{name}.keras", threads=2, log=LOG)
        out, _ = extract_per_example(tmp_path / f"{name}.keras", df, SPLITS, clip_norm=1.0,
                                     full_gradients=False)
        results.append(out[cols])
    pd.testing.assert_frame_equal(results[0], results[1], check_exact=True)


def test_a_truncated_model_names_the_file_and_the_fix(dropout_model, tmp_path):
    from dpaudit.io import UnreadableFileError

    path, _ = dropout_model
    damaged = tmp_path / "model.keras"
    data = path.read_bytes()
    damaged.write_bytes(data[: len(data) // 2])
    for loader in (read_dense_model, load_model):  # extraction's reader and Keras's
        with pytest.raises(UnreadableFileError, match=r"model\.keras.*delete it and run again"):
            loader(damaged)


@pytest.mark.parametrize("full_gradients", [False, True])
def test_streamed_files_hold_the_in_memory_rows(dropout_model, tmp_path, monkeypatch, full_gradients):
    from dpaudit.extract import extract
    from dpaudit.io import read_parquet, write_parquet

    path, df = dropout_model
    examples = tmp_path / "examples.parquet"
    write_parquet(examples, df.assign(x=pd.Series(pd.arrays.ArrowExtensionArray(
        pa.FixedSizeListArray.from_arrays(pa.array(features(df).reshape(-1)), features(df).shape[1])))))
    # chunks of 7 rows: several row groups, the last one short (both
    # extractions use them: the chunk size may change the products' last bits)
    monkeypatch.setattr(extract, "_CHUNK_ROWS", 7)
    monkeypatch.setattr(extract, "_KEPT_CHUNK_FLOATS", 7 * read_dense_model(path).n_params)
    outputs, grads = extract_per_example(path, read_parquet(examples), SPLITS, clip_norm=0.5,
                                         full_gradients=full_gradients)
    write_parquet(tmp_path / "outputs_frame.parquet", outputs)
    write_parquet(tmp_path / "gradients_frame.parquet", grads)
    count = extract.write_per_example(path, examples, SPLITS, tmp_path / "outputs.parquet",
                                      tmp_path / "gradients.parquet", clip_norm=0.5,
                                      full_gradients=full_gradients)
    assert count == len(df)
    assert (tmp_path / "outputs.parquet").read_bytes() == (tmp_path / "outputs_frame.parquet").read_bytes()
    if full_gradients:
        streamed = pq.read_table(tmp_path / "gradients.parquet")
        expected = pq.read_table(tmp_path / "gradients_frame.parquet")
        assert streamed.schema.equals(expected.schema, check_metadata=False)
        assert streamed.equals(expected)
        assert pq.ParquetFile(tmp_path / "gradients.parquet").num_row_groups == -(-len(df) // 7)
    else:
        assert (tmp_path / "gradients.parquet").read_bytes() == (tmp_path / "gradients_frame.parquet").read_bytes()
