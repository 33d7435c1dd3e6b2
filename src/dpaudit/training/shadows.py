"""Parent set X and shadow-model training halves for practical membership privacy
(Lowy et al. 2024).

Kept apart from ``dpaudit.metrics.pmp`` so that ``train_model`` (which trains the
Recipe C shadow models) depends on these few lines only, not on the PMP maths:
an edit to the metric must not retrain every model.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import numpy as np
import pandas as pd

__all__ = ["build_parent_set", "gather_shadow_scores", "parent_set", "shadow_in_mask", "shadow_training_examples"]


def parent_set(member_ids: np.ndarray, nonmember_ids: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """X = all members ∪ an equal-size uniform sample of the non-members.

    Returns (example ids, is_member). An equal split keeps the ½ prior and the
    1/(2n − 1) weight of Prop. 12; too few non-members is refused.
    """
    member_ids = np.asarray(member_ids, dtype=np.int64)
    nonmember_ids = np.asarray(nonmember_ids, dtype=np.int64)
    n = member_ids.size
    if n < 1:
        raise ValueError("the parent set needs at least one member")
    if nonmember_ids.size < n:
        raise ValueError(
            f"the non-member split has {nonmember_ids.size} examples, fewer than the {n} members; "
            "PMP needs an equal-size parent set (Lowy et al. 2024: |X| = 2n)"
        )
    sample = np.sort(np.random.default_rng(seed).choice(nonmember_ids, size=n, replace=False))
    ids = np.concatenate([member_ids, sample])
    return ids, np.r_[np.ones(n, dtype=bool), np.zeros(n, dtype=bool)]


def _pool_ids(examples: pd.DataFrame, splits: Mapping[str, str], pool: str) -> tuple[np.ndarray, np.ndarray]:
    split = examples["split"].astype(str)
    ids = examples["example_id"].to_numpy(np.int64)
    members = np.sort(ids[(split == splits["members"]).to_numpy()])
    names = {splits["nonmembers"]}
    if pool == "nonmembers_and_utility":
        names.add(splits["utility"])
    elif pool != "nonmembers":
        raise ValueError(f"metrics.pmp.nonmember_pool must be nonmembers or nonmembers_and_utility, got {pool!r}")
    names.discard(splits["members"])
    nonmembers = np.sort(ids[split.isin(sorted(names)).to_numpy()])
    return members, nonmembers


def build_parent_set(examples: pd.DataFrame, splits: Mapping[str, str], *, seed: int, pool: str,
                     log: logging.Logger | None = None) -> dict:
    """X = members ∪ an equal-size uniform sample of the non-member pool.

    If the pool is smaller than the members, an equal-size uniform sample of the
    members is used instead and ``members_subsampled`` records it (the other
    members are then treated as fixed, known records; a warning says so).
    """
    members, pool_ids = _pool_ids(examples, splits, pool)
    subsampled = pool_ids.size < members.size
    if subsampled:
        if log is not None:
            log.warning("non-member pool (%d) is smaller than the members (%d): X uses a uniform sample of "
                        "%d members; the others are treated as fixed known records", pool_ids.size,
                        members.size, pool_ids.size)
        members = np.sort(np.random.default_rng([seed, 1]).choice(members, pool_ids.size, replace=False))
    ids, is_member = parent_set(members, pool_ids, seed)
    return {"ids": ids, "is_member": is_member, "members_subsampled": bool(subsampled),
            "n_members_total": int((examples["split"].astype(str) == splits["members"]).sum())}


def shadow_in_mask(n_parent: int, seed: int, index: int) -> np.ndarray:
    """Shadow model ``index``'s training half: a uniformly random n-subset of X's 2n positions."""
    order = np.random.default_rng([seed, 7, index]).permutation(n_parent)
    mask = np.zeros(n_parent, dtype=bool)
    mask[order[: n_parent // 2]] = True
    return mask


def shadow_training_examples(examples: pd.DataFrame, splits: Mapping[str, str], *, seed: int, pool: str,
                             index: int) -> pd.DataFrame:
    """The examples frame relabelled for shadow model ``index``: its half of X is the members
    split, every other member-split row moves to ``pmp_out`` (not trained on)."""
    parent = build_parent_set(examples, splits, seed=seed, pool=pool)
    chosen = parent["ids"][shadow_in_mask(parent["ids"].size, seed, index)]
    split = examples["split"].astype(str).to_numpy(dtype=object).copy()
    split[split == splits["members"]] = "pmp_out"
    split[np.isin(examples["example_id"].to_numpy(np.int64), chosen)] = splits["members"]
    return examples.assign(split=split)


def gather_shadow_scores(losses: Mapping[int, pd.DataFrame], examples: pd.DataFrame,
                         splits: Mapping[str, str], *, seed: int, pool: str) -> pd.DataFrame:
    """One long table (model_id, example_id, in_train, loss) over X for all shadow models."""
    parent = build_parent_set(examples, splits, seed=seed, pool=pool)
    frames = []
    for index, outputs in sorted(losses.items()):
        loss = outputs.set_index("example_id")["loss_ce"]
        missing = np.setdiff1d(parent["ids"], loss.index.to_numpy())
        if missing.size:
            raise ValueError(f"shadow model {index} has no loss for example ids {missing[:10].tolist()}")
        frames.append(pd.DataFrame({
            "model_id": index, "example_id": parent["ids"],
            "in_train": shadow_in_mask(parent["ids"].size, seed, index),
            "loss": loss.loc[parent["ids"]].to_numpy(np.float64)}))
    return pd.concat(frames, ignore_index=True)
