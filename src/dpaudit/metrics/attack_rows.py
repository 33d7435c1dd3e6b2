"""The reference-model attacks of one target run as the mia family's rows (issue 24).

``attack_rows`` is what ``metric_attacks`` (rules/attacks.smk) runs. It reads the target's
per-example outputs (``outputs.parquet``: ``label``, ``is_member``, ``logits``) and its
recipe's reference pool (``dpaudit.reference.pool.POOL_COLUMNS``), restricts both
to the audit population P (the pool's examples: members and designated non-members), and
runs ``dpaudit.metrics.attacks.run_attacks``: LiRA on φ at temperature 1, RMIA on φ at the
configured temperature, against RMIA population samples z drawn from P's non-members with
the pool's seed. Every attack's statistics are ``attack_statistics``' (same evaluation
split: P's members vs non-members), with the attack's recorded choices in ``attack_params``
(JSON) and ``reference_models``.

The loss threshold's rows are metric_mia's (``attack = "loss"``); here the loss attack only
adds its per-example score to the scores table (the ROC figure compares every rung), so a
run's table has exactly one row per attack, metric and parameter.

Scores table (``results/attacks/{dataset}/{run}/scores.parquet``): ``example_id``,
``is_member``, ``label``, one float64 column per attack (higher = more likely a member,
``dpaudit.metrics.attacks.SCORE_SIGN``) and ``rmia_population`` (the example is one of
RMIA's z samples).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from dpaudit.metrics.attacks import attack_statistics, logit_confidence, run_attacks

__all__ = ["attack_rows", "list_matrix", "pool_arrays", "rmia_population"]


def list_matrix(column: pd.Series) -> np.ndarray:
    """A fixed-size list column (``logits``) as an [n, C] float64 array."""
    if len(column) == 0:
        return np.zeros((0, 0))
    if isinstance(column.dtype, pd.ArrowDtype):
        arr = pa.array(column)
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        return arr.flatten().to_numpy(zero_copy_only=False).reshape(len(arr), -1).astype(np.float64)
    return np.stack(column.to_numpy()).astype(np.float64)


def pool_arrays(pool: pd.DataFrame) -> dict[str, np.ndarray]:
    """example_id [n], labels [n], inclusion [K, n], logits [K, n, C] of a pool table (any row order)."""
    pool = pool.sort_values(["model", "example_id"], kind="stable", ignore_index=True)
    models = np.unique(pool["model"].to_numpy())
    k = len(models)
    if k == 0 or len(pool) % k:
        raise ValueError(f"reference pool: {len(pool)} rows do not split into {k} models of equal size")
    n = len(pool) // k
    ids = pool["example_id"].to_numpy(np.int64).reshape(k, n)
    if not (ids == ids[0]).all():
        raise ValueError("reference pool: the models do not cover the same examples")
    logits = list_matrix(pool["logits"])
    return {"example_id": ids[0], "label": pool["label"].to_numpy(np.int64)[:n],
            "inclusion": pool["included"].to_numpy(bool).reshape(k, n),
            "logits": logits.reshape(k, n, -1)}


def rmia_population(is_member: np.ndarray, size: int, seed: int) -> np.ndarray:
    """Indices of RMIA's z samples: ``size`` non-members of P (all when fewer), drawn with ``seed``."""
    candidates = np.flatnonzero(~np.asarray(is_member, dtype=bool))
    if candidates.size == 0:
        raise ValueError("RMIA needs non-members in the audit population")
    if candidates.size <= size:
        return candidates
    rng = np.random.default_rng([int(seed), 11])
    return np.sort(rng.choice(candidates, size=int(size), replace=False))


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def attack_rows(outputs: pd.DataFrame, pool: pd.DataFrame, options: Mapping[str, Any], *, delta: float,
                accountant_epsilon: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(rows, scores) of every configured attack on one target.

    ``options``: the validated ``metrics.attacks`` block (attacks, seed, alpha,
    fpr_targets, lira.global_variance_below, rmia.gamma / offline_a / temperature /
    population_size). ``rows`` are mia-family rows before ``metric_rows`` (an ``attack``
    column, ``attack_statistics``' columns, ``attack_params`` JSON, ``reference_models``);
    the ``loss`` attack writes no rows (metric_mia's are its rows).
    """
    arrays = pool_arrays(pool)
    ids = arrays["example_id"]
    target = outputs.set_index(outputs["example_id"].to_numpy(np.int64))
    missing = np.setdiff1d(ids, target.index.to_numpy())
    if missing.size:
        raise ValueError(f"the target's outputs lack {missing.size} example(s) of the reference pool, "
                         f"e.g. example_id {missing[:5].tolist()}")
    target = target.loc[ids]
    labels = target["label"].to_numpy(np.int64)
    if not np.array_equal(labels, arrays["label"]):
        raise ValueError("the target's labels differ from the reference pool's: built from another dataset?")
    is_member = target["is_member"].to_numpy(bool)
    target_logits = list_matrix(target["logits"])
    k = arrays["inclusion"].shape[0]
    rmia_options = options["rmia"]
    temperature = float(rmia_options["temperature"])
    phi = logit_confidence(target_logits, labels)
    ref_phi = logit_confidence(arrays["logits"], labels)
    if temperature != 1.0:
        rmia_phi = logit_confidence(target_logits, labels, temperature=temperature)
        rmia_ref_phi = logit_confidence(arrays["logits"], labels, temperature=temperature)
    else:
        rmia_phi, rmia_ref_phi = phi, ref_phi
    population = rmia_population(is_member, rmia_options["population_size"], options["seed"])
    global_variance = k < int(options["lira"]["global_variance_below"])
    scores = run_attacks(phi, ref_phi, arrays["inclusion"], population=population, attacks=options["attacks"],
                         gamma=float(rmia_options["gamma"]), offline_a=rmia_options["offline_a"],
                         rmia_phi=rmia_phi, rmia_reference_phi=rmia_ref_phi, rmia_temperature=temperature,
                         global_variance=global_variance)
    frames = []
    for name, result in scores.items():
        if name == "loss":
            continue
        stats = attack_statistics(result.scores, is_member, delta=delta, seed=int(options["seed"]),
                                  alpha=float(options["alpha"]), fpr_targets=tuple(options["fpr_targets"]),
                                  accountant_epsilon=accountant_epsilon, attack=name)
        stats["attack_params"] = pd.array([json.dumps({k: _plain(v) for k, v in result.params.items()},
                                                      sort_keys=True)] * len(stats), dtype="string")
        stats["reference_models"] = pd.array([k] * len(stats), dtype="Int64")
        frames.append(stats)
    rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        {"metric": pd.array([], dtype="string")})
    table = pd.DataFrame({"example_id": ids, "is_member": is_member, "label": labels})
    for name, result in scores.items():
        table[name] = np.asarray(result.scores, dtype=np.float64)
    in_population = np.zeros(len(ids), dtype=bool)
    in_population[population] = True
    table["rmia_population"] = in_population
    return rows, table
