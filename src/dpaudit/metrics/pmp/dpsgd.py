"""Per-model PMP of DP-SGD runs (Lowy et al. 2024; Recipes A, B, C, see docs/architecture.md).

The paper itself treats only one-shot mechanisms. Recipe A applies its
Prop. 12 to ONE full-batch DP-SGD step at a fixed checkpoint (a per-step
diagnostic, never a bound on the trained model: PMP does not compose).
Recipe B extends the joint-convexity argument to the whole training
transcript with the realised trajectory's per-checkpoint clipped gradients and
a CLT approximation of the subsampled replace-one Gaussian (a heuristic, not a
guarantee). Recipe C is the empirical side: shadow models trained on random
halves of the parent set, per-example Clopper–Pearson ε lower bounds.
"""

from __future__ import annotations

import math

import numpy as np

from dpaudit.dp import mechanisms
from dpaudit.dp.hypothesis import (
    clopper_pearson_lower,
    clopper_pearson_upper,
    epsilon_from_rate_bounds,
)
from dpaudit.metrics.pmp.bounds import profile_epsilon_per_row
from dpaudit.metrics.pmp.gaussian import gaussian_pmp

__all__ = [
    "MIN_SHADOW_MODELS",
    "certifiable_epsilon",
    "clip_rows",
    "empirical_pmp",
    "project_rows",
    "projection_matrix",
    "recipe_a_single_step",
    "recipe_b_trajectory",
    "replace_one_chi",
]


def clip_rows(gradients: np.ndarray, clip: float) -> tuple[np.ndarray, np.ndarray]:
    """clip_C(g) = g·min(1, C/‖g‖) row-wise (float64), and the clipped norms."""
    g = np.asarray(gradients, dtype=np.float64)
    norms = np.linalg.norm(g, axis=1)
    factor = np.minimum(1.0, float(clip) / np.where(norms > 0, norms, 1.0))
    return g * factor[:, None], norms * factor


def projection_matrix(n_columns: int, dim: int, seed: int) -> np.ndarray | None:
    """Seeded Gaussian JL matrix (E‖xA‖² = ‖x‖²), or None when ``n_columns`` ≤ ``dim`` (or dim = 0)."""
    if dim <= 0 or n_columns <= dim:
        return None
    return np.random.default_rng(seed).standard_normal((n_columns, dim)) / math.sqrt(dim)


def project_rows(rows: np.ndarray, matrix: np.ndarray | None) -> np.ndarray:
    """Rows times the projection (unchanged without one). Callers keep exact norms
    separately: only differences between rows are approximated."""
    rows = np.asarray(rows, dtype=np.float64)
    return rows if matrix is None else rows @ matrix


def _pair_inner_products(a: np.ndarray, rows_i: np.ndarray, rows_j: np.ndarray,
                         block_rows: int = 1024) -> np.ndarray:
    """⟨a_i, a_j⟩ for the given pairs, through blocks of the Gram matrix (memory
    block_rows × len(a), never pairs × columns)."""
    out = np.empty(rows_i.size)
    order = np.argsort(rows_i, kind="stable")
    sorted_i = rows_i[order]
    for start in range(0, a.shape[0], block_rows):
        stop = min(start + block_rows, a.shape[0])
        lo, hi = np.searchsorted(sorted_i, [start, stop])
        if lo == hi:
            continue
        gram = a[start:stop] @ a.T
        pick = order[lo:hi]
        out[pick] = gram[rows_i[pick] - start, rows_j[pick]]
    return out


def _squared_distances(a: np.ndarray, rows_i: np.ndarray, rows_j: np.ndarray) -> np.ndarray:
    sq = np.einsum("ij,ij->i", a, a)
    return np.maximum(sq[rows_i] + sq[rows_j] - 2.0 * _pair_inner_products(a, rows_i, rows_j), 0.0)


def recipe_a_single_step(clipped: np.ndarray, noise_multiplier: float, clip: float, delta: float) -> dict:
    """Recipe A: Prop. 12 for one full-batch step Σ clip_C(g(x)) + N(0, (zC)²I).

    Replace-one global sensitivity 2C (μ = 2/z). A per-step diagnostic at the
    given checkpoint; an upper bound on that one release's PMP only.
    """
    sigma = float(noise_multiplier) * float(clip)
    return gaussian_pmp(clipped, sigma, delta, sensitivity_global=2.0 * float(clip))


def replace_one_chi(norm_sq_a, norm_sq_b, inner_ab) -> np.ndarray:
    """χ = e^{‖a‖²} − 2e^{⟨a,b⟩} + e^{‖b‖²} ≥ 0: the small-q χ² term of the Poisson-subsampled
    replace-one Gaussian (1 − q)N(0) + qN(a) vs (1 − q)N(0) + qN(b), written with expm1
    around e^{⟨a,b⟩} so near-equal gradients do not cancel."""
    inner_ab = np.asarray(inner_ab, dtype=np.float64)
    chi = np.exp(inner_ab) * (np.expm1(np.asarray(norm_sq_a) - inner_ab)
                              + np.expm1(np.asarray(norm_sq_b) - inner_ab))
    return np.maximum(chi, 0.0)


def recipe_b_trajectory(checkpoints: list[dict], *, sampling_rate: float, noise_multiplier: float,
                        clip: float, delta: float, n_partners: int, seed: int,
                        projection_dim: int = 0) -> dict:
    """Recipe B: whole-training PMP heuristic from per-checkpoint clipped gradients (CLT).

    ``checkpoints``: dicts with ``steps`` (T_k, steps the checkpoint stands for)
    and ``clipped`` (2n × P clipped per-example gradients at θ_k). For each
    target x and ``n_partners`` random partners x' (all if fewer):
    μ_{xx'} = q·sqrt(Σ_k T_k χ_k(x, x')), δ̃_x(ε̃) = mean_{x'} δ_G(ε̃; μ_{xx'}),
    ε̃_x solves δ̃_x = δ. Same-method references: replace-one worst case
    χ = 4 sinh(1/z²) (``eps_global``), add/remove χ = e^{1/z²} − 1, and ε(X)
    from the largest sampled μ. A diagnostic, not a guarantee: the trajectory
    depends on D and the noise.
    """
    if not checkpoints:
        raise ValueError("Recipe B needs at least one checkpoint")
    z = float(noise_multiplier)
    q = float(sampling_rate)
    scale = 1.0 / (z * float(clip))
    n_parent = checkpoints[0]["clipped"].shape[0]
    rng = np.random.default_rng(seed)
    k_partners = min(int(n_partners), n_parent - 1)
    # Partners drawn without replacement among the other 2n − 1 points, per target:
    # the n_parent × (n_parent − 1) ranks are shifted past the target's own index.
    keys = rng.random((n_parent, n_parent - 1))
    partners = np.argpartition(keys, k_partners - 1, axis=1)[:, :k_partners] if k_partners < n_parent - 1 \
        else np.tile(np.arange(n_parent - 1), (n_parent, 1))
    targets = np.repeat(np.arange(n_parent), partners.shape[1])
    partners = partners.ravel()
    partners = partners + (partners >= targets)
    total = np.zeros(targets.size)
    steps_total = 0
    # One matrix for every checkpoint: the same seeded map, drawn once.
    matrix = projection_matrix(checkpoints[0]["clipped"].shape[1], int(projection_dim), int(seed))
    for k, ckpt in enumerate(checkpoints):
        clipped = np.asarray(ckpt["clipped"], dtype=np.float64)
        if clipped.shape[0] != n_parent:
            raise ValueError(f"checkpoint {k} has {clipped.shape[0]} rows, expected {n_parent}")
        norm_sq = np.einsum("ij,ij->i", clipped, clipped) * scale**2  # exact, before projection
        projected = project_rows(clipped, matrix) * scale
        dist_sq = _squared_distances(projected, targets, partners)
        inner = 0.5 * (norm_sq[targets] + norm_sq[partners] - dist_sq)
        total += int(ckpt["steps"]) * replace_one_chi(norm_sq[targets], norm_sq[partners], inner)
        steps_total += int(ckpt["steps"])
    mu = q * np.sqrt(total)
    mu_rows = mu.reshape(n_parent, -1)
    eps_x = profile_epsilon_per_row(mu_rows, delta)
    inv_z2 = 1.0 / z**2
    mu_replace = q * math.sqrt(steps_total * 4.0 * math.sinh(inv_z2))
    mu_add_remove = q * math.sqrt(steps_total * math.expm1(inv_z2))
    mu_max = float(mu.max())

    def eps_of_mu(value):
        return mechanisms.gaussian_epsilon_analytic(1.0 / value, delta) if value > 0 else 0.0

    return {
        "eps_pmp": float(eps_x.max()),
        "eps_pmp_x": eps_x,
        "mu_mean_x": mu_rows.mean(axis=1),
        "mu_max_x": mu_rows.max(axis=1),
        "eps_global": eps_of_mu(mu_replace),
        "eps_global_add_remove": eps_of_mu(mu_add_remove),
        "eps_X": eps_of_mu(mu_max),
        "mu_global": mu_replace,
        "n_partners": int(partners.size // n_parent),
        "steps": steps_total,
        "checkpoints": len(checkpoints),
        "projection_dim": 0 if matrix is None else int(projection_dim),
    }


MIN_SHADOW_MODELS = 4  # two selection and two evaluation models (config: metrics.pmp.shadow_models)


def certifiable_epsilon(n_in, n_out, level: float, delta: float) -> np.ndarray:
    """Largest ε̂_x Recipe C's Clopper–Pearson bound can certify with ``n_in`` in- and
    ``n_out`` out-models in the evaluation half, at ``level`` per one-sided bound:
    every in-model above every out-model (TP = n_in, FP = 0), floored at 0.

    No outcome of the evaluation models gives more, so 0 means the bound is
    vacuous at this budget whatever the model leaks. With n_in = n_out = m and
    δ ≈ 0 it is ln(a^{1/m}/(1 − a^{1/m})), a = ``level``: positive only when
    m > log₂(1/a).
    """
    n_in = np.asarray(n_in, dtype=np.int64)
    n_out = np.asarray(n_out, dtype=np.int64)
    terms = epsilon_from_rate_bounds(
        clopper_pearson_lower(n_in, n_in, level), clopper_pearson_upper(0, n_out, level),
        clopper_pearson_lower(n_out, n_out, level), clopper_pearson_upper(0, n_in, level), float(delta))
    return np.maximum(terms, 0.0)


def empirical_pmp(scores: np.ndarray, in_mask: np.ndarray, *, delta: float, alpha: float,
                  seed: int) -> dict:
    """Recipe C: per-example ε̂_x lower bounds from shadow models (the LiRA protocol is the PMP game).

    ``scores[r, i]``: attack score (higher = more member-like, e.g. −loss) of
    example i under shadow model r; ``in_mask[r, i]``: i was in model r's
    training half. Models are split at random into a selection half (picks
    each example's threshold and direction) and an evaluation half, where
    one-sided Clopper–Pearson bounds give
    ε̂_x = max{ln((TPR_lo − δ)/FPR_hi), ln((TNR_lo − δ)/FNR_hi)}, floored at 0.
    Each x uses two one-sided bounds (TPR_lo, FPR_hi; TNR_lo = 1 − FPR_hi and
    FNR_hi = 1 − TPR_lo are the same events), each at level α/(2·2n): Bonferroni
    over the 2 × 2n bounds makes α the family-wise level, so the max over x is
    a simultaneous (1 − α) lower bound.

    Also returned: the point estimate ``emp_eps_point`` (plain rates, no
    confidence correction: not a bound) and ``emp_eps_certifiable``, the largest
    ε̂ these evaluation counts could certify (``certifiable_epsilon``). With 16
    models (≈ 4 in and 4 out evaluation samples per x) it is 0: the bound is
    vacuous at that budget whatever the model leaks.
    """
    scores = np.asarray(scores, dtype=np.float64)
    in_mask = np.asarray(in_mask, dtype=bool)
    n_models, n_parent = scores.shape
    if n_models < MIN_SHADOW_MODELS:
        raise ValueError(f"Recipe C needs at least {MIN_SHADOW_MODELS} shadow models, got {n_models}")
    order = np.random.default_rng(seed).permutation(n_models)
    select, evaluate = order[: n_models // 2], order[n_models // 2:]
    # Candidate thresholds: each selection model's own score of each example
    # (R_s × R_s × 2n comparisons, R_s = number of selection models).
    sel_scores, sel_in = scores[select], in_mask[select]
    above = sel_scores[None, :, :] >= sel_scores[:, None, :]
    n_in_sel, n_out_sel = sel_in.sum(axis=0), (~sel_in).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        tpr = (above & sel_in[None]).sum(axis=1) / n_in_sel
        fpr = (above & ~sel_in[None]).sum(axis=1) / n_out_sel
    gap = np.nan_to_num(tpr - fpr)
    best = np.argmax(np.abs(gap), axis=0)
    cols = np.arange(n_parent)
    thresholds = np.where((n_in_sel > 0) & (n_out_sel > 0), sel_scores[best, cols], np.inf)
    flip = gap[best, cols] < 0
    ev_scores = np.where(flip[None, :], -scores[evaluate], scores[evaluate])
    ev_thresholds = np.where(flip, -thresholds, thresholds)
    ev_in = in_mask[evaluate]
    predicted = ev_scores >= ev_thresholds[None, :]
    n_in = ev_in.sum(axis=0)
    n_out = (~ev_in).sum(axis=0)
    tp = (predicted & ev_in).sum(axis=0)
    fp = (predicted & ~ev_in).sum(axis=0)
    level = float(alpha) / (2 * n_parent)  # two one-sided bounds per x, 2n examples: family-wise α
    valid = (n_in > 0) & (n_out > 0) & np.isfinite(thresholds)
    eps = np.zeros(n_parent)
    ceiling = np.zeros(n_parent)
    if valid.any():
        ceiling[valid] = certifiable_epsilon(n_in[valid], n_out[valid], level, delta)
        ni, no, tpv, fpv = n_in[valid], n_out[valid], tp[valid], fp[valid]
        terms = epsilon_from_rate_bounds(
            clopper_pearson_lower(tpv, ni, level), clopper_pearson_upper(fpv, no, level),
            clopper_pearson_lower(no - fpv, no, level), clopper_pearson_upper(ni - tpv, ni, level),
            float(delta),
        )
        eps[valid] = np.maximum(terms, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        tpr_pt = np.where(n_in > 0, tp / np.maximum(n_in, 1), np.nan)
        fpr_pt = np.where(n_out > 0, fp / np.maximum(n_out, 1), np.nan)
        raw = np.maximum(np.log((tpr_pt - delta) / fpr_pt), np.log((1 - fpr_pt - delta) / (1 - tpr_pt)))
    point = np.where(np.isfinite(raw), np.maximum(raw, 0.0), np.where(raw > 0, np.inf, 0.0))
    return {
        "emp_eps_lower": float(eps.max()),
        "emp_eps_lower_x": eps,
        "emp_eps_point": float(point.max()),
        "emp_eps_point_x": point,
        "emp_eps_certifiable": float(ceiling.max()),
        "emp_eps_certifiable_x": ceiling,
        "emp_eps_q50": float(np.quantile(eps, 0.5)),
        "emp_eps_q99": float(np.quantile(eps, 0.99)),
        "n_models": int(n_models),
        "n_eval_models": int(evaluate.size),
        "alpha": float(alpha),
        "alpha_per_bound": level,
    }
