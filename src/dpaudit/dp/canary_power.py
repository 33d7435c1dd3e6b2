"""What the claim-curve test could have caught: the detectable noise factor.

For an audited run the claim-curve test (``dpaudit.dp.canary_bounds.claim_curve_test``)
either rejects or not; this module says how strong that test was. The *detectable
noise factor* is the largest f ≤ 1 such that an implementation drawing noise f·σ
instead of the claimed σ is rejected by this very test (same number of canaries m,
same q and steps, same thresholds, confidence and claimed curve) with probability
≥ ``power`` (0.8): "this audit rejects, 8 times in 10, an implementation whose noise
is below f× the claim". f close to 1 is a strong audit; f = 0 means no noise
reduction at all is caught 8 times in 10.

The mechanism simulated
-----------------------
The white-box canaries of the audit twin are independent trials of the claimed
DP-SGD mechanism (issue 22): canary i is included with probability ½; at each step t
its coordinate shows u_it = c·s_it + fσ·z_it (units of the clip norm C), with
s_it ~ Bernoulli(q′) when included (0 when not) and z_it ~ N(0, 1) independent; the
score is the log-likelihood ratio of the *claimed* mechanism,
``subsampled_gaussian_llr`` with the claimed q and σ (what the auditor knows; the audit
twin, ``dpaudit.audit.twin``, scores its canaries with the same function). ``simulate_canary_scores`` is that mechanism in numpy, vectorized over
canaries and steps, with the bugs it can carry: ``noise_factor`` f, ``steps_factor``
(more steps than the accountant counted), ``sample_rate_factor`` (q′ = q·factor) and
``clip_factor`` c (a contribution of c·C under noise calibrated for C).

How the factor is computed (``detectable_noise_factor``)
--------------------------------------------------------
* Power at f: the fraction of ``repetitions`` simulated audits at noise fσ whose
  claim-curve test rejects. Repetition r always draws from the generator seeded
  (seed, r), whatever f: common random numbers, so the estimated power is a step
  function of f that is non-increasing in practice and bisection is well posed.
* Bisection over f in [``lower``, 1] to ``tolerance``: the returned factor is the
  largest f tried whose measured power is ≥ ``power`` (its power is returned too,
  and the power at the next f tried above it, which is < ``power``). With R
  repetitions the factor is the (1 − power) quantile of the per-repetition critical
  factors (the noise below which each simulated audit rejects), so its seed-to-seed
  spread shrinks like 1/√R.
* The rejection decision of each simulated audit is ``claim_curve_rejects``: the
  decision of ``claim_curve_test`` (same thresholds ``candidate_thresholds``, same
  Clopper–Pearson bounds at α/(2K), same comparison of the point and its mirror with
  the curve) without its p-value search. The curve is bracketed on a fixed grid
  (it is decreasing, so f(a_{i+1}) ≤ f(α) ≤ f(a_i) on [a_i, a_{i+1}]) and evaluated
  exactly only where the bracket cannot decide, so the decision is identical to the
  exact one.
* Scores by tabulation (``method="tabulated"``, the default). Given the inclusion
  bits the scores are independent, and each is a sum over steps of i.i.d. per-step
  terms ℓ(u_t). The per-step term's distribution is known in closed form (ℓ is
  increasing, so P[ℓ(u) ≤ y] = Φ((ℓ⁻¹(y) − a)/(fσ)) for u ~ N(a, (fσ)²), mixed over
  s_t), so it is put on a lattice of spacing h (each term rounded to the lattice)
  and composed over the steps by FFT (its characteristic function to the power T).
  Each repetition then draws the inclusion bits and one uniform per canary and reads
  the score off the inverse CDF of its class (uniform within the lattice cell, so no
  ties). This is an exact simulation (up to floating-point error of the FFT, ~1e-13
  in probability, far below the 1/m the test resolves) of the same test applied to
  the score Σ_t round_h(ℓ(u_t)) + (a uniform tie-break within one cell), which
  differs from the LLR by at most (T/2 + 1)·h; h is 1/2¹⁶ of a window covering ±20
  standard deviations of the score, so the typical difference is ~10⁻⁴ standard
  deviations. The test only uses ranks, and m, q, T, the thresholds, the confidence
  and the curve are the audit's own. Its cost does not grow with m·T (one FFT per f,
  then m uniforms), so m = 50,000 stays cheap. The uniform per canary is also the
  common random number across f (quantile coupling). ``detectable_noise_factor``
  draws each repetition's bits and uniforms once (not again at every f) and treats
  all repetitions of an f together: one inverse-CDF call per class on all uniforms in
  ascending order (each repetition's sorted scores read through its uniforms'
  positions), every repetition's thresholds by bisection on their pooled ranks (no
  sort of each pool), one Clopper–Pearson and one curve call (curve values kept
  across f): the same scores and decisions as ``detectable_factor`` on
  ``tabulated_canary_sampler`` (the unit tests compare the records).
* ``method="direct"`` simulates every step of every canary with
  ``simulate_canary_scores`` instead (cost ∝ m·T per repetition and f; the unit
  tests check both methods agree).

``detectable_factor(simulate, ...)`` is the generic version: any ``simulate(f, rng)
-> (scores, included)`` gets the same bisection, repetitions and seeds.
``detectable_factor_batched(simulate_all, ...)`` is the same bisection and decision for
a sampler that draws all repetitions at once, ``simulate_all(f) -> (scores, included)``
with scores of shape repetitions × m: it owns its random numbers and reuses them at
every f (common random numbers), as the releases of the linear mechanisms do
(``dpaudit.audit.linear_detection``: their noise is drawn once and scaled by f).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import special

from dpaudit.dp.canary_bounds import candidate_thresholds, check_significance, threshold_ranks
from dpaudit.dp.hypothesis import clopper_pearson_upper

__all__ = ["claim_curve_rejects", "detectable_factor", "detectable_factor_batched", "detectable_noise_factor",
           "simulate_canary_scores", "subsampled_gaussian_llr", "tabulated_canary_sampler"]

DEFAULT_REPETITIONS = 100
DEFAULT_TOLERANCE = 0.005
DEFAULT_LOWER = 0.01
_LATTICE = 2**16
_WINDOW_SDS = 20.0
_TAIL_SDS = 10.0  # per-step u beyond ±10 noise sds carries < 1e-23 of the mass


# ------------------------------------------------------------------ the mechanism, step by step


def subsampled_gaussian_llr(observations: np.ndarray, q: float, sigma: float) -> np.ndarray:
    """Σ_t log[(1 − q) + q·exp((2u_t − 1)/(2σ²))] per column: the log-likelihood ratio of
    "included" (u_t ~ (1 − q)N(0, σ²) + qN(1, σ²)) against "excluded" (u_t ~ N(0, σ²)),
    with u_t the update at the canary's coordinate in units of C."""
    u = np.asarray(observations, dtype=np.float64)
    return np.logaddexp(np.log1p(-q), np.log(q) + (2.0 * u - 1.0) / (2.0 * sigma**2)).sum(axis=0)


def _included_bits(m: int, rng: np.random.Generator) -> np.ndarray:
    return rng.random(int(m)) < 0.5


def simulate_canary_scores(m: int, q: float, steps: int, sigma: float, *, noise_factor: float = 1.0,
                           steps_factor: float = 1, sample_rate_factor: float = 1.0, clip_factor: float = 1.0,
                           rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Scores and inclusion bits of m white-box canaries of a DP-SGD implementation
    (module docstring): included with probability ½, sampled at rate
    q·``sample_rate_factor`` per step for round(steps·``steps_factor``) steps,
    contributing ``clip_factor`` (units of C) under noise ``noise_factor``·σ. The
    score is the claimed mechanism's LLR (claimed q and σ), summed over the steps
    the implementation ran."""
    m, q, sigma = int(m), float(q), float(sigma)
    run_steps = int(round(int(steps) * float(steps_factor)))
    rate = min(q * float(sample_rate_factor), 1.0)
    if m < 1 or run_steps < 1 or not 0.0 < q <= 1.0 or not sigma > 0.0:
        raise ValueError(f"need m >= 1, steps >= 1, q in (0, 1], sigma > 0; got {m}, {run_steps}, {q}, {sigma}")
    included = _included_bits(m, rng)
    sampled = rng.random((run_steps, m), dtype=np.float32) < rate
    u = rng.standard_normal((run_steps, m), dtype=np.float32)
    u *= np.float32(float(noise_factor) * sigma)
    u += np.float32(clip_factor) * (sampled & included)
    return subsampled_gaussian_llr(u, q, sigma), included


# ------------------------------------------------------------------ the score's distribution, tabulated


def _llr_term(u, q: float, sigma: float):
    return np.logaddexp(math.log1p(-q), math.log(q) + (2.0 * np.asarray(u, dtype=np.float64) - 1.0)
                        / (2.0 * sigma**2))


def _llr_inverse(y: np.ndarray, q: float, sigma: float) -> np.ndarray:
    """u with ℓ(u) = y (−inf at or below ℓ's infimum log(1 − q))."""
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.log(np.expm1(y) + q) - math.log(q)
    return np.where(y > math.log1p(-q), sigma**2 * v + 0.5, -np.inf)


class _ScoreTable:
    """Lattice distribution of Σ_t round_h(ℓ(u_t)) over ``run_steps`` steps for the
    excluded (u ~ N(0, s²)) and included (u ~ (1 − r)N(0, s²) + rN(c, s²)) canaries."""

    def __init__(self, q: float, sigma: float, run_steps: int, noise: float, rate: float, clip: float):
        s = float(noise) * sigma
        centres = np.array([0.0, float(clip)])
        weights = {"out": np.array([1.0, 0.0]), "in": np.array([1.0 - rate, rate])}
        lo = float(_llr_term(centres.min() - _TAIL_SDS * s, q, sigma))
        hi = float(_llr_term(centres.max() + _TAIL_SDS * s, q, sigma))
        # moments of one step's term (Gauss–Hermite), for the window of the sum
        nodes, w = special.roots_hermitenorm(120)
        w = w / w.sum()
        per_centre = _llr_term(centres[:, None] + s * nodes[None, :], q, sigma)
        m1 = per_centre @ w
        m2 = (per_centre**2) @ w
        means, sds = [], []
        for mix in weights.values():
            mean = float(mix @ m1)
            means.append(run_steps * mean)
            sds.append(math.sqrt(max(run_steps * (float(mix @ m2) - mean**2), 0.0)))
        spread = max(max(sds), 1e-9 * (hi - lo), 1e-12)
        w_lo = max(run_steps * lo, min(means) - _WINDOW_SDS * spread)
        w_hi = min(run_steps * hi, max(means) + _WINDOW_SDS * spread)
        n = _LATTICE
        h = max(w_hi - w_lo, 1e-12) / (n - 1)
        k_step = int(math.ceil((hi - lo) / h)) + 1
        while k_step > n // 2:  # one step wider than the sum's window (few steps): widen the lattice
            n *= 2
        self.h = h
        # per-step lattice: value lo + k·h takes the mass of [lo + (k − ½)h, lo + (k + ½)h)
        edges = lo + (np.arange(k_step + 1) - 0.5) * h
        edges[0], edges[-1] = -np.inf, np.inf
        u_edges = _llr_inverse(edges, q, sigma)
        offset = int(math.floor((w_lo - run_steps * lo) / h))  # first lattice index of the sum kept
        self.values, self.cdf = {}, {}
        for name, mix in weights.items():
            step = np.zeros(k_step)
            for centre, weight in zip(centres, mix, strict=True):
                if weight > 0:
                    cdf = special.ndtr((u_edges - centre) / s) if s > 0 else (u_edges >= centre).astype(float)
                    step += weight * np.diff(cdf)
            spectrum = np.fft.rfft(step, n) ** run_steps
            total = np.clip(np.fft.irfft(spectrum, n), 0.0, None)
            total = np.roll(total, -(offset % n))  # index i holds the sum's lattice index offset + i
            total /= total.sum()
            self.values[name] = run_steps * lo + (offset + np.arange(n + 1) - 0.5) * h  # cell edges
            self.cdf[name] = np.concatenate([[0.0], np.cumsum(total)])
            self.cdf[name] /= self.cdf[name][-1]

    def quantile(self, name: str, uniforms: np.ndarray) -> np.ndarray:
        """Inverse CDF, linear within each lattice cell (a uniform tie-break)."""
        return np.interp(uniforms, self.cdf[name], self.values[name])


def tabulated_canary_sampler(m: int, q: float, steps: int, sigma: float, *, steps_factor: float = 1,
                             sample_rate_factor: float = 1.0, clip_factor: float = 1.0
                             ) -> Callable[[float, np.random.Generator], tuple[np.ndarray, np.ndarray]]:
    """``simulate(f, rng) -> (scores, included)``: the canaries of
    ``simulate_canary_scores`` at noise_factor f, drawn from the tabulated distribution
    of their scores (module docstring). The table of the last f is kept."""
    m, q, sigma = int(m), float(q), float(sigma)
    run_steps = int(round(int(steps) * float(steps_factor)))
    rate = min(q * float(sample_rate_factor), 1.0)
    cache: dict[float, _ScoreTable] = {}

    def simulate(noise_factor: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        f = float(noise_factor)
        if f not in cache:
            cache.clear()
            cache[f] = _ScoreTable(q, sigma, run_steps, f, rate, float(clip_factor))
        table = cache[f]
        included = _included_bits(m, rng)
        uniforms = rng.random(m)
        scores = np.empty(m)
        scores[included] = table.quantile("in", uniforms[included])
        scores[~included] = table.quantile("out", uniforms[~included])
        return scores, included

    return simulate


# ------------------------------------------------------------------ the test's decision, fast


class _Memo:
    """An elementwise function's values by int64 key, each key computed once: ``compute(new_keys)``
    (ascending, distinct) is called for the keys not met before."""

    def __init__(self, compute: Callable[[np.ndarray], np.ndarray]):
        self.compute, self.keys, self.values = compute, np.empty(0, dtype=np.int64), np.empty(0)

    def __call__(self, keys: np.ndarray) -> np.ndarray:
        distinct = np.unique(keys)
        nearest = np.minimum(np.searchsorted(self.keys, distinct), max(self.keys.size - 1, 0))
        new = distinct[self.keys[nearest] != distinct] if self.keys.size else distinct
        if new.size:  # merged in place of a sort: both runs are ascending
            at = np.searchsorted(self.keys, new)
            self.keys, self.values = np.insert(self.keys, at, new), np.insert(self.values, at, self.compute(new))
        return self.values[np.searchsorted(self.keys, keys)]


class _BracketedCurve:
    """f_claim on a fixed grid: decides ``fnr_ub < f(fpr_ub)`` from the bracket
    f(a_{i+1}) ≤ f(α) ≤ f(a_i) and calls the exact curve only when it cannot. ``curve.fnr``
    is elementwise, so it is evaluated lazily, once per grid point read and per exact argument
    (keyed by its bits), and kept: the bisection over f meets many of the same points again."""

    def __init__(self, curve, points: int = 4000):
        self.curve = curve
        self.grid = np.concatenate([[0.0], np.geomspace(1e-12, 1.0, points)])
        self._on_grid = _Memo(lambda index: np.asarray(curve.fnr(self.grid[index]), dtype=np.float64))
        self._exact = _Memo(lambda bits: np.asarray(curve.fnr(bits.view(np.float64)), dtype=np.float64))

    def below(self, fpr: np.ndarray, fnr: np.ndarray) -> np.ndarray:
        """fnr < f(fpr), elementwise (the exact comparison)."""
        i = np.clip(np.searchsorted(self.grid, fpr, side="right") - 1, 0, self.grid.size - 2)
        upper, lower = self._on_grid(i), self._on_grid(i + 1)
        out = fnr < lower
        unsure = ~out & (fnr < upper)
        if unsure.any():
            out[unsure] = fnr[unsure] < self._exact(np.asarray(fpr[unsure], dtype=np.float64).view(np.int64))
        return out


def claim_curve_rejects(scores, included, curve, *, alpha: float, per_tail: int | None = 40) -> bool:
    """The decision of ``claim_curve_test`` (its ``rejected``), without the p-value
    search: some (FPR_ub, FNR_ub) at a candidate threshold, or its mirror, lies below
    ``curve``. ``curve`` may be a ``ClaimedCurve`` or the bracketed form used by
    ``detectable_factor``."""
    alpha = check_significance(alpha)
    bracket = _bracketed(curve)
    scores = np.asarray(scores, dtype=np.float64)
    included = np.asarray(included, dtype=bool)
    # each class sorted on its own (two plain sorts cost a third of one stable argsort of the pool)
    errors = _sorted_errors(np.sort(scores[included]), np.sort(scores[~included]), alpha, per_tail)
    return bool(_rejections(bracket, _flat([errors]))[0])


def _sorted_errors(positives: np.ndarray, negatives: np.ndarray, alpha: float, per_tail: int | None) -> tuple:
    """(fp, n_neg, fn, n_pos, level) of the test at ``candidate_thresholds`` of the pooled
    scores (each class in ascending order): the errors and the Clopper–Pearson level α/(2K)."""
    n_pos, n_neg = positives.size, negatives.size
    if n_pos == 0 or n_neg == 0:
        raise ValueError(f"the claim-curve test needs included and excluded trials, got {n_pos} and {n_neg}")
    # the pooled scores in order: one merge of the two sorted runs (timsort), the same values as sorting the pool
    pooled = np.sort(np.concatenate([positives, negatives]), kind="stable")
    thresholds = candidate_thresholds(pooled, per_tail, presorted=True)
    fn = np.searchsorted(positives, thresholds, side="left")  # included scoring below t
    fp = n_neg - np.searchsorted(negatives, thresholds, side="left")  # excluded scoring t or more
    return fp, n_neg, fn, n_pos, alpha / (2 * thresholds.size)


def _flat(errors: list[tuple]) -> tuple:
    """Audits' ``_sorted_errors`` end to end: (fp, n_neg, fn, n_pos, level) per threshold, thresholds per audit."""
    sizes = np.array([len(e[0]) for e in errors])
    return (np.concatenate([e[0] for e in errors]), np.repeat([e[1] for e in errors], sizes),
            np.concatenate([e[2] for e in errors]), np.repeat([e[3] for e in errors], sizes),
            np.repeat([e[4] for e in errors], sizes), sizes)


@dataclass(frozen=True)
class _Runs:
    """One ascending run of scores per repetition, read through an index: run r holds
    ``values[index[p]]`` for p in ``starts[r]:starts[r + 1]``, ``index`` ascending within each run
    (and, for ``_pooled_errors``, ``values`` ascending)."""

    values: np.ndarray
    index: np.ndarray
    starts: np.ndarray

    def at(self, positions: np.ndarray) -> np.ndarray:
        return self.values[self.index[np.clip(positions, 0, self.index.size - 1)]]  # (callers mask the clipped)

    def run(self, r: int) -> np.ndarray:
        return self.values[self.index[self.starts[r]:self.starts[r + 1]]]


def _count_below(runs: _Runs, thresholds: np.ndarray) -> np.ndarray:
    """Per run r (rows) and threshold t: how many of run r's values lie below t. The values below t
    are the first searchsorted(values, t), so: how many of run r's index entries lie below that."""
    below = np.searchsorted(runs.values, thresholds)
    return np.array([np.searchsorted(runs.index[a:b], first)
                     for a, b, first in zip(runs.starts[:-1], runs.starts[1:], below, strict=True)])


def _pooled_order_statistics(a: _Runs, b: _Runs, ranks: np.ndarray) -> np.ndarray:
    """Per repetition r (rows) and pooled index k: the value ``np.sort`` of run r of ``a`` and run r
    of ``b`` together holds at k (the (k + 1)-th smallest), without the sort. Bisection on i, how
    many of the k + 1 smallest come from ``a``: the smallest i with a[i] ≥ b[k − i]."""
    a_first, b_first, k = a.starts[:-1, None], b.starts[:-1, None], ranks[None, :]
    lo, hi = np.maximum(k + 1 - np.diff(b.starts)[:, None], 0), np.minimum(k + 1, np.diff(a.starts)[:, None])
    while (active := lo < hi).any():
        mid = (lo + hi) // 2  # in [lo, hi), a[mid] and b[k − mid] lie in their runs
        more_a = active & (a.at(a_first + mid) < b.at(b_first + k - mid))
        lo, hi = np.where(more_a, mid + 1, lo), np.where(active & ~more_a, mid, hi)
    return np.maximum(np.where(lo > 0, a.at(a_first + lo - 1), -np.inf),
                      np.where(k - lo >= 0, b.at(b_first + k - lo), -np.inf))


def _pooled_errors(positives: _Runs, negatives: _Runs, alpha: float, per_tail: int) -> tuple:
    """``_flat`` of ``_sorted_errors`` of every repetition (run r of each class, none empty, ``values``
    ascending), all at once: the thresholds are the pooled scores at the ranks of
    ``candidate_thresholds`` (the same m for all), read by bisection instead of sorting each pool."""
    n_pos, n_neg = np.diff(positives.starts), np.diff(negatives.starts)
    m = int(n_pos[0] + n_neg[0])
    ranks = threshold_ranks(m, int(per_tail))
    values = np.sort(_pooled_order_statistics(positives, negatives,
                                              np.concatenate([m - ranks, np.minimum(ranks, m - 1)])), axis=1)
    distinct = np.ones(values.shape, dtype=bool)  # np.unique of each row (no NaN: the values ascend)
    distinct[:, 1:] = values[:, 1:] != values[:, :-1]
    sizes = distinct.sum(axis=1)
    fn = _count_below(positives, values)[distinct]
    fp = (n_neg[:, None] - _count_below(negatives, values))[distinct]
    return fp, np.repeat(n_neg, sizes), fn, np.repeat(n_pos, sizes), np.repeat(alpha / (2 * sizes), sizes), sizes


def _rejections(bracket: _BracketedCurve, errors: tuple) -> np.ndarray:
    """Per audit of ``errors`` (``_flat``), whether some (FPR_ub, FNR_ub) or its mirror lies below
    the curve. All audits' bounds and curve values are computed in one call each (elementwise, so
    each audit's decision is the one it gets alone)."""
    fp, n_neg, fn, n_pos, levels, sizes = errors
    fpr_ub = np.atleast_1d(clopper_pearson_upper(fp, n_neg, levels))
    fnr_ub = np.atleast_1d(clopper_pearson_upper(fn, n_pos, levels))
    below = bracket.below(fpr_ub, fnr_ub) | bracket.below(fnr_ub, fpr_ub)
    return np.logical_or.reduceat(below, np.concatenate([[0], np.cumsum(sizes)[:-1]]))


# ------------------------------------------------------------------ the factor


def _check_detection(alpha: float, power: float, lower: float, upper: float, tolerance: float) -> float:
    alpha = check_significance(alpha)
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must lie in (0, 1), got {power}")
    if not 0.0 < lower < upper or not tolerance > 0:
        raise ValueError(f"need 0 < lower < upper, tolerance > 0; got {lower}, {upper}, {tolerance}")
    return alpha


def _largest_caught(power_at: Callable[[float], float], *, power: float, tolerance: float, lower: float,
                    upper: float) -> tuple[float | None, float | None]:
    """(lo, hi) of the bisection over f in [lower, upper] on ``power_at(f) >= power``: lo the largest f
    tried that is caught often enough (None: not even ``lower``), hi the next f tried above it (None:
    ``upper`` itself is caught)."""
    need = power - 1e-12
    if power_at(upper) >= need:
        return upper, None
    if power_at(lower) < need:
        return None, lower
    lo, hi = lower, upper
    while hi - lo > tolerance:
        mid = 0.5 * (lo + hi)
        if power_at(mid) >= need:
            lo = mid
        else:
            hi = mid
    return lo, hi


def _check_repetitions(repetitions: int, seed: int) -> tuple[int, int]:
    repetitions, seed = int(repetitions), int(seed)
    if repetitions < 1:
        raise ValueError(f"need repetitions >= 1, got {repetitions}")
    return repetitions, seed


def _bracketed(curve) -> _BracketedCurve:
    return curve if isinstance(curve, _BracketedCurve) else _BracketedCurve(curve)


def _search(power_of: Callable[[float], float], *, power: float, tolerance: float, lower: float,
            upper: float) -> tuple[float | None, float | None, dict[float, float]]:
    """``_largest_caught`` over ``power_of`` evaluated once per f: (lo, hi, the powers measured)."""
    measured: dict[float, float] = {}

    def power_at(f: float) -> float:
        if f not in measured:
            measured[f] = power_of(f)
        return measured[f]

    lo, hi = _largest_caught(power_at, power=power, tolerance=tolerance, lower=lower, upper=upper)
    return lo, hi, measured


def _factor_record(lo: float | None, hi: float | None, measured: dict[float, float], **settings) -> dict:
    return {
        "factor": 0.0 if lo is None else float(lo),
        "power_at_factor": None if lo is None else measured[lo],
        "next_factor": None if hi is None else float(hi),
        "power_at_next": None if hi is None else measured[hi],
        **settings,
        "evaluations": len(measured),
        "powers": dict(sorted(measured.items())),
    }


def detectable_factor(simulate: Callable[[float, np.random.Generator], tuple[np.ndarray, np.ndarray]], *,
                      curve, alpha: float, per_tail: int | None = 40, power: float = 0.8,
                      repetitions: int = DEFAULT_REPETITIONS, seed: int = 0, tolerance: float = DEFAULT_TOLERANCE,
                      lower: float = DEFAULT_LOWER, upper: float = 1.0) -> dict:
    """Largest factor f in [``lower``, ``upper``] (to ``tolerance``) at which the
    claim-curve test rejects ``simulate(f, rng)`` in at least a fraction ``power`` of
    ``repetitions`` simulated audits (repetition r draws from the generator seeded
    (seed, r) at every f). ``factor`` is 0 when even ``lower`` is not caught that
    often, and ``upper`` when ``upper`` itself is. ``powers``: every f tried and its
    measured power."""
    alpha = _check_detection(alpha, power, lower, upper, tolerance)
    repetitions, seed = _check_repetitions(repetitions, seed)
    start = time.perf_counter()
    bracket = _bracketed(curve)

    def power_of(f: float) -> float:
        hits = 0
        for r in range(repetitions):
            scores, included = simulate(f, np.random.default_rng([seed, r]))
            hits += claim_curve_rejects(scores, included, bracket, alpha=alpha, per_tail=per_tail)
        return hits / repetitions

    lo, hi, measured = _search(power_of, power=power, tolerance=tolerance, lower=lower, upper=upper)
    return {**_factor_record(lo, hi, measured, power=float(power), repetitions=repetitions, seed=seed,
                             tolerance=float(tolerance), lower=float(lower), upper=float(upper), alpha=alpha,
                             per_tail=per_tail),
            "seconds": time.perf_counter() - start}


def detectable_factor_batched(simulate_all: Callable[[float], tuple[np.ndarray, np.ndarray]], *, curve,
                              alpha: float, per_tail: int | None = 40, power: float = 0.8,
                              tolerance: float = DEFAULT_TOLERANCE, lower: float = DEFAULT_LOWER,
                              upper: float = 1.0) -> dict:
    """``detectable_factor`` for a sampler that draws every repetition at once:
    ``simulate_all(f) -> (scores, included)``, scores repetitions × m (one simulated audit
    per row), included m booleans shared by the rows or repetitions × m. The sampler owns
    its random numbers and must reuse them at every f (common random numbers), so the
    record's ``seed`` is None and ``repetitions`` is the number of rows."""
    alpha = _check_detection(alpha, power, lower, upper, tolerance)
    start = time.perf_counter()
    bracket = _bracketed(curve)
    rows: list[int] = []

    def power_of(f: float) -> float:
        scores, included = simulate_all(f)
        scores = np.atleast_2d(scores)
        included = np.broadcast_to(np.asarray(included, dtype=bool), scores.shape)
        rows.append(scores.shape[0])
        hits = sum(claim_curve_rejects(s, i, bracket, alpha=alpha, per_tail=per_tail)
                   for s, i in zip(scores, included, strict=True))
        return hits / scores.shape[0]

    lo, hi, measured = _search(power_of, power=power, tolerance=tolerance, lower=lower, upper=upper)
    if len(set(rows)) != 1:
        raise ValueError(f"simulate_all returned different numbers of repetitions across f: {sorted(set(rows))}")
    return {**_factor_record(lo, hi, measured, power=float(power), repetitions=rows[0], seed=None,
                             tolerance=float(tolerance), lower=float(lower), upper=float(upper), alpha=alpha,
                             per_tail=per_tail),
            "seconds": time.perf_counter() - start}


class _TabulatedAudits:
    """``power_at(f)`` of the tabulated sampler (``tabulated_canary_sampler``), each repetition's
    draws made once and all repetitions of an f treated together (module docstring)."""

    def __init__(self, m: int, q: float, steps: int, sigma: float, *, repetitions: int, seed: int):
        self.q, self.sigma, self.run_steps, self.repetitions = float(q), float(sigma), int(steps), int(repetitions)
        drawn: dict[str, list[np.ndarray]] = {"in": [], "out": []}
        for r in range(repetitions):
            rng = np.random.default_rng([seed, r])
            included = _included_bits(m, rng)
            uniforms = rng.random(int(m))
            drawn["in"].append(np.sort(uniforms[included]))
            drawn["out"].append(np.sort(uniforms[~included]))
        self.ascending, self.position, self.starts = {}, {}, {}
        for name, runs in drawn.items():
            by_repetition = np.concatenate(runs)
            starts = self.starts[name] = np.concatenate([[0], np.cumsum([run.size for run in runs])])
            order = np.argsort(by_repetition)  # equal uniforms give equal scores: any order
            self.ascending[name] = by_repetition[order]
            position = self.position[name] = np.empty_like(order)
            position[order] = np.arange(order.size)
            # within a repetition tied uniforms may have swapped places: either reads the same score
            descents = np.flatnonzero(position[1:] < position[:-1]) + 1
            for r in np.unique(np.searchsorted(starts, descents[~np.isin(descents, starts)], side="right") - 1):
                position[starts[r]:starts[r + 1]].sort()

    @staticmethod
    def _ascending(values: np.ndarray) -> np.ndarray:
        return values if values.size < 2 or bool((values[1:] >= values[:-1]).all()) else np.sort(values)

    def power(self, f: float, bracket: _BracketedCurve, alpha: float, per_tail: int | None) -> float:
        table = _ScoreTable(self.q, self.sigma, self.run_steps, float(f), self.q, 1.0)
        positives, negatives = (_Runs(table.quantile(name, self.ascending[name]), self.position[name],
                                      self.starts[name]) for name in ("in", "out"))
        ready = all(bool((runs.values[1:] >= runs.values[:-1]).all()) and np.diff(runs.starts).all()
                    for runs in (positives, negatives))  # the scores ascend (no NaN) and no class is empty
        if per_tail is not None and ready:
            errors = _pooled_errors(positives, negatives, alpha, per_tail)
        else:  # every distinct score a threshold, a class left empty (refused) or an order broken by rounding
            errors = _flat([_sorted_errors(self._ascending(positives.run(r)), self._ascending(negatives.run(r)),
                                           alpha, per_tail) for r in range(self.repetitions)])
        return int(_rejections(bracket, errors).sum()) / self.repetitions


def _tabulated_factor(canaries: int, q: float, steps: int, sigma: float, *, curve, alpha: float,
                      per_tail: int | None, power: float, repetitions: int, seed: int, tolerance: float,
                      lower: float = DEFAULT_LOWER, upper: float = 1.0) -> dict:
    """``detectable_factor(tabulated_canary_sampler(canaries, q, steps, sigma), ...)``: the same
    bisection, scores and decisions (so the same record), each repetition's draws made once."""
    alpha = _check_detection(alpha, power, lower, upper, tolerance)
    repetitions, seed = _check_repetitions(repetitions, seed)
    start = time.perf_counter()
    bracket = _bracketed(curve)
    audits = _TabulatedAudits(canaries, q, steps, sigma, repetitions=repetitions, seed=seed)
    lo, hi, measured = _search(lambda f: audits.power(f, bracket, alpha, per_tail), power=power,
                               tolerance=tolerance, lower=lower, upper=upper)
    return {**_factor_record(lo, hi, measured, power=float(power), repetitions=repetitions, seed=seed,
                             tolerance=float(tolerance), lower=float(lower), upper=float(upper), alpha=alpha,
                             per_tail=per_tail),
            "seconds": time.perf_counter() - start}


def detectable_noise_factor(*, canaries: int, q: float, steps: int, sigma: float, curve, alpha: float,
                            delta: float = 0.0, per_tail: int | None = 40, power: float = 0.8,
                            repetitions: int = DEFAULT_REPETITIONS, seed: int = 0,
                            tolerance: float = DEFAULT_TOLERANCE, method: str = "tabulated") -> dict:
    """The detectable noise factor of a white-box DP-SGD canary audit (module
    docstring): ``canaries`` canaries of the claimed mechanism (q, steps, σ) at noise
    f·σ, each audit the claim-curve test against ``curve`` at significance ``alpha``
    with ``per_tail`` thresholds per tail. ``delta`` does not change the decision (it
    enters only the test's many-trials ε bound) and is recorded. Returns
    ``detectable_factor``'s dict plus the settings."""
    if method == "tabulated":
        out = _tabulated_factor(canaries, q, steps, sigma, curve=curve, alpha=alpha, per_tail=per_tail,
                                power=power, repetitions=repetitions, seed=seed, tolerance=tolerance)
    elif method == "direct":
        def simulate(f, rng):
            return simulate_canary_scores(canaries, q, steps, sigma, noise_factor=f, rng=rng)

        out = detectable_factor(simulate, curve=curve, alpha=alpha, per_tail=per_tail, power=power,
                                repetitions=repetitions, seed=seed, tolerance=tolerance)
    else:
        raise ValueError(f"method must be 'tabulated' or 'direct', got {method!r}")
    return {**out, "canaries": int(canaries), "sampling_probability": float(q), "steps": int(steps),
            "noise_multiplier": float(sigma), "delta": float(delta), "method": method}
