"""Issues 32 and 45: what the mechanism checks cost the released training loop, the accounting
check's cost per run, and the checks' validity over many seeds. No assertions (noisy machines);
figures for the closing note.

Two models, as the default run and config/cnn.yaml train them (SGD, momentum 0.9, B = 64, 10
epochs, learning rate 0.05):

* ``mlp``: the default run's synthetic model (d = 20, hidden 64, 2 classes, n = 1,000 members,
  150 steps), fast_gradient_clipping;
* ``cnn``: config/cnn.yaml's CNN on 8×8 images (conv 8 and 16 filters 3×3 same, max pooling,
  hidden 32, 10 classes, n = 900 members, the digits run's size), layerwise_clipping.

``loop``: the compiled step alone, without graph-side checks, with the noise monitor, with the
weight monitor and with both (each with its per-block folds), each traced once and called in
turn on the same batches in one process: the ratio of the median per-step times. ``train_model``:
the released loop as the workflow runs it (train_seconds: tracing, sampler, its ledger, the
epochs' utility passes) with no observer, with issue 32's checks alone and with
``MechanismObserver()`` (every check of issues 32 and 45), alternated; and the checks' work after
training (``mechanism_check_seconds``).

Every ``train_model`` round clears the accounting check's remembered recomputations
(``accounting_check.clear_cache``), as a job's first run; a few further runs with the same inputs
give the cost a batch job's other seeds pay.

Measured (``--rounds 7``, one run, after the clipping certificate's cond was kept a function call
and its backward passes mapped from one trace; a shared 2-core machine; docs/architecture.md, "The
clipping certificate's cost, cut again"): compiled step with both monitors (no clipping certificate)
1.04× (MLP, 0.418 → 0.435 ms) and 1.01× (CNN, 1.43 → 1.44 ms); train_seconds with every check 1.56×
(MLP, 0.286 → 0.447 s) and 1.64× (CNN, 0.517 → 0.846 s), epochs 2–10 1.29× and 1.40× (the 16 checked
steps' backward passes, the cond's dispatch); checks after training 0.027 s (MLP) and 0.050 s (CNN)
with the accounting recomputed and the start check's rebuild, (loop + checks) / loop 1.66× and 1.73×
(1.84× and 1.87× at the session's start, ``--rounds 3``). The accounting check alone 2.3 / 4.0 /
4.3 ms at ε = 1 / 4 / 16 (dpaudit.dp.rdp_series).

``--validity N``: the correct mechanism over N seeds × ε ∈ {1, 4} on every gradient path and
optimizer (tiny MLPs, the unit test's sizes): how many noise or weight certificates fail (the
test suite runs 4 seeds).

``--rows``: issue 45's row ledger, its memory and the sampler check's time at the default run and at the
Purchase-100 paper configuration (132,207 members, B = 256, 50 epochs; the sampler mirrored in numpy by
geometric skips).

    python bench/bench_noise_check.py [--rounds 7] [--models mlp cnn] [--validity 20] [--rows]
"""

from __future__ import annotations

import argparse
import logging
import math
import time

import numpy as np
import pandas as pd

from dpaudit import _tf
from dpaudit.audit.mechanism_checks import MechanismObserver, monitor_for
from dpaudit.dp import accounting, accounting_check, noise_certificate
from dpaudit.training.architectures import build_model
from dpaudit.training.models import logits_model
from dpaudit.training.steps import build_train_step

BATCH, EPOCHS, LR, MOMENTUM, DELTA = 64, 10, 0.05, 0.9, 1e-4
MODELS = {
    "mlp": {"n": 1000, "d": 20, "classes": 2, "implementation": "fast_gradient_clipping",
            "params": {"model": "mlp", "hidden_units": [64], "activation": "relu", "dropout": 0.0}},
    "cnn": {"n": 900, "d": 64, "classes": 10, "implementation": "layerwise_clipping",
            "params": {"model": "cnn", "conv_filters": [8, 16], "conv_kernel_size": 3, "conv_strides": 1,
                       "conv_padding": "same", "pooling": "max", "hidden_units": [32], "activation": "relu",
                       "dropout": 0.0, "image_shape": [8, 8, 1]}},
}


def _data(spec, seed=0):
    rng = np.random.default_rng(seed)
    n, d, k = spec["n"], spec["d"], spec["classes"]
    y = rng.integers(0, k, n + 300)
    x = (rng.normal(size=(n + 300, d)) + np.outer(y - (k - 1) / 2, np.linspace(-1, 1, d))).astype(np.float32)
    return x, y


def _net(spec):
    return logits_model(build_model(spec["d"], {**spec["params"], "n_classes": spec["classes"]}, seed=1))


VARIANTS = ("none", "noise", "weights", "both")


def loop_overhead(name: str, rounds: int) -> None:
    """Per step, the four variants called in turn on the same batch (order reversed every other
    step), so a busy machine slows them alike; medians of the per-step times."""
    tf = _tf.tf
    spec = MODELS[name]
    _tf.configure(2, 0)
    x, y = _data(spec)
    n, steps = spec["n"], (spec["n"] // BATCH) * EPOCHS
    sigma = accounting.calibrate_noise(4.0, BATCH / n, steps, DELTA, "rdp", "poisson")
    calls = steps * rounds
    built = {}
    for variant in VARIANTS:
        net = _net(spec)
        observer = MechanismObserver()
        # "both" as a training has them: the observer's two monitors write one block
        monitor = (observer.noise_monitor(net, steps=calls, seed=1, canaries=0) if variant == "both"
                   else monitor_for(net, steps=calls, seed=1) if variant == "noise" else None)
        step, _, _ = build_train_step(
            net, mechanism="dpsgd", optimizer="sgd", learning_rate=LR, momentum=MOMENTUM, clip_norm=1.0,
            noise_multiplier=sigma, expected_batch_size=BATCH, implementation=spec["implementation"],
            noise_monitor=monitor, weight_monitor=observer.weight_monitor if variant in ("weights", "both") else None)
        step(tf.constant(x[:BATCH]), tf.constant(y[:BATCH]))  # trace outside the timing
        if monitor is not None:
            monitor.reset()
        if observer.weights is not None:
            observer.weights.reset()
        built[variant] = (step, monitor, observer.weights)
    rng = np.random.default_rng(2)
    times = {v: np.zeros(calls) for v in VARIANTS}
    for i in range(calls):
        idx = np.flatnonzero(rng.random(n) < BATCH / n)
        xb, yb = tf.constant(x[idx]), tf.constant(y[idx])
        for variant in (VARIANTS if i % 2 == 0 else VARIANTS[::-1]):
            start = time.perf_counter()
            built[variant][0](xb, yb)
            times[variant][i] = time.perf_counter() - start
    base = np.median(times["none"])
    print(f"{name}: compiled step, {calls} calls of each variant interleaved (B={BATCH} of {n}; the monitors fold "
          "every block): median per step " + ", ".join(
              f"{v} {np.median(times[v]) * 1e3:.3f} ms ({np.median(times[v]) / base:.3f})" for v in VARIANTS))
    _, monitor, weights = built["both"]
    start = time.perf_counter()
    stats = monitor.statistics()
    noise_certificate.certify(stats["variables"], stats["samples"], stats["sample_columns"], noise_multiplier=sigma,
                              clip_norm=1.0)
    middle = time.perf_counter()
    record = weights.finish()
    print(f"  after {calls} steps: noise certificate {middle - start:.3f} s, weight certificate "
          f"{time.perf_counter() - middle:.3f} s; largest deviation {record['largest_deviation']:.3g} rounding units "
          f"({record['largest_deviation_variable']}), passed {record['passed']}")


class _NoiseOnly(MechanismObserver):
    """The checks of issue 32 alone (noise monitor, sampler ledger): no weight monitor."""

    check_weights = False


def train_model_overhead(name: str, rounds: int) -> None:
    from dpaudit.training.train import train_model

    spec = MODELS[name]
    x, y = _data(spec, seed=1)
    n = spec["n"]
    split = np.array(["train"] * n + ["test"] * 300)
    frame = pd.DataFrame({"example_id": np.arange(len(y)), "split": split, "label": y, "x": list(x)})
    params = {**spec["params"], "mechanism": "dpsgd", "epochs": EPOCHS, "batch_size": BATCH, "clip_norm": 1.0,
              "learning_rate": LR, "momentum": MOMENTUM, "optimizer": "sgd", "target_epsilon": 4.0, "delta": DELTA,
              "seed": 0, "n_classes": spec["classes"]}
    splits = {"members": "train", "nonmembers": "holdout", "utility": "test"}
    observers = {"none": lambda: None, "issue 32": _NoiseOnly, "all": MechanismObserver}
    loops = {k: [] for k in observers}
    steady = {k: [] for k in observers}  # epochs 2.. (the first traces the step)
    checks = []
    log = logging.getLogger("bench")
    order = list(observers)
    for r in range(rounds):
        for kind in (order if r % 2 == 0 else order[::-1]):
            accounting_check.clear_cache()  # every round pays the accounting recomputation, as a job's first run
            info = train_model(frame, splits, params, "/tmp/bench_noise.keras", threads=2, log=log,
                               observer=observers[kind]())
            loops[kind].append(info["train_seconds"])
            steady[kind].append(sum(h["seconds"] for h in info["history"][1:]))
            if kind == "all":
                checks.append(info["mechanism_check_seconds"])
                assert info["noise_check"]["passed"], info["noise_check"]["failures"]
    warm = []  # a further run with the same σ, q, T, δ in the process (a batch job's other seeds)
    for _ in range(max(1, rounds // 3)):
        warm.append(train_model(frame, splits, params, "/tmp/bench_noise.keras", threads=2, log=log,
                                observer=MechanismObserver())["mechanism_check_seconds"])
    base, base_steady = np.median(loops["none"]), np.median(steady["none"])
    print(f"{name}: train_model's released loop, {rounds} alternated rounds, medians; train_seconds (tracing "
          "included): " + ", ".join(f"{k} {np.median(v):.3f} s ({np.median(v) / base:.3f})" for k, v in loops.items())
          + f"; epochs 2-{EPOCHS}: " + ", ".join(f"{k} {np.median(v):.3f} s ({np.median(v) / base_steady:.3f})"
                                                 for k, v in steady.items())
          + f"; all checks after training {np.median(checks):.3f} s ((loop + checks) / loop "
          f"{(np.median(loops['all']) + np.median(checks)) / base:.3f}); with the accounting recomputation "
          f"remembered from a run of the same inputs {np.median(warm):.3f} s "
          f"({(np.median(loops['all']) + np.median(warm)) / base:.3f})")


def validity(seeds: int) -> None:
    """The unit test's validity run (tests/unit/test_weight_certificate.py) with ``seeds`` seeds."""
    from tests.unit.test_weight_certificate import validity_run

    runs, flags = validity_run(seeds)
    print(f"validity: {runs} correct trainings (5 paths × 3 optimizers × 2 ε × {seeds} seeds): {len(flags)} flagged "
          f"(expected {runs * noise_certificate.FAMILY_ALPHA:.2f} at family-wise {noise_certificate.FAMILY_ALPHA:g})")
    for flag in flags:
        print("  ", flag)


def _poisson_rows(n: int, q: float, rng: np.random.Generator) -> np.ndarray:
    """One Poisson batch by geometric skips (the law of ``sampling.poisson_batches``, without n uniforms)."""
    gaps = rng.geometric(q, size=int(n * q + 10 * math.sqrt(n * q) + 10))
    rows = np.cumsum(gaps) - 1
    while rows[-1] < n:  # rare: draw on
        rows = np.concatenate([rows, rows[-1] + np.cumsum(rng.geometric(q, size=rows.size))])
    return rows[rows < n]


def row_ledger_cost(n: int, batch: int, epochs: int, label: str) -> None:
    """The row ledger's memory and the sampler check's time at one sampler configuration (issue 45)."""
    import tracemalloc

    from dpaudit.audit.mechanism_checks import SamplerLedger
    from dpaudit.dp import sampler_check

    q, spe = batch / n, n // batch
    steps = spe * epochs
    rng = np.random.default_rng(0)
    ledger = SamplerLedger("poisson", n, q, batch, spe)
    recording = 0.0
    for _ in range(steps):
        rows = _poisson_rows(n, q, rng)
        start = time.perf_counter()
        ledger.drew(rows)
        recording += time.perf_counter() - start
    nbytes = ledger.ledger_bytes()
    drawn = int(ledger.batch_sizes.sum())
    budget = min(n * steps, 50 * 2**20)
    tracemalloc.start()
    start = time.perf_counter()
    check = sampler_check.check_sampler(ledger.groups(), rate=q, batch_size=batch)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(f"row ledger, {label}: N = {n:,}, B = {batch}, {steps:,} steps, {drawn:,} rows drawn: {nbytes:,} bytes "
          f"({nbytes / drawn:.2f} bytes a row drawn, {nbytes / (n * steps):.5f} bytes per row and step; budget "
          f"min(1 byte per row and step = {n * steps:,}, 50 MiB) = {budget:,} bytes, used {nbytes / budget:.1%}); "
          f"recording {recording:.2f} s ({recording / steps * 1e6:.1f} µs a step); sampler check {seconds:.2f} s, "
          f"peak {peak / 2**20:.1f} MiB while checking; passed {check['passed']} ({check['tests']} tests)")


def accounting_cost() -> None:
    n, steps = 1000, (1000 // BATCH) * EPOCHS
    q = BATCH / n
    for eps in (1.0, 4.0, 16.0):
        sigma = accounting.calibrate_noise(eps, q, steps, DELTA, "rdp", "poisson")
        published = accounting.dpsgd_epsilon(sigma, q, steps, DELTA, "rdp", "poisson")
        loop = {"sampling": "poisson", "population": n, "rate": q, "rows_drawn": int(q * n * steps),
                "steps_executed": steps, "steps_per_epoch": n // BATCH, "batch_size": BATCH}
        accounting_check.clear_cache()  # the trainings above recomputed ε = 4's
        start = time.perf_counter()
        check = accounting_check.reproduce_accounting(
            published_epsilon=published["epsilon"], delta=DELTA, accountant_inputs=published, loop=loop,
            noise_multiplier_drawn=sigma, noise_check=None, accountant="rdp")
        seconds = time.perf_counter() - start
        print(f"accounting check at ε = {eps:g} (σ = {sigma:.3f}): {seconds:.4f} s; recomputed RDP ε "
              f"{check['recomputed_epsilon']:.4f}, "
              f"published {published['epsilon']:.4f}, reproduced {check['reproduced']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--validity", type=int, default=0, help="seeds of the validity run (0: skip)")
    parser.add_argument("--skip-accounting", action="store_true")
    parser.add_argument("--rows", action="store_true", help="the row ledger's memory and the sampler check's time")
    args = parser.parse_args()
    for name in args.models:
        loop_overhead(name, args.rounds)
        train_model_overhead(name, args.rounds)
    if not args.skip_accounting:
        accounting_cost()
    if args.validity:
        validity(args.validity)
    if args.rows:
        row_ledger_cost(MODELS["mlp"]["n"], BATCH, EPOCHS, "the default run's MLP")
        # Purchase-100 at the paper's setting (config/paper/epsilon_star.yaml): 197,324 records, 67 % members
        row_ledger_cost(132_207, 256, 50, "Purchase-100 paper config")


if __name__ == "__main__":
    main()
