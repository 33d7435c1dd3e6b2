"""Loss-threshold membership inference: ROC, AUC, advantage, TPR at low FPR, ε lower bounds.

The attack (Yeom et al. 2018; Negoescu et al. 2023, Sec. 3) predicts "member" when an example's
loss is at most a threshold τ. Members are the training set, non-members a
holdout set. For a threshold τ

    TP = #{members with loss ≤ τ},   FP = #{non-members with loss ≤ τ},
    TPR = TP / n_members,             FPR = FP / n_nonmembers.

Every function works on sorted arrays and cumulative counts, so 10⁶ + 10⁶ losses
take a fraction of a second; nothing loops over examples or thresholds in Python.

The ε lower bound follows the hypothesis-testing reading of (ε, δ)-DP
(Geambasu's DP lecture, the hypothesis-testing reading; Kairouz et al. 2015): every test satisfies
TPR ≤ e^ε·FPR + δ and TNR ≤ e^ε·FNR + δ. Replacing the rates with one-sided
Clopper–Pearson bounds (Jagielski et al. 2020; Nasr et al. 2021) turns an
observed attack into a statistically valid lower bound on the ε of the training
run, provided the threshold was not chosen on the same data it is evaluated on
(``method="split"``) or the confidence level pays for the choice
(``method="bonferroni"``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpaudit.contract.delta import check_delta
from dpaudit.contract.metrics import typed_frame
from dpaudit.dp.hypothesis import (
    check_one_sided_alpha,
    clopper_pearson,
    clopper_pearson_lower,
    clopper_pearson_upper,
    epsilon_from_counts,
    epsilon_from_rate_bounds,
    epsilon_terms_from_counts,
)
from dpaudit.dp.roc import (
    DEFAULT_FPR_TARGETS,
    RocCurve,
    as_losses,
    roc_auc,
    roc_curve,
    roc_from_sorted,
    roc_max_advantage,
    tpr_at_fpr,
)

__all__ = [
    "CI_METHODS",
    "DEFAULT_FPR_TARGETS",
    "METRIC_NAMES",
    "OUTPUT_COLUMNS",
    "OUTPUT_DTYPES",
    "EpsilonLowerBound",
    "accuracy",
    "epsilon_lower_bound",
    "mia_metrics",
]

CI_METHODS: tuple[str, ...] = ("split", "bonferroni")
# The mia family's metric names, as declared in dpaudit.contract.metrics.
METRIC_NAMES: tuple[str, ...] = (
    "attack_auc",
    "attack_advantage",
    "epsilon_lower_bound",
    "accountant_epsilon",
    "train_accuracy",
    "test_accuracy",
    "generalization_gap",
)

# Fixed dtypes so that the frames of many runs concatenate without object
# columns or float/int flips (an all-NA column would otherwise become object).
OUTPUT_DTYPES: dict[str, str] = {
    "metric": "string",
    "value": "float64",
    # "loss" on the attack rows: this is the loss-threshold rung of the mia family's attacks
    # (dpaudit.contract.metrics.ATTACK_NAMES; the reference-model attacks are metric_attacks')
    "attack": "string",
    "loss": "string",
    "fpr_target": "float64",
    "fpr_realized": "float64",
    "threshold": "float64",
    "tp": "Int64",
    "fp": "Int64",
    "n_members": "Int64",
    "n_nonmembers": "Int64",
    "delta": "float64",
    "alpha": "float64",
    "ci_method": "string",
    "seed": "Int64",
    # tpr_at_fpr rows: two-sided 1 - alpha Clopper-Pearson interval of the TPR, and whether
    # 1/n_nonmembers <= fpr_target (a nonzero FPR at or below the target is reachable)
    "ci_lower": "float64",
    "ci_upper": "float64",
    "resolved": "boolean",
}
OUTPUT_COLUMNS: tuple[str, ...] = tuple(OUTPUT_DTYPES)

_REQUIRED_INPUT_COLUMNS = ("example_id", "split", "is_member", "correct")
# Exact CP bounds are evaluated in blocks that double in size, starting here;
# the pruning decides after each block whether more can change the answer.
_SEARCH_BLOCK = 256


# --------------------------------------------------------------------------- ROC


# ------------------------------------------------------------------ ε bounds
# Clopper–Pearson bounds and ε from rates live in dpaudit.dp.hypothesis (shared
# with the privacy cards and every other family); this module adds the threshold
# search of the loss-threshold attack.


def _cp_grid(n: int) -> np.ndarray:
    """Counts in 0..n at which CP bounds are tabulated for ``_epsilon_term_caps``.

    Every count within 256 of either end, then geometric steps of 0.25 % in
    min(k, n − k): rates near 0 and near 1 both need fine relative resolution.
    """
    edge = min(n, 256)
    near = np.arange(edge + 1, dtype=np.int64)
    parts = [near, n - near]
    if n > 2 * edge:
        num = math.ceil(math.log(n / (2 * edge)) / math.log(1.0025)) + 1
        far = np.round(np.geomspace(edge, n / 2, num=num)).astype(np.int64)
        parts += [far, n - far]
    return np.unique(np.concatenate(parts))


def _epsilon_term_caps(tp, fp, n_m: int, n_n: int, delta: float, alpha: float) -> np.ndarray:
    """Cheap upper bounds on ``epsilon_terms_from_counts``, used to skip hopeless thresholds.

    Both CP bounds increase with k, so evaluating them exactly at the nearest
    tabulated count on the favourable side (above k for a lower bound, below k
    for an upper bound) over-states every term. A few thousand root-finds per
    class replace one per threshold; the margin covers floating-point noise.
    """
    tp = np.asarray(tp, np.int64)
    fp = np.asarray(fp, np.int64)
    grid_m, grid_n = _cp_grid(n_m), _cp_grid(n_n)
    lo_m, hi_m = (
        clopper_pearson_lower(grid_m, n_m, alpha),
        clopper_pearson_upper(grid_m, n_m, alpha),
    )
    lo_n, hi_n = (
        clopper_pearson_lower(grid_n, n_n, alpha),
        clopper_pearson_upper(grid_n, n_n, alpha),
    )
    tpr_lo = lo_m[np.searchsorted(grid_m, tp, side="left")]
    fnr_hi = hi_m[np.searchsorted(grid_m, n_m - tp, side="right") - 1]
    tnr_lo = lo_n[np.searchsorted(grid_n, n_n - fp, side="left")]
    fpr_hi = hi_n[np.searchsorted(grid_n, fp, side="right") - 1]
    caps = epsilon_from_rate_bounds(tpr_lo, fpr_hi, tnr_lo, fnr_hi, delta)
    return caps + 1e-9


def _best_threshold(roc: RocCurve, delta: float, alpha: float) -> tuple[int, float]:
    """Index into ``roc`` maximizing the unfloored CP-bounded ε, and that value.

    Exact CP bounds cost a root-find each (seconds per million), so the search
    is pruned without changing the answer:
    1. Both terms grow with TP and shrink with FP. A point followed by a
       members-only step, or preceded by a non-members-only step, is dominated;
       only "corners" remain.
    2. Corners are examined in decreasing order of a cheap cap on their value
       (``_epsilon_term_caps``) until no unexamined cap can beat the best exact
       value found, or until every remaining cap is ≤ 0 (those can only give
       a value that floors to 0).
    Among examined candidates ties go to the smallest threshold.
    """
    tp, fp = roc.tp, roc.fp
    size = tp.size
    entered_member = np.ones(size, dtype=bool)
    entered_member[1:] = tp[1:] > tp[:-1]
    leaves_by_nonmember = np.ones(size, dtype=bool)
    leaves_by_nonmember[:-1] = fp[1:] > fp[:-1]
    corners = np.flatnonzero(entered_member & leaves_by_nonmember)
    if corners.size == 0:  # only possible for the trivial curve; keep flag-nobody
        corners = np.array([0])

    caps = _epsilon_term_caps(
        tp[corners], fp[corners], roc.n_members, roc.n_nonmembers, delta, alpha
    )
    order = np.argsort(-caps, kind="stable")
    best_value, best_index = -np.inf, int(corners[order[0]])
    start, chunk = 0, _SEARCH_BLOCK
    while start < order.size:
        head_cap = caps[order[start]]
        # After the first block a cap ≤ 0 can only yield a value that floors
        # to 0, which an examined candidate already achieves.
        if start > 0 and (head_cap < best_value or head_cap <= 0.0):
            break
        block = corners[order[start : start + chunk]]
        values = epsilon_terms_from_counts(tp[block], fp[block], roc.n_members, roc.n_nonmembers, delta, alpha)
        top = values.max()
        if top > best_value or (top == best_value and block[values == top].min() < best_index):
            best_value = float(top)
            best_index = int(block[values == top].min())
        start += chunk
        chunk *= 2
    return best_index, best_value


@dataclass(frozen=True)
class EpsilonLowerBound:
    """An ε lower bound with everything needed to reproduce and judge it.

    ``tp``, ``fp``, ``n_members`` and ``n_nonmembers`` are the counts the
    Clopper–Pearson bounds were computed from: the evaluation half for
    ``"split"``, all data for ``"bonferroni"``. ``alpha`` is the nominal level,
    ``alpha_effective`` the per-bound level actually used (α/n_thresholds for
    Bonferroni). ``seed`` is None for Bonferroni, which draws nothing.
    """

    epsilon: float
    threshold: float
    tp: int
    fp: int
    n_members: int
    n_nonmembers: int
    method: str
    alpha: float
    alpha_effective: float
    delta: float
    seed: int | None
    n_thresholds: int

    @property
    def fpr(self) -> float:
        return self.fp / self.n_nonmembers


def epsilon_lower_bound(
    member_losses: np.ndarray | Sequence[float],
    nonmember_losses: np.ndarray | Sequence[float],
    *,
    delta: float,
    alpha: float = 0.05,
    method: str = "split",
    seed: int | None = None,
) -> EpsilonLowerBound:
    """Statistically valid ε lower bound from the loss-threshold attack.

    ``method="split"`` (default): a seeded random half of the members and of
    the non-members chooses the threshold that maximizes the Clopper–Pearson
    ε bound (at α) on that half; the other half evaluates that single threshold
    with CP bounds at α. Selecting on the CP bound rather than on raw rate
    ratios avoids picking a zero-FPR threshold backed by a handful of members.
    ``n_thresholds`` records how many distinct thresholds the selection half
    offered.

    ``method="bonferroni"``: all data, the maximum over every distinct loss
    value of the bound with per-bound level α/K, K = number of distinct loss
    values (the thresholds tried).

    In both cases ε_true ≥ ``epsilon`` holds with probability ≥ 1 − 2α when the
    attack's samples are independent draws (two one-sided bounds, union bound).
    Input order does not matter for Bonferroni; for the split, permute inputs
    consistently (e.g. sort by example id) to reproduce a result.
    """
    delta = check_delta(delta, allow_pure=True)  # δ = 0 tests a pure ε-DP claim
    alpha = check_one_sided_alpha(alpha)
    members = as_losses(member_losses, "member_losses")
    nonmembers = as_losses(nonmember_losses, "nonmember_losses")

    if method == "bonferroni":
        roc = roc_from_sorted(np.sort(members), np.sort(nonmembers))
        n_thresholds = roc.thresholds.size - 1  # the distinct loss values
        alpha_eff = alpha / n_thresholds
        index, value = _best_threshold(roc, delta, alpha_eff)
        return EpsilonLowerBound(
            epsilon=max(value, 0.0),
            threshold=float(roc.thresholds[index]),
            tp=int(roc.tp[index]),
            fp=int(roc.fp[index]),
            n_members=roc.n_members,
            n_nonmembers=roc.n_nonmembers,
            method=method,
            alpha=alpha,
            alpha_effective=alpha_eff,
            delta=delta,
            seed=None,
            n_thresholds=n_thresholds,
        )

    if method != "split":
        raise ValueError(f"method must be one of {CI_METHODS}, got {method!r}")
    if seed is None:
        raise ValueError("method='split' needs an explicit seed so the split is reproducible")
    if members.size < 2 or nonmembers.size < 2:
        raise ValueError(
            "method='split' needs at least 2 members and 2 non-members "
            f"(got {members.size} and {nonmembers.size})"
        )
    rng = np.random.default_rng(seed)
    perm_m = rng.permutation(members.size)
    perm_n = rng.permutation(nonmembers.size)
    half_m, half_n = members.size // 2, nonmembers.size // 2
    select_m, eval_m = np.sort(members[perm_m[:half_m]]), np.sort(members[perm_m[half_m:]])
    select_n, eval_n = np.sort(nonmembers[perm_n[:half_n]]), np.sort(nonmembers[perm_n[half_n:]])

    roc_select = roc_from_sorted(select_m, select_n)
    index, _ = _best_threshold(roc_select, delta, alpha)
    threshold = float(roc_select.thresholds[index])
    tp = int(np.searchsorted(eval_m, threshold, side="right"))
    fp = int(np.searchsorted(eval_n, threshold, side="right"))
    eps = epsilon_from_counts(tp, fp, eval_m.size, eval_n.size, delta=delta, alpha=alpha)
    return EpsilonLowerBound(
        epsilon=float(eps),
        threshold=threshold,
        tp=tp,
        fp=fp,
        n_members=int(eval_m.size),
        n_nonmembers=int(eval_n.size),
        method=method,
        alpha=alpha,
        alpha_effective=alpha,
        delta=delta,
        seed=int(seed),
        n_thresholds=int(roc_select.thresholds.size - 1),
    )


# ------------------------------------------------------------------ accuracy


def accuracy(correct: np.ndarray | Sequence[bool] | pd.Series, name: str = "correct") -> float:
    """Fraction of correct predictions; refuses empty input and missing values."""
    series = pd.Series(correct)
    if series.size == 0:
        raise ValueError(f"{name}: no examples to measure accuracy on")
    if series.isna().any():
        raise ValueError(f"{name}: {int(series.isna().sum())} missing value(s) in 'correct'")
    values = series.to_numpy(dtype=np.float64)
    if not np.all((values == 0.0) | (values == 1.0)):
        raise ValueError(f"{name}: 'correct' must be boolean or 0/1")
    return float(values.mean())


# --------------------------------------------------------------- the table


def _finite_losses(frame: pd.DataFrame, loss_column: str, role: str) -> np.ndarray:
    losses = pd.to_numeric(frame[loss_column]).to_numpy(dtype=np.float64, na_value=np.nan)
    bad = ~np.isfinite(losses)
    if bad.any():
        ids = frame["example_id"].to_numpy()[bad]
        shown = ", ".join(str(i) for i in ids[:20])
        more = f" and {ids.size - 20} more" if ids.size > 20 else ""
        raise ValueError(
            f"{loss_column} is NaN or infinite for {ids.size} {role} example(s); "
            f"example_id: {shown}{more}"
        )
    return losses


def mia_metrics(
    outputs: pd.DataFrame,
    *,
    members_split: str,
    nonmembers_split: str,
    utility_split: str,
    delta: float,
    accountant_epsilon: float,
    seed: int,
    alpha: float = 0.05,
    fpr_targets: Sequence[float] = DEFAULT_FPR_TARGETS,
    loss_column: str = "loss_ce",
    ci_method: str = "split",
) -> pd.DataFrame:
    """All loss-threshold MIA metrics of one run, in long format.

    ``outputs`` is a run's outputs.parquet with a ``split`` column (DESIGN §3):
    members are rows with ``split == members_split``, non-members rows with
    ``split == nonmembers_split``; train accuracy is measured on members and
    test accuracy on ``utility_split``. ``accountant_epsilon`` is +inf for
    non-private baselines and is reported as such.

    Returns one row per value with columns ``OUTPUT_COLUMNS`` and dtypes
    ``OUTPUT_DTYPES``; parameters that do not apply to a metric are NA.
    Rows (in order): attack_auc, attack_advantage, one tpr_at_fpr per target,
    epsilon_lower_bound, accountant_epsilon, train_accuracy, test_accuracy,
    generalization_gap (= train − test accuracy).
    """
    missing = [c for c in (*_REQUIRED_INPUT_COLUMNS, loss_column) if c not in outputs.columns]
    if missing:
        raise ValueError(f"outputs is missing column(s) {missing}")
    if ci_method not in CI_METHODS:
        raise ValueError(f"ci_method must be one of {CI_METHODS}, got {ci_method!r}")
    delta = check_delta(delta, allow_pure=True)  # δ = 0 tests a pure ε-DP claim
    alpha = check_one_sided_alpha(alpha)
    accountant_epsilon = float(accountant_epsilon)
    if math.isnan(accountant_epsilon) or accountant_epsilon < 0:
        raise ValueError(
            f"accountant_epsilon must be >= 0 (+inf for baselines), got {accountant_epsilon}"
        )

    split = outputs["split"].astype("string")

    def rows_of(name: str) -> pd.DataFrame:
        return outputs[(split == name).fillna(False).to_numpy()]

    # Sorting by example_id makes the seeded split independent of row order.
    members = rows_of(members_split).sort_values("example_id", kind="stable")
    nonmembers = rows_of(nonmembers_split).sort_values("example_id", kind="stable")
    utility = rows_of(utility_split)
    for frame, role, name in (
        (members, "member", members_split),
        (nonmembers, "non-member", nonmembers_split),
        (utility, "utility", utility_split),
    ):
        if frame.empty:
            raise ValueError(
                f"no {role} examples: no row has split == {name!r} "
                f"(splits present: {sorted(split.dropna().unique().tolist())})"
            )
    # A mislabeled split would silently turn the attack into noise.
    wrong_m = members["example_id"][~members["is_member"].astype(bool).to_numpy()]
    wrong_n = nonmembers["example_id"][nonmembers["is_member"].astype(bool).to_numpy()]
    if len(wrong_m) or len(wrong_n):
        raise ValueError(
            "is_member disagrees with split: "
            f"{len(wrong_m)} row(s) of {members_split!r} have is_member False "
            f"(example_id {wrong_m.head(10).tolist()}), "
            f"{len(wrong_n)} row(s) of {nonmembers_split!r} have is_member True "
            f"(example_id {wrong_n.head(10).tolist()})"
        )

    member_losses = _finite_losses(members, loss_column, "member")
    nonmember_losses = _finite_losses(nonmembers, loss_column, "non-member")

    roc = roc_curve(member_losses, nonmember_losses)
    n_m, n_n = roc.n_members, roc.n_nonmembers
    counts = {"attack": "loss", "loss": loss_column, "n_members": n_m, "n_nonmembers": n_n}

    rows: list[dict[str, object]] = [{"metric": "attack_auc", "value": roc_auc(roc), **counts}]

    adv = roc_max_advantage(roc)
    rows.append(
        {
            "metric": "attack_advantage",
            "value": adv.advantage,
            "fpr_realized": adv.fpr,
            "threshold": adv.threshold,
            "tp": adv.tp,
            "fp": adv.fp,
            **counts,
        }
    )
    for target, point in tpr_at_fpr(roc, fpr_targets).items():
        tpr_lo, tpr_hi = clopper_pearson(point.tp, n_m, alpha)
        rows.append(
            {
                "metric": "tpr_at_fpr",
                "value": point.tpr,
                "ci_lower": float(tpr_lo),
                "ci_upper": float(tpr_hi),
                "resolved": bool(n_n * target >= 1.0),
                "fpr_target": target,
                "fpr_realized": point.fpr,
                "threshold": point.threshold,
                "tp": point.tp,
                "fp": point.fp,
                **counts,
            }
        )

    bound = epsilon_lower_bound(
        member_losses, nonmember_losses, delta=delta, alpha=alpha, method=ci_method, seed=seed
    )
    rows.append(
        {
            "metric": "epsilon_lower_bound",
            "value": bound.epsilon,
            "attack": "loss",
            "loss": loss_column,
            "fpr_realized": bound.fpr,
            "threshold": bound.threshold,
            "tp": bound.tp,
            "fp": bound.fp,
            "n_members": bound.n_members,
            "n_nonmembers": bound.n_nonmembers,
            "delta": delta,
            "alpha": alpha,
            "ci_method": ci_method,
            "seed": bound.seed,
        }
    )
    rows.append({"metric": "accountant_epsilon", "value": accountant_epsilon, "delta": delta})

    train_acc = accuracy(members["correct"], f"split {members_split!r}")
    test_acc = accuracy(utility["correct"], f"split {utility_split!r}")
    rows.append({"metric": "train_accuracy", "value": train_acc})
    rows.append({"metric": "test_accuracy", "value": test_acc})
    rows.append({"metric": "generalization_gap", "value": train_acc - test_acc})
    return typed_frame(rows, OUTPUT_DTYPES)
