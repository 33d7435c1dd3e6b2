"""Per-model PMP of DP-SGD runs (Lowy et al. 2024; Recipes A, B, C, see docs/architecture.md).

The paper itself treats only one-shot mechanisms. Recipe A applies its
Prop. 12 to ONE full-batch DP-SGD step at a fixed checkpoint (a per-step
diagnostic, never a bound on the trained model: PMP does not compose).
Recipe B extends the joint-convexity argument to the whole training
transcript with the realised trajectory's per-checkpoint clipped gradients and
a CLT approximation of the subsampled replace-one Gaussian (a heuristic, not a
guarantee). Recipe C is the empirical side: reference models of the run's recipe
trained on random halves of a population holding the parent set (the recipe's reference
pool, ``dpaudit.metrics.pmp.pool``), per-example Clopper–Pearson ε lower bounds.
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
from dpaudit.dp.profile_solver import profile_epsilon_per_row, profile_epsilon_standard_error
from dpaudit.extract.max_distance import largest_clipped_distance
from dpaudit.extract.pmp_pairs import (
    clip_rows,
    clipped_distances,
    clipped_factor_views,
    project_rows,
    projection_matrix,
    replace_one_chi,
    trajectory_chi_sums,
)
from dpaudit.extract.pmp_partners import (
    PARTNER_BLOCK,
    PILOT_PARTNERS,
    block_inner_products,
    partner_blocks,
    partners_drawn,
    partners_for_standard_error,
)
from dpaudit.metrics.pmp.gaussian import SOLVE_CELLS, gaussian_pmp, pmp_result, solve_rows

__all__ = [
    "EXACT_MAX_PARENT",
    "MIN_REFERENCE_MODELS",
    "certifiable_epsilon",
    "clip_rows",
    "empirical_pmp",
    "project_rows",
    "projection_matrix",
    "recipe_a_from_factors",
    "recipe_a_single_step",
    "recipe_b_from_chi_sums",
    "recipe_b_trajectory",
    "reference_models_to_certify",
    "replace_one_chi",
]


def recipe_a_single_step(clipped: np.ndarray | None, noise_multiplier: float, clip: float, delta: float, *,
                         distances: np.ndarray | None = None) -> dict:
    """Recipe A: Prop. 12 for one full-batch step Σ clip_C(g(x)) + N(0, (zC)²I).

    Replace-one global sensitivity 2C (μ = 2/z). A per-step diagnostic at the
    given checkpoint; an upper bound on that one release's PMP only. ``distances``:
    the clipped gradients' pairwise distances instead of the gradients
    (``dpaudit.extract.pmp_pairs.clipped_distances``).
    """
    sigma = float(noise_multiplier) * float(clip)
    return gaussian_pmp(clipped, sigma, delta, sensitivity_global=2.0 * float(clip), distances=distances)


EXACT_MAX_PARENT = 4096  # metrics.pmp.recipe_a_exact_max's default


def recipe_a_from_factors(inputs: np.ndarray, deltas: np.ndarray, grad_norm: np.ndarray,
                          layers, *, noise_multiplier: float, clip: float, delta: float, exact_max: int,
                          partners: int, seed: int, relative_standard_error: float | None = None,
                          partners_max: int | None = None, log=None) -> dict:
    """Recipe A from the extraction's Dense-layer factors (``pmp_pairs.parquet``), at any size.

    A parent set of 2n ≤ ``exact_max`` points gets the exact Prop. 12 bound: every target's
    mean over all 2n − 1 partners (``clipped_distances`` and ``gaussian_pmp``, the 2n × 2n
    distances held once). A larger one would need 4n² distances and Newton steps of
    δ_G on each (≈ 0.4 µs per pair: 6.5 s at 2n = 4,096, `bench/bench_pmp_scale.py`; several minutes at 2n = 32,560), so there each target's
    mean δ̃_x(ε) is estimated on its ``partners`` drawn partners (``dpaudit.extract.pmp_partners``
    with ``seed``, Recipe B's draw: a Gram block per block of targets): an unbiased Monte Carlo
    estimate of δ̃_x(ε) at every ε, hence an estimate of ε̃_x, neither an upper nor a lower bound
    (``pmp_is_upper_bound`` False, ``partners_sampled`` True; ``mu_mean_x`` and ``mu_max_x`` over
    the drawn partners, as Recipe B's; ``standard_error``: the delta-method standard error of the
    largest ε̃_x, ``profile_epsilon_standard_error``). With ``relative_standard_error`` the count is
    sized as Recipe B's (a pilot of ``PILOT_PARTNERS`` drawn with ``seed``, then
    ``partners_for_standard_error`` up to ``partners_max``, the pilot itself when that is its count,
    else a second draw whose solve starts at the pilot's roots); without, ``partners``. ε(X) from the largest distance over all pairs
    (``dpaudit.extract.max_distance.largest_clipped_distance``: exact, or an upper bound when its
    pair budget runs out; ``distance_method`` and ``distance_exact`` say which, ``distance_pairs_evaluated``,
    ``distance_pair_budget`` and ``distance_next_block`` how the search ended). No n·k array is
    held: each block of targets is solved as it is drawn (the solver's rows are independent). A
    sampled ε̃_x never exceeds the exact ε(X) (each δ_G(ε; μ) ≤ δ_G(ε; max μ)). ``n_partners``
    in the result: the partners each ε̃_x averages. ``log``: progress lines (``dpaudit.progress``).
    """
    n_parent = len(grad_norm)
    z, clip = float(noise_multiplier), float(clip)
    sigma = z * clip
    if n_parent <= int(exact_max):
        distances = clipped_distances(inputs, deltas, grad_norm, layers, clip)
        res = recipe_a_single_step(None, z, clip, delta, distances=distances)
        return res | {"n_partners": n_parent - 1, "partners_sampled": False, "standard_error": 0.0,
                      "distance_method": "all_pairs", "distance_exact": True}
    if not sigma > 0:
        raise ValueError(f"noise standard deviation must be > 0, got {sigma}")
    largest = largest_clipped_distance(inputs, deltas, grad_norm, layers, clip, exact_max=exact_max,
                                       seed=int(seed), log=log)
    views, clipped_sq = clipped_factor_views(inputs, deltas, grad_norm, layers, clip)
    k = partners_drawn(n_parent, partners)
    if relative_standard_error is not None:  # Recipe A's own pilot, as Recipe B's (dpaudit.extract.pmp_partners)
        k0 = partners_drawn(n_parent, min(PILOT_PARTNERS, int(partners_max)))
        pilot = _drawn_partners_pass(views, clipped_sq, k0, int(seed), sigma, delta, log, "pilot")
        top = int(np.argmax(pilot[0]))
        k = partners_for_standard_error(float(pilot[1][top]), k0, n_parent - 1,
                                        float(relative_standard_error) * float(pilot[0][top]), int(partners_max))
    if relative_standard_error is not None and k == k0:  # the pilot is the draw (n, k, seed) asks for
        eps_x, se_x, mu_mean, mu_max = pilot
    else:
        eps_x, se_x, mu_mean, mu_max = _drawn_partners_pass(
            views, clipped_sq, k, int(seed), sigma, delta, log, "drawn partners",
            start=None if relative_standard_error is None else pilot[0])
    res = pmp_result(eps_x, sigma, delta, sensitivity_global=2.0 * clip, sens_x=largest["value"],
                     mu_mean_x=mu_mean, mu_max_x=mu_max, upper_bound=False)
    return res | {"n_partners": k, "partners_sampled": True, "standard_error": float(se_x[np.argmax(eps_x)]),
                  "distance_method": largest["method"], "distance_exact": bool(largest["exact"]),
                  "distance_pairs_evaluated": int(largest["pairs_evaluated"]),
                  "distance_pair_budget": largest.get("pair_budget"), "distance_next_block": largest.get("next_block")}


def _drawn_partners_pass(views, clipped_sq, k, seed, sigma, delta, log, label, start=None):
    """(ε̃_x, its standard error, mean μ, max μ) per target over k partners drawn with ``seed``
    (``partner_blocks``), block by block: no n·k array. ``start``: per-target guesses of ε̃_x (the
    pilot's), where the solver's Newton steps begin (``profile_epsilon_per_row``)."""
    from dpaudit.progress import Progress

    n_parent = clipped_sq.size
    eps_x, se_x, mu_mean, mu_max = (np.empty(n_parent) for _ in range(4))
    blocks = -(-n_parent // PARTNER_BLOCK)
    with Progress(f"Recipe A: {label}", total=blocks, unit="blocks", log=log) as progress:
        for first, stop, shared, columns in partner_blocks(n_parent, k, seed):
            partner = shared[columns]
            d2 = clipped_sq[first:stop, None] + clipped_sq[partner] - 2.0 * block_inner_products(
                views, first, stop, shared, columns)
            mu = np.sqrt(np.maximum(d2, 0.0)) / sigma
            guess = None if start is None else start[first:stop]
            eps_x[first:stop] = profile_epsilon_per_row(mu, delta, start=guess)
            se_x[first:stop] = profile_epsilon_standard_error(mu, eps_x[first:stop], population=n_parent - 1)
            mu_mean[first:stop], mu_max[first:stop] = mu.mean(axis=1), mu.max(axis=1)
            progress.advance()
    return eps_x, se_x, mu_mean, mu_max


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
    depends on D and the noise. The sums Σ_k T_k χ_k are
    ``dpaudit.extract.pmp_pairs.trajectory_chi_sums`` (the extraction job computes them),
    the rest ``recipe_b_from_chi_sums`` (the metric's).
    """
    if not checkpoints:
        raise ValueError("Recipe B needs at least one checkpoint")
    sums = trajectory_chi_sums(checkpoints, noise_multiplier=noise_multiplier, clip=clip, n_partners=n_partners,
                               seed=seed, projection_dim=projection_dim)
    return recipe_b_from_chi_sums(sums["total"], checkpoints[0]["clipped"].shape[0], sampling_rate=sampling_rate,
                                  noise_multiplier=noise_multiplier, delta=delta, steps=sums["steps"],
                                  checkpoints=sums["checkpoints"], projection_dim=sums["projection_dim"])


def recipe_b_from_chi_sums(total: np.ndarray, n_parent: int, *, sampling_rate: float, noise_multiplier: float,
                           delta: float, steps: int, checkpoints: int, projection_dim: int) -> dict:
    """Recipe B from Σ_k T_k χ_k per (target, partner) (flat, target-major, the same number of
    partners per target): μ = q·sqrt(Σ), ε̃_x per target (by row blocks, ``solve_rows``), the
    same-method references, ``standard_error_x``, each ε̃_x's delta-method standard error from the
    partner draw (``profile_epsilon_standard_error``; 0 with every partner), and ``standard_error``,
    that of the largest ε̃_x. The largest of noisy estimates leans upward when many targets are
    near it (by up to about that error times √(2 ln 2n)), beyond its own standard error."""
    z = float(noise_multiplier)
    q = float(sampling_rate)
    mu = q * np.sqrt(np.asarray(total, dtype=np.float64))
    mu_rows = mu.reshape(int(n_parent), -1)
    eps_x = solve_rows(lambda start, stop: mu_rows[start:stop], delta, int(n_parent),
                       block_rows=max(1, SOLVE_CELLS // mu_rows.shape[1]))
    standard_error_x = profile_epsilon_standard_error(mu_rows, eps_x, population=int(n_parent) - 1)
    inv_z2 = 1.0 / z**2
    mu_replace = q * math.sqrt(steps * 4.0 * math.sinh(inv_z2))
    mu_add_remove = q * math.sqrt(steps * math.expm1(inv_z2))
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
        "n_partners": int(mu.size // int(n_parent)),
        "standard_error": float(standard_error_x[np.argmax(eps_x)]),
        "standard_error_x": standard_error_x,
        "steps": int(steps),
        "checkpoints": int(checkpoints),
        "projection_dim": int(projection_dim),
    }


MIN_REFERENCE_MODELS = 4  # two selection and two evaluation models (config: metrics.attacks.reference_models)


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


def reference_models_to_certify(n_bounded: int, alpha: float, delta: float, *, above: float = 0.0,
                                largest: int = 4096) -> int:
    """Smallest number K of models for which Recipe C can certify some ε̂ > ``above`` over
    ``n_bounded`` examples at family-wise level ``alpha``: ``empirical_pmp`` evaluates on
    K − ⌊K/2⌋ models, and the best case is an evaluation half split as evenly as it allows
    between in- and out-models with every in-model above every out-model
    (``certifiable_epsilon`` at α/(2·n_bounded) per bound). Uneven splits certify less, so
    with the pool's random inclusion bits K is what the best-split example of X needs;
    ``largest`` caps the search (ValueError beyond)."""
    level = float(alpha) / (2 * int(n_bounded))
    for k in range(MIN_REFERENCE_MODELS, int(largest) + 1):
        evaluate = k - k // 2
        if float(certifiable_epsilon(evaluate // 2, evaluate - evaluate // 2, level, delta)) > above:
            return k
    raise ValueError(f"no K <= {largest} certifies eps > {above} over {n_bounded} examples at alpha = {alpha}")


def empirical_pmp(scores: np.ndarray, in_mask: np.ndarray, *, delta: float, alpha: float,
                  seed: int) -> dict:
    """Recipe C: per-example ε̂_x lower bounds from reference models (the LiRA protocol is the PMP game).

    ``scores[r, i]``: attack score (higher = more member-like, e.g. −loss or φ) of
    example i under reference model r; ``in_mask[r, i]``: i was in model r's
    training set. Models are split at random into a selection half (picks
    each example's threshold and direction) and an evaluation half, where
    one-sided Clopper–Pearson bounds give
    ε̂_x = max{ln((TPR_lo − δ)/FPR_hi), ln((TNR_lo − δ)/FNR_hi)}, floored at 0.
    Each x uses two one-sided bounds (TPR_lo, FPR_hi; TNR_lo = 1 − FPR_hi and
    FNR_hi = 1 − TPR_lo are the same events), each at level α/(2·m) for the m
    columns (the examples bounded; 2n when all of X): Bonferroni over the 2m
    bounds makes α the family-wise level, so the max over x is a simultaneous
    (1 − α) lower bound.

    Also returned: the point estimate ``emp_eps_point`` (plain rates, no
    confidence correction: not a bound) and ``emp_eps_certifiable``, the largest
    ε̂ these evaluation counts could certify (``certifiable_epsilon``). With 16
    models (≈ 4 in and 4 out evaluation samples per x) it is 0: the bound is
    vacuous at that budget whatever the model leaks.
    """
    scores = np.asarray(scores, dtype=np.float64)
    in_mask = np.asarray(in_mask, dtype=bool)
    n_models, n_parent = scores.shape
    if n_models < MIN_REFERENCE_MODELS:
        raise ValueError(f"Recipe C needs at least {MIN_REFERENCE_MODELS} reference models, got {n_models}")
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
    level = float(alpha) / (2 * n_parent)  # two one-sided bounds per x, n_parent examples: family-wise α
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
