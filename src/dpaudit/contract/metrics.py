"""The metric vocabulary: every (family, metric) of ``results/tables/metrics.parquet``, declared once.

A metric row is long format: the keys ``dataset``, ``run``, ``family``, ``metric``, one
value, and the parameter columns the value depends on. Each ``Metric`` below says what
its number means (one sentence), its unit, its kind (``KINDS``) and its parameter
columns. A metric name belongs to one family only and has one meaning; a parameter
(an FPR target, a quantile, a τ, a loss variant) is a column, never part of a name.

Values. A numeric metric (``dtype="float64"``) stores its value in ``value`` (float64)
and leaves ``value_bool`` NA. A flag (``dtype="bool"``: a yes/no check such as "the
attack ROC stays inside the DP region") stores it in ``value_bool`` (nullable boolean)
and leaves ``value`` NaN, so no boolean is ever averaged as a number by accident. Row
ids and other identifiers are parameter columns (e.g. ``y_max_row_id``), never values.

Writing rows. Every family builds its file with ``metric_rows(family, rows, dataset=...,
run=...)``, which refuses a metric that is not declared, or declared for another
family (``ValueError`` naming it), checks the declared parameter columns are present,
and puts the key and value columns first with fixed dtypes. ``aggregate_metrics``
checks the joined table again (``check_metric_table``) and writes it with
``SCHEMA_VERSION`` in its Parquet key-value metadata (``SCHEMA_VERSION_KEY``).

Adding metrics: append ``Metric(...)`` entries to the family's list below (or a new
list, with its ``Family``, joined into ``METRICS``), then run ``python -m dpaudit.docs_gen``
to regenerate the reference ``docs/metrics.md`` (``dpaudit.docs_gen.render_metrics_markdown``);
``tests/unit/test_contract_metrics.py`` fails while the committed file differs.

The training mechanisms and their display names are ``dpaudit.contract.mechanisms``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

# the names renamed when the vocabulary was introduced (schema version 2), re-exported
from dpaudit.contract.renamed import RENAMED

__all__ = [
    "FAMILIES", "KEY_COLUMNS", "ATTACK_NAMES", "KINDS", "METRICS", "RENAMED", "SCHEMA_VERSION",
    "SCHEMA_VERSION_KEY", "VALUE_COLUMNS", "Family", "Metric", "check_metric_table", "declared",
    "glossary_entry", "loss_attack_rows", "metric_rows", "read_schema_version", "write_metric_table",
]

# ------------------------------------------------------------------- the table

SCHEMA_VERSION = 2  # 1: before the vocabulary (names of the RENAMED list); 2: this vocabulary
SCHEMA_VERSION_KEY = b"dpaudit.metrics_schema_version"
KEY_COLUMNS: tuple[str, ...] = ("dataset", "run", "family", "metric")
VALUE_COLUMNS: tuple[str, ...] = ("value", "value_bool")

KINDS: dict[str, str] = {
    "guarantee": "what a DP theorem or accountant certifies for the trained model",
    "bound": "a bound implied by a guarantee or certified from data at a stated confidence",
    "estimate": "a point estimate of a privacy quantity; not a bound",
    "measurement": "a quantity measured on the model's outputs (accuracy, attack success)",
    "diagnostic": "a check or intermediate quantity that helps judge another number",
}
UNITS = ("nats", "fraction", "probability", "factor", "count", "p-value", "norm", "—")
DTYPES = ("float64", "bool")
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class Family:
    """A metric family: one rule (or group of rules) that writes ``results/metrics/<name>/``."""

    name: str
    source: str  # the paper or specification it implements
    level: str = "run"  # "run": rows per trained run; "dataset": rows per dataset (no run key)

    def __post_init__(self):
        if self.level not in ("run", "dataset"):
            raise ValueError(f"family {self.name!r}: level must be 'run' or 'dataset', got {self.level!r}")


@dataclass(frozen=True)
class Metric:
    """One declared metric: its name within its family and what its value means."""

    family: str
    name: str
    label: str  # short header for tables and figures
    meaning: str  # one sentence
    unit: str
    kind: str
    parameters: tuple[str, ...] = ()  # columns every row of this metric carries
    dtype: str = "float64"  # "bool": a flag, stored in value_bool

    def __post_init__(self):
        where = f"metric {self.family}/{self.name}"
        if not _NAME.match(self.name):
            raise ValueError(f"{where}: names are snake_case")
        if self.kind not in KINDS:
            raise ValueError(f"{where}: kind {self.kind!r} is not one of {sorted(KINDS)}")
        if self.unit not in UNITS:
            raise ValueError(f"{where}: unit {self.unit!r} is not one of {UNITS}")
        if self.dtype not in DTYPES:
            raise ValueError(f"{where}: dtype {self.dtype!r} is not one of {DTYPES}")
        if not self.meaning.endswith(".") or self.meaning.count(". ") > 0:
            raise ValueError(f"{where}: the meaning is one sentence ending with a full stop")
        clash = set(self.parameters) & {*KEY_COLUMNS, *VALUE_COLUMNS}
        if clash:
            raise ValueError(f"{where}: parameter column(s) {sorted(clash)} are key or value columns")


FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("mia", "membership inference: the loss threshold (Yeom et al.; seed 002 §2.1) and, with metrics.attacks, "
           "LiRA (Carlini et al. 2022) and RMIA (Zarifzadeh et al. 2024) with reference models (column attack)"),
    Family("privacy_card", "privacy card of a trained model (Geambasu's DP lecture: the guarantee read as attack bounds)"),
    Family("epsilon_star", "Epsilon* (Negoescu et al. 2023)"),
    Family("identifiability", "identifiability scores (Bernau et al. 2021)"),
    Family("pmp", "practical membership privacy (Lowy et al. 2024)"),
    Family("profile", "privacy profile of private logistic regression (LeBlond et al. 2023)",
           level="dataset"),
    Family("canary", "canary audits (Steinke, Nasr, Jagielski 2023; Mahloujifar, Melis, Chaudhuri 2025; "
           "Nasr et al. 2023)"),
)}

_COUNTS = ("attack", "loss", "n_members", "n_nonmembers")
_OPERATING_POINT = ("fpr_realized", "threshold", "tp", "fp")
# The attack column (issue 24): loss = the loss threshold of metric_mia (threshold in loss
# units, member when loss <= threshold); lira_online, lira_offline, rmia = the reference-model
# attacks of metric_attacks (dpaudit.metrics.attacks; threshold in score units, member when
# score >= threshold), with the pool's choices in attack_params (JSON) and reference_models.
ATTACK_NAMES: tuple[str, ...] = ("loss", "lira_online", "lira_offline", "rmia")

MIA = [
    Metric("mia", "attack_auc", "attack AUC",
           "Area under the ROC of the membership-inference attack named in column attack (loss = the loss "
           "threshold; 0.5 = chance), with a two-sided Hanley–McNeil interval in ci_lower/ci_upper for the "
           "reference-model attacks.", "fraction", "measurement", _COUNTS),
    Metric("mia", "attack_advantage", "attack advantage",
           "Largest TPR − FPR of the attack named in column attack over all thresholds.",
           "fraction", "measurement", (*_COUNTS, *_OPERATING_POINT)),
    Metric("mia", "tpr_at_fpr", "attack TPR at FPR",
           "Largest TPR of the attack named in column attack (two-sided Clopper–Pearson interval in "
           "ci_lower/ci_upper; resolved false where one non-member exceeds the target rate, and then no value "
           "for the reference-model attacks) at a threshold whose FPR is at most fpr_target.",
           "fraction", "measurement", (*_COUNTS, "fpr_target", *_OPERATING_POINT)),
    Metric("mia", "epsilon_lower_bound", "ε lower bound",
           "Lower bound on the training run's DP ε certified from the attack named in column attack with "
           "Clopper–Pearson bounds (threshold chosen on one half, evaluated on the other, or Bonferroni; ci_method).",
           "nats", "bound", (*_COUNTS, *_OPERATING_POINT, "delta", "alpha", "ci_method", "seed")),
    Metric("mia", "epsilon_lower_bound_exceeds_accountant", "ε lower bound above accountant",
           "Whether the reference-model attack named in column attack certifies an ε lower bound above the "
           "accountant's ε (accountant_epsilon): a violation of the claimed guarantee.",
           "—", "diagnostic", ("attack", "accountant_epsilon", "delta", "alpha"), dtype="bool"),
    Metric("mia", "accountant_epsilon", "accountant ε",
           "ε the privacy accountant certifies for the trained model (train.json's epsilon; +inf = no DP).",
           "nats", "guarantee", ("delta",)),
    Metric("mia", "train_accuracy", "train accuracy",
           "Top-1 accuracy on the members (the training split).", "fraction", "measurement"),
    Metric("mia", "test_accuracy", "test accuracy",
           "Top-1 accuracy on the utility split.", "fraction", "measurement"),
    Metric("mia", "generalization_gap", "generalization gap",
           "Train accuracy minus test accuracy.", "fraction", "measurement"),
]

_CARD = ("delta",)
_CARD_TEST = ("delta", "alpha", "loss", "n_members", "n_nonmembers")
PRIVACY_CARD = [
    Metric("privacy_card", "exp_epsilon", "e^ε",
           "Risk multiplier e^ε of the run's (ε, δ) guarantee: the most one example changes any outcome's odds.",
           "factor", "guarantee", _CARD),
    Metric("privacy_card", "max_attack_accuracy_bound", "max attack accuracy (bound)",
           "Best balanced membership-inference accuracy the run's (ε, δ) allows, (e^ε + δ)/(1 + e^ε).",
           "fraction", "bound", _CARD),
    Metric("privacy_card", "max_advantage_bound", "max advantage (bound)",
           "Best TPR − FPR the run's (ε, δ) allows, tanh(ε/2) + 2δ/(1 + e^ε).", "fraction", "bound", _CARD),
    Metric("privacy_card", "tpr_bound_at_fpr", "TPR bound at FPR",
           "Largest TPR the run's (ε, δ) allows any attack at FPR fpr_target, "
           "min(e^ε·fpr_target + δ, 1 − e^−ε(1 − δ − fpr_target)).", "fraction", "bound", (*_CARD, "fpr_target")),
    Metric("privacy_card", "dp_region_epsilon_lower_bound", "DP-region test ε lower bound",
           "Lower bound on ε from testing every point of the attack ROC against the DP region "
           "(Clopper–Pearson, Bonferroni over the points).", "nats", "bound", _CARD_TEST),
    Metric("privacy_card", "roc_violations", "ROC points outside the DP region",
           "Number of attack ROC points significantly outside the DP region of the run's (ε, δ).",
           "count", "diagnostic", _CARD_TEST),
    Metric("privacy_card", "roc_inside_dp_region", "ROC inside the DP region",
           "Whether the attack ROC stays inside the DP region of the run's (ε, δ) up to sampling error "
           "(NA for a non-private run).",
           "—", "diagnostic", _CARD_TEST, dtype="bool"),
]

_ESTAR = ("loss", "estimator", "delta", "filter_lo", "filter_hi", "n_tr", "n_pop")
EPSILON_STAR = [
    Metric("epsilon_star", "epsilon_star", "ε*",
           "Epsilon*: ln of the largest hypothesis-testing ratio of the loss-threshold attack over kept "
           "thresholds, the empirical privacy of this model instance over records (the draw of one record, not of "
           "the training, is the randomness), an estimate and not a bound on the training mechanism's DP ε.",
           "nats", "estimate", (*_ESTAR, "grid_size")),
    *(Metric("epsilon_star", term, f"ε* term {term}",
             f"Largest value over kept thresholds of the Epsilon* ratio {formula} (not floored at 1).",
             "factor", "diagnostic", (*_ESTAR, "grid_size"))
      for term, formula in (("m1", "(TPR − δ)/FPR"), ("m2", "(TNR − δ)/FNR"),
                            ("m3", "(FNR − δ)/TNR"), ("m4", "(FPR − δ)/TPR"))),
    Metric("epsilon_star", "normal_fit_pvalue", "Normal-fit p-value",
           "Kolmogorov–Smirnov p-value of the parametric estimator's Normal fit to one set's transformed losses.",
           "p-value", "diagnostic", ("loss", "estimator", "gof_set", "n_tr", "n_pop")),
    # issue 46: what an estimate rests on, as flags of each epsilon_star row (same loss and estimator)
    Metric("epsilon_star", "at_resolution", "ε* at the sample's resolution",
           "Whether the epsilon_star row's winning ratio rests on the fewest records of its denominator's set the "
           "estimator can use (argmax_count ≤ resolution × n; resolution = the finest rate it resolves on this "
           "sample: the smallest count the empirical filter keeps over n, 1/n for the parametric fit): the empirical "
           "value is then a lattice value that neighbouring models share, the parametric one an extrapolation of the "
           "Normal fit's tail below one record.", "—", "diagnostic",
           (*_ESTAR[:3], "n_tr", "n_pop", "term", "argmax_count", "resolution"), dtype="bool"),
    Metric("epsilon_star", "outside_bootstrap_interval", "ε* outside its bootstrap interval",
           "Whether the epsilon_star row's value lies outside its own percentile bootstrap interval "
           "(boot_low, boot_high): the replicates, a maximum over thresholds of resampled ratios, sit above the "
           "point by the estimator's upward bias (boot_mean), so read epsilon_star_bias_corrected instead.",
           "—", "diagnostic", (*_ESTAR[:3], "n_tr", "n_pop", "boot_low", "boot_high", "boot_mean"), dtype="bool"),
    Metric("epsilon_star", "epsilon_star_bias_corrected", "ε* (bias-corrected)",
           "The bootstrap's bias-corrected ε*, 2·ε* − boot_mean floored at 0, with the basic (reverse-percentile) "
           "interval 2·ε* − boot_high, 2·ε* − boot_low (floored at 0) in ci_lower/ci_upper: first-order only, as the "
           "bootstrap of a maximum understates its bias.", "nats", "estimate",
           (*_ESTAR[:3], "n_tr", "n_pop", "boot_mean", "ci_lower", "ci_upper")),
    Metric("epsilon_star", "within_permutation_null", "ε* within the no-signal null",
           "Whether the empirical epsilon_star row's value is at or below the null_level quantile (null_quantile) of "
           "ε* over random relabellings of members and non-members (sizes kept), the law ε* has when the losses "
           "carry no membership signal, so the value does not rise above the sample's noise floor (null_p_value: "
           "the permutation test's p-value).", "—", "diagnostic",
           (*_ESTAR[:3], "n_tr", "n_pop", "null_quantile", "null_p_value", "null_level", "null_permutations",
            "null_seed"), dtype="bool"),
    Metric("epsilon_star", "landscape_utility", "utility (landscape)",
           "Utility axis of the Epsilon* landscape: AUROC of P(y = 1) on the utility split for binary tasks, "
           "top-1 accuracy otherwise (utility_kind says which).",
           "fraction", "measurement", ("utility_kind", "n_pop")),
]

_IDENT = ("accountant", "conversion", "neighbouring_relation", "accountant_epsilon", "delta", "applicable", "formula")
IDENTIFIABILITY = [
    Metric("identifiability", "rho_beta", "ρ_β",
           "Largest posterior belief of the differential-identifiability adversary in the true dataset, "
           "expit(ε) (Theorem 1).", "probability", "bound", _IDENT),
    Metric("identifiability", "rho_beta_expected", "ρ_β (δ-adjusted)",
           "The δ-adjusted belief bound ρ_β + δ(1 − ρ_β).", "probability", "bound", _IDENT),
    Metric("identifiability", "rho_alpha_thm2", "ρ_α (Theorem 2)",
           "Expected advantage of the identifiability adversary against a Gaussian mechanism calibrated "
           "classically to (ε, δ) (Theorem 2).", "fraction", "bound", _IDENT),
    Metric("identifiability", "rho_alpha_rdp", "ρ_α (RDP)",
           "Expected advantage of the identifiability adversary against k full-batch Gaussian steps composed "
           "with RDP, 2Φ(√k·S/(2z)) − 1.",
           "fraction", "bound", (*_IDENT, "noise_multiplier", "steps", "sampling_probability")),
    Metric("identifiability", "advantage_bound_any_dp", "advantage bound (any (ε, δ)-DP)",
           "Largest membership advantage of any (ε, δ)-DP mechanism, (e^ε − 1 + 2δ)/(e^ε + 1).",
           "fraction", "bound", _IDENT),
    Metric("identifiability", "yeom_bound", "Yeom bound",
           "Yeom et al.'s membership advantage bound min(1, e^ε − 1).", "fraction", "bound", _IDENT),
]

_PMP = ("method", "status", "delta", "accountant_epsilon", "parent_seed", "nonmember_pool")
_PMP_C = (*_PMP, "n_reference_models", "n_eval_models", "n_bounded", "alpha")
_PMP_X = (*_PMP, "parent_set_distance_method", "parent_set_distance_exact")  # issue 37: how ε(X)'s distance was found
PMP = [
    Metric("pmp", "epsilon_pmp", "ε̃ (PMP)",
           "Practical-membership-privacy ε̃ of the parent set: the largest per-example ε̃(x) of the method "
           "(an upper bound for one step in Recipe A, a Monte Carlo estimate of it when n_partners < n_parent − 1 "
           "above metrics.pmp.recipe_a_exact_max as the note says; a heuristic in Recipe B; column standard_error: the "
           "partner draw's standard error of the largest ε̃(x), 0 with every partner, beyond which the largest of noisy "
           "estimates leans upward when many targets are near the top).",
           "nats", "diagnostic", (*_PMP, "standard_error")),
    Metric("pmp", "epsilon_pmp_quantile", "ε̃(x) quantile",
           "The quantile (column quantile) of the per-example ε̃(x) over the parent set (estimates when "
           "n_partners < n_parent − 1, as for epsilon_pmp).", "nats", "diagnostic", (*_PMP, "quantile")),
    Metric("pmp", "epsilon_global", "ε (same method)",
           "The method's own DP ε for every neighbour (not only those in the parent set), under "
           "neighbouring_relation.", "nats", "diagnostic", (*_PMP, "neighbouring_relation")),
    Metric("pmp", "epsilon_parent_set", "ε(X)",
           "The method's DP ε over neighbours inside the parent set X (from the largest distance found by "
           "parent_set_distance_method: over all pairs when parent_set_distance_exact, else an upper bound in Recipe A "
           "and the drawn pairs' largest in Recipe B).", "nats", "diagnostic", _PMP_X),
    Metric("pmp", "epsilon_pmp_ratio_global", "ε̃ / ε",
           "epsilon_pmp divided by epsilon_global (replace-one).", "factor", "diagnostic", _PMP),
    Metric("pmp", "epsilon_pmp_ratio_parent_set", "ε̃ / ε(X)",
           "epsilon_pmp divided by epsilon_parent_set.", "factor", "diagnostic", _PMP_X),
    Metric("pmp", "mia_success_bound_global", "MIA success bound at ε",
           "Balanced MIA success bound (e^ε + δ)/(1 + e^ε) at the method's epsilon_global.",
           "probability", "diagnostic", _PMP),
    Metric("pmp", "mia_success_bound_pmp", "MIA success bound at ε̃ (δ = 0)",
           "Practical MIA success bound 1/(1 + e^−ε̃) at the method's ε̃ (Lemma 6, δ = 0).",
           "probability", "diagnostic", _PMP),
    Metric("pmp", "mia_success_bound_pmp_delta", "MIA success bound at ε̃",
           "Balanced MIA success bound (e^ε̃ + δ)/(1 + e^ε̃) at the method's ε̃ with the run's δ.",
           "probability", "diagnostic", _PMP),
    Metric("pmp", "mip_eta", "η-MIP",
           "Membership-inference-privacy level η = (1 − e^−ε̃)/2 implied by ε̃-PMP (Lemma 13).",
           "fraction", "diagnostic", _PMP),
    Metric("pmp", "empirical_epsilon_lower_bound", "empirical ε̂ lower bound",
           "Largest per-example ε lower bound certified for the n_bounded examples of the parent set in the run's "
           "recipe reference pool (Recipe C, Clopper–Pearson, family-wise level alpha).", "nats", "bound", _PMP_C),
    Metric("pmp", "empirical_epsilon_lower_bound_quantile", "ε̂(x) quantile",
           "The quantile (column quantile) of the per-example certified ε lower bounds of Recipe C.",
           "nats", "bound", (*_PMP_C, "quantile")),
    Metric("pmp", "empirical_epsilon_certifiable", "largest certifiable ε̂",
           "Largest ε Recipe C could certify with these reference models whatever they output (0 = vacuous).",
           "nats", "diagnostic", _PMP_C),
    Metric("pmp", "empirical_epsilon_point", "ε̂ point estimate",
           "Largest per-example plug-in ε estimate from the reference models (biased upward; not a bound).",
           "nats", "estimate", _PMP_C),
    Metric("pmp", "ordering_holds", "ordering holds",
           "Whether ε̂ ≤ ε̃ ≤ ε(X) ≤ ε holds for Recipe B's values (note names a failure).",
           "—", "diagnostic", (*_PMP, "note"), dtype="bool"),
]

_PROFILE = ("view", "n", "d", "lam", "draws", "profile_seed", "epsilon_grid_min", "epsilon_grid_max")
PROFILE = [
    Metric("profile", "epsilon_low", "ε_low",
           "Largest grid ε whose per-neighbour progress τ_k over ranks k ≥ n/10 stays at most tau_low (the "
           "typical profile's low plateau; NaN when the grid misses it).",
           "nats", "measurement", (*_PROFILE, "tau_low")),
    Metric("profile", "epsilon_low_predicted", "ε_low (predicted)",
           "ε_low predicted from the farthest neighbour, 2 t_d(τ_low)/(nΛδ_max).",
           "nats", "estimate", (*_PROFILE, "tau_low")),
    Metric("profile", "epsilon_high", "ε_high",
           "Smallest grid ε at which the top-ranked neighbour's progress reaches tau_high (the typical "
           "profile's high plateau; NaN when the grid misses it).", "nats", "measurement", (*_PROFILE, "tau_high")),
    Metric("profile", "epsilon_high_predicted", "ε_high (predicted)",
           "ε_high predicted from the farthest neighbour, 2 t_d(τ_high)/(nΛδ_max).",
           "nats", "estimate", (*_PROFILE, "tau_high")),
    Metric("profile", "beta_star", "β*",
           "Output-perturbation noise rate β = nΛε/2 at the predicted ε_low.", "factor", "estimate", _PROFILE),
    Metric("profile", "delta_max", "δ_max",
           "Largest worst-case shift ‖Δ_i‖ of the base model when one row is removed (row y_max_row_id).",
           "norm", "measurement", (*_PROFILE, "y_max_row_id")),
    Metric("profile", "t_d", "t_d(τ)",
           "The t at which the per-neighbour progress (H_d(t)/t − c_d)/(1 − c_d) first reaches tau after its dip.",
           "—", "diagnostic", (*_PROFILE, "tau")),
]

# One list per family; a new family (e.g. canary) adds its list here and its Family above.
_CANARY = ("threat_model", "score_kind", "canaries", "included", "confidence", "delta", "ceiling", "applicable")
_MECHANISM = ("checked_model", "coordinates", "steps", "tests", "family_alpha", "confidence", "failed", "applicable", "note")
_ACCOUNTED = ("recomputed_epsilon", "claimed_epsilon", "delta", "accounted_q", "realized_q", "accounted_steps", "executed_steps")
_GUESSES = ("ceiling_max", "guesses", "guesses_top", "guesses_bottom", "correct", "candidates", "claimed_epsilon")
CANARY = [
    Metric("canary", "epsilon_lb_one_run", "one-run ε lower bound",
           "Largest ε at which (ε, δ)-DP is rejected by the guesses on the canaries' scores (Steinke, Nasr, "
           "Jagielski 2023, Theorem 5.2) at the δ of its row, Bonferroni over the guess counts, to compare with "
           "claimed_epsilon, the accountant's ε at that δ.", "nats", "bound", (*_CANARY, *_GUESSES)),
    Metric("canary", "epsilon_lb_one_run_fdp", "one-run ε lower bound (f-DP)",
           "Largest ε whose exactly (ε, δ)-DP Gaussian trade-off curve is rejected by the same guesses "
           "(Mahloujifar, Melis, Chaudhuri 2025), a bound for mechanisms at least as private as that curve "
           "allows.", "nats", "bound", (*_CANARY, *_GUESSES)),
    Metric("canary", "epsilon_gdp_estimate", "GDP ε estimate",
           "ε at δ of the largest Gaussian-DP μ consistent with Clopper–Pearson bounds on the canary test's "
           "FPR and FNR (Nasr, Hayes, Steinke and others 2023), an estimate under a Gaussian trade-off curve.",
           "nats", "estimate", (*_CANARY, "mu", "mu_ceiling", "thresholds", "note")),
    Metric("canary", "epsilon_lb_many_runs", "many-runs ε lower bound",
           "Clopper–Pearson ε lower bound from R releases on D and R on a worst-case neighbour D′ scored by "
           "their exact log-density ratio (linear mechanisms).", "nats", "bound", (*_CANARY, "ceiling_max", "claimed_epsilon")),
    Metric("canary", "claim_curve_rejected", "claimed curve rejected",
           "Whether independent canary trials (white-box gradient canaries, or releases of a linear mechanism) "
           "put a Clopper–Pearson point (FPR, FNR) below the accountant's claimed trade-off curve (Nasr, Hayes, "
           "Steinke and others 2023, Section 4; Dong, Roth, Su 2022), Bonferroni over the thresholds, with the worst point and the adjusted "
           "significance p_value at which the claim is (or would be) rejected.", "—", "diagnostic",
           (*_CANARY, "fpr_upper", "fnr_upper", "claimed_fnr", "mirrored", "thresholds", "p_value", "claim_curve"),
           dtype="bool"),
    Metric("canary", "epsilon_lb_many_trials", "many-trials ε lower bound",
           "Largest ε with ln((1 − δ − FNR)/FPR) or its mirror over the claim-curve test's Clopper–Pearson bounds, "
           "a distribution-free lower bound at the run's own δ for independent trials.", "nats", "bound",
           (*_CANARY, "thresholds", "claimed_epsilon")),
    Metric("canary", "detectable_noise_factor", "detectable noise factor",
           "Largest factor f such that an implementation drawing noise f·σ instead of the claimed σ is rejected "
           "with probability at least power by this run's claim-curve test (same trials, thresholds and "
           "confidence), simulated.", "factor", "diagnostic",
           (*_CANARY, "power", "repetitions", "simulation_seed", "thresholds")),
    Metric("canary", "noise_check_passed", "noise certificate passed",
           "Whether the noise the training added, read from the updates handed to the optimizer on every coordinate "
           "at every step, passed every test of N(0, σ²C²) drawn afresh (variance, mean, lag-one correlation, "
           "skewness, kurtosis, goodness of fit, independence across coordinates and steps) at the family-wise level "
           "family_alpha, and every variable and optimizer state moved only by the optimizer's rule applied to those "
           "updates (float rounding), for the model checked_model names.", "—", "diagnostic",
           _MECHANISM, dtype="bool"),
    Metric("canary", "noise_variance_ratio_min", "noise variance ratio (min)",
           "Smallest measured noise variance over the claimed σ²C² among the trainable variables (and canary "
           "coordinates) of the model checked_model names; below 1 is less noise than the accountant assumes.",
           "factor", "measurement", _MECHANISM),
    Metric("canary", "accounting_reproduced", "accounting reproduced",
           "Whether the accountant's inputs match what the training loop did (sampler rate against the rows "
           "actually drawn, steps executed, noise multiplier) and ε recomputed from those values by the run's kind of "
           "accountant in code independent of the calibration (recomputed_epsilon: RDP by dpaudit.dp.rdp_series, PLD "
           "by dp_accounting's PLD at a coarser grid) stays within 1 % of the published claimed_epsilon.",
           "—", "diagnostic", (*_MECHANISM[:1], *_ACCOUNTED, *_MECHANISM[-4:]), dtype="bool"),
    Metric("canary", "sampler_check_passed", "sampler check passed", "Whether the rows every step drew follow the "
           "claimed sampler's law at its rate (batch sizes with both tails, each row's count, rows never drawn, "
           "independence across steps; shuffle's exact promises) at family_alpha, for checked_model's training.",
           "—", "diagnostic", _MECHANISM, dtype="bool"),
    Metric("canary", "measured_above_promise", "measured above promise",
           "Whether the audit caught the mechanism leaking more than its claim: its noise certificate, sampler check "
           "or accounting check failed, the claim-curve test rejected, or a distribution-free bound exceeds the "
           "accountant's ε (verdict above_promise, consistent, "
           "or too_weak when the audit could not have caught a 2× noise shortfall; decided_by names the test).",
           "—", "diagnostic", ("verdict", "decided_by", "checked_model", "ceiling_max", "confidence",
                             "applicable", "note"), dtype="bool"),
]

METRICS: tuple[Metric, ...] = (*MIA, *PRIVACY_CARD, *EPSILON_STAR, *IDENTIFIABILITY, *PMP, *PROFILE, *CANARY)



def _index(metrics: Iterable[Metric]) -> dict[tuple[str, str], Metric]:
    index: dict[tuple[str, str], Metric] = {}
    owner: dict[str, str] = {}
    for metric in metrics:
        if metric.family not in FAMILIES:
            raise ValueError(f"metric {metric.name!r} declares family {metric.family!r}, not one of {sorted(FAMILIES)}")
        if metric.name in owner:
            raise ValueError(f"metric {metric.name!r} is declared twice (families {owner[metric.name]!r} and "
                             f"{metric.family!r}); a name has one family and one meaning")
        owner[metric.name] = metric.family
        index[(metric.family, metric.name)] = metric
    return index


_BY_KEY = _index(METRICS)
_OWNER = {name: family for family, name in _BY_KEY}


def declared(family: str, metric: str) -> Metric:
    """The declaration of ``family``/``metric``; ValueError naming it if there is none."""
    if family not in FAMILIES:
        raise ValueError(f"unknown metric family {family!r}; declared families: {sorted(FAMILIES)}")
    found = _BY_KEY.get((family, metric))
    if found is None:
        if metric in _OWNER:
            raise ValueError(f"metric {metric!r} is declared for family {_OWNER[metric]!r}, not {family!r}")
        raise ValueError(f"metric {metric!r} of family {family!r} is not declared in dpaudit.contract.metrics")
    return found


def loss_attack_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``table`` that are not the reference-model attacks' (issue 24): every row
    whose ``attack`` is ``loss`` or empty (other families; tables without the column). A
    reader that wants one attack row per run and metric (the loss threshold) filters here."""
    if "attack" not in table.columns:
        return table
    attack = table["attack"].astype("string")
    return table[(attack.isna() | (attack == "loss")).to_numpy(dtype=bool)]


def glossary_entry(family: str, metric: str) -> tuple[str, str, str]:
    """(header, unit, meaning) of a metric, the triple the report tables' glossaries use."""
    m = declared(family, metric)
    return m.label, m.unit, m.meaning


# ------------------------------------------------------------------ the writer


def _as_frame(rows: pd.DataFrame | Sequence[Mapping]) -> pd.DataFrame:
    if isinstance(rows, pd.DataFrame):
        return rows.reset_index(drop=True)
    return pd.DataFrame(list(rows))


def _split_values(family: str, frame: pd.DataFrame) -> tuple[np.ndarray, pd.array]:
    """(float64 values, boolean flags) of the rows, checked against each metric's dtype."""
    names = frame["metric"].astype("string").to_numpy()
    raw = frame["value"].to_numpy(dtype=object) if "value" in frame.columns else np.full(len(frame), None, object)
    flags = frame["value_bool"].to_numpy(dtype=object) if "value_bool" in frame.columns else None
    values = np.full(len(frame), np.nan, dtype=np.float64)
    booleans: list[object] = [pd.NA] * len(frame)
    for i, name in enumerate(names):
        metric = declared(family, str(name))
        v = raw[i] if flags is None or metric.dtype == "float64" else flags[i]
        missing = v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))
        if metric.dtype == "bool":
            if missing:
                continue
            if not isinstance(v, bool | np.bool_):
                raise ValueError(f"{family}/{name} is a flag: its value must be True, False or NA, got {v!r}")
            booleans[i] = bool(v)
        else:
            if missing:
                continue
            if isinstance(v, bool | np.bool_ | str):
                raise ValueError(f"{family}/{name} is numeric: got {v!r}")
            values[i] = float(v)
    return values, pd.array(booleans, dtype="boolean")


def typed_frame(rows: Sequence[Mapping], dtypes: Mapping[str, str]) -> pd.DataFrame:
    """A family's rows (dicts) as a frame with fixed column dtypes, so frames of many runs
    concatenate without object columns: float64 columns take None as NaN, the others are
    pandas arrays of their dtype (nullable)."""
    columns = {}
    for column, dtype in dtypes.items():
        values = [row.get(column) for row in rows]
        if dtype == "float64":
            columns[column] = np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)
        else:
            columns[column] = pd.array(values, dtype=dtype)
    return pd.DataFrame(columns)


def metric_rows(family: str, rows: pd.DataFrame | Sequence[Mapping], *, dataset: str,
                run: str | None = None) -> pd.DataFrame:
    """The family's metric file: rows checked against the vocabulary, keys and values first.

    ``rows`` has a ``metric`` column, a ``value`` column (numbers for numeric metrics,
    True/False/NA for flags) and the parameter columns. Refused with ValueError naming
    the metric: a metric not declared, or declared for another family; a missing
    declared parameter column; a flag given a number or a number given a flag; a run
    key for a dataset-level family or none for a per-run one. ``value`` comes out
    float64 and ``value_bool`` nullable boolean (module docstring).
    """
    fam = FAMILIES.get(family)
    if fam is None:
        raise ValueError(f"unknown metric family {family!r}; declared families: {sorted(FAMILIES)}")
    if (run is None) != (fam.level == "dataset"):
        raise ValueError(f"family {family!r} is {fam.level}-level: "
                         + ("its rows carry no run" if fam.level == "dataset" else "its rows need a run"))
    frame = _as_frame(rows)
    if "metric" not in frame.columns:
        raise ValueError(f"{family} rows lack a 'metric' column")
    clash = set(frame.columns) & {"dataset", "run", "family"}
    if clash:
        raise ValueError(f"{family} rows already carry key column(s) {sorted(clash)}; pass them to metric_rows")
    for name in frame["metric"].astype("string").unique():
        metric = declared(family, str(name))
        absent = [c for c in metric.parameters if c not in frame.columns]
        if absent:
            raise ValueError(f"{family}/{name}: declared parameter column(s) {absent} missing")
    values, booleans = _split_values(family, frame)
    rest = frame.drop(columns=[c for c in ("metric", *VALUE_COLUMNS) if c in frame.columns])
    keys = pd.DataFrame({
        "dataset": pd.array([dataset] * len(frame), dtype="string"),
        "run": pd.array([run] * len(frame), dtype="string"),
        "family": pd.array([family] * len(frame), dtype="string"),
        "metric": frame["metric"].astype("string").to_numpy(),
        "value": values,
        "value_bool": booleans,
    })
    keys["metric"] = keys["metric"].astype("string")
    return pd.concat([keys, rest], axis=1)


def check_metric_table(table: pd.DataFrame) -> None:
    """Refuse a joined table with an undeclared (family, metric) or a value in the wrong column."""
    missing = [c for c in (*KEY_COLUMNS, *VALUE_COLUMNS) if c not in table.columns]
    if missing:
        raise ValueError(f"metric table lacks column(s) {missing} (written before schema version {SCHEMA_VERSION}?)")
    if table["value"].dtype != np.float64:
        raise ValueError(f"metric table: value must be float64, got {table['value'].dtype}")
    for (family, name), group in table.groupby(["family", "metric"], sort=False):
        metric = declared(str(family), str(name))
        if metric.dtype == "bool" and group["value"].notna().any():
            raise ValueError(f"{family}/{name} is a flag but has numbers in value")
        if metric.dtype == "float64" and group["value_bool"].notna().any():
            raise ValueError(f"{family}/{name} is numeric but has flags in value_bool")


def write_metric_table(path, table: pd.DataFrame) -> None:
    """Write the joined metrics table with SCHEMA_VERSION in the Parquet key-value metadata."""
    from dpaudit.io import write_parquet

    check_metric_table(table)
    write_parquet(path, table, metadata={SCHEMA_VERSION_KEY: str(SCHEMA_VERSION).encode()})


def read_schema_version(path) -> int | None:
    """The schema version a metrics table was written with (None: written before versioning)."""
    import pyarrow.parquet as pq

    metadata = pq.read_schema(path).metadata or {}
    version = metadata.get(SCHEMA_VERSION_KEY)
    return None if version is None else int(version)
