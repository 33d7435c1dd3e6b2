"""ε lower bounds and estimates from canary scores: the statistics of the canary audit.

A canary audit plants m canaries, each included in training independently with
probability ½, and scores every canary after training (higher = "looks included").
Three estimators turn the scores into statements about ε; all live here, beside
Clopper–Pearson in ``dpaudit.dp.hypothesis``, so every family imports them from one
place.

* One-run bound (Steinke, Nasr, Jagielski 2023, "Privacy auditing with one (1)
  training run", Thm. 5.2): the auditor guesses "in" for the k₊ highest scores and
  "out" for the k₋ lowest and abstains on the rest; with r = k₊ + k₋ guesses and v
  correct, an (ε, δ)-DP mechanism has
  P[W ≥ v] ≤ β + 2mδ·max_{1≤i≤v} (P[B ≥ v − i] − β)/i,  B ~ Bin(r, e^ε/(1+e^ε)),
  β = P[B ≥ v]. ε_LB is the largest ε whose p-value is ≤ the significance. The
  guess counts are chosen from a fixed candidate list with a Bonferroni correction.
* f-DP one-run bound (Mahloujifar, Melis, Chaudhuri 2025, "Auditing f-differential
  privacy in one run", the capped reconstruction recursion of their Sec. 4): the
  same guesses tested against the trade-off curve of the Gaussian mechanism that is
  exactly (ε, δ)-DP; it is a lower bound on ε for mechanisms whose trade-off curve
  is at least that Gaussian one, tighter than the Steinke bound there.
* GDP estimate (Nasr et al. 2023, "Tight auditing of differentially private machine
  learning"): one-sided Clopper–Pearson upper bounds on FPR and FNR at every
  threshold (Bonferroni over the 2K bounds), μ = max Φ⁻¹(1 − FPR_UB) − Φ⁻¹(FNR_UB)
  clamped at 0, and ε(μ, δ) from δ(ε; μ) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)
  (Dong, Roth, Su 2019, Cor. 2.13). An estimate under a Gaussian trade-off, not a
  distribution-free bound.

* Claim-curve test (Nasr et al. 2023, Sec. 4: many independent trials; the claim as
  a whole trade-off curve, Dong, Roth, Su 2022): for independent trials of the
  claimed mechanism (the audit twin's gradient canaries, or releases of a linear
  mechanism), one-sided Clopper–Pearson upper bounds on FPR and FNR at rank-spaced
  thresholds of the pooled scores (chosen before the labels are looked at), with
  Bonferroni over the 2K bounds. The claim is rejected when some (FPR_ub, FNR_ub), or
  its mirror (FNR_ub, FPR_ub), lies below the claimed curve f_claim
  (``dpaudit.dp.tradeoff``): no 2mδ term and no change of δ. The same bounds give the
  many-trials (ε, δ) lower bound at the run's own δ,
  max over thresholds of ln((1 − δ − FNR_ub)/FPR_ub) and ln((1 − δ − FPR_ub)/FNR_ub).

Every estimator also reports its ceiling: what perfect guessing (perfectly separated
scores) certifies with the same counts and confidence. A bound at its ceiling says
"the audit could not have shown more", not "ε is this".
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import special
from scipy.special import _ufuncs

from dpaudit.contract.delta import check_delta
from dpaudit.dp.hypothesis import clopper_pearson_upper, epsilon_from_rate_bounds
from dpaudit.dp.mechanisms import gaussian_epsilon_analytic, gaussian_sigma_analytic

__all__ = [
    "GUESS_SIDES",
    "ClaimCurveTest",
    "claim_curve_test",
    "GdpEstimate",
    "OneRunBound",
    "candidate_thresholds",
    "check_significance",
    "default_guess_counts",
    "gdp_epsilon",
    "gdp_estimate",
    "guesses_curve",
    "one_run_audit",
    "one_run_epsilon",
    "one_run_fdp_epsilon",
    "one_run_fdp_rejects",
    "one_run_delta",
    "one_run_p_value",
    "threshold_ranks",
]

GUESS_SIDES = ("top", "both")
# ε beyond this is reported as the search limit: e^64 guesses are never made.
_EPS_SEARCH_LIMIT = 64.0


def check_significance(alpha: float) -> float:
    alpha = float(alpha)
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"significance (1 − confidence) must lie in (0, 0.5), got {alpha}")
    return alpha


def _check_counts(m: int, r: int, v: int) -> tuple[int, int, int]:
    m, r, v = int(m), int(r), int(v)
    if not 0 <= v <= r <= m or m < 1:
        raise ValueError(f"one-run counts need 0 <= correct <= guesses <= canaries >= 1, got {v}, {r}, {m}")
    return m, r, v


# ------------------------------------------------------------------ one-run (Steinke et al.)


def _binom_sf(k, n: int, p: float) -> np.ndarray:
    """``scipy.stats.binom.sf(k, n, p)`` for integer k, n ≥ 1 and p in [0, 1] (1-D): the same
    kernel on the support, clipped to [0, 1] as ``binom.sf`` does, 1 below it and 0 from n on.
    Without scipy.stats, whose import and per-call checks cost a canary job more than its
    p-values (the tests hold ``binom.sf`` as the oracle)."""
    k = np.atleast_1d(np.asarray(k, dtype=np.float64))
    out = np.where(k < 0, 1.0, 0.0)
    inside = (k >= 0) & (k < n)
    out[inside] = np.clip(_ufuncs._binom_sf(np.floor(k[inside]), float(n), float(p)), 0, 1)
    return out


def one_run_p_value(m: int, r: int, v: int, eps: float, delta: float) -> float:
    """p-value of "the mechanism is (ε, δ)-DP" after v correct of r guesses on m canaries.

    Steinke et al. 2023, Thm. 5.2 (its δ term is 2mδ·max_i (P[B ≥ v − i] − β)/i).
    """
    m, r, v = _check_counts(m, r, v)
    delta = check_delta(delta, allow_pure=True)
    if v == 0:
        return 1.0
    q = special.expit(float(eps))
    beta = float(_binom_sf(v - 1, r, q)[0])
    if delta == 0.0:
        return min(beta, 1.0)
    return min(beta + 2.0 * m * delta * _largest_slack(r, v, q, beta), 1.0)


def _largest_slack(r: int, v: int, q: float, beta: float) -> float:
    """max over i = 1..v of (P[B ≥ v − i] − β)/i, B ~ Bin(r, q), β = P[B ≥ v]: the terms in blocks of
    i (64, then doubling). A tail is at most 1 (``_binom_sf`` clips), so no term from i on exceeds
    (1 − β)/i (rounding is monotone); once the largest term so far reaches that, the rest cannot
    change the maximum, the float the maximum of all v terms gives."""
    largest, start, size = -math.inf, 1, 64
    while start <= v:
        i = np.arange(start, min(start + size, v + 1))
        block = float(np.max((_binom_sf(v - i - 1, r, q) - beta) / i))
        if math.isnan(block):
            return block
        largest, start, size = max(largest, block), start + size, 2 * size
        if largest >= (1.0 - beta) / start:
            break
    return largest


def _largest_rejected(reject_gap, lo: float = 0.0) -> float:
    """Largest ε with reject_gap(ε) > 0 (gap decreasing in ε); ``lo`` when none is. Each ε's gap
    is computed once: brentq starts at the bracket's ends, already evaluated while bracketing."""
    reject_gap = functools.lru_cache(maxsize=None)(reject_gap)
    if reject_gap(lo) <= 0:
        return lo
    hi = max(1.0, 2.0 * lo)
    while reject_gap(hi) > 0:
        if hi >= _EPS_SEARCH_LIMIT:
            return _EPS_SEARCH_LIMIT
        lo, hi = hi, 2.0 * hi
    from scipy import optimize  # here: a baseline run's canary job never searches

    return float(optimize.brentq(reject_gap, lo, hi, xtol=1e-6))


def one_run_epsilon(m: int, r: int, v: int, alpha: float, delta: float) -> float:
    """Largest ε at which (ε, δ)-DP is rejected at significance α (0 when none is)."""
    m, r, v = _check_counts(m, r, v)
    alpha = check_significance(alpha)
    delta = check_delta(delta, allow_pure=True)
    if v == 0 or one_run_p_value(m, r, v, 0.0, 0.0) > alpha:
        return 0.0  # even pure 0-DP is not rejected, so nothing larger is
    return _largest_rejected(lambda eps: alpha - one_run_p_value(m, r, v, eps, delta))


def one_run_delta(delta: float, alpha: float, canaries: int) -> float:
    """δ at which the distribution-free one-run bound tests the accountant's claim.

    Its p-value carries 2mδ (m canaries); at the run's δ that term alone can exceed the
    significance (m = 5,000, δ = 6.2e-4 gives 6.2), so no ε is ever rejected. Every
    accountant certifies a whole privacy profile ε(δ′), so the bound tests the point
    δ′ = min(δ, α/(20m)), where the term costs at most α/10, against ε(δ′).
    """
    return min(float(delta), float(alpha) / (20.0 * max(int(canaries), 1)))


# ------------------------------------------------------------------ f-DP one-run (Mahloujifar et al.)


@functools.lru_cache(maxsize=4096)
def _gaussian_mu(eps: float, delta: float) -> float:
    """μ = 1/σ of the Gaussian mechanism (sensitivity 1) that is exactly (ε, δ)-DP."""
    if delta <= 0.0:
        return math.inf  # only δ > 0 has a Gaussian curve; refused by the caller
    if eps <= 0.0:
        return 0.0
    return 1.0 / gaussian_sigma_analytic(1.0, eps, delta)


def one_run_fdp_rejects(m: int, r: int, v: int, alpha: float, mu: float) -> float:
    """Positive when v correct of r guesses rejects μ-GDP at significance α.

    The capped recursion of Mahloujifar et al. (2025): starting from the mass
    α·v/m of correct and α·(r − v)/m of wrong guesses, walk down the correct
    guesses; each step raises the wrong-guess mass to at least the Gaussian
    trade-off curve's inverse at the correct-guess mass, Φ(Φ⁻¹(x) − μ), and moves
    the correct-guess mass accordingly. The claim is rejected when the final masses
    exceed the guessing rate r/m. Returns that excess.
    """
    correct = alpha * v / m
    wrong = alpha * (r - v) / m
    for i in range(v - 1, -1, -1):
        raised = max(wrong, float(special.ndtr(special.ndtri(correct) - mu)))
        if raised == wrong:
            break  # neither mass can change again
        correct = min(correct + i / (r - i) * (raised - wrong), 1.0)
        wrong = raised
    return correct + wrong - r / m


def one_run_fdp_epsilon(m: int, r: int, v: int, alpha: float, delta: float) -> float:
    """Largest ε whose exactly-(ε, δ)-DP Gaussian trade-off curve is rejected at α."""
    m, r, v = _check_counts(m, r, v)
    alpha = check_significance(alpha)
    delta = check_delta(delta, allow_pure=True)
    if delta == 0.0:
        raise ValueError("the f-DP one-run bound compares with a Gaussian curve and needs delta > 0")
    if v == 0:
        return 0.0
    return _largest_rejected(lambda eps: one_run_fdp_rejects(m, r, v, alpha, _gaussian_mu(eps, delta)))


# ------------------------------------------------------------------ guesses from scores


@functools.lru_cache(maxsize=4096)
def _cached_bound(method: str, m: int, r: int, v: int, alpha: float, delta: float) -> float:
    """``one_run_epsilon`` or ``one_run_fdp_epsilon`` (pure functions of their numbers), kept: an
    audit's ceilings (v = r) repeat across its candidates' perfect guesses and across the score
    kinds of one set of canaries."""
    return (one_run_epsilon if method == "steinke" else one_run_fdp_epsilon)(m, r, v, alpha, delta)


@dataclass(frozen=True)
class OneRunBound:
    """A one-run bound with what it depends on (see ``one_run_audit``)."""

    epsilon: float
    ceiling: float
    ceiling_max: float
    method: str
    canaries: int
    guesses: int
    guesses_top: int
    guesses_bottom: int
    correct: int
    candidates: int
    alpha: float
    alpha_per_candidate: float
    delta: float


def default_guess_counts(m: int) -> list[int]:
    """1-2-5 steps from 10 up to m, and m itself."""
    counts = [c * 10**e for e in range(1, 8) for c in (1, 2, 5) if c * 10**e < m]
    return [*counts, int(m)]


def _guess_candidates(m: int, counts, sides) -> list[tuple[int, int]]:
    out = []
    for count in counts:
        count = int(count)
        if not 1 <= count <= m:
            raise ValueError(f"guess counts must lie in [1, {m}] (the canaries), got {count}")
        for side in sides:
            if side == "top":
                out.append((count, 0))
            elif side == "both":
                if count >= 2:
                    out.append((count - count // 2, count // 2))
            else:
                raise ValueError(f"guess side must be one of {GUESS_SIDES}, got {side!r}")
    return sorted(set(out))


def _checked_scores(scores, included) -> tuple[np.ndarray, np.ndarray]:
    """float64 scores and bool inclusion bits: 1-D, same non-zero length, finite scores."""
    scores = np.asarray(scores, dtype=np.float64)
    included = np.asarray(included, dtype=bool)
    if scores.shape != included.shape or scores.ndim != 1 or scores.size == 0:
        raise ValueError("scores and included must be 1-D arrays of the same, non-zero length")
    if not np.isfinite(scores).all():
        raise ValueError(f"{int((~np.isfinite(scores)).sum())} canary score(s) are not finite")
    return scores, included


def _sorted_inclusion(scores, included) -> np.ndarray:
    scores, included = _checked_scores(scores, included)
    # Ties broken by canary position, a choice made before looking at inclusion.
    order = np.lexsort((np.arange(scores.size), -scores))
    return included[order]


def one_run_audit(scores, included, *, alpha: float, delta: float, method: str = "steinke",
                  guess_counts=None, sides=GUESS_SIDES) -> OneRunBound:
    """One-run ε lower bound from canary scores (higher = guessed in).

    Every candidate (k₊, k₋) guesses "in" for the k₊ highest and "out" for the k₋
    lowest scores; candidates are the guess counts (default ``default_guess_counts``)
    times the sides (``top``: k₋ = 0; ``both``: k₊ ≈ k₋). The bound is the largest
    over candidates, each at α / #candidates (Bonferroni), so the choice is paid for.
    ``ceiling`` is what perfect guessing certifies with the chosen candidate's
    counts, ``ceiling_max`` the largest over candidates (the audit's best case).
    ``method``: ``steinke`` or ``fdp`` (Gaussian trade-off, needs δ > 0).
    """
    alpha = check_significance(alpha)
    delta = check_delta(delta, allow_pure=True)
    if method not in ("steinke", "fdp"):
        raise ValueError(f"method must be 'steinke' or 'fdp', got {method!r}")
    bound = functools.partial(_cached_bound, method)
    sorted_in = _sorted_inclusion(scores, included)
    m = sorted_in.size
    candidates = _guess_candidates(m, guess_counts or default_guess_counts(m), sides)
    per = alpha / len(candidates)
    in_top = np.concatenate([[0], np.cumsum(sorted_in)])
    out_bottom = np.concatenate([[0], np.cumsum(~sorted_in[::-1])])
    best = None
    ceiling_max = 0.0
    for top, bottom in candidates:
        r = top + bottom
        if top + bottom > m:
            continue
        v = int(in_top[top] + out_bottom[bottom])
        ceiling = bound(m, r, r, per, delta)
        ceiling_max = max(ceiling_max, ceiling)
        eps = bound(m, r, v, per, delta)
        if best is None or eps > best[0]:
            best = (eps, ceiling, top, bottom, v)
    eps, ceiling, top, bottom, v = best
    return OneRunBound(epsilon=float(eps), ceiling=float(ceiling), ceiling_max=float(ceiling_max),
                       method=method, canaries=int(m), guesses=int(top + bottom), guesses_top=int(top),
                       guesses_bottom=int(bottom), correct=int(v), candidates=len(candidates),
                       alpha=alpha, alpha_per_candidate=per, delta=delta)


def guesses_curve(scores, included, *, alpha: float, delta: float, guess_counts=None) -> pd.DataFrame:
    """The Steinke bound of the top-r guesses for each r, at α each (no correction: a
    diagnostic of where the bound saturates, not a certificate), with its ceiling."""
    alpha = check_significance(alpha)
    sorted_in = _sorted_inclusion(scores, included)
    m = sorted_in.size
    counts = sorted(set(int(c) for c in (guess_counts or default_guess_counts(m))))
    in_top = np.concatenate([[0], np.cumsum(sorted_in)])
    rows = []
    for r in counts:
        v = int(in_top[r])
        rows.append({"guesses": r, "correct": v, "epsilon": one_run_epsilon(m, r, v, alpha, delta),
                     "ceiling": one_run_epsilon(m, r, r, alpha, delta), "canaries": m,
                     "alpha": alpha, "delta": delta})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ GDP estimate (Nasr et al.)


def gdp_epsilon(mu: float, delta: float) -> float:
    """ε of μ-GDP at δ: the ε of the Gaussian mechanism with σ = 1/μ (Dong et al. 2019,
    Cor. 2.13; computed in log space by ``dpaudit.dp.mechanisms``)."""
    mu = float(mu)
    if not mu >= 0 or math.isnan(mu):
        raise ValueError(f"mu must be >= 0, got {mu}")
    if mu == 0.0:
        return 0.0
    if math.isinf(mu):
        return math.inf
    return gaussian_epsilon_analytic(1.0 / mu, delta)


@dataclass(frozen=True)
class GdpEstimate:
    mu: float
    epsilon: float
    mu_ceiling: float
    ceiling: float
    threshold: float
    fpr_upper: float
    fnr_upper: float
    thresholds: int
    included: int
    excluded: int
    alpha: float
    delta: float


def _gdp_mu(fpr_ub, fnr_ub):
    with np.errstate(divide="ignore", invalid="ignore"):
        return special.ndtri(1.0 - fpr_ub) - special.ndtri(fnr_ub)


def candidate_thresholds(scores: np.ndarray, per_tail: int | None, *, presorted: bool = False) -> np.ndarray:
    """Thresholds the GDP estimate tries: every distinct score (``per_tail=None``), or
    the k-th highest and k-th lowest score for ``per_tail`` geometrically spaced ranks
    k from 1 to m/2. They depend on the pooled scores only, never on inclusion, so the
    Bonferroni correction over them is exact; fewer thresholds pay less for the choice
    (at m = 5,000 ideal DP-SGD canaries, 40 per tail raise the median estimate from
    0.33 to 0.45 at ε = 1). ``presorted``: ``scores`` are already in ascending order
    (the same thresholds, one sort fewer)."""
    if per_tail is None:
        return np.unique(scores)
    per_tail = int(per_tail)
    if per_tail < 1:
        raise ValueError(f"threshold ranks per tail must be >= 1, got {per_tail}")
    ordered = np.asarray(scores) if presorted else np.sort(scores)
    m = ordered.size
    ranks = threshold_ranks(m, per_tail)
    return np.unique(np.concatenate([ordered[m - ranks], ordered[np.minimum(ranks, m - 1)]]))


@functools.lru_cache(maxsize=64)
def threshold_ranks(m: int, per_tail: int) -> np.ndarray:
    """The ranks k of ``candidate_thresholds`` for m pooled scores (read-only; kept: a detectable-factor
    search asks for the same m and per_tail a thousand times)."""
    ranks = np.unique(np.round(np.geomspace(1, max(m / 2, 1), per_tail)).astype(np.int64))
    ranks = ranks[(ranks >= 1) & (ranks <= m)]
    ranks.setflags(write=False)
    return ranks


@dataclass(frozen=True)
class _ThresholdCounts:
    """Errors of "in iff score ≥ t" at ``candidate_thresholds`` and their one-sided
    Clopper–Pearson upper bounds at α/(2K) each (Bonferroni over the 2K bounds)."""

    thresholds: np.ndarray
    fn: np.ndarray  # included scored below t
    fp: np.ndarray  # excluded scored at or above t
    fpr_upper: np.ndarray
    fnr_upper: np.ndarray
    n_pos: int
    n_neg: int
    per_bound: float


def _threshold_counts(scores, included, per_tail, alpha: float, what: str, units: str) -> _ThresholdCounts:
    scores, included = _checked_scores(scores, included)
    pos, neg = np.sort(scores[included]), np.sort(scores[~included])
    n_pos, n_neg = pos.size, neg.size
    if n_pos == 0 or n_neg == 0:
        raise ValueError(f"{what} needs included and excluded {units}, got {n_pos} and {n_neg}")
    thresholds = candidate_thresholds(scores, per_tail)
    per = alpha / (2 * thresholds.size)
    fn = np.searchsorted(pos, thresholds, side="left")
    fp = n_neg - np.searchsorted(neg, thresholds, side="left")
    return _ThresholdCounts(thresholds=thresholds, fn=fn, fp=fp,
                            fpr_upper=np.atleast_1d(clopper_pearson_upper(fp, n_neg, per)),
                            fnr_upper=np.atleast_1d(clopper_pearson_upper(fn, n_pos, per)),
                            n_pos=int(n_pos), n_neg=int(n_neg), per_bound=per)


def gdp_estimate(scores, included, *, alpha: float, delta: float, per_tail: int | None = 40) -> GdpEstimate:
    """GDP estimate of ε from canary scores (test "in" iff score ≥ t for each candidate t,
    ``candidate_thresholds``).

    Bonferroni over 2K one-sided Clopper–Pearson bounds (K thresholds), μ clamped at 0
    (a worse-than-chance test is no evidence). ``ceiling``: the estimate when one
    threshold separates the scores perfectly, with the same K and counts.
    """
    alpha = check_significance(alpha)
    delta = check_delta(delta, allow_pure=True)
    if delta == 0.0:
        raise ValueError("the GDP estimate converts μ to ε at a delta > 0")
    c = _threshold_counts(scores, included, per_tail, alpha, "the GDP estimate", "canaries")
    thresholds, k, per, n_pos, n_neg = c.thresholds, c.thresholds.size, c.per_bound, c.n_pos, c.n_neg
    fpr_ub, fnr_ub = c.fpr_upper, c.fnr_upper
    mus = _gdp_mu(fpr_ub, fnr_ub)
    best = int(np.argmax(mus))
    mu = max(float(mus[best]), 0.0)
    # perfect separation: no false positive and no false negative at one threshold
    mu_ceiling = max(float(_gdp_mu(clopper_pearson_upper(0, n_neg, per), clopper_pearson_upper(0, n_pos, per))), 0.0)
    return GdpEstimate(mu=mu, epsilon=gdp_epsilon(mu, delta), mu_ceiling=mu_ceiling,
                       ceiling=gdp_epsilon(mu_ceiling, delta), threshold=float(thresholds[best]),
                       fpr_upper=float(fpr_ub[best]), fnr_upper=float(fnr_ub[best]),
                       thresholds=int(k), included=int(n_pos), excluded=int(n_neg), alpha=alpha, delta=delta)


# ------------------------------------------------------------------ claim-curve test (many trials)


@dataclass(frozen=True)
class ClaimCurveTest:
    """The claim-curve test of independent trials against a claimed trade-off curve.

    ``p_value``: the Bonferroni-adjusted significance at which the claim is rejected
    (rejected iff ``p_value`` ≤ ``alpha``), i.e. 2K times the smallest per-bound level
    at which some threshold's point falls below the curve, capped at 1. ``worst_*``:
    that threshold's bounds at the test's own per-bound level α/(2K) and the claimed
    FNR there (its mirror's when ``worst_mirrored``). ``epsilon``: the many-trials
    (ε, δ) lower bound at ``delta`` with the same bounds, ``ceiling`` what perfect
    separation certifies with these counts.
    """

    rejected: bool
    p_value: float
    worst_fpr_upper: float
    worst_fnr_upper: float
    worst_claimed_fnr: float
    worst_mirrored: bool
    worst_threshold: float
    epsilon: float
    ceiling: float
    thresholds: int
    included: int
    excluded: int
    alpha: float
    delta: float


def _curve_gaps(curve, fpr_ub: np.ndarray, fnr_ub: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(gap, mirrored): claimed FNR minus bound, for the point and its mirror (> 0 rejects). One
    curve call for both (``curve.fnr`` is elementwise: the values of two calls)."""
    claimed = np.asarray(curve.fnr(np.concatenate([fpr_ub, fnr_ub])))
    direct = claimed[:fpr_ub.size] - fnr_ub
    mirror = claimed[fpr_ub.size:] - fpr_ub
    return np.maximum(direct, mirror), mirror > direct


def _upper_bounds(fp: np.ndarray, n_neg: int, fn: np.ndarray, n_pos: int, level: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(FPR_ub, FNR_ub) at per-threshold levels, in one Clopper–Pearson call (elementwise: the
    values of two calls)."""
    bounds = np.atleast_1d(clopper_pearson_upper(np.concatenate([fp, fn]),
                                                 np.repeat([n_neg, n_pos], [fp.size, fn.size]),
                                                 np.concatenate([level, level])))
    return bounds[:fp.size], bounds[fp.size:]


def claim_curve_test(scores, included, curve, *, alpha: float, delta: float = 0.0,
                     per_tail: int | None = 40) -> ClaimCurveTest:
    """Test independent trials (higher score = looks included) against ``curve`` (a
    ``dpaudit.dp.tradeoff.ClaimedCurve``; module docstring). The thresholds are
    ``candidate_thresholds`` of the pooled scores; "in" iff score ≥ t."""
    alpha = check_significance(alpha)
    delta = check_delta(delta, allow_pure=True)
    c = _threshold_counts(scores, included, per_tail, alpha, "the claim-curve test", "trials")
    thresholds, k, per, n_pos, n_neg = c.thresholds, c.thresholds.size, c.per_bound, c.n_pos, c.n_neg
    fp, fn, fpr_ub, fnr_ub = c.fp, c.fn, c.fpr_upper, c.fnr_upper
    gaps, _ = _curve_gaps(curve, fpr_ub, fnr_ub)
    # Smallest per-bound level at which each threshold rejects: the gap grows with the
    # level (narrower bounds), so bisect in log level; 0.5 (the median) is the largest.
    levels = np.full(k, np.nan)
    top = np.full(k, 0.5)
    reject_top, _ = _curve_gaps(curve, *_upper_bounds(fp, n_neg, fn, n_pos, top))
    live = reject_top > 0
    if live.any():
        lo = np.full(int(live.sum()), math.log(1e-300))
        hi = np.full(int(live.sum()), math.log(0.5))
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            g, _ = _curve_gaps(curve, *_upper_bounds(fp[live], n_neg, fn[live], n_pos, np.exp(mid)))
            hi = np.where(g > 0, mid, hi)
            lo = np.where(g > 0, lo, mid)
        levels[live] = np.exp(hi)
    adjusted = np.where(np.isnan(levels), 1.0, np.minimum(2 * k * levels, 1.0))
    # the reported point: the threshold with the smallest adjusted level (ties: the largest gap)
    worst = int(np.lexsort((-gaps, adjusted))[0])
    _, mirrored = _curve_gaps(curve, fpr_ub[worst:worst + 1], fnr_ub[worst:worst + 1])
    rejected = bool(gaps.max() > 0)
    p_value = float(adjusted[worst])
    if rejected:
        p_value = min(p_value, alpha)  # bisection precision never contradicts the direct check
    else:
        p_value = max(p_value, np.nextafter(alpha, 1.0))
    claimed = float(curve.fnr(fnr_ub[worst]) if mirrored[0] else curve.fnr(fpr_ub[worst]))
    terms = epsilon_from_rate_bounds(1.0 - fnr_ub, fpr_ub, 1.0 - fpr_ub, fnr_ub, delta)
    perfect_fpr = clopper_pearson_upper(0, n_neg, per)
    perfect_fnr = clopper_pearson_upper(0, n_pos, per)
    ceiling = float(np.max(epsilon_from_rate_bounds(1.0 - perfect_fnr, perfect_fpr, 1.0 - perfect_fpr,
                                                    perfect_fnr, delta)))
    return ClaimCurveTest(rejected=rejected, p_value=p_value, worst_fpr_upper=float(fpr_ub[worst]),
                          worst_fnr_upper=float(fnr_ub[worst]), worst_claimed_fnr=claimed,
                          worst_mirrored=bool(mirrored[0]), worst_threshold=float(thresholds[worst]),
                          epsilon=max(float(np.max(terms)), 0.0), ceiling=max(ceiling, 0.0), thresholds=int(k),
                          included=int(n_pos), excluded=int(n_neg), alpha=alpha, delta=delta)
