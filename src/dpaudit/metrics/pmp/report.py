"""The per-run PMP table of the report (Lowy et al. 2024)."""

from __future__ import annotations

import math

import pandas as pd

__all__ = ["REPORT_COLUMNS", "pmp_report_table"]


REPORT_COLUMNS = {
    ("accountant", "accountant_epsilon"): "accountant_epsilon",
    ("accountant", "mia_bound_dp"): "accountant_mia_success_bound",
    ("gauss_single_step", "eps_pmp"): "A_eps_pmp_single_step",
    ("gauss_single_step", "eps_global_same_method"): "A_eps_single_step",
    ("dpsgd_clt", "eps_global_same_method"): "B_eps_clt_replace_one",
    ("dpsgd_clt", "eps_X"): "B_eps_X",
    ("dpsgd_clt", "eps_pmp"): "B_eps_pmp",
    ("dpsgd_clt", "eps_pmp_q50"): "B_eps_pmp_median_x",
    ("dpsgd_clt", "mia_bound_pmp_delta"): "B_mia_success_bound",
    ("dpsgd_clt", "mia_bound_dp"): "B_mia_success_bound_dp",
    ("empirical_lira", "emp_eps_lower"): "C_emp_eps_lower",
    ("empirical_lira", "emp_eps_certifiable_max"): "C_emp_eps_certifiable_max",
    ("empirical_lira", "mia_bound_pmp_delta"): "C_mia_success_bound",
    ("empirical_lira_point", "emp_eps_point"): "C_emp_eps_point_estimate",
    ("dpsgd_clt", "ordering_ok"): "ordering_ok",
}


def pmp_report_table(frames: list[pd.DataFrame]) -> tuple[pd.DataFrame, str]:
    """One row per run (wide) of the headline PMP values, and its HTML for the report."""
    long = pd.concat(frames, ignore_index=True)
    long = long[[(m, k) in REPORT_COLUMNS for m, k in zip(long["method"], long["metric"], strict=True)]]
    long = long.assign(column=[REPORT_COLUMNS[(m, k)] for m, k in zip(long["method"], long["metric"], strict=True)])
    wide = long.pivot_table(index=["dataset", "run"], columns="column", values="value", aggfunc="first",
                            dropna=False).reset_index()
    for column in REPORT_COLUMNS.values():
        if column not in wide.columns:
            wide[column] = math.nan
    status = long[long["metric"] == "eps_pmp"].groupby(["dataset", "run"])["status"].first().rename("status")
    notes = long[long["metric"] == "ordering_ok"].set_index(["dataset", "run"])["note"].rename("ordering_note")
    wide = wide.join(status, on=["dataset", "run"]).join(notes, on=["dataset", "run"])
    wide = wide[["dataset", "run", "status", *REPORT_COLUMNS.values(), "ordering_note"]]
    html = ("<p>Practical membership privacy (Lowy et al.) of every run. A = Prop. 12 for one full-batch step at "
            "the final weights (upper bound for that step only); B = whole training, realised trajectory, CLT "
            "(a diagnostic, not a guarantee); C = shadow-model lower bound (C_emp_eps_certifiable_max: the most it "
            "could certify with these shadow models; 0 = vacuous), and its point estimate (not a bound). "
            "Non-private runs: not applicable.</p>"
            + wide.to_html(index=False, float_format=lambda v: f"{v:.4g}", na_rep="n/a"))
    return wide, html
