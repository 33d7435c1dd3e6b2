"""The many-runs bound of the linear mechanisms: Clopper–Pearson over R releases per side.

Releases on D (``included``) and on the worst-case neighbour D′ are scored by their
exact log-density ratio (``dpaudit.audit.linear_audit``); the loss-threshold
attack's threshold search (``dpaudit.metrics.mia.epsilon_lower_bound``, split method:
one seeded half chooses the threshold, the other evaluates it) turns them into an ε
lower bound holding with probability ≥ 1 − 2α. Its ceiling is what perfect separation
certifies with the same evaluation counts.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from dpaudit.dp.canary_bounds import claim_curve_test
from dpaudit.dp.hypothesis import epsilon_from_counts
from dpaudit.dp.tradeoff import pure_tradeoff
from dpaudit.metrics.mia import epsilon_lower_bound

__all__ = ["bound_from_scores", "claim_curve", "many_runs_bound"]


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


def claim_curve(scores: pd.DataFrame, *, epsilon: float, alpha: float, per_tail: int | None = 40) -> dict[str, Any]:
    """The claim-curve test of a many_runs scores frame against pure ε-DP (δ = 0).

    The releases are independent trials of the claimed mechanism: ``included`` = released on
    D, score = log p_D − log p_D′ (higher = looks like D), exactly the test's convention.
    """
    test = claim_curve_test(scores["score"].to_numpy(np.float64), scores["included"].to_numpy(bool),
                            pure_tradeoff(epsilon), alpha=alpha, delta=0.0, per_tail=per_tail)
    return {"claim_rejected": test.rejected, "claim_p_value": test.p_value, "claim_epsilon": test.epsilon,
            "claim_ceiling": test.ceiling, "claim_thresholds": test.thresholds,
            "claim_worst_fpr_upper": test.worst_fpr_upper, "claim_worst_fnr_upper": test.worst_fnr_upper,
            "claim_worst_claimed_fnr": test.worst_claimed_fnr, "claim_worst_mirrored": test.worst_mirrored}

