"""The per-run PMP table of the report (Lowy et al. 2024)."""

from __future__ import annotations

import math

import pandas as pd

from dpaudit.metrics.pmp.bounds import mia_success_bound_delta

__all__ = ["REPORT_COLUMNS", "pmp_report_table"]


# (method, metric, quantile or None) -> report column; metric names of dpaudit.contract.metrics (family pmp).
REPORT_COLUMNS = {
    ("gauss_single_step", "epsilon_pmp", None): "A_eps_pmp_single_step",
    ("gauss_single_step", "epsilon_global", None): "A_eps_single_step",
    ("dpsgd_clt", "epsilon_global", None): "B_eps_clt_replace_one",
    ("dpsgd_clt", "epsilon_parent_set", None): "B_eps_X",
    ("dpsgd_clt", "epsilon_pmp", None): "B_eps_pmp",
    ("dpsgd_clt", "epsilon_pmp_quantile", 0.5): "B_eps_pmp_median_x",
    ("dpsgd_clt", "mia_success_bound_pmp_delta", None): "B_mia_success_bound",
    ("dpsgd_clt", "mia_success_bound_global", None): "B_mia_success_bound_dp",
    ("empirical_lira", "empirical_epsilon_lower_bound", None): "C_emp_eps_lower",
    ("empirical_lira", "empirical_epsilon_certifiable", None): "C_emp_eps_certifiable_max",
    ("empirical_lira", "mia_success_bound_pmp_delta", None): "C_mia_success_bound",
    ("empirical_lira_point", "empirical_epsilon_point", None): "C_emp_eps_point_estimate",
}
FLAG_COLUMNS = {("dpsgd_clt", "ordering_holds"): "ordering_holds"}


def _key(row) -> tuple:
    quantile = row.quantile if "quantile" in row._fields and not pd.isna(row.quantile) else None
    relation = row.neighbouring_relation if "neighbouring_relation" in row._fields else None
    if row.metric == "epsilon_global" and not pd.isna(relation) and relation != "replace_one":
        return (row.method, row.metric, "other relation")
    return (row.method, row.metric, quantile)


def pmp_report_table(frames: list[pd.DataFrame]) -> tuple[pd.DataFrame, str]:
    """One row per run (wide) of the headline PMP values, and its HTML for the report."""
    long = pd.concat(frames, ignore_index=True)
    runs = long[["dataset", "run"]].drop_duplicates(ignore_index=True)
    keys = [_key(row) for row in long.itertuples(index=False)]
    numbers = long.assign(column=[REPORT_COLUMNS.get(k) for k in keys]).dropna(subset=["column"])
    wide = numbers.pivot_table(index=["dataset", "run"], columns="column", values="value", aggfunc="first",
                               dropna=False).reset_index()
    wide = runs.merge(wide, on=["dataset", "run"], how="left")
    for column in REPORT_COLUMNS.values():
        if column not in wide.columns:
            wide[column] = math.nan
    # accountant ε and its balanced MIA success bound: every row carries the accountant's ε
    accountant = long.groupby(["dataset", "run"])[["accountant_epsilon", "delta"]].first().reset_index()
    accountant["accountant_mia_success_bound"] = [
        mia_success_bound_delta(eps, 0.0 if math.isnan(d) else d)
        for eps, d in zip(accountant["accountant_epsilon"].astype(float), accountant["delta"].astype(float),
                          strict=True)]
    wide = wide.merge(accountant[["dataset", "run", "accountant_epsilon", "accountant_mia_success_bound"]],
                      on=["dataset", "run"], how="left")
    for (method, metric), column in FLAG_COLUMNS.items():
        flags = long[(long["method"] == method) & (long["metric"] == metric)]
        wide = wide.merge(flags[["dataset", "run", "value_bool"]].rename(columns={"value_bool": column}),
                          on=["dataset", "run"], how="left")
    status = long[long["metric"] == "epsilon_pmp"].groupby(["dataset", "run"])["status"].first().rename("status")
    notes = long[long["metric"] == "ordering_holds"].set_index(["dataset", "run"])["note"].rename("ordering_note")
    wide = wide.join(status, on=["dataset", "run"]).join(notes, on=["dataset", "run"])
    wide = wide[["dataset", "run", "status", "accountant_epsilon", "accountant_mia_success_bound",
                 *REPORT_COLUMNS.values(), *FLAG_COLUMNS.values(), "ordering_note"]]
    html = ("<p>Practical membership privacy (Lowy et al.) of every run. A = Prop. 12 for one full-batch step at "
            "the final weights (upper bound for that step only); B = whole training, realised trajectory, CLT "
            "(a diagnostic, not a guarantee); C = lower bound from the recipe's reference models "
            "(C_emp_eps_certifiable_max: the most it could certify with them; 0 = vacuous), and its point "
            "estimate (not a bound). "
            "Non-private runs: not applicable.</p>"
            + wide.to_html(index=False, float_format=lambda v: f"{v:.4g}", na_rep="n/a"))
    return wide, html
