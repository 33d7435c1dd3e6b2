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
        rows.append({**keys, "family": "mia", "metric": "attack_auc", "value": 0.6})
        for estimator, value in (("parametric", 2.0 + i), ("empirical", 1.5 + i)):
            for loss in ("logit", "ce"):
                shift = 0.0 if loss == "logit" else 10.0
                rows.append({**keys, "family": "epsilon_star", "metric": "epsilon_star", "estimator": estimator,
                             "loss": loss, "value": value + shift, "boot_low": value + shift - 0.5,
                             "boot_high": value + shift + 0.25, "at_ceiling": estimator == "empirical" and i == 1,
                             "on_boundary": estimator == "parametric" and i == 2, "separated": False,
                             "none_kept": False, "argmax_count": 1.0 if (estimator, i) == ("empirical", 0) else 7.0})
    return pd.DataFrame(rows)


def test_audit_table_carries_the_metrics_values_for_every_run():
    table = _metrics_table()
    audit = audit_table(table).set_index("run")
    assert sorted(audit.index) == ["r0", "r1", "r2"]
    for run, rows in table.groupby("run"):
        bound = rows[rows["metric"] == "epsilon_lower_bound"].iloc[0]
        assert audit.loc[run, "epsilon_lower_bound"] == bound["value"]
        assert audit.loc[run, "accountant_epsilon"] == bound["accountant_epsilon"]
        star = rows[(rows["metric"] == "epsilon_star") & (rows["loss"] == "logit")].set_index("estimator")["value"]
        assert audit.loc[run, "epsilon_star_parametric"] == star["parametric"]
        assert audit.loc[run, "epsilon_star_empirical"] == star["empirical"]
        details = rows[(rows["metric"] == "epsilon_star") & (rows["loss"] == "logit")].set_index("estimator")
        for estimator in ("parametric", "empirical"):
            column = f"epsilon_star_{estimator}"
            assert audit.loc[run, f"{column}_low"] == details.loc[estimator, "boot_low"]
            assert audit.loc[run, f"{column}_high"] == details.loc[estimator, "boot_high"]
            assert audit.loc[run, f"{column}_at_ceiling"] == details.loc[estimator, "at_ceiling"]
            assert audit.loc[run, f"{column}_on_boundary"] == details.loc[estimator, "on_boundary"]
            assert audit.loc[run, f"{column}_argmax_count"] == details.loc[estimator, "argmax_count"]
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


def test_audit_figure_draws_undefined_epsilon_star_as_a_note_not_a_point(tmp_path):
    # A perfectly separated run has ε* = NaN (i8a): the figure still renders and says so.
    table = _metrics_table()
    chosen = (table["metric"] == "epsilon_star") & (table["run"] == "r2") & (table["estimator"] == "empirical")
    table.loc[chosen, ["value", "boot_low", "boot_high"]] = np.nan
    table.loc[chosen, "separated"] = True
    audit = audit_table(table)
    assert audit.set_index("run").loc["r2", "epsilon_star_empirical_separated"]
    assert np.isnan(audit.set_index("run").loc["r2", "epsilon_star_empirical"])
    plot_audit(audit, tmp_path / "b.png")
    assert (tmp_path / "b.png").stat().st_size > 0


def test_hollow_markers_flag_ceiling_boundary_and_values_decided_by_one_example():
    from dpaudit.plots.audit import _flagged

    audit = audit_table(_metrics_table()).set_index("run")
    # r0: empirical ε* rests on one example; r1: empirical at its ceiling; r2: parametric on the filter edge.
    empirical = dict(zip(audit.index, _flagged(audit, "epsilon_star_empirical"), strict=True))
    parametric = dict(zip(audit.index, _flagged(audit, "epsilon_star_parametric"), strict=True))
    assert empirical == {"r0": True, "r1": True, "r2": False}
    assert parametric == {"r0": False, "r1": False, "r2": True}
    # a missing count (NaN: ε* undefined) is not a flag of its own
    audit.loc["r0", "epsilon_star_empirical_argmax_count"] = np.nan
    assert not _flagged(audit, "epsilon_star_empirical")[list(audit.index).index("r0")]


def test_audit_dataset_ignores_dataset_level_rows_of_the_same_dataset():
    # The privacy profile's rows name their source dataset and carry no run (a view of it).
    table = _metrics_table()
    dataset = str(table["dataset"].iloc[0])
    profile = pd.DataFrame({"dataset": [dataset], "run": pd.array([pd.NA], dtype="string"), "family": ["profile"],
                            "metric": ["epsilon_low"], "value": [1.0]})
    mixed = pd.concat([table, profile], ignore_index=True)
    from dpaudit.plots.audit import audit_dataset

    assert len(audit_dataset(mixed, dataset)) == len(audit_dataset(table, dataset))
