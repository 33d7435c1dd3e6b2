"""Benchmark: DP-SGD vs non-private epoch time, extraction's per-example gradients vs a loop.

Run: ``.venv/bin/python bench/bench_training.py [--threads 2]``. Prints one JSON
object per line (``{"bench": ..., ...}``). Every DP path is timed without and with
Dropout against the non-private step of the same model, all in ONE run with the
epochs interleaved (ratios stay meaningful on a loaded machine). Targets: the
default DP path (``auto``: fast_gradient_clipping without Dropout,
masked_ghost_clipping with it) ≤ 2× (stretch 1.3×) the non-private epoch time;
extraction's per-example gradients (numpy, ``dpaudit.extract.dense_model``; TensorFlow's
``vectorized_map`` before issue 23, timed beside it) ≥ 10× faster than a Python loop.

CNNs (issue 33; ``--only cnn`` runs just these): DP-SGD with ``layerwise_clipping`` over the
non-private epoch of the same CNN, on digits 8×8 (target ≤ 2×) and on 28×28×1
synthetic_images with 2 conv layers of 32 filters (target ≤ 2.5×); tensorflow-privacy's
vectorized optimizer on the same model is timed beside it as the comparison.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np


def _emit(**record) -> None:
    print(json.dumps(record), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--sigma", type=float, default=1.0)
    parser.add_argument("--n-grad", type=int, default=1000)
    parser.add_argument("--dropout", type=float, default=0.3)
    parser.add_argument("--hidden", type=int, default=64, help="units of the one hidden layer")
    parser.add_argument("--only", choices=["all", "mlp", "cnn"], default="all")
    parser.add_argument("--cnn-epochs", type=int, default=3)
    parser.add_argument("--cnn-n", type=int, default=1000, help="synthetic 28x28 images per epoch")
    args = parser.parse_args()
    if args.only == "cnn":
        cnn_ratios(args)
        return
    if not 0.0 < args.dropout < 1.0:
        parser.error("--dropout must be in (0, 1): the with-Dropout variants need Dropout")

    from dpaudit import _tf
    from dpaudit.extract.dense_model import read_dense_model
    from dpaudit.extract.extract import per_example_gradients
    from dpaudit.training.models import build_mlp, logits_model, save_model
    from dpaudit.training.sampling import poisson_batches
    from dpaudit.training.steps import build_train_step, optimizer_class_name

    tf = _tf.tf
    _tf.configure(args.threads, 0)
    rng = np.random.default_rng(0)
    n, d, batch = args.n, 20, args.batch_size
    x = rng.normal(size=(n, d)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64)
    spe = n // batch
    # The same Poisson batches (q = B/n) for every variant, so only the step differs.
    batches = list(poisson_batches(n, batch / n, spe * (args.epochs + 1), np.random.default_rng(1)))
    feeds = [(tf.constant(x[b]), tf.constant(y[b])) for b in batches]

    def make(mechanism: str, implementation: str, dropout: float):
        net = logits_model(build_mlp(d, {"hidden_units": [args.hidden], "n_classes": 2, "dropout": dropout}, seed=0))
        step, _, opt = build_train_step(
            net, mechanism=mechanism, optimizer="sgd", learning_rate=0.1,
            clip_norm=1.0 if mechanism == "dpsgd" else None,
            noise_multiplier=args.sigma if mechanism == "dpsgd" else 0.0,
            expected_batch_size=batch, implementation=implementation,
        )
        for xb, yb in feeds[:spe]:  # warm-up epoch: tracing
            step(xb, yb)
        return step, optimizer_class_name(opt)

    # (dropout, mechanism, implementation); fast_gradient_clipping is not exact with Dropout.
    dropouts = (0.0, args.dropout)
    variants = {
        (p, "non_private"): make("baseline", "fast_gradient_clipping", p) for p in dropouts
    }
    for p in dropouts:
        impls = ["masked_ghost_clipping", "vectorized_optimizer"]
        if p == 0.0:
            impls.insert(0, "fast_gradient_clipping")
        for impl in impls:
            variants[(p, impl)] = make("dpsgd", impl, p)
    auto = {0.0: "fast_gradient_clipping", args.dropout: "masked_ghost_clipping"}
    # Epochs of the variants are interleaved so load from other processes hits all alike.
    times: dict[tuple, list[float]] = {key: [] for key in variants}
    for e in range(1, args.epochs + 1):
        for key, (step, _) in variants.items():
            t0 = time.perf_counter()
            for xb, yb in feeds[e * spe : (e + 1) * spe]:
                step(xb, yb)
            times[key].append(time.perf_counter() - t0)
    common = dict(model=f"mlp-{d}-{args.hidden}-2", n=n, batch_size=batch, epochs_timed=args.epochs, threads=args.threads)
    for p in dropouts:
        base_s = statistics.median(times[(p, "non_private")])
        _emit(bench="epoch_time", variant="non_private", dropout=p,
              optimizer_class=variants[(p, "non_private")][1], seconds=base_s, epochs_per_s=1 / base_s,
              **common)
        for (dropout, impl), (_, dp_cls) in variants.items():
            if dropout != p or impl == "non_private":
                continue
            dp_s = statistics.median(times[(p, impl)])
            ratio = dp_s / base_s
            _emit(bench="epoch_time", variant=f"dpsgd/{impl}", dropout=p, optimizer_class=dp_cls,
                  sigma=args.sigma, clip_norm=1.0, seconds=dp_s, epochs_per_s=1 / dp_s, **common)
            record = dict(bench="dp_over_nonprivate_epoch_time", dp_implementation=impl, dropout=p,
                          auto_default=auto[p] == impl, optimizer_class=dp_cls, sigma=args.sigma,
                          ratio=ratio, statistic="median epoch time over median", **common)
            if auto[p] == impl:
                record.update(target_max=2.0, stretch_max=1.3, meets_target=ratio <= 2.0,
                              meets_stretch=ratio <= 1.3)
            _emit(**record)

    # Per-example gradients: extraction's numpy factors (read from the saved model, as the job
    # does), TensorFlow's vectorized_map (extraction's path before issue 23) and a Python loop
    # over a compiled single-example gradient (the obvious alternative).
    import tempfile
    from pathlib import Path

    model = build_mlp(d, {"hidden_units": [64], "n_classes": 2}, seed=0)
    net = logits_model(model)
    xg, yg = x[: args.n_grad], y[: args.n_grad]
    with tempfile.TemporaryDirectory() as folder:
        save_model(model, Path(folder) / "model.keras")
        t0 = time.perf_counter()
        dense = read_dense_model(Path(folder) / "model.keras")
        norms_vec, _ = per_example_gradients(dense, xg, yg, keep=True)
        first_call_s = time.perf_counter() - t0  # includes reading the model, as one extraction job pays it
    reps = []
    for _ in range(5):
        t0 = time.perf_counter()
        per_example_gradients(dense, xg, yg, keep=True)
        reps.append(time.perf_counter() - t0)
    vec_s = statistics.median(reps)

    @tf.function(input_signature=[tf.TensorSpec([None, d], tf.float32), tf.TensorSpec([None], tf.int64)],
                 autograph=False)
    def vectorized(xb, yb):
        def one(args):
            xi, yi = args
            with tf.GradientTape() as tape:
                loss = tf.nn.sparse_softmax_cross_entropy_with_logits(yi[None], net(xi[None, :], training=False))[0]
            return tf.concat([tf.reshape(g, [-1]) for g in tape.gradient(loss, net.trainable_variables)], axis=0)
        return tf.vectorized_map(one, (xb, yb))

    vectorized(tf.constant(xg[:10]), tf.constant(yg[:10]))  # trace
    reps = []
    for _ in range(5):
        t0 = time.perf_counter()
        vectorized(tf.constant(xg), tf.constant(yg)).numpy()
        reps.append(time.perf_counter() - t0)
    tf_vec_s = statistics.median(reps)

    variables = net.trainable_variables

    @tf.function(input_signature=[tf.TensorSpec([1, d], tf.float32), tf.TensorSpec([1], tf.int64)])
    def single(xi, yi):
        with tf.GradientTape() as tape:
            loss = tf.nn.sparse_softmax_cross_entropy_with_logits(yi, net(xi, training=False))
        return tf.concat([tf.reshape(g, [-1]) for g in tape.gradient(loss, variables)], axis=0)

    single(tf.constant(xg[:1]), tf.constant(yg[:1]))
    t0 = time.perf_counter()
    loop = np.stack([single(tf.constant(xg[i : i + 1]), tf.constant(yg[i : i + 1])).numpy() for i in range(len(xg))])
    loop_s = time.perf_counter() - t0
    max_norm_diff = float(np.max(np.abs(np.linalg.norm(loop.astype(np.float64), axis=1) - norms_vec)))
    _emit(bench="per_example_gradients", n=len(xg), numpy_factors_s=vec_s,
          numpy_first_call_with_model_read_s=first_call_s, tf_vectorized_map_s=tf_vec_s, python_loop_s=loop_s,
          speedup=loop_s / vec_s, target_min=10.0, meets_target=loop_s / vec_s >= 10.0,
          max_abs_norm_difference=max_norm_diff)
    if args.only == "all":
        cnn_ratios(args)


def cnn_ratios(args) -> None:
    """DP-SGD (layerwise_clipping, and the vectorized optimizer) over non-private epoch time of two CNNs."""
    from dpaudit import _tf
    from dpaudit.data.arrays import synthetic_images
    from dpaudit.data.datasets import prepare_dataset
    from dpaudit.data.examples import features
    from dpaudit.training.architectures import build_model
    from dpaudit.training.layer_clipping import LayerGradients
    from dpaudit.training.models import logits_model
    from dpaudit.training.sampling import poisson_batches
    from dpaudit.training.steps import build_train_step

    tf = _tf.tf
    _tf.configure(args.threads, 0)
    digits, info_digits = prepare_dataset("digits", {}, {})
    images, info_images = synthetic_images({"n": args.cnn_n, "image_size": 28, "classes": 10})
    setups = [
        ("digits_8x8", digits, info_digits, {"conv_filters": [16, 32], "hidden_units": [32]}, 2.0),
        ("synthetic_28x28x1", images, info_images, {"conv_filters": [32, 32], "hidden_units": []}, 2.5),
    ]
    for name, table, info, arch, target in setups:
        members = np.asarray(table.column("split").to_pylist()) == "train"
        x = features(table)[members]
        y = table.column("label").to_numpy()[members]
        n, batch = len(y), 64
        spe = max(1, n // batch)
        params = {"model": "cnn", "n_classes": info["classes"], "image_shape": info["image_shape"],
                  "conv_kernel_size": 3, "conv_padding": "same", "pooling": "max", **arch}
        batches = list(poisson_batches(n, batch / n, spe * (args.cnn_epochs + 1), np.random.default_rng(1)))
        feeds = [(tf.constant(x[b]), tf.constant(y[b])) for b in batches]
        variants = {}
        for variant in ("non_private", "layerwise_clipping", "vectorized_optimizer"):
            net = logits_model(build_model(x.shape[1], params, seed=0))
            if variant == "vectorized_optimizer":
                step = _vectorized_step(net, args.sigma, batch)
            else:
                step, _, _ = build_train_step(
                    net, mechanism="baseline" if variant == "non_private" else "dpsgd", optimizer="sgd",
                    learning_rate=0.05, clip_norm=1.0, noise_multiplier=args.sigma, expected_batch_size=batch,
                    implementation="layerwise_clipping")
            for xb, yb in feeds[:spe]:  # warm-up epoch: tracing
                step(xb, yb)
            variants[variant] = step
        times = {key: [] for key in variants}
        for e in range(1, args.cnn_epochs + 1):  # interleaved, so load hits every variant alike
            for key, step in variants.items():
                t0 = time.perf_counter()
                for xb, yb in feeds[e * spe:(e + 1) * spe]:
                    step(xb, yb)
                times[key].append(time.perf_counter() - t0)
        base = statistics.median(times["non_private"])
        # which Conv2D norm each layer uses (mixed ghost clipping's per-layer choice)
        choice = _conv_choices(logits_model(build_model(x.shape[1], params, seed=0)), x[:4], y[:4], LayerGradients)
        common = dict(model=name, architecture=arch, n=n, batch_size=batch, epochs_timed=args.cnn_epochs,
                      threads=args.threads, sigma=args.sigma, conv_norms=choice, non_private_s=base)
        for key in ("layerwise_clipping", "vectorized_optimizer"):
            ratio = statistics.median(times[key]) / base
            record = dict(bench="cnn_dp_over_nonprivate_epoch_time", dp_implementation=key, ratio=ratio,
                          seconds=statistics.median(times[key]), **common)
            if key == "layerwise_clipping":
                record.update(target_max=target, meets_target=ratio <= target)
            _emit(**record)


def _vectorized_step(net, sigma: float, batch: int):
    """tensorflow-privacy's vectorized DP optimizer on any Keras model (the comparison)."""
    from dpaudit import _tf

    tf = _tf.tf
    opt = _tf.VectorizedDPKerasSGDOptimizer(l2_norm_clip=1.0, noise_multiplier=sigma, num_microbatches=None,
                                            learning_rate=0.05)
    variables = net.trainable_variables
    signature = [tf.TensorSpec([None, int(net.input_shape[-1])], tf.float32), tf.TensorSpec([None], tf.int64)]

    @tf.function(input_signature=signature, autograph=False)
    def step(x, y):
        with tf.GradientTape(persistent=True) as tape:
            losses = tf.nn.sparse_softmax_cross_entropy_with_logits(y, net(x, training=True))
        grads_and_vars = opt._compute_gradients(losses, variables, tape=tape)
        scale = tf.cast(tf.shape(y)[0], tf.float32) / batch  # Σ/|b| → Σ/B, as the DP paths divide
        opt.apply_gradients([(g * scale, v) for g, v in grads_and_vars])

    return step


def _conv_choices(net, x, y, layer_gradients_cls) -> dict[str, str]:
    from dpaudit import _tf
    from dpaudit.training.layer_clipping import model_chain, tapped_forward

    tf = _tf.tf
    chain = model_chain(net)
    with tf.GradientTape() as tape:
        logits, taps = tapped_forward(chain, tf.constant(x))
        loss = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(tf.constant(y), logits))
    deltas = tape.gradient(loss, [t.z for t in taps])
    return {t.layer.name: ("ghost" if layer_gradients_cls(t, dz).ghost else "explicit")
            for t, dz in zip(taps, deltas, strict=True) if type(t.layer).__name__ == "Conv2D"}


if __name__ == "__main__":
    main()
