"""Membership-inference attacks with reference models: LiRA (Carlini et al. 2022) and RMIA
(Zarifzadeh et al. 2024), beside the loss threshold (the weakest rung).

Sign convention (every attack of this module): a SCORE IS HIGHER FOR "MORE LIKELY A
MEMBER". The statistics home (``dpaudit.dp.roc``, ``dpaudit.metrics.mia``) flags
"member" when a loss-like value is at most a threshold, so ``attack_statistics``
hands it ``-score``; a reported threshold t means "flag member when score ≥ t".

Inputs, all numpy, vectorized over examples and reference models:

* ``target_phi`` [n]: the signal of the attacked model on each example of the audit
  population P;
* ``reference_phi`` [K, n]: the same signal of K reference models;
* ``inclusion`` [K, n] bool: whether reference model k trained on example j.

The signal is the logit-scaled confidence φ = log p_y − log Σ_{y′≠y} p_{y′}
(``logit_confidence``), computed from logits as z_y − logsumexp_{y′≠y} z_{y′}:
no probability is ever formed, so φ is exact where p_y rounds to 1. φ = logit(p_y),
hence p_y = expit(φ) and the cross-entropy is softplus(−φ): the loss attack and RMIA
read the same φ (RMIA's temperature T enters through ``logit_confidence(...,
temperature=T)``).

numpy/scipy only: no TensorFlow (tests/unit/test_metrics_layering.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import special  # not scipy.stats: ~0.5 s of imports per job for norm's logsf and isf

from dpaudit.contract.delta import check_delta
from dpaudit.contract.metrics import typed_frame
from dpaudit.dp.hypothesis import check_one_sided_alpha, clopper_pearson
from dpaudit.dp.roc import DEFAULT_FPR_TARGETS, roc_auc, roc_curve, roc_max_advantage, tpr_at_fpr
from dpaudit.losses import logit_confidence
from dpaudit.metrics.mia import OUTPUT_DTYPES as MIA_OUTPUT_DTYPES
from dpaudit.metrics.mia import epsilon_lower_bound

__all__ = [
    "ATTACKS",
    "GLOBAL_VARIANCE_BELOW",
    "OUTPUT_DTYPES",
    "SCORE_SIGN",
    "AttackScores",
    "GaussianFit",
    "attack_statistics",
    "auc_interval",
    "gaussian_fit",
    "lira_offline",
    "lira_online",
    "logit_confidence",
    "loss_attack",
    "rmia",
    "run_attacks",
    "tune_rmia_offline_a",
]

SCORE_SIGN = "higher score = more likely a member"
ATTACKS: tuple[str, ...] = ("loss", "lira_online", "lira_offline", "rmia")
# Carlini et al. 2022: below about 64 reference models a per-example variance is too
# noisy; one variance per side (IN, OUT) pooled over all examples replaces it.
GLOBAL_VARIANCE_BELOW = 64
# Smallest standard deviation of a fit, against a zero spread of saturated signals.
MIN_STD = 1e-8


# ------------------------------------------------------------------ the signal


def _check_inputs(target_phi, reference_phi, inclusion):
    target = np.asarray(target_phi, dtype=np.float64)
    ref = np.asarray(reference_phi, dtype=np.float64)
    inc = np.asarray(inclusion)
    if target.ndim != 1:
        raise ValueError(f"target_phi must be [n], got shape {target.shape}")
    if ref.ndim != 2 or ref.shape[1] != target.size:
        raise ValueError(f"reference_phi must be [K, n={target.size}], got shape {ref.shape}")
    if inc.shape != ref.shape or inc.dtype != np.bool_:
        raise ValueError(f"inclusion must be a bool array of shape {ref.shape}, got {inc.dtype} {inc.shape}")
    for name, arr in (("target_phi", target), ("reference_phi", ref)):
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} has {int(np.sum(~np.isfinite(arr)))} non-finite value(s)")
    return target, ref, inc


@dataclass(frozen=True)
class AttackScores:
    """Per-example scores of one attack on one target (higher = more likely a member) and
    every choice the scores depend on (``params``: recorded with the rows)."""

    attack: str
    scores: np.ndarray
    params: dict[str, Any] = field(default_factory=dict)


def loss_attack(target_phi) -> AttackScores:
    """The loss threshold (Yeom et al. 2018) as a score: −CE = −softplus(−φ) = log p_y."""
    phi = np.asarray(target_phi, dtype=np.float64)
    return AttackScores("loss", special.log_expit(phi), {"signal": "neg_cross_entropy"})


# ------------------------------------------------------------------------ LiRA


@dataclass(frozen=True)
class GaussianFit:
    """Per-example Gaussian fits of the reference signals, IN (models that trained on the
    example) and OUT. ``global_variance``: one pooled variance per side (K < 64).
    ``imputed_in`` / ``imputed_out``: examples without any IN (OUT) model, whose mean is
    the other side's shifted by the median IN − OUT difference over the other examples."""

    mean_in: np.ndarray
    mean_out: np.ndarray
    std_in: np.ndarray
    std_out: np.ndarray
    n_in: np.ndarray
    n_out: np.ndarray
    global_variance: bool
    imputed_in: int
    imputed_out: int


def _side(ref: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(count, mean (NaN without models), per-example sum of squared residuals)."""
    count = mask.sum(axis=0)
    total = np.where(mask, ref, 0.0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / count
    resid = np.where(mask, ref - np.where(count > 0, mean, 0.0)[None, :], 0.0)
    return count, mean, np.square(resid).sum(axis=0)


def gaussian_fit(reference_phi, inclusion, *, global_variance: bool | None = None) -> GaussianFit:
    """Means and standard deviations of the IN and OUT reference signals per example.

    Per-example variance with ddof = 1 (the global pooled one where an example has
    fewer than 2 models on a side); ``global_variance`` (default: K < 64) pools the
    within-example squared residuals of all examples, Σ_j Σ_k (φ_kj − μ_j)² /
    Σ_j (n_j − 1), separately for IN and OUT (the spread of one example's signal
    across models, not the spread of the means across examples).
    """
    ref = np.asarray(reference_phi, dtype=np.float64)
    inc = np.asarray(inclusion, dtype=bool)
    k = ref.shape[0]
    if global_variance is None:
        global_variance = k < GLOBAL_VARIANCE_BELOW
    n_in, mean_in, ss_in = _side(ref, inc)
    n_out, mean_out, ss_out = _side(ref, ~inc)
    both = (n_in > 0) & (n_out > 0)
    if not both.any():
        raise ValueError("no example has both an IN and an OUT reference model: train more reference models")
    shift = float(np.median(mean_in[both] - mean_out[both]))
    imputed_in, imputed_out = int(np.sum(n_in == 0)), int(np.sum(n_out == 0))
    mean_in = np.where(n_in > 0, mean_in, mean_out + shift)
    mean_out = np.where(n_out > 0, mean_out, mean_in - shift)

    def pooled(count, ss):
        dof = np.clip(count - 1, 0, None).sum()
        return math.sqrt(ss.sum() / dof) if dof > 0 else math.nan

    std = []
    for count, ss in ((n_in, ss_in), (n_out, ss_out)):
        glob = pooled(count, ss)
        if math.isnan(glob):
            raise ValueError("no example has two reference models on one side: train more reference models")
        if global_variance:
            s = np.full(count.shape, glob)
        else:
            with np.errstate(invalid="ignore", divide="ignore"):
                s = np.where(count >= 2, np.sqrt(ss / (count - 1)), glob)
        std.append(np.maximum(s, MIN_STD))
    return GaussianFit(mean_in, mean_out, std[0], std[1], n_in, n_out, bool(global_variance),
                       imputed_in, imputed_out)


def _fit_params(fit: GaussianFit, k: int) -> dict[str, Any]:
    return {"reference_models": k, "global_variance": fit.global_variance,
            "imputed_in": fit.imputed_in, "imputed_out": fit.imputed_out}


def lira_online(target_phi, reference_phi, inclusion, *, global_variance: bool | None = None) -> AttackScores:
    """LiRA online: log N(φ; μ_in, σ_in²) − log N(φ; μ_out, σ_out²) per example (the
    log-likelihood ratio of the two Gaussian fits)."""
    target, ref, inc = _check_inputs(target_phi, reference_phi, inclusion)
    fit = gaussian_fit(ref, inc, global_variance=global_variance)
    zin = (target - fit.mean_in) / fit.std_in
    zout = (target - fit.mean_out) / fit.std_out
    score = 0.5 * (zout * zout - zin * zin) + np.log(fit.std_out) - np.log(fit.std_in)
    return AttackScores("lira_online", score, _fit_params(fit, ref.shape[0]))


def lira_offline(target_phi, reference_phi, inclusion, *, global_variance: bool | None = None) -> AttackScores:
    """LiRA offline: the one-sided test against the OUT fit, score −log P(Z ≥ φ),
    Z ~ N(μ_out, σ_out²) (monotone in 1 − P(Z > φ) of the paper, exact far in the tail)."""
    target, ref, inc = _check_inputs(target_phi, reference_phi, inclusion)
    fit = gaussian_fit(ref, inc, global_variance=global_variance)
    score = -special.log_ndtr(-(target - fit.mean_out) / fit.std_out)  # = -norm.logsf(z)
    return AttackScores("lira_offline", score, _fit_params(fit, ref.shape[0]))


# ------------------------------------------------------------------------ RMIA


def _log_mean_exp(logs: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log of the mean of exp(logs) over the models in ``mask`` (axis 0), and the counts."""
    count = mask.sum(axis=0)
    masked = np.where(mask, logs, -np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = special.logsumexp(masked, axis=0) - np.log(count)
    return np.where(count > 0, out, np.nan), count


def _rmia_log_marginal(ref: np.ndarray, inc: np.ndarray, offline_a: float | None) -> tuple[np.ndarray, int]:
    """log Pr(x) per example from the reference models' log p_y.

    Online (``offline_a`` None): ½(mean_IN p + mean_OUT p), one side alone where the
    other has no model. Offline: ½((1 + a)·mean_OUT p + (1 − a)) (Zarifzadeh et al.
    2024's linear approximation of the IN mean), the mean over all models where an
    example has no OUT model. Returns it and the number of fallback examples.
    """
    logp = special.log_expit(ref)
    lin, n_in = _log_mean_exp(logp, inc)
    lout, n_out = _log_mean_exp(logp, ~inc)
    lall, _ = _log_mean_exp(logp, np.ones_like(inc))
    if offline_a is None:
        with np.errstate(invalid="ignore"):
            both = np.logaddexp(lin, lout) - math.log(2.0)
        out = np.where(n_in == 0, lout, np.where(n_out == 0, lin, both))
        return out, int(np.sum((n_in == 0) | (n_out == 0)))
    a = float(offline_a)
    with np.errstate(divide="ignore", invalid="ignore"):
        mixed = np.logaddexp(math.log1p(a) + lout, math.log(1.0 - a) if a < 1 else -np.inf) - math.log(2.0)
    return np.where(n_out > 0, mixed, lall), int(np.sum(n_out == 0))


def rmia(target_phi, reference_phi, inclusion, *, population, gamma: float = 1.0,
         offline_a: float | None = None, temperature: float = 1.0) -> AttackScores:
    """RMIA: score(x) = fraction of population samples z with LR(x, z) ≥ γ, where

        LR(x, z) = [p_θ(x) / Pr(x)] / [p_θ(z) / Pr(z)],

    p_θ(x) = expit(φ_target(x)) the attacked model's probability of x's label (at the
    temperature φ was computed with; ``temperature`` is recorded, not applied) and Pr(·)
    the reference models' marginal (``_rmia_log_marginal``; online when ``offline_a`` is
    None, else the offline mixing with parameter a ∈ [0, 1]). ``population``: indices
    into the n examples of the z samples (data the target should not have trained on;
    the caller's choice). Pr(z) uses the same estimator as Pr(x). Computed in log space
    with one sort of the z ratios: O((n + |Z|) log |Z|).
    """
    target, ref, inc = _check_inputs(target_phi, reference_phi, inclusion)
    gamma = float(gamma)
    if not (gamma > 0 and math.isfinite(gamma)):
        raise ValueError(f"gamma must be finite and > 0, got {gamma}")
    if offline_a is not None and not 0.0 <= float(offline_a) <= 1.0:
        raise ValueError(f"offline_a must lie in [0, 1], got {offline_a}")
    population = np.asarray(population, dtype=np.int64)
    if population.ndim != 1 or population.size == 0:
        raise ValueError("population must be a non-empty 1-D array of example indices")
    log_marginal, fallback = _rmia_log_marginal(ref, inc, offline_a)
    ratio = special.log_expit(target) - log_marginal
    ratio_z = np.sort(ratio[population])
    count = np.searchsorted(ratio_z, ratio - math.log(gamma), side="right")
    params = {"reference_models": ref.shape[0], "gamma": gamma,
              "offline_a": None if offline_a is None else float(offline_a),
              "mode": "online" if offline_a is None else "offline",
              "temperature": float(temperature), "population_size": int(population.size),
              "marginal_fallback": fallback}
    return AttackScores("rmia", count / population.size, params)


def tune_rmia_offline_a(reference_phi, inclusion, *, population, gamma: float = 1.0,
                        held_out: int = 0, grid: Sequence[float] = tuple(np.linspace(0.0, 1.0, 11))
                        ) -> tuple[float, np.ndarray]:
    """The offline a maximizing the AUC of offline RMIA against reference model
    ``held_out`` (its inclusion row is the truth, the other models are the references).
    Returns (a, AUC per grid value); ties go to the smallest a."""
    ref = np.asarray(reference_phi, dtype=np.float64)
    inc = np.asarray(inclusion, dtype=bool)
    if ref.shape[0] < 3:
        raise ValueError("tuning a needs at least 3 reference models (one held out)")
    keep = np.arange(ref.shape[0]) != held_out
    truth = inc[held_out]
    aucs = []
    for a in grid:
        s = rmia(ref[held_out], ref[keep], inc[keep], population=population, gamma=gamma, offline_a=a).scores
        aucs.append(roc_auc(roc_curve(-s[truth], -s[~truth])))
    aucs = np.asarray(aucs)
    return float(np.asarray(grid)[int(np.argmax(aucs))]), aucs


# ------------------------------------------------------------------ statistics

# mia's columns (``loss`` names the signal) plus the attack, intervals and flags.
OUTPUT_DTYPES: dict[str, str] = {
    "attack": "string",
    **MIA_OUTPUT_DTYPES,
    "value_bool": "boolean",
    "ci_lower": "float64",
    "ci_upper": "float64",
    "resolved": "boolean",
    "accountant_epsilon": "float64",
}


def auc_interval(auc: float, n_members: int, n_nonmembers: int, alpha: float = 0.05) -> tuple[float, float]:
    """Two-sided (1 − α) normal interval of the AUC with the Hanley & McNeil (1982) variance:
    [A(1 − A) + (n_m − 1)(Q1 − A²) + (n_n − 1)(Q2 − A²)] / (n_m n_n), Q1 = A/(2 − A),
    Q2 = 2A²/(1 + A). Clipped to [0, 1]."""
    a = float(auc)
    q1, q2 = a / (2.0 - a), 2.0 * a * a / (1.0 + a)
    var = (a * (1 - a) + (n_members - 1) * (q1 - a * a) + (n_nonmembers - 1) * (q2 - a * a)) / (
        n_members * n_nonmembers)
    half = -special.ndtri(alpha / 2.0) * math.sqrt(max(var, 0.0))
    return max(0.0, a - half), min(1.0, a + half)


def attack_statistics(scores, is_member, *, delta: float, seed: int, alpha: float = 0.05,
                      fpr_targets: Sequence[float] = DEFAULT_FPR_TARGETS,
                      accountant_epsilon: float | None = None, attack: str | None = None,
                      signal: str = "logit_confidence") -> pd.DataFrame:
    """The mia family's statistics of one attack on one target, in long format.

    Rows: ``attack_auc`` (with a Hanley–McNeil interval in ci_lower/ci_upper),
    ``attack_advantage``, ``tpr_at_fpr`` per target (realized FPR, counts, two-sided
    Clopper–Pearson interval on the TPR; ``resolved`` False and value NaN where
    1/n_nonmembers > target, i.e. no threshold can realize a nonzero FPR at or below
    it), ``epsilon_lower_bound`` (``dpaudit.metrics.mia.epsilon_lower_bound``, threshold
    chosen on a seeded held-out half) and, given ``accountant_epsilon``,
    ``epsilon_lower_bound_exceeds_accountant`` (value_bool: the attack certifies more
    than the accountant claims: a violation). ``threshold`` is in score units (flag
    member when score ≥ threshold). Column dtypes ``OUTPUT_DTYPES``.
    """
    s = np.asarray(scores, dtype=np.float64)
    member = np.asarray(is_member, dtype=bool)
    if s.shape != member.shape or s.ndim != 1:
        raise ValueError("scores and is_member must be 1-D of the same length")
    delta = check_delta(delta, allow_pure=True)
    alpha = check_one_sided_alpha(alpha)
    loss_m, loss_n = -s[member], -s[~member]
    roc = roc_curve(loss_m, loss_n)
    n_m, n_n = roc.n_members, roc.n_nonmembers
    base = {"attack": attack, "loss": signal, "n_members": n_m, "n_nonmembers": n_n}
    auc = roc_auc(roc)
    lo, hi = auc_interval(auc, n_m, n_n, alpha)
    rows: list[dict[str, Any]] = [{**base, "metric": "attack_auc", "value": auc, "ci_lower": lo, "ci_upper": hi,
                                   "alpha": alpha}]
    adv = roc_max_advantage(roc)
    rows.append({**base, "metric": "attack_advantage", "value": adv.advantage, "fpr_realized": adv.fpr,
                 "threshold": -adv.threshold, "tp": adv.tp, "fp": adv.fp})
    for target, point in tpr_at_fpr(roc, fpr_targets).items():
        resolved = n_n * target >= 1.0
        tpr_lo, tpr_hi = clopper_pearson(point.tp, n_m, alpha)
        rows.append({**base, "metric": "tpr_at_fpr", "value": point.tpr if resolved else math.nan,
                     "fpr_target": target, "fpr_realized": point.fpr, "threshold": -point.threshold,
                     "tp": point.tp, "fp": point.fp, "ci_lower": float(tpr_lo), "ci_upper": float(tpr_hi),
                     "alpha": alpha, "resolved": bool(resolved)})
    bound = epsilon_lower_bound(loss_m, loss_n, delta=delta, alpha=alpha, method="split", seed=seed)
    rows.append({**base, "metric": "epsilon_lower_bound", "value": bound.epsilon, "fpr_realized": bound.fpr,
                 "threshold": -bound.threshold, "tp": bound.tp, "fp": bound.fp, "n_members": bound.n_members,
                 "n_nonmembers": bound.n_nonmembers, "delta": delta, "alpha": alpha, "ci_method": "split",
                 "seed": bound.seed})
    if accountant_epsilon is not None:
        acc = float(accountant_epsilon)
        rows.append({**base, "metric": "epsilon_lower_bound_exceeds_accountant", "value": math.nan,
                     "value_bool": bool(bound.epsilon > acc), "accountant_epsilon": acc, "delta": delta,
                     "alpha": alpha})
    return typed_frame(rows, OUTPUT_DTYPES)


def run_attacks(target_phi, reference_phi, inclusion, *, population, attacks: Sequence[str] = ATTACKS,
                gamma: float = 1.0, offline_a: float | None = None, rmia_phi=None,
                rmia_reference_phi=None, rmia_temperature: float = 1.0,
                global_variance: bool | None = None) -> dict[str, AttackScores]:
    """Every requested attack's scores on one target. RMIA reads ``rmia_phi`` /
    ``rmia_reference_phi`` (φ at its temperature) when given, else the LiRA φ.
    ``offline_a`` None runs RMIA online; ``"tune"`` picks it on reference model 0
    (``tune_rmia_offline_a``; the value is recorded)."""
    unknown = set(attacks) - set(ATTACKS)
    if unknown:
        raise ValueError(f"unknown attack(s) {sorted(unknown)}; known: {ATTACKS}")
    out: dict[str, AttackScores] = {}
    if "loss" in attacks:
        out["loss"] = loss_attack(target_phi)
    if "lira_online" in attacks:
        out["lira_online"] = lira_online(target_phi, reference_phi, inclusion, global_variance=global_variance)
    if "lira_offline" in attacks:
        out["lira_offline"] = lira_offline(target_phi, reference_phi, inclusion, global_variance=global_variance)
    if "rmia" in attacks:
        t_phi = target_phi if rmia_phi is None else rmia_phi
        r_phi = reference_phi if rmia_reference_phi is None else rmia_reference_phi
        a = offline_a
        tuned = None
        if isinstance(a, str):
            if a != "tune":
                raise ValueError(f"offline_a must be None, a number in [0, 1] or 'tune', got {a!r}")
            a, tuned = tune_rmia_offline_a(r_phi, inclusion, population=population, gamma=gamma)
        result = rmia(t_phi, r_phi, inclusion, population=population, gamma=gamma, offline_a=a,
                      temperature=rmia_temperature)
        if tuned is not None:
            result.params["offline_a_tuned_on"] = "reference model 0"
        out["rmia"] = result
    return out
