"""The workflow's reference pool of one training recipe (issue 24): who is in the audit
population P, the K models' outputs on P as a table, and what the pool records.

``build_reference_pool`` is what ``reference_pool`` (rules/attacks.smk) runs: P is every
member and every designated non-member of the dataset (``dataset.json``'s splits), in
``examples.parquet`` order; ``dpaudit.reference.pool_training.train_reference_models`` trains
the K models of the recipe on random halves of P. The table (``POOL_COLUMNS``) has one
row per model and example of P: ``example_id``, ``model`` (0..K-1), ``included`` (the
inclusion bit), ``label``, ``phi`` (φ = log p_y − log Σ_{y′≠y} p_{y′} at temperature 1)
and ``logits`` (float32, the model's C logits, so any temperature can be read later).
The record (``pool_info``) holds the seeds, σ, δ, whether the model axis was used and
why not, each model's accuracy on its IN and OUT examples of P, and the two accountings
(``dpaudit.reference.accounting``): the recipe's target on its n members
(``target_sampling_probability``, ``target_steps``, ``target_epsilon``: what the run's
train.json says) and each reference model's own, retrained like the target on its n_k
rows (``training_rows``, ``reference_sampling_probability`` = B/n_k, ``reference_steps``,
``reference_epsilon`` per model, ``reference_epsilon_max`` the largest; ``reference_rule``
says how in words).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from dpaudit.losses import logit_confidence
from dpaudit.reference.accounting import REFERENCE_RULE
from dpaudit.reference.pool_training import train_reference_models
from dpaudit.training.models import features

__all__ = ["POOL_COLUMNS", "audit_population", "build_reference_pool", "pool_frame", "pool_info"]

POOL_COLUMNS = ("example_id", "model", "included", "label", "phi", "logits")


def audit_population(examples: pd.DataFrame, splits: Mapping[str, str],
                     outputs: pd.DataFrame | None = None) -> pd.DataFrame:
    """The rows of P = members ∪ designated non-members, in file order, with ``is_member``.

    ``outputs``: a model trained elsewhere's P.OUTPUTS (issue 44): P is its members and held-out rows,
    whose roles come from its ``split`` column (named as the dataset's splits), not the dataset's."""
    if outputs is not None:
        roles = outputs[outputs["split"].astype(str).isin([splits["members"], splits["nonmembers"]]).to_numpy()]
        member = pd.Series(roles["split"].astype(str).to_numpy() == splits["members"],
                           index=roles["example_id"].to_numpy(np.int64))
        chosen = examples[examples["example_id"].isin(member.index).to_numpy()].reset_index(drop=True)
        chosen["is_member"] = member.reindex(chosen["example_id"].to_numpy(np.int64)).to_numpy(bool)
        return chosen
    split = examples["split"].astype(str)
    chosen = examples[split.isin([splits["members"], splits["nonmembers"]]).to_numpy()].reset_index(drop=True)
    chosen["is_member"] = (chosen["split"].astype(str) == splits["members"]).to_numpy()
    return chosen


def pool_frame(logits: np.ndarray, inclusion: np.ndarray, example_ids: np.ndarray, labels: np.ndarray) -> pd.DataFrame:
    """One row per (model, example of P): ``POOL_COLUMNS``."""
    logits = np.asarray(logits, dtype=np.float32)
    k, n, c = logits.shape
    phi = logit_confidence(logits, labels)
    column = pa.FixedSizeListArray.from_arrays(pa.array(logits.reshape(-1)), c)
    return pd.DataFrame({
        "example_id": np.tile(np.asarray(example_ids, dtype=np.int64), k),
        "model": np.repeat(np.arange(k, dtype=np.int32), n),
        "included": np.asarray(inclusion, dtype=bool).reshape(-1),
        "label": np.tile(np.asarray(labels, dtype=np.int64), k),
        "phi": phi.reshape(-1),
        "logits": pd.Series(pd.arrays.ArrowExtensionArray(column)),
    })


def _accuracy(correct: np.ndarray, mask: np.ndarray) -> list[float]:
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (correct & mask).sum(axis=1) / mask.sum(axis=1)
    return [float(v) if math.isfinite(v) else None for v in out]


def _numbers(values, kind) -> list | None:
    return None if values is None else [kind(v) for v in np.asarray(values).reshape(-1)]


def pool_info(pool, labels: np.ndarray, *, count: int, seed: int, recipe: Mapping[str, Any],
              runs: list[str]) -> dict[str, Any]:
    """The pool's record: how it was trained (the target's accounting and each model's own)
    and how well each model fits (IN) and generalizes (OUT)."""
    correct = np.argmax(pool.logits, axis=2) == np.asarray(labels)[None, :]
    final_loss = pool.history["loss"][:, -1]
    target = pool.target
    epsilon = _numbers(pool.epsilon, float)
    return {
        "reference_models": int(count),
        "seed": int(seed),
        "seeds": [int(s) for s in pool.seeds],
        "recipe": dict(recipe),
        "runs": list(runs),
        "n_population": int(pool.inclusion.shape[1]),
        "n_members": int(pool.info["n_members"]),
        "inclusion_rate": float(pool.inclusion.mean()),
        "noise_multiplier": None if pool.noise_multiplier is None else float(pool.noise_multiplier),
        "delta": pool.delta,
        "target_sampling_probability": target.get("sampling_probability"),
        "target_steps": target.get("steps"),
        "target_steps_per_epoch": target.get("steps_per_epoch"),
        "target_epsilon": None if target.get("epsilon") is None else float(target["epsilon"]),
        "reference_rule": REFERENCE_RULE,
        "training_rows": [int(v) for v in pool.inclusion.sum(axis=1)],
        "reference_sampling_probability": _numbers(pool.sampling_probability, float),
        "reference_steps": _numbers(pool.steps, int),
        "reference_steps_per_epoch": pool.info.get("steps_per_epoch"),
        "reference_epsilon": epsilon,
        "reference_epsilon_max": max(epsilon) if epsilon else None,
        "vectorized": bool(pool.vectorized),
        "fallback_reason": pool.fallback_reason,
        "train_seconds": float(pool.train_seconds),
        "in_accuracy": _accuracy(correct, pool.inclusion),
        "out_accuracy": _accuracy(correct, ~pool.inclusion),
        "final_train_loss": [float(v) if math.isfinite(v) else None for v in final_loss],
        # the reference models' noise certificate (issue 32), None for a mechanism without DP-SGD noise
        "noise_check": pool.info.get("noise_check"),
    }


def build_reference_pool(examples: pd.DataFrame, splits: Mapping[str, str], params: Mapping[str, Any], *,
                         count: int, seed: int, threads: int = 1, runs: list[str] | None = None,
                         recorded: Mapping[str, Any] | None = None, population: pd.DataFrame | None = None,
                         log: logging.Logger | None = None) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Train the K reference models of the recipe ``params`` (``train_model``'s parameters
    without the seed, δ resolved) on halves of P; returns (``pool_frame``, ``pool_info``).
    ``recorded``: the train.json of one of the recipe's runs (its σ and the target's ε, not
    recomputed; each model's own ε is the accountant's, ``model_accounting``). ``population``: a model
    trained elsewhere's P.OUTPUTS, whose members and held-out rows are P (``audit_population``)."""
    population = audit_population(examples, splits, population)
    n_members = int(population["is_member"].sum())
    x = features(population)
    labels = population["label"].to_numpy(np.int64)
    recipe = {k: v for k, v in params.items() if k != "seed"}
    pool = train_reference_models(x, labels, {**recipe, "seed": int(seed)}, n_members=n_members, count=count,
                                  seed=seed, threads=threads, log=log, recorded=recorded)
    frame = pool_frame(pool.logits, pool.inclusion, population["example_id"].to_numpy(np.int64), labels)
    return frame, pool_info(pool, labels, count=count, seed=seed, recipe=recipe, runs=runs or [])
