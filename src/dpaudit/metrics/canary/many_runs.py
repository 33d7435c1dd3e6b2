"""The many-runs bound of the linear mechanisms: Clopper–Pearson over R releases per side.

Releases on D (``included``) and on the worst-case neighbour D′ are scored by their
exact log-density ratio (``dpaudit.training.canary_linear``); the loss-threshold
attack's threshold search (``dpaudit.metrics.mia.epsilon_lower_bound``, split method:
one seeded half chooses the threshold, the other evaluates it) turns them into an ε
lower bound holding with probability ≥ 1 − 2α. Its ceiling is what perfect separation
certifies with the same evaluation counts.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from dpaudit.dp.hypothesis import epsilon_from_counts
from dpaudit.metrics.mia import epsilon_lower_bound
from dpaudit.training.canary_linear import linear_release_scores

__all__ = ["audit_linear", "many_runs_bound"]


def many_runs_bound(scores_in, scores_out, *, delta: float, alpha: float, seed: int) -> dict[str, Any]:
    """Bound, ceiling and counts from the scores of the releases on D and on D′."""
    scores_in = np.asarray(scores_in, dtype=np.float64)
    scores_out = np.asarray(scores_out, dtype=np.float64)
    bound = epsilon_lower_bound(-scores_in, -scores_out, delta=delta, alpha=alpha, method="split", seed=seed)
    ceiling = epsilon_from_counts(bound.n_members, 0, bound.n_members, bound.n_nonmembers, delta=delta, alpha=alpha)
    return {"epsilon_lower_bound": bound.epsilon, "ceiling": float(ceiling), "threshold": -bound.threshold,
            "tp": bound.tp, "fp": bound.fp, "n_eval_included": bound.n_members,
            "n_eval_excluded": bound.n_nonmembers, "delta": bound.delta, "alpha": bound.alpha}


def bound_from_scores(scores: pd.DataFrame, *, delta: float, alpha: float, seed: int) -> dict[str, Any]:
    """``many_runs_bound`` of a canary scores frame (``included`` = released on D)."""
    included = scores["included"].to_numpy(bool)
    values = scores["score"].to_numpy(np.float64)
    return many_runs_bound(values[included], values[~included], delta=delta, alpha=alpha, seed=seed)


def audit_linear(x_members: np.ndarray, labels: np.ndarray, *, mechanism: str, epsilon: float, lam: float,
                 releases: int, alpha: float = 0.05, seed: int, delta: float = 0.0, **options) -> dict[str, Any]:
    """Releases, scores and bound in one call (``linear_release_scores`` then ``many_runs_bound``)."""
    result = linear_release_scores(x_members, labels, mechanism=mechanism, epsilon=epsilon, lam=lam,
                                   releases=releases, seed=seed, **options)
    frame = result["scores"]
    included = frame["included"].to_numpy(bool)
    values = frame["score"].to_numpy(np.float64)
    return {**result, **many_runs_bound(values[included], values[~included], delta=delta, alpha=alpha, seed=seed)}
