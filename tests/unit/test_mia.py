"""Tests for dpaudit.metrics.mia (loss-threshold membership inference).

Oracles are independent of the implementation: ROC quantities by brute force
over all candidate thresholds, AUC by O(n·m) pair counting, Clopper–Pearson
bounds through the binomial tails (bisection on binom.sf / binom.cdf, never
beta.ppf, which the module uses), and ε bounds by closed forms derived by hand
or by an explicit Python loop over thresholds.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom

from dpaudit import io
from dpaudit.dp import hypothesis
from dpaudit.dp import roc as R
from dpaudit.metrics import mia

# ----------------------------------------------------------------- oracles


def _brute_roc_points(members, nonmembers):
    """All candidate thresholds (−inf and every distinct loss) with their counts, by loops."""
    candidates = [-math.inf] + sorted(set(members.tolist()) | set(nonmembers.tolist()))
    points = []
    for t in candidates:
        tp = sum(1 for x in members if x <= t)
        fp = sum(1 for x in nonmembers if x <= t)
        points.append((t, tp, fp))
    return points


def _brute_auc(members, nonmembers):
    """P(member loss < non-member loss) + ½ P(equal), counted over all pairs."""
    wins = 0.0
    for a in members:
        for b in nonmembers:
            wins += 1.0 if a < b else (0.5 if a == b else 0.0)
    return wins / (len(members) * len(nonmembers))


def _bisect(fn, target, increasing, iterations=200):
    """Solve fn(p) = target on [0, 1] for a monotone fn, vectorized over arrays."""
    lo = np.zeros_like(target, dtype=np.float64)
    hi = np.ones_like(target, dtype=np.float64)
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        above = fn(mid) > target
        go_left = above if increasing else ~above
        hi = np.where(go_left, mid, hi)
        lo = np.where(go_left, lo, mid)
    return 0.5 * (lo + hi)


def _cp_lower_oracle(k, n, alpha):
    """p with P(X ≥ k | n, p) = α (0 when k = 0), from the binomial tail."""
    k = np.asarray(k, np.float64)
    n = np.broadcast_to(np.asarray(n, np.float64), k.shape)
    p = _bisect(lambda p: binom.sf(k - 1, n, p), np.full(k.shape, alpha), increasing=True)
    return np.where(k == 0, 0.0, p)


def _cp_upper_oracle(k, n, alpha):
    """p with P(X ≤ k | n, p) = α (1 when k = n), from the binomial cdf."""
    k = np.asarray(k, np.float64)
    n = np.broadcast_to(np.asarray(n, np.float64), k.shape)
    p = _bisect(lambda p: binom.cdf(k, n, p), np.full(k.shape, alpha), increasing=False)
    return np.where(k == n, 1.0, p)


def _eps_oracle(tp, fp, n_m, n_n, delta, alpha):
    """Unfloored ε terms from oracle CP bounds; −inf where a numerator is ≤ 0."""
    tp, fp = np.asarray(tp, np.float64), np.asarray(fp, np.float64)
    tpr_lo = _cp_lower_oracle(tp, n_m, alpha)
    fpr_hi = _cp_upper_oracle(fp, n_n, alpha)
    tnr_lo = _cp_lower_oracle(n_n - fp, n_n, alpha)
    fnr_hi = _cp_upper_oracle(n_m - tp, n_m, alpha)
    with np.errstate(divide="ignore", invalid="ignore"):
        t1 = np.where(tpr_lo - delta > 0, np.log((tpr_lo - delta) / fpr_hi), -np.inf)
        t2 = np.where(tnr_lo - delta > 0, np.log((tnr_lo - delta) / fnr_hi), -np.inf)
    return np.maximum(t1, t2)


def _tied_losses(rng, size, levels=12):
    """Losses on a coarse grid so that ties within and across classes are common."""
    return rng.integers(0, levels, size=size).astype(np.float64) / 4.0


# --------------------------------------------------------------------- ROC


@pytest.mark.parametrize("seed", range(5))
def test_roc_counts_match_brute_force_with_ties(seed):
    # Oracle: explicit count of "loss ≤ t" per class at every candidate threshold. Exact.
    rng = np.random.default_rng(seed)
    members, nonmembers = _tied_losses(rng, 37), _tied_losses(rng, 23)
    roc = R.roc_curve(members, nonmembers)
    points = _brute_roc_points(members, nonmembers)
    assert roc.thresholds.tolist() == [p[0] for p in points]
    assert roc.tp.tolist() == [p[1] for p in points]
    assert roc.fp.tolist() == [p[2] for p in points]
    assert roc.n_members == 37 and roc.n_nonmembers == 23
    np.testing.assert_array_equal(roc.tpr, roc.tp / 37)
    np.testing.assert_array_equal(roc.fpr, roc.fp / 23)
    assert roc.tpr.dtype == np.float64 and roc.thresholds.dtype == np.float64
    assert roc.tpr[-1] == 1.0 and roc.fpr[-1] == 1.0


@pytest.mark.parametrize("seed", range(8))
def test_auc_matches_pair_counting_with_ties(seed):
    # Oracle: O(n·m) pair counting, ties count ½. Tolerance 1e-12 (both are exact
    # rationals; only the final division rounds).
    rng = np.random.default_rng(100 + seed)
    members = _tied_losses(rng, int(rng.integers(1, 60)))
    nonmembers = _tied_losses(rng, int(rng.integers(1, 60)))
    roc = R.roc_curve(members, nonmembers)
    assert R.roc_auc(roc) == pytest.approx(_brute_auc(members, nonmembers), abs=1e-12)


def test_auc_extremes_and_all_ties():
    # Hand-derived: perfect separation → 1, reversed → 0, all losses equal → ½.
    assert R.roc_auc(R.roc_curve([0.0, 1.0], [2.0, 3.0, 4.0])) == 1.0
    assert R.roc_auc(R.roc_curve([5.0, 6.0], [2.0, 3.0])) == 0.0
    assert R.roc_auc(R.roc_curve([1.0] * 4, [1.0] * 7)) == 0.5


@pytest.mark.parametrize("seed", range(8))
def test_max_advantage_matches_brute_force(seed):
    # Oracle: loop over every candidate threshold, keep the first (smallest) one
    # with the largest TPR − FPR, compared exactly through integer cross-products.
    rng = np.random.default_rng(200 + seed)
    members, nonmembers = _tied_losses(rng, 41), _tied_losses(rng, 29)
    best = None
    for t, tp, fp in _brute_roc_points(members, nonmembers):
        score = tp * 29 - fp * 41
        if best is None or score > best[0]:
            best = (score, t, tp, fp)
    point = R.roc_max_advantage(R.roc_curve(members, nonmembers))
    assert (point.threshold, point.tp, point.fp) == best[1:]
    assert point.advantage == pytest.approx(best[0] / (41 * 29), abs=1e-15)
    assert point.advantage >= 0.0


@pytest.mark.parametrize("seed", range(8))
def test_tpr_at_fpr_matches_brute_force(seed):
    # Oracle: among candidate thresholds with FP/n ≤ target take the largest TP,
    # then the smallest FP among those. Exact.
    rng = np.random.default_rng(300 + seed)
    members = _tied_losses(rng, 53, levels=30)
    nonmembers = _tied_losses(rng, 200, levels=30)
    targets = (0.0, 0.001, 0.01, 0.05, 0.1, 0.5, 1.0)
    result = R.tpr_at_fpr(R.roc_curve(members, nonmembers), targets)
    assert list(result) == list(targets)
    points = _brute_roc_points(members, nonmembers)
    for target in targets:
        feasible = [p for p in points if p[2] / 200 <= target]
        best_tp = max(p[1] for p in feasible)
        best = min((p for p in feasible if p[1] == best_tp), key=lambda p: p[2])
        got = result[target]
        assert (got.threshold, got.tp, got.fp) == best, target
        assert got.fpr <= target
        assert got.n_members == 53 and got.n_nonmembers == 200


def test_tpr_at_fpr_without_enough_nonmembers_is_zero_at_minus_inf():
    # Hand-derived: 10 non-members cannot realize FPR ≤ 0.001 except with FP = 0;
    # the smallest loss is a non-member, so only "flag nobody" qualifies.
    roc = R.roc_curve(np.arange(1.0, 11.0), np.arange(0.0, 10.0))
    point = R.tpr_at_fpr(roc, (0.001,))[0.001]
    assert (point.threshold, point.tp, point.fp, point.tpr, point.fpr) == (
        -math.inf,
        0,
        0,
        0.0,
        0.0,
    )


def test_roc_refuses_empty_and_nonfinite():
    with pytest.raises(ValueError, match="member_losses is empty"):
        R.roc_curve([], [1.0])
    with pytest.raises(ValueError, match="nonmember_losses is empty"):
        R.roc_curve([1.0], [])
    with pytest.raises(ValueError, match=r"position\(s\) 1, 3"):
        R.roc_curve([0.0, np.nan, 1.0, np.inf], [1.0])


# ---------------------------------------------------------- Clopper–Pearson

CP_CASES = [(k, n) for n in (1, 2, 7, 50, 1000) for k in sorted({0, 1, n // 3, n // 2, n - 1, n})]


@pytest.mark.parametrize("alpha", [0.05, 0.01, 1e-6])
@pytest.mark.parametrize(("k", "n"), CP_CASES)
def test_clopper_pearson_tails_equal_alpha(k, n, alpha):
    # Oracle: definition through binomial tails, P(X ≥ k | p_lo) = α and
    # P(X ≤ k | p_hi) = α; relative tolerance 1e-7 on the tail probability.
    lo = hypothesis.clopper_pearson_lower(k, n, alpha)
    hi = hypothesis.clopper_pearson_upper(k, n, alpha)
    assert isinstance(lo, float) and isinstance(hi, float)
    assert 0.0 <= lo <= k / n <= hi <= 1.0
    if k == 0:
        assert lo == 0.0
        # Hand-derived: (1 − p)^n = α.
        assert hi == pytest.approx(1.0 - alpha ** (1.0 / n), rel=1e-10)
    else:
        assert binom.sf(k - 1, n, lo) == pytest.approx(alpha, rel=1e-7)
    if k == n:
        assert hi == 1.0
        # Hand-derived: p^n = α.
        assert lo == pytest.approx(alpha ** (1.0 / n), rel=1e-10)
    else:
        assert binom.cdf(k, n, hi) == pytest.approx(alpha, rel=1e-7)


def test_clopper_pearson_vectorized_and_validated():
    k = np.array([0, 3, 10])
    np.testing.assert_allclose(
        hypothesis.clopper_pearson_lower(k, 10, 0.05), _cp_lower_oracle(k, 10, 0.05), rtol=1e-9
    )
    np.testing.assert_allclose(
        hypothesis.clopper_pearson_upper(k, 10, 0.05), _cp_upper_oracle(k, 10, 0.05), rtol=1e-9
    )
    with pytest.raises(ValueError, match="0 <= k <= n"):
        hypothesis.clopper_pearson_lower(11, 10, 0.05)
    with pytest.raises(ValueError, match="alpha"):
        hypothesis.clopper_pearson_upper(1, 10, 0.7)


# ------------------------------------------------------------- ε bounds


def test_epsilon_from_counts_hand_computed():
    # n = 10 per class, perfect attack (TP = 10, FP = 0), α = 0.05. By hand:
    # TPR_lo = TNR_lo = 0.05^(1/10) = 0.7411344491069477,
    # FPR_hi = FNR_hi = 1 − 0.05^(1/10) = 0.2588655508930523,
    # δ = 0:   ε = ln(0.74113445 / 0.25886555) = 1.0518748...
    # δ = 0.1: ε = ln(0.64113445 / 0.25886555) = 0.9069...
    assert hypothesis.epsilon_from_counts(10, 0, 10, 10, delta=0.0, alpha=0.05) == pytest.approx(
        math.log(0.7411344491069477 / 0.2588655508930523), rel=1e-12
    )
    assert hypothesis.epsilon_from_counts(10, 0, 10, 10, delta=0.0, alpha=0.05) == pytest.approx(
        1.05187, abs=1e-5
    )
    assert hypothesis.epsilon_from_counts(10, 0, 10, 10, delta=0.1, alpha=0.05) == pytest.approx(
        math.log(0.6411344491069477 / 0.2588655508930523), rel=1e-12
    )
    # A threshold with no evidence: TP = FP = 5 of 10 gives negative terms, floored to 0.
    assert hypothesis.epsilon_from_counts(5, 5, 10, 10, delta=0.0, alpha=0.05) == 0.0
    # δ ≥ TPR_lo and δ ≥ TNR_lo: both numerators non-positive, both terms ignored.
    assert hypothesis.epsilon_from_counts(10, 0, 10, 10, delta=0.75, alpha=0.05) == 0.0


def test_epsilon_from_counts_matches_tail_oracle_off_the_edges():
    # Oracle: CP bounds from binomial-tail bisection. Relative tolerance 1e-9.
    tp = np.array([8, 30, 1, 45, 0])
    fp = np.array([1, 12, 0, 44, 0])
    got = hypothesis.epsilon_from_counts(tp, fp, 50, 60, delta=1e-3, alpha=0.05)
    want = np.maximum(_eps_oracle(tp, fp, 50, 60, 1e-3, 0.05), 0.0)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    assert got[0] > 0.0  # 8/50 members vs 1/60 non-members is real evidence


def _brute_bonferroni(members, nonmembers, delta, alpha):
    """Max over every distinct loss value of the oracle ε at α/K, by an explicit loop."""
    points = _brute_roc_points(members, nonmembers)[1:]  # the distinct loss values
    alpha_k = alpha / len(points)
    tp = np.array([p[1] for p in points])
    fp = np.array([p[2] for p in points])
    values = _eps_oracle(tp, fp, len(members), len(nonmembers), delta, alpha_k)
    return max(float(values.max()), 0.0), alpha_k


@pytest.mark.parametrize("seed", range(4))
def test_bonferroni_matches_explicit_search(seed):
    # Oracle: Python loop over all thresholds with tail-bisection CP bounds at α/K.
    # Sizes above 512 exercise the pruning grid's geometric part. Tolerance 1e-9 rel.
    rng = np.random.default_rng(400 + seed)
    members = np.round(rng.exponential(0.7, size=700), 2)  # rounding creates ties
    nonmembers = np.round(rng.exponential(1.0, size=600), 2)
    want, alpha_k = _brute_bonferroni(members, nonmembers, 1e-4, 0.05)
    got = mia.epsilon_lower_bound(members, nonmembers, delta=1e-4, alpha=0.05, method="bonferroni")
    assert got.epsilon == pytest.approx(want, rel=1e-9)
    assert got.epsilon > 0.0
    assert got.method == "bonferroni" and got.seed is None
    assert got.alpha == 0.05 and got.alpha_effective == pytest.approx(alpha_k, rel=1e-15)
    assert (got.n_members, got.n_nonmembers) == (700, 600)
    # The reported counts belong to the reported threshold.
    assert got.tp == int(np.sum(members <= got.threshold))
    assert got.fp == int(np.sum(nonmembers <= got.threshold))


@pytest.mark.parametrize("seed", range(3))
def test_split_selects_on_one_half_and_evaluates_on_the_other(seed):
    # Oracle: the documented split (np.random.default_rng(seed).permutation of
    # members, then of non-members; the first ⌊n/2⌋ select), an explicit loop
    # for the selection at α, oracle CP bounds for the evaluation. Tolerance 1e-9 rel.
    rng = np.random.default_rng(500 + seed)
    members = np.round(rng.exponential(0.6, size=301), 2)
    nonmembers = np.round(rng.exponential(1.0, size=250), 2)
    split_rng = np.random.default_rng(seed)
    perm_m, perm_n = split_rng.permutation(301), split_rng.permutation(250)
    sel_m, ev_m = members[perm_m[:150]], members[perm_m[150:]]
    sel_n, ev_n = nonmembers[perm_n[:125]], nonmembers[perm_n[125:]]
    points = _brute_roc_points(sel_m, sel_n)
    values = _eps_oracle([p[1] for p in points], [p[2] for p in points], 150, 125, 1e-4, 0.05)
    threshold = points[int(np.argmax(values))][0]  # first maximum = smallest threshold
    tp, fp = int(np.sum(ev_m <= threshold)), int(np.sum(ev_n <= threshold))
    want = max(float(_eps_oracle(tp, fp, 151, 125, 1e-4, 0.05)), 0.0)

    got = mia.epsilon_lower_bound(members, nonmembers, delta=1e-4, alpha=0.05, seed=seed)
    assert got.method == "split" and got.seed == seed
    assert (got.n_members, got.n_nonmembers) == (151, 125)
    assert got.threshold == threshold
    assert (got.tp, got.fp) == (tp, fp)
    assert got.epsilon == pytest.approx(want, rel=1e-9, abs=1e-12)
    again = mia.epsilon_lower_bound(members, nonmembers, delta=1e-4, alpha=0.05, seed=seed)
    assert again == got


@pytest.mark.parametrize(
    ("n_m", "n_n", "shift", "alpha"),
    [(3000, 800, 0.3, 0.05), (700, 5000, 0.0, 0.05), (20000, 20000, 0.05, 0.05 / 40000)],
)
@pytest.mark.parametrize("block", [1, 256])
def test_pruned_search_equals_exhaustive_search(n_m, n_n, shift, alpha, block, monkeypatch):
    # The threshold search skips thresholds using cheap caps. Oracle: the exact
    # term at every threshold, no pruning (the term itself is checked against
    # binomial tails above; this test isolates the pruning). The caps must
    # dominate the exact terms everywhere and the search must find the exact
    # maximum. Exact equality: same function, same inputs. A first block of 1
    # forces the search through its continue/stop logic many times.
    monkeypatch.setattr(mia, "_SEARCH_BLOCK", block)
    rng = np.random.default_rng(n_m + n_n)
    members = rng.normal(0.0, 1.0, n_m)
    nonmembers = rng.normal(shift, 1.0, n_n)
    roc = R.roc_curve(members, nonmembers)
    exact = hypothesis.epsilon_terms_from_counts(roc.tp, roc.fp, n_m, n_n, 1e-5, alpha)
    caps = mia._epsilon_term_caps(roc.tp, roc.fp, n_m, n_n, 1e-5, alpha)
    assert np.all(caps >= exact)
    index, value = mia._best_threshold(roc, 1e-5, alpha)
    assert exact[index] == value
    assert max(value, 0.0) == max(exact.max(), 0.0)
    if exact.max() > 0:
        assert value == exact.max()


@pytest.mark.parametrize("slack", [0.5, 0.01, 0.001])
@pytest.mark.parametrize("shift", [0.0, 0.4, 1.5])
def test_pruned_search_survives_loose_caps(shift, slack, monkeypatch):
    # The stop rule must be correct for any valid caps, not only tight ones.
    # Caps = exact + random non-negative slack (large or tiny) scramble the order;
    # with a first block of 1 the search has to keep going until no cap can
    # beat the best. Oracle: exhaustive maximum of the exact terms. Exact equality.
    rng = np.random.default_rng(int(shift * 10))
    members, nonmembers = rng.normal(0.0, 1.0, 1500), rng.normal(shift, 1.0, 1200)
    roc = R.roc_curve(members, nonmembers)
    exact_terms = hypothesis.epsilon_terms_from_counts
    slack_rng = np.random.default_rng(99)

    def loose_caps(tp, fp, n_m, n_n, delta, alpha):
        exact = exact_terms(tp, fp, n_m, n_n, delta, alpha)
        return exact + slack_rng.exponential(slack, size=exact.shape)

    monkeypatch.setattr(mia, "_epsilon_term_caps", loose_caps)
    monkeypatch.setattr(mia, "_SEARCH_BLOCK", 1)
    exact = exact_terms(roc.tp, roc.fp, 1500, 1200, 1e-5, 0.05)
    index, value = mia._best_threshold(roc, 1e-5, 0.05)
    assert exact[index] == value
    assert max(value, 0.0) == max(exact.max(), 0.0)
    if exact.max() > 0:
        assert value == exact.max()


def test_identical_distributions_give_zero():
    # Same distribution for both classes: the true ε is 0. With data seed 7 and
    # split seed 7 (a fixed, checked draw) both methods report exactly 0; in
    # general a positive value can occur with probability ≤ 2α (see the rate test).
    rng = np.random.default_rng(7)
    members, nonmembers = rng.normal(size=3000), rng.normal(size=3000)
    assert mia.epsilon_lower_bound(members, nonmembers, delta=1e-5, seed=7).epsilon == 0.0
    assert (
        mia.epsilon_lower_bound(members, nonmembers, delta=1e-5, method="bonferroni").epsilon == 0.0
    )


def test_identical_distributions_rarely_positive():
    # Each run gives ε > 0 with probability ≤ 2α = 0.1 (two one-sided CP bounds).
    # Over 100 fixed seeds we accept at most 20 positives: for Binomial(100, 0.1),
    # P(X ≥ 21) ≈ 1e-3, and the seeds are fixed so the outcome is reproducible.
    positives = {"split": 0, "bonferroni": 0}
    for seed in range(100):
        rng = np.random.default_rng(1000 + seed)
        members, nonmembers = rng.normal(size=400), rng.normal(size=400)
        for method in positives:
            bound = mia.epsilon_lower_bound(
                members, nonmembers, delta=1e-4, seed=seed, method=method
            )
            positives[method] += bound.epsilon > 0.0
    assert positives["split"] <= 20, positives
    assert positives["bonferroni"] <= 20, positives


@pytest.mark.parametrize("n", [100, 1000, 5000])
def test_perfect_separation_reaches_the_closed_form(n):
    # Perfectly separated classes: at the separating threshold TP = n, FP = 0 and,
    # by hand, TPR_lo = TNR_lo = a^(1/n), FPR_hi = FNR_hi = 1 − a^(1/n) with
    # a = α/K (Bonferroni, K = 2n distinct losses) or a = α on the evaluation half
    # (split). ε = ln((a^(1/n) − δ)/(1 − a^(1/n))) ≈ ln(n / ln(1/a)). Tolerance 1e-9 rel.
    alpha, delta = 0.05, 1e-6
    rng = np.random.default_rng(n)
    members, nonmembers = rng.uniform(0, 1, size=n), rng.uniform(2, 3, size=n)

    a = alpha / (2 * n)
    root = a ** (1.0 / n)
    closed = math.log((root - delta) / (1.0 - root))
    got = mia.epsilon_lower_bound(
        members, nonmembers, delta=delta, alpha=alpha, method="bonferroni"
    )
    assert got.epsilon == pytest.approx(closed, rel=1e-9)
    assert (got.tp, got.fp) == (n, 0)
    assert got.epsilon == pytest.approx(
        math.log(n / math.log(1 / a)), abs=0.6 * math.log(1 / a) / n + 0.05
    )

    # Split: tie all members at one loss and all non-members at another so the
    # selected threshold catches every evaluation member and no non-member.
    tied = mia.epsilon_lower_bound(
        np.full(n, 0.25), np.full(n, 0.75), delta=delta, alpha=alpha, seed=1
    )
    half = n - n // 2
    root = alpha ** (1.0 / half)
    assert tied.epsilon == pytest.approx(math.log((root - delta) / (1.0 - root)), rel=1e-9)
    assert (tied.threshold, tied.tp, tied.fp) == (0.25, half, 0)


def _randomized_response(rng, eps_true, n):
    """Member and non-member 'losses' of an ε-DP randomized response.

    A member reports loss 0 with probability e^ε/(1+e^ε), a non-member with
    probability 1/(1+e^ε); otherwise loss 1. The likelihood ratio of the two
    loss distributions is exactly e^{±ε}, so every threshold test obeys
    TPR ≤ e^ε·FPR and TNR ≤ e^ε·FNR: the true ε (δ = 0) is eps_true.
    """
    p = math.exp(eps_true) / (1.0 + math.exp(eps_true))
    members = (rng.random(n) >= p).astype(np.float64)
    nonmembers = (rng.random(n) >= 1.0 - p).astype(np.float64)
    return members, nonmembers


def _laplace_pair(rng, eps_true, n):
    """Member losses Laplace(0, 1/ε), non-member Laplace(1, 1/ε): density ratio ≤ e^ε."""
    return rng.laplace(0.0, 1.0 / eps_true, n), rng.laplace(1.0, 1.0 / eps_true, n)


@pytest.mark.parametrize("mechanism", [_randomized_response, _laplace_pair])
@pytest.mark.parametrize("method", ["split", "bonferroni"])
def test_bound_does_not_exceed_known_epsilon(mechanism, method):
    # Known truth ε = 1 (pure DP, δ = 0 is valid; we use δ = 1e-5, which only
    # lowers the bound). Each run exceeds the truth with probability ≤ 2α = 0.1;
    # over 60 fixed seeds we accept at most 12 exceedances (Binomial(60, 0.1):
    # P(X ≥ 13) ≈ 3e-3). We also require the bound to be informative: its mean
    # is above 0.3 (by hand, the ideal randomized-response test at n = 2000 per
    # class gives about ln(0.71/0.29) ≈ 0.9 with split halves).
    eps_true = 1.0
    values = []
    for seed in range(60):
        rng = np.random.default_rng(2000 + seed)
        members, nonmembers = mechanism(rng, eps_true, 2000)
        bound = mia.epsilon_lower_bound(members, nonmembers, delta=1e-5, seed=seed, method=method)
        values.append(bound.epsilon)
    values = np.array(values)
    assert int(np.sum(values > eps_true)) <= 12, values
    assert values.mean() > 0.3, values.mean()


def test_epsilon_lower_bound_validates_arguments():
    with pytest.raises(ValueError, match="explicit seed"):
        mia.epsilon_lower_bound([0.0, 1.0], [2.0, 3.0], delta=0.0)
    with pytest.raises(ValueError, match="at least 2 members"):
        mia.epsilon_lower_bound([0.0], [2.0, 3.0], delta=0.0, seed=0)
    with pytest.raises(ValueError, match="method"):
        mia.epsilon_lower_bound([0.0, 1.0], [2.0, 3.0], delta=0.0, method="oracle")
    with pytest.raises(ValueError, match="delta"):
        mia.epsilon_lower_bound([0.0, 1.0], [2.0, 3.0], delta=1.0, seed=0)


# ------------------------------------------------------------ mia_metrics


def _outputs(n_train=200, n_holdout=150, n_test=120, seed=0):
    """A synthetic outputs.parquet frame: members have smaller losses."""
    rng = np.random.default_rng(seed)
    n = n_train + n_holdout + n_test
    loss_ce = np.concatenate(
        [
            rng.exponential(0.4, n_train),
            rng.exponential(1.0, n_holdout),
            rng.exponential(1.0, n_test),
        ]
    )
    p_true = np.exp(-loss_ce)
    frame = pd.DataFrame(
        {
            "example_id": rng.permutation(np.arange(10, 10 + n)).astype(np.int64),
            "split": ["train"] * n_train + ["holdout"] * n_holdout + ["test"] * n_test,
            "is_member": [True] * n_train + [False] * (n_holdout + n_test),
            "label": rng.integers(0, 2, n),
            "loss_ce": loss_ce,
            # Negoescu et al. 2023, footnote 1: ℓ = log(e^CE − 1), a strictly increasing function of CE.
            "loss_logit": np.log(np.expm1(loss_ce)),
            "p_true": p_true,
            "correct": p_true > 0.5,
        }
    )
    return frame.sample(frac=1.0, random_state=seed).reset_index(drop=True)


KW = {
    "members_split": "train",
    "nonmembers_split": "holdout",
    "utility_split": "test",
    "delta": 1e-5,
    "seed": 11,
}


def test_mia_metrics_schema_and_values():
    frame = _outputs()
    out = mia.mia_metrics(frame, accountant_epsilon=math.inf, **KW)

    assert tuple(out.columns) == mia.OUTPUT_COLUMNS
    assert {c: str(t) for c, t in out.dtypes.items()} == mia.OUTPUT_DTYPES
    assert out["metric"].tolist() == [
        "attack_auc",
        "attack_advantage",
        "tpr_at_fpr",
        "tpr_at_fpr",
        "tpr_at_fpr",
        "epsilon_lower_bound",
        "accountant_epsilon",
        "train_accuracy",
        "test_accuracy",
        "generalization_gap",
    ]
    rows = out.set_index(out["metric"] + out["fpr_target"].astype("string").fillna(""))

    members = frame[frame.split == "train"]
    nonmembers = frame[frame.split == "holdout"]
    test = frame[frame.split == "test"]
    # Independent oracle for the AUC: pair counting.
    assert rows.loc["attack_auc", "value"] == pytest.approx(
        _brute_auc(members.loss_ce.to_numpy(), nonmembers.loss_ce.to_numpy()), abs=1e-12
    )
    assert rows.loc["attack_auc", "loss"] == "loss_ce"
    assert (rows.loc["attack_auc", "n_members"], rows.loc["attack_auc", "n_nonmembers"]) == (200, 150)

    # Baselines carry ε = +inf, never 0 or NaN (Geambasu's DP lecture: no DP is ε = ∞).
    assert rows.loc["accountant_epsilon", "value"] == math.inf
    assert rows.loc["accountant_epsilon", "delta"] == 1e-5

    # Accuracies by hand from the `correct` column.
    train_acc, test_acc = members.correct.mean(), test.correct.mean()
    assert rows.loc["train_accuracy", "value"] == pytest.approx(train_acc, abs=1e-15)
    assert rows.loc["test_accuracy", "value"] == pytest.approx(test_acc, abs=1e-15)
    assert rows.loc["generalization_gap", "value"] == pytest.approx(train_acc - test_acc, abs=1e-15)

    for target in (0.001, 0.01, 0.1):
        row = rows.loc[f"tpr_at_fpr{target}"]
        assert row["fpr_realized"] <= target
        assert row["value"] == row["tp"] / 200
        assert row["fpr_realized"] == row["fp"] / 150
        # The counts belong to the threshold.
        assert row["tp"] == int((members.loss_ce <= row["threshold"]).sum())
        assert row["fp"] == int((nonmembers.loss_ce <= row["threshold"]).sum())

    eps = rows.loc["epsilon_lower_bound"]
    assert eps["ci_method"] == "split" and eps["seed"] == 11
    assert eps["alpha"] == 0.05 and eps["delta"] == 1e-5
    assert (eps["n_members"], eps["n_nonmembers"]) == (100, 75)  # evaluation halves
    assert eps["value"] >= 0.0

    # NA exactly where a parameter does not apply.
    assert out["fpr_target"].notna().tolist() == [False, False, True, True, True] + [False] * 5
    assert out["seed"].notna().tolist() == [False] * 5 + [True] + [False] * 4
    assert out["delta"].notna().tolist() == [False] * 5 + [True, True] + [False] * 3
    assert out["threshold"].notna().tolist() == [False] + [True] * 5 + [False] * 4
    assert out["loss"].notna().tolist() == [True] * 6 + [False] * 4
    assert out.loc[out.metric.isin(["train_accuracy", "test_accuracy"]), "tp"].isna().all()


def test_mia_metrics_frames_concatenate_and_roundtrip(tmp_path):
    frame = _outputs()
    baseline = mia.mia_metrics(frame, accountant_epsilon=math.inf, **KW)
    dp = mia.mia_metrics(
        frame, accountant_epsilon=2.0, ci_method="bonferroni", loss_column="loss_logit", **KW
    )
    both = pd.concat([baseline, dp], ignore_index=True)
    assert {c: str(t) for c, t in both.dtypes.items()} == mia.OUTPUT_DTYPES
    eps_dp = dp[dp.metric == "epsilon_lower_bound"].iloc[0]
    assert eps_dp["ci_method"] == "bonferroni" and pd.isna(eps_dp["seed"])
    assert (eps_dp["n_members"], eps_dp["n_nonmembers"]) == (200, 150)

    path = tmp_path / "metrics.parquet"
    io.write_parquet(path, both)
    back = io.read_parquet(path)
    pd.testing.assert_frame_equal(back, both)


def test_mia_metrics_roc_metrics_invariant_to_monotone_loss():
    # Negoescu et al. 2023, footnote 1: the logit loss is a strictly increasing function of CE, so the
    # empirical ROC (AUC, advantage, TPR at FPR) is identical; only thresholds move.
    frame = _outputs(seed=3)
    ce = mia.mia_metrics(frame, accountant_epsilon=1.0, loss_column="loss_ce", **KW)
    logit = mia.mia_metrics(frame, accountant_epsilon=1.0, loss_column="loss_logit", **KW)
    for name in ("attack_auc", "attack_advantage", "tpr_at_fpr", "epsilon_lower_bound"):
        a, b = ce[ce.metric == name], logit[logit.metric == name]
        np.testing.assert_allclose(a["value"], b["value"], rtol=1e-12)
        assert a["tp"].tolist() == b["tp"].tolist()
    assert (logit["loss"].dropna() == "loss_logit").all()


def test_mia_metrics_independent_of_row_order():
    frame = _outputs(seed=4)
    a = mia.mia_metrics(frame, accountant_epsilon=1.0, **KW)
    b = mia.mia_metrics(frame.iloc[::-1].reset_index(drop=True), accountant_epsilon=1.0, **KW)
    pd.testing.assert_frame_equal(a, b)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_mia_metrics_refuses_nonfinite_losses_naming_ids(bad):
    frame = _outputs()
    member_id = frame.loc[frame.split == "train", "example_id"].iloc[3]
    nonmember_id = frame.loc[frame.split == "holdout", "example_id"].iloc[5]
    frame.loc[frame.example_id == member_id, "loss_ce"] = bad
    with pytest.raises(
        ValueError, match=rf"loss_ce is NaN or infinite .*member.*example_id: {member_id}"
    ):
        mia.mia_metrics(frame, accountant_epsilon=1.0, **KW)
    frame.loc[frame.example_id == member_id, "loss_ce"] = 0.1
    frame.loc[frame.example_id == nonmember_id, "loss_ce"] = bad
    with pytest.raises(ValueError, match=rf"non-member.*example_id: {nonmember_id}"):
        mia.mia_metrics(frame, accountant_epsilon=1.0, **KW)


def test_mia_metrics_refuses_empty_sets():
    frame = _outputs()
    with pytest.raises(ValueError, match=r"no member examples: no row has split == 'members'"):
        mia.mia_metrics(frame, accountant_epsilon=1.0, **{**KW, "members_split": "members"})
    with pytest.raises(ValueError, match="no non-member examples"):
        mia.mia_metrics(frame[frame.split != "holdout"], accountant_epsilon=1.0, **KW)
    with pytest.raises(ValueError, match="no utility examples"):
        mia.mia_metrics(frame[frame.split != "test"], accountant_epsilon=1.0, **KW)


def test_mia_metrics_refuses_inconsistent_or_invalid_input():
    frame = _outputs()
    flipped = frame.copy()
    flipped.loc[flipped.index[flipped.split == "train"][0], "is_member"] = False
    with pytest.raises(ValueError, match="is_member disagrees with split"):
        mia.mia_metrics(flipped, accountant_epsilon=1.0, **KW)
    with pytest.raises(ValueError, match="missing column"):
        mia.mia_metrics(frame.drop(columns="correct"), accountant_epsilon=1.0, **KW)
    with pytest.raises(ValueError, match="accountant_epsilon"):
        mia.mia_metrics(frame, accountant_epsilon=math.nan, **KW)
    with pytest.raises(ValueError, match="ci_method"):
        mia.mia_metrics(frame, accountant_epsilon=1.0, ci_method="holm", **KW)


def test_accuracy_hand_computed():
    assert mia.accuracy([True, True, True, False]) == 0.75
    assert mia.accuracy(np.array([1, 0, 0, 0, 0])) == 0.2
    with pytest.raises(ValueError, match="no examples"):
        mia.accuracy([])
    with pytest.raises(ValueError, match="missing"):
        mia.accuracy(pd.array([True, None], dtype="boolean"))
