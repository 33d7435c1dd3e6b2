"""The label-permutation null of the empirical Epsilon* (an extension: Negoescu et al. 2023 give none).

ε* is a maximum over thresholds of noisy ratios, so even losses that carry no membership signal
give a positive value at finite sizes (identical member and non-member Normals at 898/450 rows:
ε* ≈ 1.5, the bootstrap's bias correction only brings it to 1.3; ``dpaudit.metrics.epsilon_star.run``).
Under the hypothesis that membership leaves no trace in the losses, members and non-members are
exchangeable: relabelling the pooled losses at random, sizes kept, gives ε* exactly the law the
observed value has. ``permutation_null`` draws ``permutations`` such relabellings (relabelling k
from ``numpy.random.default_rng([seed, k, 7])``) and reports

* ``quantile``: the ``level`` quantile of the null ε* (numpy's "higher" method: a value of the
  replicates, never an interpolation below one);
* ``p_value``: (1 + #{null ≥ observed}) / (1 + defined replicates), the permutation test's p-value,
  valid at any size (Phipson & Smyth 2010);
* ``within``: observed ≤ quantile: the value is one that losses without membership signal reach
  at these sizes, so it says nothing about the model beyond the sample's noise floor.

Vectorized like the bootstrap (``dpaudit.metrics.epsilon_star.bootstrap``): the pooled sort order
is the same for every relabelling, so a relabelling's rates at each distinct loss are cumulative
sums of its member indicator in that order (ties handled by taking the rates at each run's end),
and the observed value is computed by the same code from the true labels (it equals
``empirical_epsilon_star``'s; tested).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from dpaudit.metrics.epsilon_star.bootstrap import BLOCK_ELEMENTS, counts_epsilon_star
from dpaudit.metrics.epsilon_star.estimators import EMPIRICAL_FILTER, _as_losses, _check_filter
from dpaudit.progress import Progress

__all__ = ["PermutationNull", "permutation_null"]

_STREAM = 7  # the relabellings' own stream of default_rng([seed, k, ...]), apart from the bootstrap's


@dataclass(frozen=True)
class PermutationNull:
    observed: float
    quantile: float
    p_value: float
    within: bool | None
    level: float
    permutations: int
    seed: int
    undefined: int
    replicates: np.ndarray


def _relabelled(seed: int, k: int, n_tr: int, total: int) -> np.ndarray:
    """Relabelling k: which of the pooled sort order's positions are members (n_tr of them)."""
    member = np.zeros(total, dtype=bool)
    member[np.random.default_rng([int(seed), int(k), _STREAM]).choice(total, n_tr, replace=False)] = True
    return member


def _values(members: np.ndarray, ends: np.ndarray, n_tr: int, n_pop: int, delta: float, bound: float) -> np.ndarray:
    """Empirical ε* of each row of ``members`` [b, N] (member indicators in the pooled sort order)."""
    c_tr = np.cumsum(members, axis=1, dtype=np.int64)[:, ends]
    return counts_epsilon_star(c_tr, (ends + 1)[None, :] - c_tr, n_tr, n_pop, delta, bound)


def permutation_null(member_losses: ArrayLike, nonmember_losses: ArrayLike, delta: float, *,
                     permutations: int = 200, level: float = 0.95, seed: int = 0,
                     empirical_filter: float = EMPIRICAL_FILTER) -> PermutationNull:
    """The empirical ε*'s label-permutation null (module docstring)."""
    if int(permutations) < 1:
        raise ValueError(f"permutations must be >= 1, got {permutations}")
    if not 0.0 < float(level) < 1.0:
        raise ValueError(f"the null's level must lie in (0, 1), got {level}")
    _check_filter(empirical_filter, empirical_filter, "empirical_filter")
    tr = _as_losses(member_losses, "member_losses", finite=False)
    pop = _as_losses(nonmember_losses, "nonmember_losses", finite=False)
    n_tr, n_pop = tr.size, pop.size
    total = n_tr + n_pop
    pooled = np.concatenate([tr, pop])
    order = np.argsort(pooled, kind="stable")
    ordered = pooled[order]
    ends = np.flatnonzero(np.append(ordered[1:] != ordered[:-1], True))
    observed = float(_values((order < n_tr)[None, :], ends, n_tr, n_pop, delta, empirical_filter)[0])
    replicates = np.empty(int(permutations))
    per_block = max(1, BLOCK_ELEMENTS // total)
    with Progress("eps* permutation null", total=int(permutations), unit="relabellings") as progress:
        for start in range(0, int(permutations), per_block):
            ks = range(start, min(start + per_block, int(permutations)))
            block = np.stack([_relabelled(seed, k, n_tr, total) for k in ks])
            replicates[ks.start:ks.stop] = _values(block, ends, n_tr, n_pop, delta, empirical_filter)
            progress.advance(len(ks))
    defined = replicates[np.isfinite(replicates)]
    quantile = float(np.quantile(defined, float(level), method="higher")) if defined.size else float("nan")
    p_value, within = float("nan"), None
    if defined.size and np.isfinite(observed):
        p_value = float((1 + np.count_nonzero(defined >= observed)) / (1 + defined.size))
        within = bool(observed <= quantile)
    return PermutationNull(observed=observed, quantile=quantile, p_value=p_value, within=within, level=float(level),
                           permutations=int(permutations), seed=int(seed), undefined=int(replicates.size - defined.size),
                           replicates=replicates)
