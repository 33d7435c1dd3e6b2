"""ε(X)'s largest distance between clipped gradients above the exact path, certified (issue 37).

``largest_clipped_distance`` returns the value, how it was found (``method``) and whether it is
the maximum over all pairs (``exact``) or an upper bound on it:

* ``all_pairs`` (2n ≤ ``exact_max``): every pair, row blocks of the clipped Gram
  (``pmp_pairs.max_clipped_distance``). Exact.
* ``ceiling``: a pair found within a relative 1e-9 of the ceiling r₁ + r₂ (the two largest
  clipped norms, ≤ 2C) that no pair can pass: that pair's distance, exact to 1e-9.
* ``branch_and_bound``: a certificate that no pair beats the best one found. Exact.
* ``branch_and_bound_upper_bound``: the next cluster pair's block of pairs would have taken the
  pairs evaluated past the budget, so the search stopped before it (the pairs evaluated are then
  at most the budget, often somewhat below it: ``pairs_evaluated``, ``pair_budget`` and
  ``next_block`` say by how much, issue 47); the value is an upper bound on the maximum (never
  below it): the next cluster pair's bound, at most the ceiling r₁ + r₂.

The search. c_i is the clipped gradient (Dense-layer factors, ``pmp_pairs``), r_i = ‖c_i‖.
(1) A basis: the span of m sampled rows, orthonormalised through their Gram matrix K = V Λ Vᵀ
(u_k = Σ_s c_s V_sk/√λ_k, the ``dims`` largest λ ≥ 1e-6 λ_max): p_i = (⟨u_k, c_i⟩)_k from an
n × m Gram block and ρ_i = √(r_i² − ‖p_i‖²) what lies outside it. Then
‖c_i − c_j‖² = ‖p_i − p_j‖² + ‖c_i^⊥ − c_j^⊥‖² ≤ ‖p_i − p_j‖² + (ρ_i + ρ_j)².
(2) A lower bound L: exact distances from the extreme points of every basis direction (and the
largest norm) to all points, then from each one's farthest point (a double sweep).
(3) Clusters of the p_i (a few Lloyd steps; any partition is correct): with centre μ, radius R
and largest ρ per cluster, no pair of clusters c, d holds a pair farther than
√((‖μ_c − μ_d‖ + R_c + R_d)² + (ρ_c + ρ_d)²). Cluster pairs go in decreasing bound; within a
pair only the points whose own bound against the other cluster beats L are evaluated (exact
clipped Gram block, float64). The search stops when the next bound is ≤ L (certificate) or when
``pair_budget`` evaluated pairs are spent (the next bound is then the stated upper bound).

Rounding: the bounds carry slack for the basis' orthonormality (η = 1e-7·max r on each p, ρ
widened to match), so they hold for the computed p; the evaluated distances are the exact path's
formula, so ``exact`` values equal the all-pairs pass up to its own rounding (a few ulps).
Cost: n·m·W for the basis, n·(dims + 1)·W·2 for the sweeps, then the evaluated pairs; on
gradients, whose far pairs lie along few directions, far fewer than n²/2
(``bench/bench_scale.py`` measures it). ``pair_budget`` (default max(2,048·n, 2²⁹): every pair
up to 2n ≈ 32,768) keeps the worst case linear in n, at the price of an upper bound. That worst
case is common: gradients whose kernel parts a ⊗ δ spread over many directions (dense inputs)
leave ρ at 0.5–0.8 of r even with 256 basis directions (MLP of Adult's shape on random
inputs), so the bounds prune little there, and above the budget the row says "upper bound".
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from dpaudit.progress import Progress

__all__ = ["CEILING_TOLERANCE", "largest_clipped_distance"]

CEILING_TOLERANCE = 1e-9
BASIS_ROWS = 256
BASIS_DIMS = 24
CLUSTER_ROWS = 512  # points per cluster, about
PAIR_BUDGET_PER_ROW = 2048
PAIR_BUDGET_FLOOR = 1 << 29  # all pairs up to 2n ≈ 32,768 (Adult's parent set: ~10 s), whatever the data


def _gram(views, rows_a, rows_b) -> np.ndarray:
    """⟨c_i, c_j⟩ for i in rows_a, j in rows_b (float64)."""
    out = None
    for a, d in views:
        term = a[rows_a] @ a[rows_b].T
        term += 1.0
        term *= d[rows_a] @ d[rows_b].T
        out = term if out is None else out + term
    return out


def _squared(views, sq, rows_a, rows_b) -> np.ndarray:
    """Squared distances (the exact path's formula: ‖c_i‖² + ‖c_j‖² − 2⟨c_i, c_j⟩, at least 0)."""
    d2 = _gram(views, rows_a, rows_b)
    d2 *= -2.0
    d2 += sq[rows_a][:, None]
    d2 += sq[rows_b][None, :]
    return np.maximum(d2, 0.0, out=d2)


def largest_clipped_distance(inputs: np.ndarray, deltas: np.ndarray, grad_norm: np.ndarray,
                             layers: Sequence[Sequence[int]], clip: float, *, exact_max: int = 4096,
                             pair_budget: int | None = None, seed: int = 0, log=None) -> dict:
    """max_ij ‖clip_C(g_i) − clip_C(g_j)‖ with ``method``, ``exact``, ``pairs_evaluated`` and, past
    the exact path, ``pair_budget`` (and, when the budget stopped the search, ``next_block``: the
    pairs of the block it did not evaluate) (module docstring). ``log``: where the search's progress
    lines go (``dpaudit.progress``, pairs evaluated of the budget)."""
    from dpaudit.extract.pmp_pairs import clipped_factor_views, max_clipped_distance

    n = len(grad_norm)
    if n <= int(exact_max):
        value = max_clipped_distance(inputs, deltas, grad_norm, layers, clip)
        return {"value": value, "method": "all_pairs", "exact": True, "pairs_evaluated": n * (n - 1) // 2}
    budget = max(PAIR_BUDGET_PER_ROW * n, PAIR_BUDGET_FLOOR) if pair_budget is None else int(pair_budget)
    views, sq = clipped_factor_views(inputs, deltas, grad_norm, layers, clip)
    r = np.sqrt(sq)
    rng = np.random.default_rng(seed)
    top2 = np.sort(r)[-2:]
    ceiling = float(top2.sum())
    # (1) the basis
    sample = np.sort(rng.choice(n, size=min(BASIS_ROWS, n), replace=False))
    lam, vec = np.linalg.eigh(_gram(views, sample, sample))
    keep = np.flatnonzero(lam >= 1e-6 * max(lam[-1], 0.0))[::-1][:BASIS_DIMS] if lam[-1] > 0 else np.array([], int)
    coords = vec[:, keep] / np.sqrt(lam[keep])
    p = np.empty((n, keep.size))
    for start in range(0, n, 4096):
        rows = np.arange(start, min(start + 4096, n))
        p[rows] = _gram(views, rows, sample) @ coords
    eta = 1e-7 * float(r.max())
    inside = np.maximum(np.sqrt(np.einsum("ij,ij->i", p, p)) - eta, 0.0)
    rho = np.sqrt(np.maximum(sq - inside**2, 0.0))
    # (2) the lower bound: extremes of each direction and of the norm, then their farthest points
    ends = np.unique(np.concatenate([p.argmax(axis=0), p.argmin(axis=0), [int(np.argmax(r))]]))
    best2 = -1.0
    evaluated = 0
    for sweep in range(2):
        d2 = _squared(views, sq, ends, np.arange(n))
        evaluated += d2.size
        d2[np.arange(ends.size), ends] = -1.0
        far = d2.argmax(axis=1)
        k = int(np.argmax(d2[np.arange(ends.size), far]))
        if d2[k, far[k]] > best2:
            best2 = float(d2[k, far[k]])
        ends = np.setdiff1d(np.unique(far), ends) if sweep == 0 else ends
        if ends.size == 0:
            break
    if math.sqrt(best2) >= ceiling * (1.0 - CEILING_TOLERANCE):
        return {"value": math.sqrt(best2), "method": "ceiling", "exact": True, "pairs_evaluated": evaluated,
                "pair_budget": budget}
    # (3) clusters and the branch and bound
    n_clusters = max(1, n // CLUSTER_ROWS)
    centres = p[rng.choice(n, size=n_clusters, replace=False)]
    for _ in range(4):
        label = _nearest(p, centres)
        counts = np.bincount(label, minlength=n_clusters)
        sums = np.stack([np.bincount(label, weights=p[:, j], minlength=n_clusters) for j in range(p.shape[1])],
                        axis=1) if p.shape[1] else np.zeros_like(centres)
        centres = np.where(counts[:, None] > 0, sums / np.maximum(counts, 1)[:, None], centres)
    label = _nearest(p, centres)
    order = np.argsort(label, kind="stable")
    bounds_at = np.searchsorted(label[order], np.arange(n_clusters + 1))
    members = [order[bounds_at[c]:bounds_at[c + 1]] for c in range(n_clusters)]
    live = [c for c in range(n_clusters) if members[c].size]
    radius = np.zeros(n_clusters)
    rho_max = np.zeros(n_clusters)
    for c in live:
        radius[c] = np.sqrt(((p[members[c]] - centres[c]) ** 2).sum(axis=1)).max()
        rho_max[c] = rho[members[c]].max()
    live = np.array(live)
    gap = np.sqrt(((centres[live][:, None, :] - centres[live][None, :, :]) ** 2).sum(axis=2))
    bound = (gap + radius[live][:, None] + radius[live][None, :] + 2 * eta) ** 2 + \
        (rho_max[live][:, None] + rho_max[live][None, :]) ** 2
    bound *= 1.0 + 1e-9
    iu = np.triu_indices(live.size)
    pairs = np.argsort(-bound[iu], kind="stable")
    with Progress("largest clipped distance (pairs of the budget)", total=budget, unit="pairs",
                  log=log) as progress:
        for idx in pairs:
            c, d = live[iu[0][idx]], live[iu[1][idx]]
            b = bound[iu[0][idx], iu[1][idx]]
            if b <= best2:
                return {"value": math.sqrt(best2), "method": "branch_and_bound", "exact": True,
                        "pairs_evaluated": evaluated, "pair_budget": budget}
            rows_c = _worth(p, rho, members[c], centres[d], radius[d], rho_max[d], eta, best2)
            rows_d = _worth(p, rho, members[d], centres[c], radius[c], rho_max[c], eta, best2)
            if rows_c.size == 0 or rows_d.size == 0:
                continue
            if evaluated + rows_c.size * rows_d.size > budget:
                value = min(ceiling, math.sqrt(max(best2, float(b))))  # no pair passes r₁ + r₂ either
                return {"value": value, "method": "branch_and_bound_upper_bound", "exact": False,
                        "pairs_evaluated": evaluated, "pair_budget": budget,
                        "next_block": int(rows_c.size * rows_d.size)}
            best2 = max(best2, _largest_squared(views, sq, rows_c, rows_d))
            evaluated += rows_c.size * rows_d.size
            progress.advance(rows_c.size * rows_d.size)
        return {"value": math.sqrt(max(best2, 0.0)), "method": "branch_and_bound", "exact": True,
                "pairs_evaluated": evaluated, "pair_budget": budget}


def _largest_squared(views, sq, rows_c, rows_d, block: int = 1024, wide: int = 8192) -> float:
    """The largest squared distance between rows_c and rows_d (a point's own distance is 0),
    ``block`` × ``wide`` at a time: a cluster of k-means may hold many points."""
    largest = 0.0
    for i in range(0, rows_c.size, block):
        for j in range(0, rows_d.size, wide):
            d2 = _squared(views, sq, rows_c[i:i + block], rows_d[j:j + wide])
            d2[rows_c[i:i + block][:, None] == rows_d[j:j + wide][None, :]] = 0.0
            largest = max(largest, float(d2.max()))
    return largest


def _nearest(p: np.ndarray, centres: np.ndarray) -> np.ndarray:
    label = np.empty(len(p), dtype=np.int64)
    c2 = np.einsum("ij,ij->i", centres, centres)
    for start in range(0, len(p), 8192):
        block = p[start:start + 8192]
        label[start:start + 8192] = np.argmin(c2[None, :] - 2.0 * block @ centres.T, axis=1)
    return label


def _worth(p, rho, rows, centre, radius, rho_max, eta, best2) -> np.ndarray:
    """The rows that may be in a pair farther than √best2 with a point of the other cluster."""
    reach = np.sqrt(((p[rows] - centre) ** 2).sum(axis=1)) + radius + 2 * eta
    bound = (reach**2 + (rho[rows] + rho_max) ** 2) * (1.0 + 1e-9)
    return rows[bound > best2]
