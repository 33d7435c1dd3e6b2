"""Recipe C's membership game from the run's recipe reference pool (Lowy et al. 2024; issue 24).

The reference pool (``dpaudit.reference.pool``, rule ``reference_pool``) holds K
models of the run's training recipe, each trained on a random half of the audit population
P = members ∪ the nonmembers split (every example in each model's training set with
probability ½, independently: the pool's inclusion matrix), each retrained like the
released model on its own rows (``dpaudit.reference.accounting``): the run's
mechanism, expected batch B, epochs, σ, clip norm and learning rate, at its own rate
q_k = B/n_k for ⌊n_k/B⌋·epochs steps. For an example x of the parent set X that is in P, the IN models
are those whose inclusion bit for x is 1 and the OUT models the others, so x's scores
under the IN models sample P_in,x and under the OUT models P_out,x (post-processing,
Lemma 14): Recipe C's game, with the rest of each model's training set a random half of P
rather than an n-subset of X.

The game's mechanism is the run's training procedure applied to each model's data set, as
Recipe C's shadow models (the LiRA protocol) train on random n-subsets of X with the run's
hyperparameters:
on an n-subset the practitioner's rate B/n IS the target's, on a half of P (n_k ≈ |P|/2,
0.75·n with the default 50/25/25 split) it is B/n_k. Recipe C keeps the practitioner's
rate rather than the target's q = B/n: the models then take the target's batch, update
size and noise per step, so their scores are the target's kind (with the target's q the
expected batch is q·n_k ≈ 0.75·B under the fixed divisor B: updates 0.75× as large,
relatively noisier, and less accurate models than the target). The price: ε̂ lower-bounds
the privacy of the reference mechanism, whose accountant ε (``reference_epsilon`` of the
pool record, largest over models ``reference_epsilon_max``) exceeds the run's when n_k < n
(a larger q amplifies less); the rows record it (column ``reference_epsilon``) and say so
in their note. ``pool_checks`` compares the pool's record of the TARGET (σ,
``target_sampling_probability``, ``target_steps``) with the run's train.json: a mismatch
there is a pool of another recipe; the models' own q and steps differ by design.

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

__all__ = ["POOL_COLUMNS", "pool_checks", "pool_game", "pool_recipe_c", "reference_training"]

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
    """Where the pool's record of the recipe's TARGET disagrees with the run's train.json
    (σ, the target's q and steps: the pool reads the recipe's accounting as train_model
    does). The reference models' own q_k and steps_k (``reference_training``) differ from
    these by design and are not compared. A record without ``target_*`` keys (before the
    models kept their own rates) is read at its ``sampling_probability`` and ``steps``."""
    problems = []
    for key in ("noise_multiplier", "sampling_probability", "steps"):
        ours = pool_info.get(f"target_{key}", pool_info.get(key)) if key != "noise_multiplier" \
            else pool_info.get(key)
        theirs = train.get(key)
        if ours is None or theirs is None:
            continue
        if not np.isclose(float(ours), float(theirs), rtol=1e-9, atol=0.0):
            problems.append(f"{key}: pool {ours} vs run {theirs}")
    return problems


def reference_training(pool_info: Mapping) -> dict:
    """How the pool's models trained, from its record: ``reference_epsilon`` (the largest
    accountant ε over the models, NaN when unrecorded) and ``note`` (their rates and steps
    beside the target's, or "" for a record without them)."""
    eps = pool_info.get("reference_epsilon_max")
    q, steps = pool_info.get("reference_sampling_probability"), pool_info.get("reference_steps")
    if eps is None or not q or not steps:
        return {"reference_epsilon": np.nan, "note": ""}
    eps = float(eps)  # a record's non-finite numbers come back as strings
    target_eps = pool_info.get("target_epsilon")
    note = (f"reference models retrained like the run on their own halves of P (q_k = B/n_k in "
            f"[{min(q):.4g}, {max(q):.4g}], steps {min(steps)}-{max(steps)}; the run's q = "
            f"{float(pool_info.get('target_sampling_probability') or np.nan):.4g}, steps "
            f"{pool_info.get('target_steps')}): their accountant eps is up to {eps:.4g} (the run's "
            f"{float(target_eps) if target_eps is not None else np.nan:.4g}), the mechanism eps_hat bounds")
    return {"reference_epsilon": eps, "note": note}
