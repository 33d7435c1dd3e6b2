"""Audit figure: its data table carries the metrics table's values unchanged."""

import math

import numpy as np
import pandas as pd
from scipy import stats

from dpaudit.plots.audit import audit_table, epsilon_upper_at_threshold, plot_audit


def _metrics_table() -> pd.DataFrame:
    runs = [("baseline", math.nan, 0, math.inf), ("dpsgd", 1.0, 0, 0.98), ("dpsgd", 4.0, 1, 3.9)]
    rows = []
    for i, (mechanism, target, seed, eps) in enumerate(runs):
        keys = {"dataset": "toy", "run": f"r{i}", "mechanism": mechanism, "target_epsilon": target,
                "seed": seed, "accountant_epsilon": eps, "accountant_delta": 1e-3}
        rows.append({**keys, "family": "mia", "metric": "epsilon_lower_bound", "value": 0.1 * i,
                     "alpha": 0.05, "ci_method": "split", "tp": 40 + i, "fp": 3 - i, "n_members": 100,
                     "n_nonmembers": 100, "delta": 1e-3})
        rows.append({**keys, "family": "mia", "metric": "auc", "value": 0.6})
        for estimator, value in (("parametric", 2.0 + i), ("empirical", 1.5 + i)):
            for loss in ("logit", "ce"):
                rows.append({**keys, "family": "epsilon_star", "metric": "eps_star", "estimator": estimator,
                             "loss": loss, "value": value + (0.0 if loss == "logit" else 10.0)})
    return pd.DataFrame(rows)


def test_audit_table_carries_the_metrics_values_for_every_run():
    table = _metrics_table()
    audit = audit_table(table).set_index("run")
    assert sorted(audit.index) == ["r0", "r1", "r2"]
    for run, rows in table.groupby("run"):
        bound = rows[rows["metric"] == "epsilon_lower_bound"].iloc[0]
        assert audit.loc[run, "epsilon_lower_bound"] == bound["value"]
        assert audit.loc[run, "accountant_epsilon"] == bound["accountant_epsilon"]
        star = rows[(rows["metric"] == "eps_star") & (rows["loss"] == "logit")].set_index("estimator")["value"]
        assert audit.loc[run, "epsilon_star_parametric"] == star["parametric"]
        assert audit.loc[run, "epsilon_star_empirical"] == star["empirical"]
    # baselines last, DP runs by ε
    assert audit.index.tolist() == ["r1", "r2", "r0"]


def test_epsilon_upper_matches_scipy_beta_quantiles():
    # Oracle: Clopper–Pearson bounds straight from scipy's beta quantiles (one-sided, α each).
    tp, fp, n_m, n_n, delta, alpha = 40, 3, 100, 120, 1e-3, 0.05
    tpr_hi = stats.beta.ppf(1 - alpha, tp + 1, n_m - tp)
    fpr_lo = stats.beta.ppf(alpha, fp, n_n - fp + 1)
    tnr_hi = stats.beta.ppf(1 - alpha, n_n - fp + 1, fp)
    fnr_lo = stats.beta.ppf(alpha, n_m - tp, tp + 1)
    expected = max(math.log((tpr_hi - delta) / fpr_lo), math.log((tnr_hi - delta) / fnr_lo))
    got = float(epsilon_upper_at_threshold(tp, fp, n_m, n_n, delta, alpha))
    assert math.isclose(got, expected, rel_tol=1e-9), (got, expected)
    assert float(epsilon_upper_at_threshold(40, 0, 100, 100, 0.0, 0.05)) == math.inf


def test_audit_figure_writes_png_and_truetype_pdf(tmp_path):
    audit = audit_table(_metrics_table())
    plot_audit(audit, tmp_path / "a.png", tmp_path / "a.pdf")
    assert (tmp_path / "a.png").stat().st_size > 0
    pdf = (tmp_path / "a.pdf").read_bytes()
    assert b"/Type3" not in pdf and (b"/TrueType" in pdf or b"/CIDFontType2" in pdf)
    assert np.isfinite(audit["epsilon_upper"].iloc[0])
