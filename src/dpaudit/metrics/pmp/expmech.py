"""Exact and Monte Carlo PMP of the exponential mechanism (Lowy et al., Definition 7, Lemma 8, Prop. 9).

The parent set X has 2n points; D is a uniformly random n-subset. For every
candidate output w and target x_i the PMP log-ratio is

    r[i, w] = ln Σ_{D ∋ x_i} P_D(w) − ln Σ_{D ∌ x_i} P_D(w),

and ε̃(X) = max_{i, w} |r[i, w]| (the paper prints the one-sided form; pure
PMP needs both directions). Everything is computed in log space: β reaches
10³ for concentrated data and a linear-space sum returns NaN there.
Subsets use index semantics: duplicate records count as distinct people.
"""

from __future__ import annotations

import itertools
import math
import time

import numpy as np
from scipy.special import logsumexp

__all__ = [
    "EXACT_SUBSET_LIMIT",
    "distance_losses",
    "expmech_exact_neighbour_epsilon",
    "expmech_pmp_exact",
    "expmech_pmp_monte_carlo",
    "global_sensitivity_ball",
    "log_probabilities",
    "pmp_from_log_probabilities",
    "subset_masks",
    "subset_sensitivity",
]

# C(2n, n) subsets are enumerated up to n = 10 (184,756 rows); above, Monte Carlo.
EXACT_SUBSET_LIMIT = 200_000


def subset_masks(n_parent: int, n: int) -> np.ndarray:
    """All C(n_parent, n) subsets as a boolean K × n_parent matrix (lexicographic order)."""
    if not 0 < n <= n_parent:
        raise ValueError(f"need 0 < n <= n_parent, got n={n}, n_parent={n_parent}")
    k = math.comb(n_parent, n)
    if k > EXACT_SUBSET_LIMIT:
        raise ValueError(f"C({n_parent},{n}) = {k} subsets exceed {EXACT_SUBSET_LIMIT}; use Monte Carlo")
    idx = np.fromiter(itertools.chain.from_iterable(itertools.combinations(range(n_parent), n)),
                      dtype=np.int64, count=k * n).reshape(k, n)
    masks = np.zeros((k, n_parent), dtype=bool)
    np.put_along_axis(masks, idx, True, axis=1)
    return masks


def distance_losses(candidates: np.ndarray, points: np.ndarray) -> np.ndarray:
    """H[w, i] = ‖w − x_i‖₂ (the geometric-median loss of the paper's simulations)."""
    candidates = np.asarray(candidates, dtype=np.float64)
    points = np.asarray(points, dtype=np.float64)
    return np.linalg.norm(candidates[:, None, :] - points[None, :, :], axis=2)


def global_sensitivity_ball(candidates: np.ndarray, clip: float, n: int) -> float:
    """Δ_ℓ over the ball ‖x‖ ≤ C for ℓ(w, D) = mean_{x∈D} ‖w − x‖ under replace-one:
    max_w (‖w‖ + C − max(0, ‖w‖ − C))/n, i.e. (1 + C)/n for unit w and C ≥ 1."""
    norms = np.linalg.norm(np.asarray(candidates, dtype=np.float64), axis=1)
    return float(np.max(norms + clip - np.maximum(0.0, norms - clip)) / n)


def subset_sensitivity(losses: np.ndarray, n: int) -> float:
    """Δ_ℓ(X) of reading R1: max_w (max_i h(w, x_i) − min_i h(w, x_i))/n over X only."""
    losses = np.asarray(losses, dtype=np.float64)
    return float(np.max(losses.max(axis=1) - losses.min(axis=1)) / n)


def log_probabilities(masks: np.ndarray, losses: np.ndarray, n: int, beta: float) -> np.ndarray:
    """log P_D(w) for every subset row of ``masks``: −βℓ(w, D) − log Σ_w' exp(−βℓ(w', D))."""
    mean_loss = (masks.astype(np.float64) @ losses.T) / n
    logits = -float(beta) * mean_loss
    return logits - logsumexp(logits, axis=1, keepdims=True)


def _log_ratios(logp: np.ndarray, masks: np.ndarray, *, normalise_counts: bool) -> np.ndarray:
    """r[i, w] = log-mean (or log-sum) over subsets with x_i minus over subsets without."""
    ratios = np.empty((masks.shape[1], logp.shape[1]))
    for i in range(masks.shape[1]):  # over the 2n targets, not over rows
        inside = masks[:, i]
        n_in, n_out = int(inside.sum()), int((~inside).sum())
        if n_in == 0 or n_out == 0:
            raise ValueError(f"target {i} is in all or none of the subsets; cannot form P_in/P_out")
        with np.errstate(divide="ignore", invalid="ignore"):
            log_in = logsumexp(logp[inside], axis=0)
            log_out = logsumexp(logp[~inside], axis=0)
            # An output impossible under both mixtures constrains nothing (a deterministic
            # mechanism has many); impossible under one only gives ±inf (not PMP at any ε).
            r = np.where(np.isneginf(log_in) & np.isneginf(log_out), 0.0, log_in - log_out)
        if normalise_counts:
            r -= math.log(n_in) - math.log(n_out)
        ratios[i] = r
    return ratios


def _summarise(ratios: np.ndarray) -> dict:
    absolute = np.abs(ratios)
    i, w = np.unravel_index(int(np.argmax(absolute)), absolute.shape)
    return {
        "eps_pmp": float(absolute[i, w]),
        "eps_pmp_onesided_inout": float(ratios.max()),
        "eps_pmp_x": absolute.max(axis=1),
        "argmax_x": int(i),
        "argmax_w": int(w),
        "log_ratios": ratios,
    }


def pmp_from_log_probabilities(logp: np.ndarray, masks: np.ndarray) -> dict:
    """Exact PMP of ANY finite-output mechanism from log P_D(w) of every n-subset row of
    ``masks`` (all C(2n, n) of them): ε̃ = max_{x,w} |r[x, w]| (Lemma 11 with δ = 0)."""
    if masks.shape[0] != math.comb(masks.shape[1], int(masks[0].sum())):
        raise ValueError("masks must list every n-subset of the parent set exactly once")
    return _summarise(_log_ratios(np.asarray(logp, dtype=np.float64), masks, normalise_counts=False))


def expmech_pmp_exact(losses: np.ndarray, n: int, beta: float, *, masks: np.ndarray | None = None,
                      with_neighbours: bool = True) -> dict:
    """Algorithm EM-PMP: ε̃(X) by enumerating all C(2n, n) subsets (Prop. 9 with |·|).

    ``losses`` is H[w, i] = h(w, x_i) (m × 2n). Returns ε̃, the one-sided in/out
    value, per-target ε̃_x, the argmax (x, w), and with ``with_neighbours`` the
    exact subpopulation DP parameter ε_exact(X) (reading R2).
    """
    losses = np.asarray(losses, dtype=np.float64)
    n_parent = losses.shape[1]
    if masks is None:
        masks = subset_masks(n_parent, n)
    logp = log_probabilities(masks, losses, n, beta)
    # Every x is in exactly half the subsets, so the 1/N factors cancel.
    out = _summarise(_log_ratios(logp, masks, normalise_counts=False))
    out.update(exact_or_mc="exact", mc_subsets=int(masks.shape[0]))
    if with_neighbours:
        out["eps_X_exact"] = expmech_exact_neighbour_epsilon(logp, masks)
    return out


def expmech_exact_neighbour_epsilon(logp: np.ndarray, masks: np.ndarray, chunk: int = 4096) -> float:
    """ε_exact(X) = max over replace-one neighbours D ~ D' ⊂ X and w of |log P_D(w) − log P_D'(w)|.

    Each subset is a bitmask; swapping member i for non-member j gives code
    − 2^i + 2^j, located by binary search among the sorted codes.
    """
    n_parent = masks.shape[1]
    if n_parent > 62:
        raise ValueError("bitmask ranking supports at most 62 parent points")
    weights = np.left_shift(np.int64(1), np.arange(n_parent, dtype=np.int64))
    codes = masks.astype(np.int64) @ weights
    order = np.argsort(codes)
    sorted_codes = codes[order]
    best = 0.0
    for start in range(0, masks.shape[0], chunk):
        block = masks[start:start + chunk]
        rows = np.arange(start, start + block.shape[0])
        # All (i in D, j not in D) pairs of the block at once.
        swap = (block[:, :, None] & ~block[:, None, :])
        k, i, j = np.nonzero(swap)
        neighbour_codes = codes[rows[k]] - weights[i] + weights[j]
        pos = np.searchsorted(sorted_codes, neighbour_codes)
        neighbour = order[pos]
        diff = np.abs(logp[rows[k]] - logp[neighbour])
        best = max(best, float(diff.max(initial=0.0)))
    return best


def _bootstrap_eps(logp: np.ndarray, masks: np.ndarray, rng: np.random.Generator,
                   n_bootstrap: int) -> np.ndarray:
    """max |r| under ``n_bootstrap`` resamples of the subsets, all resamples at once.

    A resample is a row of multiplicities c_b (multinomial); its in-sum for
    target i is Σ_r c_b[r]·M[r, i]·P_r(w), a matrix product after shifting
    logP by each group's column maximum (no overflow; a group whose every
    sampled row underflows would give −inf and is recomputed exactly). A
    resample in which some target is in all or in none of the drawn subsets
    has no P_in or P_out for it: that replicate is NaN (dropped by the caller
    and counted), never redrawn, which would bias the interval.
    """
    n_rows = logp.shape[0]
    if n_bootstrap == 0:
        return np.empty(0)
    counts = rng.multinomial(n_rows, np.full(n_rows, 1.0 / n_rows), size=n_bootstrap).astype(np.float64)
    best = np.zeros(n_bootstrap)
    empty = np.zeros(n_bootstrap, dtype=bool)
    for i in range(masks.shape[1]):  # over the 2n targets, not over rows
        logs = []
        for group in (masks[:, i], ~masks[:, i]):
            shift = logp[group].max(axis=0)
            weights = counts[:, group]
            total = weights @ np.exp(logp[group] - shift)
            group_size = weights.sum(axis=1, keepdims=True)
            empty |= group_size[:, 0] == 0
            with np.errstate(divide="ignore", invalid="ignore"):
                logs.append(np.log(total) + shift - np.log(group_size))
        ratio = logs[0] - logs[1]
        bad = ~np.isfinite(ratio).all(axis=1) & ~empty
        for b in np.flatnonzero(bad):  # rare: exact log-sum-exp with the multiplicities
            w = counts[b]
            inside = masks[:, i] & (w > 0)
            outside = ~masks[:, i] & (w > 0)
            ratio[b] = (logsumexp(logp[inside], axis=0, b=w[inside, None]) - math.log(w[inside].sum())
                        - logsumexp(logp[outside], axis=0, b=w[outside, None]) + math.log(w[outside].sum()))
        with np.errstate(invalid="ignore"):
            best = np.maximum(best, np.abs(ratio).max(axis=1))
    best[empty] = np.nan
    return best


def expmech_pmp_monte_carlo(losses: np.ndarray, n: int, beta: float, *, n_subsets: int,
                            rng, n_bootstrap: int = 200, ci_level: float = 0.95) -> dict:
    """EM-PMP over ``n_subsets`` uniformly random n-subsets, with a bootstrap interval.

    log P_in/out are estimated by log-mean-exp over the sampled subsets that
    contain / exclude x (their counts differ, so they are normalised
    separately). The log of a ratio of means is biased, and the max over (x, w)
    is biased upward at small sample sizes, hence the percentile bootstrap
    over subsets (``eps_pmp_ci_lo``, ``eps_pmp_ci_hi``).

    ``n_bootstrap = 0`` skips the bootstrap: the interval and its standard
    error are NaN. A resample in which some target is in all or none of the
    drawn subsets cannot be evaluated; it is dropped and counted
    (``boot_dropped``; ``boot_used`` resamples remain), and the interval is
    NaN when none remains.
    """
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    losses = np.asarray(losses, dtype=np.float64)
    n_parent = losses.shape[1]
    t0 = time.perf_counter()
    # A uniformly random n-subset per row: the n smallest of i.i.d. uniform keys.
    keys = rng.random((int(n_subsets), n_parent))
    chosen = np.argpartition(keys, n - 1, axis=1)[:, :n]
    masks = np.zeros((int(n_subsets), n_parent), dtype=bool)
    np.put_along_axis(masks, chosen, True, axis=1)
    logp = log_probabilities(masks, losses, n, beta)
    out = _summarise(_log_ratios(logp, masks, normalise_counts=True))
    boot = _bootstrap_eps(logp, masks, rng, int(n_bootstrap))
    kept = boot[np.isfinite(boot)]
    tail = (1.0 - ci_level) / 2.0
    out.update(
        exact_or_mc="mc",
        mc_subsets=int(n_subsets),
        eps_pmp_ci_lo=float(np.quantile(kept, tail)) if kept.size else math.nan,
        eps_pmp_ci_hi=float(np.quantile(kept, 1.0 - tail)) if kept.size else math.nan,
        eps_pmp_boot_se=float(kept.std(ddof=1)) if kept.size > 1 else math.nan,
        boot_used=int(kept.size),
        boot_dropped=int(boot.size - kept.size),
        runtime_s=time.perf_counter() - t0,
    )
    return out
