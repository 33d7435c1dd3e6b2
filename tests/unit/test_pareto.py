"""Pareto frontier of strategies (Negoescu et al. 2023, Sec. 4: the convex hull of strategies that improves privacy or utility).

x = eps* (lower is better), y = utility (higher is better). Frontier = upper convex
hull of the non-dominated points, from the lowest-x point to the highest-y point;
collinear points on a hull edge count as on the frontier. Hand-made point sets with
the answer worked out in the comments, plus a brute-force oracle on random sets.
"""

from __future__ import annotations

import itertools

import numpy as np

from dpaudit.metrics.pareto import nondominated_mask, pareto_frontier, upper_hull


def test_hand_set_with_a_point_below_the_hull():
    # A(0, .5) B(1, .8) C(2, .82) D(3, .9) E(1.5, .6) F(2, .7)
    # E is dominated by B (1 <= 1.5, .8 >= .6); F by C. Nondominated: A, B, C, D.
    # Chord B->D at x = 2 is .85 > .82, so C is not on the convex frontier.
    x = [0.0, 1.0, 2.0, 3.0, 1.5, 2.0]
    y = [0.5, 0.8, 0.82, 0.9, 0.6, 0.7]
    front = pareto_frontier(x, y)
    assert front.nondominated.tolist() == [True, True, True, True, False, False]
    assert front.on_frontier.tolist() == [True, True, False, True, False, False]
    assert front.frontier_index.tolist() == [0, 1, 3]
    assert front.step_x.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert front.step_y.tolist() == [0.5, 0.8, 0.82, 0.9]


def test_collinear_point_is_on_the_frontier():
    # C(2, .85) lies exactly on the chord B(1, .8) -> D(3, .9) (slope .05 both sides).
    # Values chosen as dyadic fractions so the collinearity is exact in floating point.
    x = [0.0, 1.0, 2.0, 3.0]
    y = [0.5, 0.75, 0.875, 1.0]
    front = pareto_frontier(x, y)
    assert front.on_frontier.tolist() == [True, True, True, True]


def test_ties_duplicates_nan_and_trivial_sets():
    # Same x: the higher y dominates. Exact duplicates do not dominate each other and
    # both sit on the frontier. NaN points are never on it.
    x = [0.0, 0.0, 1.0, 1.0, np.nan]
    y = [0.5, 0.6, 0.9, 0.9, 1.0]
    front = pareto_frontier(x, y)
    assert front.nondominated.tolist() == [False, True, True, True, False]
    assert front.on_frontier.tolist() == [False, True, True, True, False]
    assert front.frontier_index.tolist() == [1, 2, 3]
    single = pareto_frontier([2.0], [0.3])
    assert single.on_frontier.tolist() == [True]
    # lower x with higher y dominates everything else: a one-point frontier
    chain = pareto_frontier([0.0, 1.0, 2.0], [1.0, 0.5, 0.2])
    assert chain.on_frontier.tolist() == [True, False, False]
    empty = pareto_frontier([], [])
    assert empty.on_frontier.size == 0 and empty.frontier_index.size == 0


def brute_force(x, y):
    """O(n^3) oracle: non-dominated by definition; on the upper hull iff no chord between two
    non-dominated points passes strictly above it (the extreme points are always on it)."""
    n = len(x)
    nd = [
        not any(
            x[j] <= x[i] and y[j] >= y[i] and (x[j] < x[i] or y[j] > y[i])
            for j in range(n)
            if j != i
        )
        for i in range(n)
    ]
    idx = [i for i in range(n) if nd[i]]
    on = [False] * n
    for i in idx:
        above = False
        for a, b in itertools.combinations(idx, 2):
            lo, hi = (a, b) if x[a] < x[b] else (b, a)
            if x[lo] < x[i] < x[hi]:
                chord = y[lo] + (y[hi] - y[lo]) * (x[i] - x[lo]) / (x[hi] - x[lo])
                if chord > y[i] + 1e-12:
                    above = True
                    break
        on[i] = not above
    return nd, on


def test_random_sets_against_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(60):
        n = int(rng.integers(1, 25))
        # a mixture of continuous points and a coarse lattice (ties, duplicates)
        if rng.random() < 0.5:
            x, y = rng.uniform(0, 8, n), rng.uniform(0, 1, n)
        else:
            x, y = rng.integers(0, 5, n).astype(float), rng.integers(0, 5, n) / 4
        nd, on = brute_force(x.tolist(), y.tolist())
        front = pareto_frontier(x, y)
        assert front.nondominated.tolist() == nd
        assert nondominated_mask(x, y).tolist() == nd
        # the lattice can put collinear points exactly on an edge; the oracle's 1e-12 slack
        # agrees with the exact test there because lattice chords are exact binary fractions
        assert front.on_frontier.tolist() == on


def test_upper_hull_of_a_parabola_keeps_every_point():
    # y = -(x - 2)^2 is concave: every sample is an upper-hull vertex (left to right).
    x = np.array([3.0, 0.0, 4.0, 1.0, 2.0])
    y = -((x - 2.0) ** 2)
    assert upper_hull(x, y).tolist() == [1, 3, 4, 0, 2]
