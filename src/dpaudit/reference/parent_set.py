"""The parent set X of practical membership privacy (Lowy et al. 2024).

Kept apart from ``dpaudit.metrics.pmp`` so that ``extract_per_example`` (which computes
Recipes A and B's gradients over X) depends on these few lines only, not on the PMP
maths: an edit to the metric must not rerun every extraction. Recipe C's models are the
run's recipe reference pool (``dpaudit.reference.pool``); which of them trained
on each x of X is the pool's inclusion matrix (``dpaudit.metrics.pmp.pool``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import numpy as np
import pandas as pd

__all__ = ["build_parent_set", "parent_set"]


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
