"""Figure text: powers of ten as superscripts (issue 8: no literal 10^6 / 1e-06 in figures)."""

from dpaudit.plots.text import number, scientific


def test_powers_of_ten_get_superscripts_and_other_numbers_stay_plain():
    # expected strings written by hand: 10⁻⁵ is "1" "0" U+207B U+2075
    assert number(1e-5) == "10\u207b\u2075"
    assert number(1e-20) == "10⁻²⁰"
    assert number(1e6) == "10⁶"
    assert number(0.001) == "10⁻³"
    # not powers of ten, or too short to gain from a superscript: unchanged :g
    assert number(0.01) == "0.01"
    assert number(2e-5) == "2e-05"
    assert number(0.00094) == "0.00094"
    assert number(0.0) == "0"
    assert number(float("inf")) == "inf"


def test_scientific_notation_with_a_superscript_exponent():
    # expected strings by hand from the mantissa/exponent split of each value
    assert scientific(2e-5) == "2.00 × 10⁻⁵"
    assert scientific(9.87e-4) == "9.87 × 10⁻⁴"
    assert scientific(123456, digits=2) == "1.2 × 10⁵"
    assert scientific(-0.5) == "-5.00 × 10⁻¹"
    assert scientific(0.0) == "0"


def test_identifiability_tables_print_infinity_and_missing_like_the_other_report_tables():
    import math

    import pandas as pd

    from dpaudit.plots.identifiability import tables_html

    parameters = pd.DataFrame({"dataset": ["d", None], "epsilon": [math.inf, float("nan")], "k": [0.123456, 2.0]})
    success = pd.DataFrame({"config": ["c"], "advantage": [-math.inf]})
    summary = pd.DataFrame({"dataset": ["d"], "config": ["c"], "ls_max": [1.0], "ls_bound": [2.0],
                            "ls_violations": [0], "eta_ks_pvalue": [0.5], "eta_ks_pvalue_bonferroni": [1.0],
                            "eta_ks_configurations": [1], "eta_ks_failed": [False]})
    page = tables_html(parameters, success, summary)
    assert "<td>∞</td>" in page and "<td>−∞</td>" in page
    assert "<td>—</td>" in page  # NaN number and None text alike
    assert "<td>0.1235</td>" in page
    for raw in ("inf<", "nan<", "NaN", "&lt;NA&gt;", "None"):
        assert raw not in page, raw


def test_privacy_utility_axis_break_marks_infinity_and_leaves_no_scale_right_of_it():
    import matplotlib.pyplot as plt
    import numpy as np

    from dpaudit.plots.privacy_utility import _axis_break

    fig, ax = plt.subplots()
    ax.set_xscale("log")
    ax.set_xlim(0.1, 3000.0)
    _axis_break(ax, 300.0)
    breaks = [text for text in ax.texts if text.get_text() == "//"]
    assert len(breaks) == 2 and {text.get_position()[0] for text in breaks} == {300.0}
    minor = np.asarray(ax.xaxis.get_minor_locator()())
    assert minor.size > 0 and (minor < 300.0).all()
    plt.close(fig)
