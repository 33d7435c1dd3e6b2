"""The ``pmp`` rows of one trained run (Lowy et al. 2024).

Builds the parent set X (members ∪ an equal-size non-member sample), computes
Recipe A (Prop. 12 for one full-batch step at the final weights: a per-step
diagnostic, an upper bound for that single release only; above
``metrics.pmp.recipe_a_exact_max`` points a Monte Carlo estimate of it on Recipe B's drawn
partners, flagged in the rows, ``dpaudit.metrics.pmp.dpsgd.recipe_a_from_factors``), Recipe B (the whole
training transcript from per-checkpoint clipped gradients, CLT: a heuristic,
not a guarantee) and, when ``metrics.pmp.recipe_c`` is on, Recipe C (empirical
per-example ε̂ lower bounds from the run's recipe reference pool,
``dpaudit.metrics.pmp.pool``). Non-private runs (ε = ∞) get rows saying the
PMP bounds do not apply.

What Recipes A and B need of the per-example gradients of X at the final weights and
at every checkpoint comes from the extraction stage (``pmp_pairs.parquet``,
``dpaudit.extract.pmp_pairs``: the final gradients' Dense-layer factors and Recipe B's
per-pair sums); this module starts no TensorFlow.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from dpaudit.contract.external import TRAINED_OUTSIDE, is_external
from dpaudit.extract.checkpoints import not_applicable
from dpaudit.extract.pmp_pairs import read_pmp_pairs
from dpaudit.metrics.pmp.bounds import mia_success_bound, mia_success_bound_delta, mip_eta
from dpaudit.metrics.pmp.dpsgd import (
    EXACT_MAX_PARENT,
    recipe_a_from_factors,
    recipe_b_from_chi_sums,
)
from dpaudit.metrics.pmp.pool import pool_checks, pool_recipe_c, reference_training
from dpaudit.reference.parent_set import build_parent_set

__all__ = [
    "OPTION_DEFAULTS",
    "pmp_run_metrics",
]

OPTION_DEFAULTS = {
    "parent_seed": 0,
    "nonmember_pool": "nonmembers_and_utility",
    "checkpoints": 5,
    "partners_relative_standard_error": 0.01,
    "partners_max": 256,
    "recipe_a_exact_max": EXACT_MAX_PARENT,
    "recipe_c": False,
    "alpha": 0.05,
    "seed": 0,
}
METHOD_LABELS = {
    "gauss_single_step": "upper bound for one full-batch step at the final weights (per-step diagnostic)",
    "dpsgd_clt": "whole-training heuristic (realised trajectory, CLT): a diagnostic, not a guarantee",
    "empirical_lira": ("empirical lower bound from the recipe's reference models (Clopper-Pearson, family-wise "
                       "level alpha: alpha/(2*n_bounded) per one-sided bound, two per example)"),
    "empirical_lira_point": "empirical point estimate from the recipe's reference models (plug-in rates): NOT a bound",
}


# Recipe A's rows that stay exact when its per-target means are estimated on drawn partners
EXACT_WHEN_SAMPLED = ("epsilon_global", "epsilon_parent_set", "mia_success_bound_global")
QUANTILES = (0.5, 0.99)  # of the per-example values, written as rows with a ``quantile`` column


def _rows(method: str, values: Mapping[str, float | bool | Mapping], common: Mapping, status: str = "ok",
          note: str = "", label: str | None = None) -> list[dict]:
    """Long rows of one method; a value given as a dict adds its items as parameter columns.

    Metric names are those of dpaudit.contract.metrics (family pmp); a flag stays a bool.
    """
    rows = []
    for name, value in values.items():
        extra = {}
        if isinstance(value, Mapping):
            extra = {k: v for k, v in value.items() if k != "value"}
            value = value["value"]
        rows.append({"method": method, "metric": name, "value": value if isinstance(value, bool) else float(value),
                     "status": status, "label": label or METHOD_LABELS.get(method, method), "note": note, **common, **extra})
    return rows


def _quantile_rows(method: str, name: str, per_example: np.ndarray, common: Mapping, note: str = "",
                   label: str | None = None) -> list[dict]:
    return [row for q in QUANTILES
            for row in _rows(method, {name: {"value": float(np.quantile(per_example, q)), "quantile": q}}, common,
                             note=note, label=label)]


def _summary(res: Mapping, delta: float) -> dict:
    eps_pmp = float(res["eps_pmp"])
    return {
        "epsilon_global": {"value": res["eps_global"], "neighbouring_relation": "replace_one"},
        "epsilon_parent_set": res["eps_X"], "epsilon_pmp": eps_pmp,
        "epsilon_pmp_ratio_global": eps_pmp / res["eps_global"] if res["eps_global"] > 0 else math.nan,
        "epsilon_pmp_ratio_parent_set": eps_pmp / res["eps_X"] if res["eps_X"] > 0 else math.nan,
        "mia_success_bound_global": mia_success_bound_delta(res["eps_global"], delta),
        "mia_success_bound_pmp": mia_success_bound(eps_pmp),
        "mia_success_bound_pmp_delta": mia_success_bound_delta(eps_pmp, delta),
        "mip_eta": mip_eta(eps_pmp),
    }


def pmp_run_metrics(examples: pd.DataFrame | None, splits: Mapping[str, str] | None, train: Mapping, *,
                    gradients_path: str | Path | None, options: Mapping, pool: pd.DataFrame | None = None,
                    pool_info: Mapping | None = None,
                    log: logging.Logger) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(long ``pmp`` rows, per-example frame) of one run; see the module docstring.

    ``examples``, ``splits`` and ``gradients_path`` (the run's ``pmp_pairs.parquet``) are read only
    when the recipes apply (None for a run they do not apply to: issue 47, no pairs are computed);
    without checkpoints Recipe B is not computed. ``pool``: the run's recipe reference pool
    (``dpaudit.metrics.pmp.pool.POOL_COLUMNS`` of ``P.REFERENCE_POOL``) and ``pool_info`` its
    record, for Recipe C (None: not computed).
    """
    o = {**OPTION_DEFAULTS, **options}
    eps_accountant = float(train["epsilon"])
    delta = train.get("delta")
    # The accountant's ε is a column of every row (the mia family writes it as a metric, and the
    # privacy card its balanced MIA success bound, max_attack_accuracy_bound).
    common = {"delta": math.nan if delta is None else float(delta), "accountant": train.get("accountant") or "none",
              "accountant_epsilon": eps_accountant, "parent_seed": int(o["parent_seed"]),
              "nonmember_pool": o["nonmember_pool"], "neighbouring_relation": None, "quantile": math.nan,
              "n_reference_models": None, "n_eval_models": None, "n_bounded": None, "alpha": math.nan,
              "reference_recipe": None, "reference_epsilon": math.nan, "standard_error": math.nan,
              "parent_set_distance_method": None, "parent_set_distance_exact": None}
    rows: list[dict] = []
    reason = not_applicable(train)
    if reason is not None:
        for method in ("gauss_single_step", "dpsgd_clt", "empirical_lira"):
            rows += _rows(method, {"epsilon_pmp": math.nan, "mia_success_bound_pmp": math.nan}, common,
                          "not_applicable", reason)
        log.info("PMP rows marked not applicable (mechanism=%s, epsilon=%s): %s",
                 train.get("mechanism"), eps_accountant, reason)
        return pd.DataFrame(rows), pd.DataFrame()
    if examples is None or splits is None or gradients_path is None:
        raise ValueError(f"PMP Recipes A and B apply to this run ({train.get('mechanism')}, epsilon = {eps_accountant:g}) "
                         "but its examples or pmp pairs were not given")
    delta = float(delta)
    parent = build_parent_set(examples, splits, seed=int(o["parent_seed"]), pool=o["nonmember_pool"], log=log)
    ids = parent["ids"]
    common |= {"n_parent": int(ids.size), "members_subsampled": parent["members_subsampled"]}
    z, clip = float(train["noise_multiplier"]), float(train["clip_norm"])
    q, steps = float(train["sampling_probability"]), int(train["steps"])
    pairs = read_pmp_pairs(gradients_path)
    if pairs is None:
        raise ValueError(f"{gradients_path}: no rows (extracted for a run the recipes do not apply to?); "
                         "delete it and run again")
    if not np.array_equal(pairs["example_id"], ids):
        raise ValueError(f"{gradients_path}: the gradients are not those of this parent set X "
                         "(metrics.pmp.parent_seed or nonmember_pool differ from the extraction's); "
                         "delete it and run again")
    meta = pairs["metadata"]
    drawn = {key: meta.get(key) for key in ("partners_relative_standard_error", "partners_max", "seed")}
    wanted = {"partners_relative_standard_error": float(o["partners_relative_standard_error"]),
              "partners_max": int(o["partners_max"]), "seed": int(o["seed"])}
    if meta.get("checkpoints") and drawn != wanted:
        raise ValueError(f"{gradients_path}: Recipe B's pairs were drawn with {drawn}, the metric's options are "
                         f"{wanted}; delete it and run again")
    if (meta["clip_norm"], meta["noise_multiplier"]) != (clip, z):
        raise ValueError(f"{gradients_path}: extracted for clip norm {meta['clip_norm']} and noise multiplier "
                         f"{meta['noise_multiplier']}, train.json says {clip} and {z}; delete it and run again")
    per_example = pd.DataFrame({"example_id": ids, "is_member": parent["is_member"]})

    res_a = recipe_a_from_factors(pairs["inputs"], pairs["deltas"], pairs["grad_norm"], meta["layers"],
                                  noise_multiplier=z, clip=clip, delta=delta, exact_max=int(o["recipe_a_exact_max"]),
                                  partners=int(o["partners_max"]), seed=int(o["seed"]),
                                  relative_standard_error=float(o["partners_relative_standard_error"]),
                                  partners_max=int(o["partners_max"]), log=log)
    a_common = common | {"n_partners": res_a["n_partners"], "projection_dim": 0, "checkpoints": 1,
                         "parent_set_distance_method": res_a["distance_method"],
                         "parent_set_distance_exact": res_a["distance_exact"]}
    a_note, a_label = _sampled_note(res_a, ids.size, o, log)
    a_rows = _rows("gauss_single_step", _summary(res_a, delta), a_common, note=a_note, label=a_label)
    _state_standard_error(a_rows, res_a["standard_error"])
    for row in a_rows:  # these come from all pairs even when the per-target means are sampled
        if row["metric"] in EXACT_WHEN_SAMPLED:
            row["label"] = METHOD_LABELS["gauss_single_step"]
            if row["metric"] == "epsilon_parent_set" and not res_a["distance_exact"]:
                row["label"] += " (from an upper bound on the largest clipped distance)"
    rows += a_rows
    rows += _quantile_rows("gauss_single_step", "epsilon_pmp_quantile", res_a["eps_pmp_x"], a_common, note=a_note,
                           label=a_label)
    per_example["eps_pmp_x_gauss_single_step"] = res_a["eps_pmp_x"]

    res_b = None
    if meta.get("checkpoints"):
        if meta["trajectory_steps"] != steps:
            raise ValueError(f"{gradients_path}: checkpoints represent {meta['trajectory_steps']} steps, "
                             f"train.json says {steps}")
        res_b = recipe_b_from_chi_sums(pairs["total"], ids.size, sampling_rate=q, noise_multiplier=z, delta=delta,
                                       steps=meta["trajectory_steps"], checkpoints=meta["checkpoints"],
                                       projection_dim=meta["projection_dim_used"])
        b_common = common | {"n_partners": res_b["n_partners"], "projection_dim": res_b["projection_dim"],
                             "checkpoints": res_b["checkpoints"],
                             "parent_set_distance_method": "largest_drawn_pair",
                             "parent_set_distance_exact": res_b["n_partners"] >= ids.size - 1}
        b_rows = _rows("dpsgd_clt", _summary(res_b, delta), b_common)
        _state_standard_error(b_rows, res_b["standard_error"])
        rows += b_rows
        log.info("Recipe B: %d partners per target, eps~ = %.4g with standard error %.3g (partner draw)",
                 res_b["n_partners"], res_b["eps_pmp"], res_b["standard_error"])
        rows += _rows("dpsgd_clt", {"epsilon_global": {"value": res_b["eps_global_add_remove"],
                                                       "neighbouring_relation": "add_remove"}}, b_common)
        rows += _quantile_rows("dpsgd_clt", "epsilon_pmp_quantile", res_b["eps_pmp_x"], b_common)
        per_example["eps_pmp_x_dpsgd_clt"] = res_b["eps_pmp_x"]
        per_example["mu_mean_dpsgd_clt"] = res_b["mu_mean_x"]
        per_example["mu_max_dpsgd_clt"] = res_b["mu_max_x"]
        per_example["eps_pmp_x_se_dpsgd_clt"] = res_b["standard_error_x"]
    elif is_external(train):  # issue 44: Recipe A ran at a model file's final weights
        rows += _rows("dpsgd_clt", {"epsilon_pmp": math.nan}, common, "not_applicable",
                      f"not applicable: {TRAINED_OUTSIDE}; Recipe B needs the gradients along its training trajectory")
    else:
        rows += _rows("dpsgd_clt", {"epsilon_pmp": math.nan}, common, "not_computed", "no checkpoints")

    res_c = None
    if pool is not None:
        res_c = _recipe_c(pool, pool_info or {}, train, ids, delta, o, common, log)
        rows += res_c.pop("rows")
        for key in ("emp_eps_lower_x", "emp_eps_point_x", "emp_eps_certifiable_x"):
            per_example[key] = res_c[key]
    elif is_external(train):
        rows += _rows("empirical_lira", {"empirical_epsilon_lower_bound": math.nan}, common, "not_applicable",
                      f"not applicable: {TRAINED_OUTSIDE}; Recipe C reads a grid recipe's reference pool")
    else:
        rows += _rows("empirical_lira", {"empirical_epsilon_lower_bound": math.nan}, common, "not_computed",
                      "metrics.pmp.recipe_c = false" if not o["recipe_c"] else "no reference pool for this run")

    rows += _ordering_rows(res_b, res_c, eps_accountant, common, log)
    return pd.DataFrame(rows), per_example


def _state_standard_error(rows: list[dict], standard_error: float) -> None:
    """epsilon_pmp's row states the standard error of its value from the partner draw (delta method
    at the largest ε̃_x; 0 with every partner; ``dpaudit.dp.profile_solver``)."""
    for row in rows:
        if row["metric"] == "epsilon_pmp":
            row["standard_error"] = float(standard_error)


def _sampled_note(res_a: Mapping, n_parent: int, o: Mapping, log) -> tuple[str, str | None]:
    """(note, label) of Recipe A's rows: empty and the method's label when exact; when its
    per-target means were estimated on drawn partners (``recipe_a_from_factors``), says so."""
    if not res_a["partners_sampled"]:
        return "", None
    k = res_a["n_partners"]
    distance = "exact" if res_a["distance_exact"] else f"an upper bound ({distance_search_note(res_a)})"
    note = (f"Monte Carlo estimate, not a bound: X has {n_parent} points > metrics.pmp.recipe_a_exact_max = "
            f"{int(o['recipe_a_exact_max'])}, so each target's mean over its 2n-1 = {n_parent - 1} partners is "
            f"estimated on n_partners = {k} drawn partners (sized as Recipe B's, seed {int(o['seed'])}; "
            f"epsilon_pmp's standard error {res_a['standard_error']:.3g} in column standard_error); "
            "epsilon_pmp, its quantiles, ratios and MIA bounds are estimates of the Prop. 12 upper "
            "bound's; epsilon_global (and mia_success_bound_global) are exact, epsilon_parent_set is "
            f"{distance}")
    log.warning("Recipe A on %d points: per-target means over %d drawn partners of %d (Monte Carlo estimate of "
                "the Prop. 12 bound; epsilon_parent_set %s)", n_parent, k, n_parent - 1, distance)
    return note, f"Monte Carlo estimate ({k} drawn partners per target) of the {METHOD_LABELS['gauss_single_step']}"


def distance_search_note(res_a: Mapping) -> str:
    """How the largest-distance search behind an upper-bound epsilon_parent_set ended (issue 47): the
    pairs it evaluated, its budget, and why it stopped (``dpaudit.extract.max_distance``)."""
    evaluated, budget, block = (res_a.get("distance_pairs_evaluated"), res_a.get("distance_pair_budget"),
                                res_a.get("distance_next_block"))
    method = f"parent_set_distance_method = {res_a['distance_method']}"
    if evaluated is None or budget is None or block is None:
        return f"largest clipped distance: the search stopped before certifying it, {method}"
    if evaluated > budget:  # its lower-bound sweeps come before the budget applies
        spent = f"{evaluated:,} pairs, more than its budget of {budget:,} (its lower-bound sweeps alone passed it),"
    else:
        spent = f"{evaluated:,} pairs of its budget of {budget:,} ({evaluated / budget:.1%})"
    return (f"largest clipped distance: the search evaluated {spent} without certifying the maximum and stopped "
            f"because the next cluster pair's block of {block:,} pairs would have passed the budget "
            f"({evaluated + block:,} pairs); the value is that block's bound, {method}")


def _recipe_c(pool, pool_info, train, ids, delta, o, common, log) -> dict:
    """Recipe C from the recipe's reference pool: its rows (``rows``) and ``pool_recipe_c``'s result."""
    res = pool_recipe_c(pool, ids, delta=delta, alpha=float(o["alpha"]), seed=int(o["seed"]))
    notes = []
    outside = ids.size - res["n_bounded"]
    if outside:
        notes.append(f"{outside} of the {ids.size} examples of X are outside the reference pool's population P "
                     "(non-members of the utility split): bounded are the other n_bounded")
    mismatch = pool_checks(pool_info, train)
    if mismatch:
        notes.append("reference pool not of this run's recipe (" + "; ".join(mismatch) + ")")
        log.warning("Recipe C: the reference pool's record of the target differs from the run's: %s",
                    "; ".join(mismatch))
    own = reference_training(pool_info)
    if own["note"]:
        notes.append(own["note"])
    vacuous = res["emp_eps_certifiable"] <= 0
    if vacuous:
        notes.insert(0, "vacuous at this budget: no outcome of the evaluation models can certify eps > 0 "
                        "(see empirical_epsilon_certifiable; more reference models needed)")
        log.warning("Recipe C with %d reference models cannot certify any eps > 0 over %d examples at alpha=%g "
                    "(largest certifiable value 0); its lower bound is vacuous", res["n_models"], res["n_bounded"],
                    res["alpha"])
    note = "; ".join(notes)
    c_common = common | {"n_reference_models": res["n_models"], "n_eval_models": res["n_eval_models"],
                         "n_bounded": res["n_bounded"], "alpha": res["alpha"], "alpha_per_bound": res["alpha_per_bound"],
                         "reference_recipe": pool_info.get("recipe_name"),
                         "reference_epsilon": own["reference_epsilon"]}
    eps_c = res["emp_eps_lower"]
    rows = _rows("empirical_lira", {
        "empirical_epsilon_lower_bound": eps_c,
        "empirical_epsilon_certifiable": res["emp_eps_certifiable"],
        "mia_success_bound_pmp": mia_success_bound(eps_c),
        "mia_success_bound_pmp_delta": mia_success_bound_delta(eps_c, delta),
    }, c_common, note=note)
    rows += _quantile_rows("empirical_lira", "empirical_epsilon_lower_bound_quantile",
                           res["emp_eps_lower_x_bounded"], c_common, note=note)
    rows += _rows("empirical_lira_point", {"empirical_epsilon_point": res["emp_eps_point"]}, c_common,
                  note="max over x of plug-in estimates: biased upward, not a lower bound")
    log.info("Recipe C: %d reference models (%d evaluate), %d of %d examples of X bounded: eps_hat = %.4g "
             "(certifiable up to %.4g)", res["n_models"], res["n_eval_models"], res["n_bounded"], ids.size, eps_c,
             res["emp_eps_certifiable"])
    return {**res, "rows": rows}


def _ordering_rows(res_b, res_c, eps_accountant, common, log) -> list[dict]:
    """Expected order (Lowy et al. 2024, Prop. 5: ε̃ ≤ ε(X) ≤ ε): ε̂ ≲ ε̃ (B) ≤ ε(X) (B) ≤ ε (B, same method); a failure is flagged and logged, never dropped."""
    if res_b is None:
        return []
    chain = [("epsilon_pmp", res_b["eps_pmp"]), ("epsilon_parent_set", res_b["eps_X"]),
             ("epsilon_global", res_b["eps_global"])]
    if res_c is not None:
        chain.insert(0, ("empirical_epsilon_lower_bound", res_c["emp_eps_lower"]))
    failures = [f"{a}={va:.4g} > {b}={vb:.4g}" for (a, va), (b, vb) in zip(chain, chain[1:], strict=False)
                if va > vb * (1 + 1e-9) + 1e-12]
    note = "; ".join(failures) if failures else "ordering holds"
    if failures:
        log.warning("PMP ordering check failed (Recipe B is a heuristic, so this is a warning): %s", note)
    return _rows("dpsgd_clt", {"ordering_holds": not failures}, common, "ok", note)

