"""ROC primitives of a score-threshold membership test: the curve at every distinct
threshold, its AUC, its operating point of largest advantage, and the TPR at a target
FPR (the statistics home; the mia family and the privacy cards read them from here).

A test flags "member" when an example's loss is at most a threshold τ; TP and FP count
members and non-members at or below τ. Everything works on sorted arrays and cumulative
counts: 10⁶ + 10⁶ losses take a fraction of a second.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_FPR_TARGETS: tuple[float, ...] = (0.001, 0.01, 0.1)

__all__ = ["DEFAULT_FPR_TARGETS", "OperatingPoint", "RocCurve", "as_losses", "negatives_at_or_above", "roc_from_sorted", "roc_auc", "roc_curve", "roc_max_advantage", "tpr_at_fpr"]


@dataclass(frozen=True)
class RocCurve:
    """The attack's ROC at every distinct threshold.

    ``thresholds[0]`` is ``-inf`` (flag nobody: TP = FP = 0); the remaining
    entries are the distinct loss values of both classes in increasing order.
    At a tied loss value members and non-members enter together, so the curve
    has one point per distinct value, never an order-dependent staircase.
    """

    thresholds: np.ndarray  # float64, strictly increasing
    tp: np.ndarray  # int64, members with loss ≤ threshold
    fp: np.ndarray  # int64, non-members with loss ≤ threshold
    tpr: np.ndarray  # float64
    fpr: np.ndarray  # float64
    n_members: int
    n_nonmembers: int


@dataclass(frozen=True)
class OperatingPoint:
    """One threshold of the attack with its confusion counts."""

    threshold: float
    tp: int
    fp: int
    n_members: int
    n_nonmembers: int

    @property
    def tpr(self) -> float:
        return self.tp / self.n_members

    @property
    def fpr(self) -> float:
        return self.fp / self.n_nonmembers

    @property
    def advantage(self) -> float:
        return self.tpr - self.fpr


def as_losses(values: np.ndarray | Sequence[float], name: str) -> np.ndarray:
    """Validate one class's losses: 1-D, non-empty, finite; returned as float64."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty: the attack needs at least one example per class")
    bad = np.flatnonzero(~np.isfinite(arr))
    if bad.size:
        shown = ", ".join(str(i) for i in bad[:10])
        more = f" and {bad.size - 10} more" if bad.size > 10 else ""
        raise ValueError(f"{name} has {bad.size} non-finite value(s) at position(s) {shown}{more}")
    return arr


def roc_from_sorted(members: np.ndarray, nonmembers: np.ndarray) -> RocCurve:
    """ROC of two already sorted, validated float64 arrays."""
    # np.unique sorts the union once; searchsorted(side="right") then counts
    # "≤ τ" per class, which is what makes tied values move together.
    distinct = np.unique(np.concatenate([members, nonmembers]))
    thresholds = np.concatenate([[-np.inf], distinct])
    tp = np.searchsorted(members, thresholds, side="right").astype(np.int64)
    fp = np.searchsorted(nonmembers, thresholds, side="right").astype(np.int64)
    n_m, n_n = int(members.size), int(nonmembers.size)
    return RocCurve(
        thresholds=thresholds,
        tp=tp,
        fp=fp,
        tpr=tp / np.float64(n_m),
        fpr=fp / np.float64(n_n),
        n_members=n_m,
        n_nonmembers=n_n,
    )


def roc_curve(
    member_losses: np.ndarray | Sequence[float], nonmember_losses: np.ndarray | Sequence[float]
) -> RocCurve:
    """ROC of the attack "member iff loss ≤ τ" over every distinct loss value.

    Raises ValueError on empty input or non-finite losses (naming positions).
    """
    members = np.sort(as_losses(member_losses, "member_losses"))
    nonmembers = np.sort(as_losses(nonmember_losses, "nonmember_losses"))
    return roc_from_sorted(members, nonmembers)


def roc_auc(roc: RocCurve) -> float:
    """Area under the ROC = P(member loss < non-member loss) + ½·P(equal).

    The trapezoid between consecutive distinct thresholds is exactly the
    pair-counting statistic with ties counted ½; integer arithmetic keeps it
    exact until the final division (sums stay below 2·n_m·n_n < 2⁶³ for any
    realistic dataset).
    """
    dfp = np.diff(roc.fp)
    tp_sum = roc.tp[1:] + roc.tp[:-1]
    twice_area = int(np.dot(dfp, tp_sum))
    return twice_area / (2.0 * roc.n_members * roc.n_nonmembers)


def _point(roc: RocCurve, i: int) -> OperatingPoint:
    return OperatingPoint(
        threshold=float(roc.thresholds[i]),
        tp=int(roc.tp[i]),
        fp=int(roc.fp[i]),
        n_members=roc.n_members,
        n_nonmembers=roc.n_nonmembers,
    )


def roc_max_advantage(roc: RocCurve) -> OperatingPoint:
    """The threshold maximizing TPR − FPR (≥ 0, the flag-nobody point gives 0).

    Ties go to the smallest threshold, so the choice does not depend on float
    noise in the subtraction order.
    """
    # Compare on the common denominator n_m·n_n so that ties are exact.
    score = roc.tp * np.int64(roc.n_nonmembers) - roc.fp * np.int64(roc.n_members)
    return _point(roc, int(np.argmax(score)))


def tpr_at_fpr(
    roc: RocCurve, fpr_targets: Sequence[float] = DEFAULT_FPR_TARGETS
) -> dict[float, OperatingPoint]:
    """For each target, the largest TPR whose realized FPR is ≤ the target.

    Among thresholds with that largest TPR the smallest realized FPR is
    reported (extra non-members caught without extra members are pure cost).
    The flag-nobody point keeps every target feasible: with too few
    non-members to realize a small FPR the answer is honestly TPR = 0 at
    threshold −inf. Keys are the targets as floats, in the given order.
    """
    result: dict[float, OperatingPoint] = {}
    for target in fpr_targets:
        target = float(target)
        if not 0.0 <= target <= 1.0:
            raise ValueError(f"fpr target must lie in [0, 1], got {target}")
        # fp is nondecreasing, so the feasible points are a prefix of the curve.
        last = int(np.searchsorted(roc.fpr, target, side="right")) - 1
        best_tp = roc.tp[last]
        # tp is nondecreasing too: the first index reaching best_tp has the least fp.
        first = int(np.searchsorted(roc.tp[: last + 1], best_tp, side="left"))
        result[target] = _point(roc, first)
    return result


def negatives_at_or_above(scores, negative_scores) -> np.ndarray:
    """For each score, how many negative scores are ≥ it (NaN negatives are not counted): the
    false positives of a threshold placed at that score (higher = more likely positive)."""
    ref = np.asarray(negative_scores, dtype=np.float64)
    ref = np.sort(ref[~np.isnan(ref)])
    return (ref.size - np.searchsorted(ref, np.asarray(scores, dtype=np.float64), side="left")).astype(np.int64)
