"""Recipe C's membership game from the run's recipe reference pool (Lowy et al. 2024; issue 24).

The reference pool (``dpaudit.training.reference_pool``, rule ``reference_pool``) holds K
models of the run's training recipe, each trained on a random half of the audit population
P = members ∪ the nonmembers split (every example in each model's training set with
probability ½, independently: the pool's inclusion matrix), with the released model's
mechanism and accounting. For an example x of the parent set X that is in P, the IN models
are those whose inclusion bit for x is 1 and the OUT models the others, so x's scores
under the IN models sample P_in,x and under the OUT models P_out,x (post-processing,
Lemma 14): Recipe C's game, with the rest of each model's training set a random half of P
rather than an n-subset of X.

The score is the pool's φ = log p_y − log Σ_{y′≠y} p_{y′} (float64 from the logits), a
strictly increasing function of p_y, hence of −loss: each example's threshold test
(``dpaudit.metrics.pmp.dpsgd.empirical_pmp``) counts the same TP and FP with φ as with
−loss, without the float32 rounding of a loss near 0.

Examples of X outside P (X's non-members drawn from the utility split when
``metrics.pmp.nonmember_pool`` is ``nonmembers_and_utility``) are in no reference model's
population; Recipe C bounds the others and says how many (``n_bounded``).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from dpaudit.metrics.pmp.dpsgd import empirical_pmp

__all__ = ["POOL_COLUMNS", "pool_checks", "pool_game", "pool_recipe_c"]

POOL_COLUMNS = ("example_id", "model", "included", "phi")  # what Recipe C reads of the pool's table


def pool_game(pool: pd.DataFrame, parent_ids: np.ndarray) -> dict:
    """Recipe C's inputs from the pool's table (``POOL_COLUMNS``, one row per model and example of P).

    Returns ``scores`` and ``in_mask`` [K, m] (φ and the inclusion bit of the m examples of
    ``parent_ids`` that are in P, in X's order), ``covered`` [|X|] (x ∈ P) and ``n_models``.
    Refuses a table that is not one row per (model, example) for models 0..K−1.
    """
    missing = [c for c in POOL_COLUMNS if c not in pool.columns]
    if missing:
        raise ValueError(f"reference pool table lacks column(s) {missing}")
    frame = pool[list(POOL_COLUMNS)]
    models = np.unique(frame["model"].to_numpy(np.int64))
    if models.size == 0 or not np.array_equal(models, np.arange(models.size)):
        raise ValueError(f"reference pool models must be numbered 0..K-1, got {models[:10].tolist()}")
    if frame.duplicated(["model", "example_id"]).any():
        raise ValueError("reference pool table has more than one row for a (model, example_id)")
    scores = frame.pivot(index="model", columns="example_id", values="phi")
    inside = frame.pivot(index="model", columns="example_id", values="included")
    if scores.isna().to_numpy().any() or inside.isna().to_numpy().any():
        raise ValueError("reference pool table misses some (model, example) pairs or holds NaN scores")
    parent_ids = np.asarray(parent_ids, dtype=np.int64)
    covered = np.isin(parent_ids, scores.columns.to_numpy(np.int64))
    chosen = parent_ids[covered]
    return {"scores": scores[chosen].to_numpy(np.float64), "in_mask": inside[chosen].to_numpy(bool),
            "covered": covered, "n_models": int(models.size)}


def pool_recipe_c(pool: pd.DataFrame, parent_ids: np.ndarray, *, delta: float, alpha: float, seed: int) -> dict:
    """``empirical_pmp`` on the examples of X in P, with the per-example arrays (``*_x``) spread
    back over X (NaN for x ∉ P) and ``n_bounded`` = |X ∩ P| (the Bonferroni family)."""
    game = pool_game(pool, parent_ids)
    covered = game["covered"]
    if not covered.any():
        raise ValueError("no example of the parent set X is in the reference pool's population P")
    res = empirical_pmp(game["scores"], game["in_mask"], delta=delta, alpha=alpha, seed=seed)
    spread = {}
    for key, values in res.items():
        if key.endswith("_x"):
            full = np.full(covered.size, np.nan)
            full[covered] = values
            spread[key] = full
            spread[f"{key}_bounded"] = values
    return {**res, **spread, "covered": covered, "n_bounded": int(covered.sum())}


def pool_checks(pool_info: Mapping, train: Mapping) -> list[str]:
    """Where the pool's record disagrees with the run's train.json on what makes a reference
    model DP-matched (σ, q, steps: the pool reads the recipe's accounting as train_model does)."""
    problems = []
    for key in ("noise_multiplier", "sampling_probability", "steps"):
        ours, theirs = pool_info.get(key), train.get(key)
        if ours is None or theirs is None:
            continue
        if not np.isclose(float(ours), float(theirs), rtol=1e-9, atol=0.0):
            problems.append(f"{key}: pool {ours} vs run {theirs}")
    return problems
