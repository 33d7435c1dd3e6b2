"""Interactive report tables: offline page, readable headers, no <NA>, ∞ kept for sorting."""

import math
import re

import pandas as pd

from dpaudit.report.pages import page
from dpaudit.report.tables import (
    MISSING,
    PAGE_STYLE,
    display_frame,
    glossary_html,
    interactive_table,
    offline_bundle,
)

GLOSSARY = {"run": ("run", "—", "run id"), "epsilon": ("ε", "nats", "accountant ε"),
            "seed": ("seed", "—", "seed"), "note": ("note", "—", "free text")}


def _frame():
    return pd.DataFrame({
        "run": pd.array(["a", "b", "c"], dtype="string"),
        "epsilon": [1.234567, math.inf, math.nan],
        "seed": pd.array([0, None, 2], dtype="Int64"),
        "note": pd.array(["x", None, "z"], dtype="string"),
        "ignored": [1, 2, 3],
    })


def test_display_frame_keeps_numbers_and_marks_missing_text():
    shown = display_frame(_frame(), GLOSSARY)
    assert list(shown.columns) == ["run", "ε", "seed", "note"]
    assert shown["ε"].dtype == "float64" and shown["ε"].iloc[1] == math.inf  # sorts as a number
    assert shown["seed"].dtype == "float64" and math.isnan(shown["seed"].iloc[1])
    assert shown["note"].tolist() == ["x", MISSING, "z"]


def test_page_is_offline_and_has_no_na_text():
    html = page("t", interactive_table(_frame(), GLOSSARY, table_id="t1") + glossary_html(GLOSSARY),
                style=PAGE_STYLE, head=offline_bundle())
    assert "<NA>" not in html and "&lt;NA&gt;" not in html
    # every script is inline: no <script src=...> and no stylesheet link to a CDN
    assert not re.search(r"<script[^>]+src=", html)
    assert not re.search(r"<link[^>]+href=['\"]https?:", html)
    assert "new ITable(" in html and "_itables_2_9_1" in html and "nats" in html
