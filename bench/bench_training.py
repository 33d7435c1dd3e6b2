"""Benchmark: DP-SGD vs non-private epoch time, vectorized vs looped per-example gradients.

Run: ``.venv/bin/python bench/bench_training.py [--threads 2]``. Prints one JSON
object per line (``{"bench": ..., ...}``); targets: DP/non-private epoch-time ratio
≤ 3 and vectorized per-example gradients ≥ 10× faster than a Python loop.
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
    args = parser.parse_args()

    from dpaudit import _tf
    from dpaudit.extract.extract import make_per_example_gradient_fn, per_example_gradients
    from dpaudit.training.models import build_mlp, logits_model
    from dpaudit.training.sampling import poisson_batches
    from dpaudit.training.train import _optimizer_class_name, build_train_step

    tf = _tf.tf
    _tf.configure(args.threads, 0)
    rng = np.random.default_rng(0)
    n, d, batch = args.n, 20, args.batch_size
    x = rng.normal(size=(n, d)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64)
    params = {"hidden_units": [64], "n_classes": 2}
    spe = n // batch
    # The same Poisson batches (q = B/n) for every variant, so only the step differs.
    batches = list(poisson_batches(n, batch / n, spe * (args.epochs + 1), np.random.default_rng(1)))
    feeds = [(tf.constant(x[b]), tf.constant(y[b])) for b in batches]

    def make(mechanism: str, implementation: str):
        net = logits_model(build_mlp(d, params, seed=0))
        step, _, opt = build_train_step(
            net, mechanism=mechanism, optimizer="sgd", learning_rate=0.1,
            clip_norm=1.0 if mechanism == "dpsgd" else None,
            noise_multiplier=args.sigma if mechanism == "dpsgd" else 0.0,
            expected_batch_size=batch, implementation=implementation,
        )
        for xb, yb in feeds[:spe]:  # warm-up epoch: tracing
            step(xb, yb)
        return step, _optimizer_class_name(opt)

    variants = {
        "non_private": make("baseline", "fast_gradient_clipping"),
        "fast_gradient_clipping": make("dpsgd", "fast_gradient_clipping"),
        "vectorized_optimizer": make("dpsgd", "vectorized_optimizer"),
    }
    # Epochs of the variants are interleaved so load from other processes hits all alike.
    times: dict[str, list[float]] = {k: [] for k in variants}
    for e in range(1, args.epochs + 1):
        for name, (step, _) in variants.items():
            t0 = time.perf_counter()
            for xb, yb in feeds[e * spe : (e + 1) * spe]:
                step(xb, yb)
            times[name].append(time.perf_counter() - t0)
    base_s = statistics.median(times["non_private"])
    _emit(bench="epoch_time", variant="non_private", optimizer_class=variants["non_private"][1],
          seconds=base_s, epochs_per_s=1 / base_s, model="mlp-20-64-2", n=n, batch_size=batch,
          threads=args.threads)
    for impl in ("fast_gradient_clipping", "vectorized_optimizer"):
        dp_s, dp_cls = statistics.median(times[impl]), variants[impl][1]
        _emit(bench="epoch_time", variant=f"dpsgd/{impl}", optimizer_class=dp_cls, sigma=args.sigma,
              clip_norm=1.0, seconds=dp_s, epochs_per_s=1 / dp_s, model="mlp-20-64-2", n=n,
              batch_size=batch, threads=args.threads)
        _emit(bench="dp_over_nonprivate_epoch_time", dp_implementation=impl, optimizer_class=dp_cls,
              sigma=args.sigma, ratio=dp_s / base_s, target_max=3.0, meets_target=dp_s / base_s <= 3.0)

    # Per-example gradients: vectorized_map path used by extraction vs a Python loop
    # over a compiled single-example gradient (the obvious alternative).
    net = logits_model(build_mlp(d, params, seed=0))
    xg, yg = x[: args.n_grad], y[: args.n_grad]
    t0 = time.perf_counter()
    norms_vec, _ = per_example_gradients(net, xg, yg, keep=True)
    first_call_s = time.perf_counter() - t0  # includes tracing, as one extraction job pays it
    fn = make_per_example_gradient_fn(net)
    fn(tf.constant(xg[:10]), tf.constant(yg[:10]))  # trace
    reps = []
    for _ in range(5):
        t0 = time.perf_counter()
        nv, gv = fn(tf.constant(xg), tf.constant(yg))
        gv.numpy()
        reps.append(time.perf_counter() - t0)
    vec_s = statistics.median(reps)

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
    _emit(bench="per_example_gradients", n=len(xg), vectorized_s=vec_s,
          vectorized_first_call_with_tracing_s=first_call_s, python_loop_s=loop_s,
          speedup=loop_s / vec_s, target_min=10.0, meets_target=loop_s / vec_s >= 10.0,
          max_abs_norm_difference=max_norm_diff)


if __name__ == "__main__":
    main()
