"""The report's figures from the tiny end-to-end run: audit data = metrics table, TrueType PDFs."""

import numpy as np
import pytest

from dpaudit.io import read_parquet
from dpaudit.plots.models import FIGURES

# make test's xdist workers (--dist loadgroup): every test of the shared fixture on one worker
pytestmark = pytest.mark.xdist_group("tiny_run")


def _metric(table, field="value", **where):
    chosen = np.ones(len(table), dtype=bool)
    for column, value in where.items():
        chosen &= (table[column] == value).fillna(False).to_numpy(dtype=bool)
    return table.loc[chosen].set_index("run")[field].astype(float)


def test_audit_data_table_equals_the_metrics_table_for_every_run(tiny_run):
    results = tiny_run["workdir"] / "results"
    table = read_parquet(results / "tables" / "metrics.parquet")
    table = table[table["dataset"] == "synthetic"]  # the tiny run also audits a table dataset (issue 25)
    audit = read_parquet(results / "figures" / "audit_synthetic.parquet").set_index("run")
    assert (results / "figures" / "audit_synthetic.png").stat().st_size > 0
    assert set(audit.index) == set(table["run"])
    expected = {
        "epsilon_lower_bound": _metric(table, family="mia", metric="epsilon_lower_bound"),
        "accountant_epsilon": _metric(table, family="mia", metric="accountant_epsilon"),
        "epsilon_star_parametric": _metric(table, family="epsilon_star", metric="epsilon_star",
                                           estimator="parametric", loss="logit"),
        "epsilon_star_empirical": _metric(table, family="epsilon_star", metric="epsilon_star",
                                          estimator="empirical", loss="logit"),
    }
    for estimator in ("parametric", "empirical"):
        for field, suffix in (("boot_low", "low"), ("boot_high", "high"), ("argmax_count", "argmax_count")):
            expected[f"epsilon_star_{estimator}_{suffix}"] = _metric(
                table, field, family="epsilon_star", metric="epsilon_star", estimator=estimator, loss="logit")
    for column, values in expected.items():
        assert len(values) == len(audit), f"{column}: {len(values)} metric rows for {len(audit)} runs"
        for run, value in values.items():
            # ε* is NaN where it is undefined (perfect separation): NaN must stay NaN.
            got = audit.loc[run, column]
            assert got == value or (np.isnan(got) and np.isnan(value)), (column, run, got, value)
    # the interval's optimistic end is never below the certified bound
    assert (audit["epsilon_upper"] >= audit["epsilon_lower_bound"]).all()


def test_every_pdf_the_workflow_writes_embeds_truetype_not_type3(tiny_run):
    pdfs = sorted((tiny_run["workdir"] / "results").rglob("*.pdf"))
    names = {pdf.name for pdf in pdfs}
    assert {f"{name}_synthetic.pdf" for name in ["audit", *FIGURES]} <= names, names
    assert {f"teaching_f{i}.pdf" for i in range(1, 6)} <= names, names
    for pdf in pdfs:
        data = pdf.read_bytes()
        # matplotlib writes font dictionaries uncompressed: a Type 3 font shows as /Subtype /Type3.
        assert b"/Type3" not in data, f"{pdf} embeds a Type 3 font"
        assert b"/TrueType" in data or b"/CIDFontType2" in data, f"{pdf} embeds no TrueType font"
