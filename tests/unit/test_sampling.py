"""Batch samplers."""

import numpy as np

from dpaudit.training.sampling import poisson_batches, shuffle_batches


def test_poisson_batch_size_moments():
    n, q, steps = 5000, 0.02, 4000
    sizes = np.array([len(b) for b in poisson_batches(n, q, steps, np.random.default_rng(0))])
    mean, var = n * q, n * q * (1 - q)  # Binomial(n, q)
    # Mean: standard error sqrt(var/steps) ≈ 0.156; allow 5 SE.
    assert abs(sizes.mean() - mean) < 5 * np.sqrt(var / steps)
    # Variance: SE of a sample variance ≈ var·sqrt(2/(steps−1)) ≈ 2.2; allow 5 SE.
    assert abs(sizes.var(ddof=1) - var) < 5 * var * np.sqrt(2 / (steps - 1))


def test_poisson_inclusion_is_independent_per_example():
    n, q, steps = 200, 0.1, 5000
    counts = np.zeros(n)
    for b in poisson_batches(n, q, steps, np.random.default_rng(1)):
        assert np.all(np.diff(b) > 0)  # indices unique and sorted
        counts[b] += 1
    # Each example's count is Binomial(steps, q): mean 500, sd ≈ 21.2; 6 sd bound
    # over 200 examples (family-wise false alarm < 1e-6).
    assert np.all(np.abs(counts - steps * q) < 6 * np.sqrt(steps * q * (1 - q)))


def test_poisson_is_seeded():
    a = list(poisson_batches(100, 0.3, 5, np.random.default_rng(7)))
    b = list(poisson_batches(100, 0.3, 5, np.random.default_rng(7)))
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def test_shuffle_each_example_once_per_epoch():
    batches = list(shuffle_batches(103, 10, 2, np.random.default_rng(0)))
    assert len(batches) == 20 and all(len(b) == 10 for b in batches)
    for epoch in (batches[:10], batches[10:]):
        flat = np.concatenate(epoch)
        assert len(np.unique(flat)) == 100


def test_shuffle_takes_the_loops_steps_from_each_permutation():
    # an audit twin's input canaries enlarge n but not the steps an epoch: each epoch is one permutation
    batches = list(shuffle_batches(230, 20, 3, np.random.default_rng(0), per_epoch=10))
    assert len(batches) == 30
    for e in range(3):
        flat = np.concatenate(batches[10 * e:10 * (e + 1)])
        assert len(np.unique(flat)) == flat.size == 200
    import pytest

    with pytest.raises(ValueError, match="per_epoch must be in"):
        next(shuffle_batches(230, 20, 3, np.random.default_rng(0), per_epoch=12))
