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
    n: int, batch_size: int, epochs: int, rng: np.random.Generator, per_epoch: int | None = None
) -> Iterator[np.ndarray]:
    """Yield fixed-size batches of a fresh permutation per epoch; the last short batch is dropped.

    Dropping it keeps every batch size equal to ``batch_size``, the quantity the
    update divides by, and each example still appears at most once per epoch.
    ``per_epoch`` (default ⌊n/B⌋, at most that): the batches an epoch of the loop takes. An
    audit twin's included input canaries enlarge n but not the released run's steps per epoch,
    so each of the loop's epochs must be one permutation (issue 45: with ⌊n/B⌋ batches a
    permutation, the loop's epochs straddled two permutations and drew rows twice in an epoch).
    """
    if not 1 <= batch_size <= n:
        raise ValueError(f"batch_size must be in [1, n={n}], got {batch_size}")
    most = n // batch_size
    per_epoch = most if per_epoch is None else int(per_epoch)
    if not 1 <= per_epoch <= most:
        raise ValueError(f"per_epoch must be in [1, n // batch_size = {most}], got {per_epoch}")
    for _ in range(int(epochs)):
        order = rng.permutation(n)
        for b in range(per_epoch):
            yield order[b * batch_size : (b + 1) * batch_size]


SAMPLER_BUGS = ("shuffled", "truncated", "half_rows", "repeated_epochs")


def planted_batches(bug: str, n: int, q: float, steps: int, per_epoch: int,
                    rng: np.random.Generator) -> Iterator[np.ndarray]:
    """A sampler that departs from ``poisson_batches`` on purpose, for power tests only
    (``dpaudit.training.steps.MechanismPolicy.sampler_bug``; never a config value):

    * ``shuffled``: batches of Binomial(n, q) size taken in turn from a fresh permutation each
      epoch (each row at most once an epoch, as shuffling does), as published DP-SGD code
      that accounts shuffled batches as Poisson;
    * ``truncated``: Poisson batches cut to their first round(qn) rows (capped at the expected size);
    * ``half_rows``: the odd rows never drawn, the even ones at rate 2q (an index mapping that
      folds two rows onto one: the expected batch size is unchanged);
    * ``repeated_epochs``: the first epoch's Poisson batches again every epoch.
    """
    if bug not in SAMPLER_BUGS:
        raise ValueError(f"sampler bug must be one of {SAMPLER_BUGS}, got {bug!r}")
    per_epoch = max(1, int(per_epoch))
    first: list[np.ndarray] = []
    order, used = rng.permutation(n), 0
    for t in range(int(steps)):
        if bug == "shuffled":
            if t % per_epoch == 0:
                order, used = rng.permutation(n), 0
            size = int(rng.binomial(n, q))
            yield np.sort(order[used:used + size])
            used += size
        elif bug == "truncated":
            yield np.flatnonzero(rng.random(n) < q)[:round(q * n)]
        elif bug == "half_rows":
            yield 2 * np.flatnonzero(rng.random((n + 1) // 2) < min(1.0, 2.0 * q))
        elif t < per_epoch:
            first.append(np.flatnonzero(rng.random(n) < q))
            yield first[-1]
        else:
            yield first[t % per_epoch]


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
