"""Speed of the privacy-profile library (LeBlond et al. 2023). Prints figures; asserts nothing.

Targets (issue 9): exact retraining of all 32,561 row-removed neighbours of Adult with
6 features <= 5 min on 2 cores; typical profile for n = 32,561, K = 1000 and 25 values
of ε <= 60 s. Also: how both grow with n and K (synthetic unit-ball data, same d).
Both are O(n²d) / O(K n log n · n_ε): retraining does a few n × B matrix products per
chunk of B neighbours, the typical profile sorts a K × n loss matrix per ε.
"""

from __future__ import annotations

import time

import numpy as np

from dpaudit.profile import model, neighbours, profiles


def _data(n: int, d: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    x /= np.linalg.norm(x, axis=1).max()
    t = np.where(rng.random(n) < 0.24, 1.0, -1.0)
    return x, t


def retraining(n: int, d: int) -> float:
    x, t = _data(n, d)
    base = model.fit(x, t)
    start = time.perf_counter()
    neighbours.retrain_removed(x, t, base.weights, 1.0)
    return time.perf_counter() - start


def typical(n: int, draws: int, n_eps: int, d: int = 2) -> float:
    x, t = _data(n, d)
    base = model.fit(x, t)
    shifts, _ = neighbours.worst_case_shifts(base.weights, model.per_example(x, t, base.weights).gradients, 1.0)
    start = time.perf_counter()
    profiles.typical_profiles(shifts, np.logspace(-2, 4, n_eps), n=n, lam=1.0, draws=draws, seed=0)
    return time.perf_counter() - start


def main() -> None:
    print("exact retraining, d = 6 (target: n = 32,561 <= 300 s)")
    for n in (4_000, 8_000, 16_000, 32_561):
        print(f"  n = {n:>6}: {retraining(n, 6):8.2f} s")
    print("typical profile, d = 2, 25 ε (target: n = 32,561, K = 1000 <= 60 s)")
    for n, draws in ((8_000, 1000), (16_000, 1000), (32_561, 250), (32_561, 500), (32_561, 1000)):
        print(f"  n = {n:>6}, K = {draws:>4}: {typical(n, draws, 25):8.2f} s")


if __name__ == "__main__":
    main()
