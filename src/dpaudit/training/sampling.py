"""Batch samplers for DP-SGD (numpy only)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np


def poisson_batches(n: int, q: float, steps: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
    """Yield ``steps`` index arrays; each keeps every example independently with prob. q.

    This is the sampling the Poisson-subsampled Gaussian accountant assumes; batch
    sizes are Binomial(n, q) and may be 0.
    """
    if not 0.0 < q <= 1.0:
        raise ValueError(f"q must be in (0, 1], got {q}")
    for _ in range(int(steps)):
        yield np.flatnonzero(rng.random(n) < q)


def shuffle_batches(
    n: int, batch_size: int, epochs: int, rng: np.random.Generator
) -> Iterator[np.ndarray]:
    """Yield fixed-size batches of a fresh permutation per epoch; the last short batch is dropped.

    Dropping it keeps every batch size equal to ``batch_size``, the quantity the
    update divides by, and each example still appears at most once per epoch.
    """
    if not 1 <= batch_size <= n:
        raise ValueError(f"batch_size must be in [1, n={n}], got {batch_size}")
    per_epoch = n // batch_size
    for _ in range(int(epochs)):
        order = rng.permutation(n)
        for b in range(per_epoch):
            yield order[b * batch_size : (b + 1) * batch_size]


def steps_per_epoch(n: int, batch_size: int) -> int:
    """Steps that make one epoch in expectation (Poisson) or exactly (shuffle)."""
    return max(1, n // batch_size)


def batch_size_problem(batch_size: int, n_members: int, dataset: str, where: str) -> str | None:
    """The one message for a batch size above the members (parse time and training job)."""
    if int(batch_size) <= int(n_members):
        return None
    # q = B/n > 1 has no meaning, and training with n instead would differ silently
    # from the run's name and its recorded parameters.
    return (f"{where}: batch_size={int(batch_size)} exceeds the {int(n_members)} members (training examples) "
            f"of dataset {dataset}; write batch_size <= {int(n_members)}")
