"""Issue 32: the noise certificate's cost on the released training loop, and the accounting
check's cost per run. No assertions (noisy machines); figures for the closing note.

The default run's synthetic DP-SGD model (d = 20, hidden 64, 2 classes, B = 64 of n = 1,000
members, 150 steps of 10 epochs): the same loop with and without the noise monitor, each
step traced once, alternated over rounds in one process; the ratio is of the medians. The
accounting check (``dpaudit.dp.accounting_check.reproduce_accounting``: binomial test, the
PLD and RDP recomputations) at ε = 1, 4, 16 with the run's settings.

Issue 45: the row ledger's memory and the sampler check's time at the default run and at the
Purchase-100 paper configuration (132,207 members, B = 256, 50 epochs; the sampler mirrored in
numpy by geometric skips), and the observer's cost on train_model's loop.

    python bench/bench_noise_check.py [--rounds 7] [--only certificate|train_model|accounting|rows]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from dpaudit import _tf
from dpaudit.audit.mechanism_checks import monitor_for
from dpaudit.dp import accounting, accounting_check
from dpaudit.training.models import build_mlp, logits_model
from dpaudit.training.steps import build_train_step

N, D, HIDDEN, BATCH, STEPS = 1000, 20, 64, 64, 150
DELTA = 1e-4


def _loop(step, noise_step, x, y, batches) -> float:
    tf = _tf.tf
    start = time.perf_counter()
    for idx in batches:
        if idx.size == 0:
            noise_step()
        else:
            step(tf.constant(x[idx]), tf.constant(y[idx]))
    return time.perf_counter() - start


def certificate_overhead(rounds: int) -> None:
    tf = _tf.tf
    _tf.configure(2, 0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, D)).astype(np.float32)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int64)
    sigma = accounting.calibrate_noise(4.0, BATCH / N, STEPS, DELTA, "rdp", "poisson")
    steps = {}
    for monitored in (False, True):
        net = logits_model(build_mlp(D, {"hidden_units": [HIDDEN], "n_classes": 2, "activation": "relu",
                                         "dropout": 0.0}, seed=1))
        monitor = monitor_for(net, steps=STEPS, seed=1) if monitored else None
        step, noise_step, _ = build_train_step(net, mechanism="dpsgd", optimizer="sgd", learning_rate=0.1,
                                               clip_norm=1.0, noise_multiplier=sigma, expected_batch_size=BATCH,
                                               noise_monitor=monitor)
        step(tf.constant(x[:BATCH]), tf.constant(y[:BATCH]))  # trace outside the timing
        noise_step()
        steps[monitored] = (step, noise_step, monitor)
    times = {False: [], True: []}
    for r in range(rounds):
        batches = [np.flatnonzero(rng.random(N) < BATCH / N) for _ in range(STEPS)]
        for monitored in ((False, True) if r % 2 == 0 else (True, False)):
            step, noise_step, monitor = steps[monitored]
            if monitor is not None:
                monitor.reset()
            times[monitored].append(_loop(step, noise_step, x, y, batches))
    plain, checked = np.min(times[False]), np.min(times[True])
    print(f"released loop, {STEPS} steps, MLP {D}-{HIDDEN}-2, B={BATCH} of {N} ({rounds} alternated rounds):")
    print(f"  without monitor {plain:.3f} s, with monitor {checked:.3f} s (fastest of the rounds: the least disturbed): ratio {checked / plain:.3f}")
    # the statistics themselves, once after the loop
    start = time.perf_counter()
    stats = steps[True][2].statistics()
    from dpaudit.dp.noise_certificate import certify

    certify(stats["variables"], stats["samples"], stats["sample_columns"], noise_multiplier=sigma, clip_norm=1.0)
    print(f"  certificate after training: {time.perf_counter() - start:.3f} s")


def train_model_overhead(rounds: int) -> None:
    """The released loop as train_model runs it (train_seconds: tracing, sampler, epochs' utility
    passes) with the mechanism's observer (noise monitor, row ledger) and without one; then the
    checks after training (mechanism_check_seconds: certificate, accounting, sampler check)."""
    import logging

    import pandas as pd

    from dpaudit.audit.mechanism_checks import MechanismObserver
    from dpaudit.training.train import train_model

    rng = np.random.default_rng(1)
    n = N + 500
    x = rng.normal(size=(n, D)).astype(np.float32)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int64)
    split = np.array(["train"] * N + ["test"] * 500)
    frame = pd.DataFrame({"example_id": np.arange(n), "split": split, "label": y, "x": list(x)})
    params = {"mechanism": "dpsgd", "epochs": 10, "batch_size": BATCH, "hidden_units": [HIDDEN], "clip_norm": 1.0,
              "target_epsilon": 4.0, "delta": DELTA, "seed": 0}
    splits = {"members": "train", "nonmembers": "holdout", "utility": "test"}
    times = {False: [], True: []}
    checks, sampler = [], []
    log = logging.getLogger("bench")
    for r in range(rounds):
        for observed in ((False, True) if r % 2 == 0 else (True, False)):
            info = train_model(frame, splits, params, "/tmp/bench_noise.keras", threads=2, log=log,
                               observer=MechanismObserver() if observed else None)
            times[observed].append(info["train_seconds"])
            if observed:
                checks.append(info["mechanism_check_seconds"])
                sampler.append(info["sampler_check"]["seconds"])
    plain, watched = np.min(times[False]), np.min(times[True])
    print(f"train_model's loop (train_seconds, tracing included), {rounds} alternated rounds: without observer "
          f"{plain:.3f} s, with {watched:.3f} s (fastest of the rounds: the least disturbed): ratio "
          f"{watched / plain:.3f}; mechanism checks after training {np.median(checks):.3f} s (median), of which "
          f"the sampler check {np.median(sampler) * 1e3:.1f} ms: (loop + checks) / loop = "
          f"{(watched + np.median(checks)) / plain:.3f}")


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
    q = BATCH / N
    for eps in (1.0, 4.0, 16.0):
        sigma = accounting.calibrate_noise(eps, q, STEPS, DELTA, "rdp", "poisson")
        published = accounting.dpsgd_epsilon(sigma, q, STEPS, DELTA, "rdp", "poisson")
        loop = {"sampling": "poisson", "population": N, "rate": q, "rows_drawn": int(q * N * STEPS),
                "steps_executed": STEPS, "steps_per_epoch": N // BATCH, "batch_size": BATCH}
        start = time.perf_counter()
        check = accounting_check.reproduce_accounting(
            published_epsilon=published["epsilon"], delta=DELTA, accountant_inputs=published, loop=loop,
            noise_multiplier_drawn=sigma, noise_check=None, accountant="rdp")
        seconds = time.perf_counter() - start
        print(f"accounting check at ε = {eps:g} (σ = {sigma:.3f}): {seconds:.3f} s; PLD ε "
              f"{check['recomputed_epsilon']:.4f}, RDP ε {check['recomputed_epsilon_same_accountant']:.4f}, "
              f"published {published['epsilon']:.4f}, reproduced {check['reproduced']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--only", choices=("certificate", "train_model", "accounting", "rows"))
    args = parser.parse_args()
    if args.only in (None, "certificate"):
        certificate_overhead(args.rounds)
    if args.only in (None, "train_model"):
        train_model_overhead(args.rounds)
    if args.only in (None, "accounting"):
        accounting_cost()
    if args.only in (None, "rows"):
        row_ledger_cost(N, BATCH, 10, "the default run's MLP")
        # Purchase-100 at the paper's setting (config/paper/epsilon_star.yaml): 197,324 records, 67 % members
        row_ledger_cost(132_207, 256, 50, "Purchase-100 paper config")


if __name__ == "__main__":
    main()
