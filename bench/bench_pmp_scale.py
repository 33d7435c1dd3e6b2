"""Recipe A of the pmp family at Adult's size: time and peak memory of ``recipe_a_from_factors``.

config/own_table.yaml trains an MLP with P = 7,042 parameters (Dense layers (107, 64) and
(64, 2): factors of width Σ(inputs + units) = 237) and builds a parent set X of 2n = 32,560
points. The factors here come from a random MLP of that shape on random binary inputs (real
gradient factors: ReLU activations, softmax residuals), clipped at C = 1 with z = 1.1.

    python bench/bench_pmp_scale.py                      # 2n = 32,560, the default threshold
    python bench/bench_pmp_scale.py --n-parent 4096 --exact-max 4096   # the exact path
    python bench/bench_pmp_scale.py --n-parent 4096 --exact-max 0 --compare   # estimate vs exact

Prints seconds and the process's peak RSS (``resource.getrusage``; run one case per process,
the peak never goes down). Issue targets: < 2 GB and < ~60 s per run at 2n = 32,560, one core.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

from dpaudit.extract.pmp_pairs import factor_norms_sq
from dpaudit.metrics.pmp.dpsgd import EXACT_MAX_PARENT, recipe_a_from_factors

LAYERS = [(107, 64), (64, 2)]


def adult_like_factors(n_parent: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(inputs, deltas, grad_norm) of a random (107, 64, 2) ReLU MLP's per-example gradients."""
    rng = np.random.default_rng(seed)
    x = (rng.random((n_parent, 107)) < 0.1).astype(np.float64)
    w1, w2 = rng.standard_normal((107, 64)) * 0.3, rng.standard_normal((64, 2)) * 0.3
    pre = x @ w1 + 0.1
    h = np.maximum(pre, 0.0)
    logits = h @ w2
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    y = rng.integers(0, 2, n_parent)
    d2 = p.copy()
    d2[np.arange(n_parent), y] -= 1.0
    d1 = (d2 @ w2.T) * (pre > 0)
    inputs = np.concatenate([x, h], axis=1).astype(np.float32)
    deltas = np.concatenate([d1, d2], axis=1).astype(np.float32)
    norms = np.sqrt(factor_norms_sq(inputs, deltas, LAYERS))
    return inputs, deltas, norms


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-parent", type=int, default=32_560)
    parser.add_argument("--exact-max", type=int, default=EXACT_MAX_PARENT)
    parser.add_argument("--partners", type=int, default=256)
    parser.add_argument("--compare", action="store_true", help="also the exact result, and the estimate's error")
    args = parser.parse_args()
    inputs, deltas, norms = adult_like_factors(args.n_parent)
    kw = dict(noise_multiplier=1.1, clip=1.0, delta=1.0 / args.n_parent, partners=args.partners, seed=0)
    print(f"factors ready: peak RSS {peak_mb():.0f} MB")
    start = time.perf_counter()
    res = recipe_a_from_factors(inputs, deltas, norms, LAYERS, exact_max=args.exact_max, **kw)
    seconds = time.perf_counter() - start
    print(f"pmp_recipe_a n_parent={args.n_parent} exact_max={args.exact_max} sampled={res['partners_sampled']} "
          f"n_partners={res['n_partners']} seconds={seconds:.1f} peak_rss_mb={peak_mb():.0f} "
          f"eps_pmp={res['eps_pmp']:.6g} eps_X={res['eps_X']:.6g} q50={np.quantile(res['eps_pmp_x'], 0.5):.6g}")
    if args.compare:
        start = time.perf_counter()
        exact = recipe_a_from_factors(inputs, deltas, norms, LAYERS, exact_max=args.n_parent, **kw)
        seconds = time.perf_counter() - start
        error = res["eps_pmp_x"] - exact["eps_pmp_x"]
        rel = error / np.maximum(exact["eps_pmp_x"], 1e-12)
        print(f"exact: seconds={seconds:.1f} peak_rss_mb={peak_mb():.0f} eps_pmp={exact['eps_pmp']:.6g} "
              f"eps_X={exact['eps_X']:.6g} q50={np.quantile(exact['eps_pmp_x'], 0.5):.6g}")
        print(f"estimate - exact per target: mean {error.mean():.3g}, sd {error.std():.3g}, "
              f"max |rel| {np.abs(rel).max():.3g}; eps_pmp rel error {res['eps_pmp'] / exact['eps_pmp'] - 1:.3g}; "
              f"eps_X equal to rounding: {np.isclose(res['eps_X'], exact['eps_X'], rtol=1e-12)}")


if __name__ == "__main__":
    main()
