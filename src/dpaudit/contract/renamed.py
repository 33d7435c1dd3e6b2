"""Metric names renamed when the vocabulary was introduced (schema version 2).

``dpaudit.contract.metrics`` re-exports ``RENAMED``; ``dpaudit.docs_gen`` renders it in
``docs/metrics.md``. Kept apart so the vocabulary's file stays under the line limit.
"""

from __future__ import annotations

__all__ = ["RENAMED"]

# Renamed when the vocabulary was introduced (schema version 2): (family, old name, new name).
# "—" as new name: no longer written by that family (the value lives where the new entry says).
RENAMED: tuple[tuple[str, str, str], ...] = (
    ("mia", "auc", "attack_auc"),
    ("mia", "max_advantage", "attack_advantage"),
    ("privacy_card", "max_attack_accuracy", "max_attack_accuracy_bound"),
    ("privacy_card", "max_advantage", "max_advantage_bound"),
    ("privacy_card", "tpr_bound_at_fpr_0_001", "tpr_bound_at_fpr (fpr_target = 0.001)"),
    ("privacy_card", "tpr_bound_at_fpr_0_01", "tpr_bound_at_fpr (fpr_target = 0.01)"),
    ("privacy_card", "attack_tpr_at_fpr_0_001", "— (mia tpr_at_fpr, fpr_target = 0.001)"),
    ("privacy_card", "attack_tpr_at_fpr_0_01", "— (mia tpr_at_fpr, fpr_target = 0.01)"),
    ("privacy_card", "attack_auc", "— (mia attack_auc)"),
    ("privacy_card", "dp_region_eps_lower_bound", "dp_region_epsilon_lower_bound"),
    ("privacy_card", "roc_inside_dp_region", "roc_inside_dp_region (value_bool)"),
    ("epsilon_star", "eps_star", "epsilon_star"),
    ("epsilon_star", "utility", "landscape_utility"),
    ("pmp", "accountant_epsilon", "— (column accountant_epsilon; mia accountant_epsilon)"),
    ("pmp", "mia_bound_dp (method accountant)", "— (privacy_card max_attack_accuracy_bound)"),
    ("pmp", "mia_bound_dp", "mia_success_bound_global"),
    ("pmp", "mia_bound_pmp", "mia_success_bound_pmp"),
    ("pmp", "mia_bound_pmp_delta", "mia_success_bound_pmp_delta"),
    ("pmp", "eps_pmp", "epsilon_pmp"),
    ("pmp", "eps_pmp_q50", "epsilon_pmp_quantile (quantile = 0.5)"),
    ("pmp", "eps_pmp_q99", "epsilon_pmp_quantile (quantile = 0.99)"),
    ("pmp", "eps_global_same_method", "epsilon_global (neighbouring_relation = replace_one)"),
    ("pmp", "eps_global_add_remove", "epsilon_global (neighbouring_relation = add_remove)"),
    ("pmp", "eps_X", "epsilon_parent_set"),
    ("pmp", "ratio", "epsilon_pmp_ratio_global"),
    ("pmp", "ratio_X", "epsilon_pmp_ratio_parent_set"),
    ("pmp", "emp_eps_lower", "empirical_epsilon_lower_bound"),
    ("pmp", "emp_eps_q50", "empirical_epsilon_lower_bound_quantile (quantile = 0.5)"),
    ("pmp", "emp_eps_q99", "empirical_epsilon_lower_bound_quantile (quantile = 0.99)"),
    ("pmp", "emp_eps_certifiable_max", "empirical_epsilon_certifiable"),
    ("pmp", "emp_eps_point", "empirical_epsilon_point"),
    ("pmp", "ordering_ok", "ordering_holds (value_bool)"),
    ("profile", "eps_low", "epsilon_low"),
    ("profile", "eps_low_predicted", "epsilon_low_predicted"),
    ("profile", "eps_high", "epsilon_high"),
    ("profile", "eps_high_predicted", "epsilon_high_predicted"),
    ("profile", "t_d_tau_low", "t_d (tau = τ_low)"),
    ("profile", "t_d_tau_mid", "t_d (tau = τ_mid)"),
    ("profile", "t_d_tau_high", "t_d (tau = τ_high)"),
    ("profile", "y_max_row_id", "— (column y_max_row_id of delta_max)"),
    ("profile", "dataset = view name", "dataset = source dataset, view in column view"),
    ("profile", "eps_grid_min / eps_grid_max (columns)", "epsilon_grid_min / epsilon_grid_max"),
)
