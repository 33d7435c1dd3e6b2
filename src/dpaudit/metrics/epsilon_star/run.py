"""Per-model long-format Epsilon* rows (Negoescu et al.), as the workflow's metric rule writes them.

Each (loss variant, estimator) gives an ``epsilon_star`` row and the four term rows
m1..m4. The ``epsilon_star`` row also carries what a reader needs to trust the
value: the estimator's ceiling for these sample sizes and filter and whether
the value sits on it (perfectly separated losses count as on it: they are
beyond it, yet keep no threshold), whether no threshold was kept (then the
value is NaN),
whether the losses separate perfectly, how many examples the winning ratio
rests on, an optional bootstrap interval and, for the parametric estimator,
whether the KS check rejects its Normal fit (rows ``normal_fit_pvalue``).

Issue 46: two flags of each ``epsilon_star`` row are rows of their own, so metrics.parquet
carries them (value_bool): ``at_resolution`` (the winning ratio's denominator rests on the
fewest records of its set the estimator can use: its resolution, the finest rate it resolves
on this sample, is the smallest count the empirical filter keeps over n (1/n below 1000 rows at
the default filter 0.001, 2/n from 1000), and 1/n for the parametric fit, whose winning rate
extrapolates the Normal tail below it; breast_cancer's 284 members and 142 non-members give
ln(8 − 284δ) = 2.057 to most models, one member against four non-members) and, with the
bootstrap, ``outside_bootstrap_interval``. Why a point falls outside its own
percentile interval: ε* is a maximum over thresholds of noisy ratios, biased upward (the
largest of many noisy ratios), and a bootstrap replicate adds a second draw of the same noise,
which its maximum picks up too, so the replicates sit above the point by about that bias
(digits, DP-SGD ε = 1, seed 0: point 0.684, replicates' mean 1.50, 99.5 % of them above the
point, interval [0.884, 2.47]). The percentile interval assumes replicates scatter around the
point as the point scatters around the truth; a maximum breaks that. The row
``epsilon_star_bias_corrected`` reports the bootstrap's bias-corrected form, 2ε* − mean of the
replicates, with the basic (reverse-percentile) interval, both floored at 0. It corrects the
first-order bias only: on identical member and non-member Normals (true ε* = 0) at 898/450
rows the empirical point averaged 1.50 and the corrected one 1.30 (40 draws); among the 11 of
450 draws whose point fell outside the percentile interval, the basic interval held the true
value 10 times, the percentile interval never (measured for issue 46, B = 100).

The noise floor itself is the row ``within_permutation_null`` of the empirical estimator
(``dpaudit.metrics.epsilon_star.permutation``): members and non-members relabelled at random,
sizes kept, give the law ε* has when the losses carry no membership signal; the flag is raised
when the value is at or below that law's ``level`` quantile (``null_quantile``, with the
permutation p-value ``null_p_value``). The parametric estimator has no such row: its Normal fit
per relabelling would cost ~50 ms each.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from dpaudit.metrics.epsilon_star.bootstrap import bootstrap_epsilon_star
from dpaudit.metrics.epsilon_star.estimators import (
    EMPIRICAL_FILTER,
    GRID_SIZE,
    TERMS,
    EpsilonStarResult,
    NormalFit,
    empirical_ceiling,
    empirical_epsilon_star,
    parametric_ceiling,
    parametric_epsilon_star,
    transform_losses,
)
from dpaudit.metrics.epsilon_star.goodness_of_fit import normal_fit_check
from dpaudit.metrics.epsilon_star.permutation import permutation_null

# The parametric supremum is approached, never attained, on the quantile grid;
# within this many nats of it the value is flagged as sitting on the ceiling.
PARAMETRIC_CEILING_TOLERANCE = 0.01

_METRIC_COLUMNS: dict[str, str] = {
    "metric": "str",
    "value": "float64",
    "loss": "str",
    "estimator": "str",
    "term": "str",
    "argmax_fpr": "float64",
    "argmax_fnr": "float64",
    "on_boundary": "boolean",
    "mu_tr": "float64",
    "sd_tr": "float64",
    "mu_pop": "float64",
    "sd_pop": "float64",
    "lo": "float64",
    "hi": "float64",
    "alpha": "float64",
    "delta": "float64",
    "filter_lo": "float64",
    "filter_hi": "float64",
    "n_tr": "int64",
    "n_pop": "int64",
    "grid_size": "int64",
    "n_kept": "int64",
    # epsilon_star rows only (NA on the others)
    "ceiling": "float64",
    "at_ceiling": "boolean",
    "none_kept": "boolean",
    "separated": "boolean",
    "argmax_count": "float64",
    "boot_low": "float64",
    "boot_high": "float64",
    "boot_se": "float64",
    "boot_level": "float64",
    "boot_resamples": "Int64",
    "boot_seed": "Int64",
    "boot_grid_size": "Int64",
    "boot_undefined": "Int64",
    "boot_mean": "float64",
    # the flag rows (at_resolution, outside_bootstrap_interval) and the bias-corrected row
    "value_bool": "boolean",
    "resolution": "float64",
    "ci_lower": "float64",
    "ci_upper": "float64",
    # parametric epsilon_star rows (either set) and normal_fit_pvalue rows (one set)
    "normal_rejected": "boolean",
    "gof_set": "str",
    "gof_ks_stat": "float64",
    "gof_n_samples": "Int64",
    "gof_repeats": "Int64",
    "gof_alpha": "float64",
    "gof_seed": "Int64",
    # within_permutation_null rows (the empirical estimator)
    "null_quantile": "float64",
    "null_p_value": "float64",
    "null_level": "float64",
    "null_permutations": "Int64",
    "null_seed": "Int64",
    "null_undefined": "Int64",
}


def _flags(
    res: EpsilonStarResult, estimator: str, tr: np.ndarray, pop: np.ndarray, empirical_filter: float
) -> dict:
    if estimator == "empirical":
        ceiling = empirical_ceiling(tr.size, pop.size, res.delta, empirical_filter)
        tolerance = 1e-12  # a lattice value: equal up to rounding
    else:
        ceiling = parametric_ceiling(res.delta, res.filter_lo)
        tolerance = PARAMETRIC_CEILING_TOLERANCE
    defined = bool(np.isfinite(res.eps_star))
    separated = bool(tr.max() < pop.min() or pop.max() < tr.min())
    if defined:
        at_ceiling = bool(res.eps_star >= ceiling - tolerance)
    else:
        # Perfectly separated losses are beyond the ceiling: moving one example of each set
        # across the gap would already give it. Otherwise (e.g. identical losses) unknown.
        at_ceiling = True if separated else None
    # examples behind the winning ratio's denominator (expected count for the parametric fit)
    set_size = tr.size if res.term in ("m2", "m4") else pop.size
    return {
        "ceiling": ceiling,
        "at_ceiling": at_ceiling,
        "none_kept": res.n_kept == 0,
        "separated": separated,
        "argmax_count": res.argmax_denominator * set_size if defined else float("nan"),
        "resolution": _fewest_count(set_size, estimator, empirical_filter) / set_size,
    }


def _fewest_count(n: int, estimator: str, empirical_filter: float) -> int:
    """The fewest records of a set of ``n`` a winning ratio's denominator can rest on: the smallest
    count whose rate the empirical filter keeps (the same float test as the estimator), 1 for the
    parametric fit (it extrapolates below one record, to its δ filter)."""
    if estimator != "empirical":
        return 1
    counts = np.arange(1, n + 1)
    kept = counts[(counts / n > empirical_filter) & ((n - counts) / n > empirical_filter)]
    return int(kept[0]) if kept.size else n


def _flag_rows(res: EpsilonStarResult, loss: str, estimator: str, n_tr: int, n_pop: int, extra: dict) -> list[dict]:
    """The issue-46 rows of one epsilon_star row: at_resolution and, with a bootstrap,
    outside_bootstrap_interval and epsilon_star_bias_corrected (module docstring)."""
    nan = float("nan")
    eps = float(res.eps_star)
    defined = bool(np.isfinite(eps))
    common = {"loss": loss, "estimator": estimator, "delta": res.delta, "filter_lo": res.filter_lo,
              "filter_hi": res.filter_hi, "n_tr": n_tr, "n_pop": n_pop, "grid_size": res.grid_size,
              "n_kept": res.n_kept, "term": res.term,
              "argmax_count": extra["argmax_count"], "resolution": extra["resolution"]}
    # an integer count of the empirical estimator is exact; 1e-9 absorbs rate × n rounding
    fewest = extra["resolution"] * (n_tr if res.term in ("m2", "m4") else n_pop)
    at = bool(extra["argmax_count"] <= fewest + 1e-9) if defined else None
    rows = [{"metric": "at_resolution", "value": nan, "value_bool": at, **common}]
    if "boot_low" not in extra:
        return rows
    low, high, mean = extra["boot_low"], extra["boot_high"], extra["boot_mean"]
    boot = {**common, "boot_low": low, "boot_high": high, "boot_mean": mean}
    known = defined and np.isfinite(low) and np.isfinite(high)
    rows.append({"metric": "outside_bootstrap_interval", "value": nan,
                 "value_bool": bool(not low <= eps <= high) if known else None, **boot})
    corrected = max(0.0, 2.0 * eps - mean) if known and np.isfinite(mean) else nan
    rows.append({"metric": "epsilon_star_bias_corrected", "value": corrected, **boot,
                 "ci_lower": max(0.0, 2.0 * eps - high) if known else nan,
                 "ci_upper": max(0.0, 2.0 * eps - low) if known else nan})
    return rows


def _null_row(tr: np.ndarray, pop: np.ndarray, loss: str, delta: float, options: Mapping,
              empirical_filter: float) -> dict:
    """The ``within_permutation_null`` row of the empirical ε* (module docstring)."""
    null = permutation_null(tr, pop, delta, permutations=int(options["permutations"]),
                            level=float(options.get("level", 0.95)), seed=int(options.get("seed", 0)),
                            empirical_filter=empirical_filter)
    return {"metric": "within_permutation_null", "value": float("nan"), "value_bool": null.within, "loss": loss,
            "estimator": "empirical", "delta": delta, "filter_lo": empirical_filter, "filter_hi": empirical_filter,
            "n_tr": tr.size, "n_pop": pop.size, "null_quantile": null.quantile, "null_p_value": null.p_value,
            "null_level": null.level, "null_permutations": null.permutations, "null_seed": null.seed,
            "null_undefined": null.undefined}


def _result_rows(
    res: EpsilonStarResult, loss: str, estimator: str, n_tr: int, n_pop: int, eps_extra: dict
) -> list[dict]:
    nan = float("nan")
    fit = res.fit or NormalFit(nan, nan, nan, nan)
    params = {
        "loss": loss,
        "estimator": estimator,
        "term": res.term,
        "argmax_fpr": res.argmax_fpr,
        "argmax_fnr": res.argmax_fnr,
        "on_boundary": res.on_boundary,
        "mu_tr": fit.mu_tr,
        "sd_tr": fit.sd_tr,
        "mu_pop": fit.mu_pop,
        "sd_pop": fit.sd_pop,
        "lo": fit.lo,
        "hi": fit.hi,
        "alpha": fit.alpha,
        "delta": res.delta,
        "filter_lo": res.filter_lo,
        "filter_hi": res.filter_hi,
        "n_tr": n_tr,
        "n_pop": n_pop,
        "grid_size": res.grid_size,
        "n_kept": res.n_kept,
    }
    rows = [{"metric": "epsilon_star", "value": res.eps_star, **params, **eps_extra}]
    rows += [{"metric": name, "value": value, **params} for name, value in zip(TERMS, res.m, strict=True)]
    return rows


def _bootstrap_columns(tr, pop, delta, estimator, options, grid_size, alpha, empirical_filter) -> dict:
    boot = bootstrap_epsilon_star(
        tr, pop, delta, estimator=estimator, resamples=int(options["resamples"]),
        level=float(options.get("level", 0.95)), seed=int(options.get("seed", 0)),
        grid_size=int(options.get("grid_size", grid_size)), alpha=alpha, empirical_filter=empirical_filter,
    )
    defined = boot.replicates[np.isfinite(boot.replicates)]
    return {
        "boot_low": boot.low, "boot_high": boot.high, "boot_se": boot.se, "boot_level": boot.level,
        "boot_resamples": boot.resamples, "boot_seed": boot.seed, "boot_grid_size": boot.grid_size,
        "boot_undefined": boot.undefined, "boot_mean": float(defined.mean()) if defined.size else float("nan"),
    }


def _goodness_of_fit_rows(tr, pop, loss, delta, alpha, options) -> tuple[list[dict], bool]:
    phi_tr, phi_pop, _, _ = transform_losses(tr, pop, alpha)
    rows, rejected = [], False
    for name, phi in (("members", phi_tr), ("nonmembers", phi_pop)):
        check = normal_fit_check(
            phi, n_samples=int(options.get("n_samples", 100)), n_repeats=int(options.get("repeats", 10)),
            alpha=float(options.get("alpha", 0.05)), seed=int(options.get("seed", 0)),
        )
        rejected |= check.rejected
        rows.append({
            "metric": "normal_fit_pvalue", "value": check.p_value, "loss": loss, "estimator": "parametric",
            "alpha": alpha, "delta": delta, "n_tr": tr.size, "n_pop": pop.size,
            "normal_rejected": check.rejected, "gof_set": name, "gof_ks_stat": check.ks_stat,
            "gof_n_samples": check.n_samples, "gof_repeats": check.n_repeats, "gof_alpha": check.alpha,
            "gof_seed": check.seed,
        })
    return rows, rejected


def epsilon_star_metrics(
    member_losses_by_variant: Mapping[str, ArrayLike],
    nonmember_losses_by_variant: Mapping[str, ArrayLike],
    delta: float,
    *,
    grid_size: int = GRID_SIZE,
    alpha: float = 1.0,
    empirical_filter: float = EMPIRICAL_FILTER,
    estimators: Sequence[str] = ("empirical", "parametric"),
    bootstrap: Mapping | None = None,
    goodness_of_fit: Mapping | None = None,
    null: Mapping | None = None,
) -> pd.DataFrame:
    """Long-format eps* table of one model: one row per (loss, estimator, metric).

    Metrics are epsilon_star and m1..m4 (each term's maximum over kept thresholds,
    not floored; NaN when no threshold survives the filter). Every row carries
    the parameters of its computation; fit columns (mu/sd, lo, hi, alpha) are
    NaN for the empirical estimator. ``epsilon_star`` rows add the ceiling and the
    flags (module docstring). ``bootstrap`` (keys resamples, level, seed,
    grid_size) adds the interval columns; ``goodness_of_fit`` (keys n_samples,
    repeats, alpha, seed) adds ``normal_fit_pvalue`` rows per set and the
    ``normal_rejected`` flag of the parametric rows; ``null`` (keys permutations, level, seed) adds the
    empirical estimator's ``within_permutation_null`` row per loss. Column dtypes are fixed
    (see ``_METRIC_COLUMNS``) so frames of many runs concatenate cleanly.
    """
    if set(member_losses_by_variant) != set(nonmember_losses_by_variant):
        raise ValueError("member and non-member loss variants differ")
    unknown = set(estimators) - {"empirical", "parametric"}
    if unknown:
        raise ValueError(f"unknown estimators {sorted(unknown)}")
    rows: list[dict] = []
    for loss in member_losses_by_variant:
        tr = np.asarray(member_losses_by_variant[loss], dtype=np.float64).ravel()
        pop = np.asarray(nonmember_losses_by_variant[loss], dtype=np.float64).ravel()
        for estimator in estimators:
            if estimator == "empirical":
                res = empirical_epsilon_star(tr, pop, delta, filter_bound=empirical_filter)
            else:
                res = parametric_epsilon_star(tr, pop, delta, grid_size=grid_size, alpha=alpha)
            extra = _flags(res, estimator, tr, pop, empirical_filter)
            if bootstrap:
                extra |= _bootstrap_columns(tr, pop, delta, estimator, bootstrap, grid_size, alpha,
                                            empirical_filter)
            if estimator == "parametric" and goodness_of_fit:
                gof_rows, extra["normal_rejected"] = _goodness_of_fit_rows(
                    tr, pop, str(loss), delta, alpha, goodness_of_fit)
            else:
                gof_rows = []
            rows.extend(_result_rows(res, str(loss), estimator, tr.size, pop.size, extra))
            rows.extend(_flag_rows(res, str(loss), estimator, tr.size, pop.size, extra))
            rows.extend(gof_rows)
            if estimator == "empirical" and null:
                rows.append(_null_row(tr, pop, str(loss), delta, null, empirical_filter))
    frame = pd.DataFrame(rows, columns=list(_METRIC_COLUMNS))
    return frame.astype(_nullable(frame))


def _nullable(frame: pd.DataFrame) -> dict[str, str]:
    """Column dtypes, counts nullable where some row (a goodness-of-fit row) lacks them."""
    dtypes = dict(_METRIC_COLUMNS)
    for column, dtype in _METRIC_COLUMNS.items():
        if dtype == "int64" and frame[column].isna().any():
            dtypes[column] = "Int64"
    return dtypes


# ---------------------------------------------------------------------------
# one trained model, as the workflow's metric rule computes it
# ---------------------------------------------------------------------------

LOSS_VARIANTS = {"logit": "loss_logit", "ce": "loss_ce"}


def epsilon_star_run_metrics(
    outputs: pd.DataFrame,
    *,
    members_split: str,
    nonmembers_split: str,
    utility_split: str,
    classes: int,
    delta: float,
    grid_size: int = GRID_SIZE,
    alpha: float = 1.0,
    empirical_filter: float = EMPIRICAL_FILTER,
    bootstrap: Mapping | None = None,
    goodness_of_fit: Mapping | None = None,
    null: Mapping | None = None,
) -> pd.DataFrame:
    """ε* of one model on both loss variants and both estimators, plus its landscape_utility row.

    Members are the training split, the population sample is the non-member split
    (Negoescu et al. 2023, Sec. 3: all of them, unbalanced). δ is the run's δ (the one DP training used).
    ``bootstrap``, ``goodness_of_fit`` and ``null`` as in ``epsilon_star_metrics``.
    """
    from dpaudit.metrics.utility import utility

    for column in ("split", *LOSS_VARIANTS.values()):
        if column not in outputs.columns:
            raise ValueError(f"outputs lack column {column!r}")
    members = outputs[outputs["split"] == members_split]
    nonmembers = outputs[outputs["split"] == nonmembers_split]
    if members.empty or nonmembers.empty:
        raise ValueError(
            f"need members ({members_split!r}: {len(members)}) and non-members "
            f"({nonmembers_split!r}: {len(nonmembers)})"
        )
    for column in LOSS_VARIANTS.values():
        bad = ~np.isfinite(outputs[column].to_numpy(dtype=np.float64))
        if bad.any():
            ids = outputs.loc[bad, "example_id"].head(20).tolist()
            raise ValueError(f"non-finite {column} for example_id(s) {ids}")
    frame = epsilon_star_metrics(
        {name: members[col].to_numpy(np.float64) for name, col in LOSS_VARIANTS.items()},
        {name: nonmembers[col].to_numpy(np.float64) for name, col in LOSS_VARIANTS.items()},
        delta,
        grid_size=grid_size,
        alpha=alpha,
        empirical_filter=empirical_filter,
        bootstrap=bootstrap,
        goodness_of_fit=goodness_of_fit,
        null=null,
    )
    measured = utility(outputs, utility_split=utility_split, classes=classes)
    # The utility row has no grid or kept-point counts: counts become nullable here
    # (NA = not applicable), the same for every run, so run frames still concatenate.
    dtypes = {k: ("Int64" if v in ("int64", "Int64") else v) for k, v in _METRIC_COLUMNS.items()}
    utility_row = pd.DataFrame([{"metric": "landscape_utility", "value": measured["utility"], "delta": delta,
                                 "n_pop": measured["n_utility"]}])
    frame = pd.concat([frame.astype(dtypes), utility_row.astype({k: dtypes[k] for k in utility_row})],
                      ignore_index=True)
    frame["utility_kind"] = pd.array([None] * (len(frame) - 1) + [measured["utility_kind"]], dtype="string")
    return frame.astype(dtypes)
