"""Speed of issue 24's reference models and attacks (figures as ratios measured in one run).

1. K = 16 reference models of one recipe stacked on a model axis
   (``dpaudit.reference.pool_training``) against ONE ``train_model`` run of the same recipe,
   on random data of the default run's audit populations (config/config.yaml: |P| =
   members + non-members and n members of synthetic, breast_cancer and digits), baseline
   and DP-SGD (hidden 64, batch 64, 10 epochs). Times are
   training only (train.json's ``train_seconds`` for the single run; the stack's loop
   including its tf.function tracing), plus the stack's wall time with the noise
   calibration, each model's own accountant ε (its rate B/n_k on its ~|P|/2 rows,
   ``dpaudit.reference.accounting``) and logits on P. Target: ratio ≤ 3 (the
   single run takes ⌊n/B⌋ steps per epoch, each reference model ⌊n_k/B⌋).
   The same for the CNN of config/cnn.yaml (digits as 8×8 images, conv [8, 16], hidden 32;
   issue 33): conv layers are not stacked, so the K models train one after another in
   the pool's process (``_train_loop``, ``layerwise_clipping`` for DP-SGD); the ratio
   against one ``train_model`` run is then about K plus one tracing per model.
2. Scoring every attack of ``dpaudit.metrics.attacks`` on one target with K = 64
   reference models and |P| = 10⁴ (statistics excluded and then included). Target ≤ 2 s.
"""

from __future__ import annotations

import logging
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from dpaudit.metrics import attacks as A
from dpaudit.reference import pool_training as R
from dpaudit.training.train import train_model

LOG = logging.getLogger("bench_attacks")
# |P|, d, classes, members: the default run's (reference_pool.json's n_population and n_members)
SIZES = {"synthetic": (1500, 20, 2, 1000), "breast_cancer": (426, 30, 2, 284), "digits": (1348, 64, 10, 898)}


def _data(size, d, classes, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(size, d)).astype(np.float32)
    w = rng.normal(size=(d, classes))
    y = np.argmax(x @ w + rng.gumbel(size=(size, classes)), axis=1).astype(np.int64)
    return x, y


def bench_training() -> None:
    for name, (size, d, classes, n) in SIZES.items():
        x, y = _data(size, d, classes)
        members = np.zeros(size, bool)
        members[:n] = True
        frame = pd.DataFrame({"example_id": np.arange(size), "split": np.where(members, "members", "nonmembers"),
                              "label": y, "x": list(x)})
        frame = pd.concat([frame, frame.iloc[:32].assign(split="utility")], ignore_index=True)
        for mechanism in ("baseline", "dpsgd"):
            params = dict(mechanism=mechanism, epochs=10, batch_size=64, learning_rate=0.05, hidden_units=[64],
                          n_classes=classes)
            if mechanism == "dpsgd":
                params.update(clip_norm=1.0, target_epsilon=3.0, delta=1e-5)
            with tempfile.TemporaryDirectory() as tmp:
                info = train_model(frame[frame.split != "nonmembers"],
                                   {"members": "members", "nonmembers": "nonmembers", "utility": "utility"},
                                   params, Path(tmp) / "m.keras", threads=1, log=LOG)
            one = info["train_seconds"]
            t0 = time.perf_counter()
            pool = R.train_reference_models(x, y, params, n_members=n, count=16, seed=0, threads=1, log=LOG)
            wall = time.perf_counter() - t0
            alone = R.train_reference_models(x, y, params, n_members=n, inclusion=pool.inclusion[:1],
                                             seeds=pool.seeds[:1], threads=1, log=LOG)
            print(f"reference_models dataset={name}-like |P|={size} d={d} mechanism={mechanism} K=16 "
                  f"stack_train_seconds={pool.train_seconds:.2f} stack_wall_seconds={wall:.2f} "
                  f"one_train_model_train_seconds={one:.2f} ratio={pool.train_seconds / one:.2f} "
                  f"stack_of_one_seconds={alone.train_seconds:.2f} vectorized={pool.vectorized} "
                  f"target_steps={pool.target['steps']} median_reference_steps={int(np.median(pool.steps))} "
                  f"max_reference_epsilon={pool.epsilon.max():.3g} target_epsilon={pool.target['epsilon']:.3g}",
                  flush=True)


def bench_cnn_pool() -> None:
    """K = 16 reference CNNs (the loop path) against one ``train_model`` run of the same recipe."""
    size, d, classes, n = SIZES["digits"]
    x, y = _data(size, d, classes)
    frame = pd.DataFrame({"example_id": np.arange(size), "split": np.where(np.arange(size) < n, "members", "nonmembers"),
                          "label": y, "x": list(x)})
    frame = pd.concat([frame, frame.iloc[:32].assign(split="utility")], ignore_index=True)
    splits = {"members": "members", "nonmembers": "nonmembers", "utility": "utility"}
    for mechanism in ("baseline", "dpsgd"):
        params = dict(mechanism=mechanism, model="cnn", image_shape=[8, 8, 1], conv_filters=[8, 16], epochs=10,
                      batch_size=64, learning_rate=0.05, hidden_units=[32], n_classes=classes)
        if mechanism == "dpsgd":
            params.update(clip_norm=1.0, target_epsilon=3.0, delta=1e-5)
        with tempfile.TemporaryDirectory() as tmp:
            info = train_model(frame[frame.split != "nonmembers"], splits, params, Path(tmp) / "m.keras",
                               threads=1, log=LOG)
        one = info["train_seconds"]
        t0 = time.perf_counter()
        pool = R.train_reference_models(x, y, params, n_members=n, count=16, seed=0, threads=1, log=LOG)
        wall = time.perf_counter() - t0
        print(f"reference_models dataset=digits-like-8x8 model=cnn mechanism={mechanism} K=16 "
              f"loop_train_seconds={pool.train_seconds:.2f} loop_wall_seconds={wall:.2f} "
              f"one_train_model_train_seconds={one:.2f} ratio={pool.train_seconds / one:.2f} "
              f"vectorized={pool.vectorized} reason={pool.fallback_reason!r}", flush=True)


def bench_scoring(k: int = 64, size: int = 10_000) -> None:
    rng = np.random.default_rng(1)
    inc = rng.random((k + 1, size)) < 0.5
    difficulty = rng.normal(0, 2, size)
    phi = difficulty + rng.gamma(1.0, 1.0, size) * inc + rng.normal(size=(k + 1, size)) * 0.7
    member = inc[0]
    population = np.flatnonzero(~member)
    best = best_all = np.inf
    for _ in range(3):
        t0 = time.perf_counter()
        scores = A.run_attacks(phi[0], phi[1:], inc[1:], population=population)
        t1 = time.perf_counter()
        for name, s in scores.items():
            A.attack_statistics(s.scores, member, delta=1e-5, seed=0, attack=name, accountant_epsilon=np.inf)
        t2 = time.perf_counter()
        best, best_all = min(best, t1 - t0), min(best_all, t2 - t0)
    print(f"attack_scoring attacks={','.join(A.ATTACKS)} K={k} |P|={size} scoring_seconds={best:.3f} "
          f"with_statistics_seconds={best_all:.3f}", flush=True)


def main() -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    only = sys.argv[1:]
    if not only or "scoring" in only:
        bench_scoring()
    if not only or "training" in only:
        bench_training()
    if not only or "cnn" in only:
        bench_cnn_pool()


if __name__ == "__main__":
    main()
