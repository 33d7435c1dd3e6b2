"""The ladder figure (issue 34): one row per rung, every value the metrics row it came from, and
rendering on a baseline (ε = ∞), a DP-SGD run, a linear mechanism and a run that did not train;
the overview's row per model, its verdict order and dossier links."""

from __future__ import annotations

import json
import math
import re

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from dpaudit.metrics import ladder as LD
from dpaudit.plots import ladder as L
from dpaudit.report import overview as O
from tests.unit.test_dossier import DATASET, model_rows, run_name, table_of

DPSGD, BASELINE = run_name("dpsgd", 4.0, 0), run_name("baseline", "NA", 0)
LINEAR, BROKEN = run_name("output_perturbation", 1.0, 0), run_name("dpsgd", 4.0, 1)


def attack_rows(run: str, aucs: dict, tprs: dict, *, fpr_realized=0.01) -> pd.DataFrame:
    """mia rows of the loss and reference-model attacks (column attack), as metric_attacks writes them."""
    rows = []
    for attack, auc in aucs.items():
        lo = None if attack == "loss" else auc - 0.05
        rows.append({"family": "mia", "metric": "attack_auc", "attack": attack, "value": auc,
                     "ci_lower": lo, "ci_upper": None if lo is None else auc + 0.05})
        tpr = tprs[attack]
        rows.append({"family": "mia", "metric": "tpr_at_fpr", "attack": attack, "fpr_target": 0.01, "value": tpr,
                     "fpr_realized": fpr_realized, "ci_lower": tpr / 2, "ci_upper": tpr * 1.5})
        rows.append({"family": "mia", "metric": "epsilon_lower_bound", "attack": attack, "value": 0.05 * len(rows)})
    frame = pd.DataFrame(rows)
    frame["dataset"], frame["run"] = DATASET, run
    return frame


def star_rows(run: str) -> pd.DataFrame:
    frame = pd.DataFrame({"family": "epsilon_star", "metric": "epsilon_star", "estimator": ["parametric", "empirical"],
                          "loss": "logit", "value": [0.4, 1.3], "boot_low": [0.1, 0.9], "boot_high": [2.0, 2.5]})
    frame["dataset"], frame["run"] = DATASET, run
    return frame


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    frames = [model_rows("dpsgd", 4.0, 0, one_run=0.7), model_rows("baseline", "NA", 0),
              model_rows("output_perturbation", 1.0, 0), model_rows("dpsgd", 4.0, 1, verdict="above_promise",
                                                                     one_run=5.5)]
    aucs = {"loss": 0.52, "lira_online": 0.61, "lira_offline": 0.55, "rmia": 0.61}  # a tie: lira_online first
    tprs = {"loss": 0.02, "lira_online": 0.05, "lira_offline": 0.03, "rmia": 0.04}
    for run in (DPSGD, BASELINE, LINEAR, BROKEN):
        frames += [attack_rows(run, aucs, tprs), star_rows(run)]
    # the loss attack's rows of model_rows carry no attack column: the loss attack here is attack_rows'
    frames = [f[~((f["family"] == "mia") & f["metric"].isin(["attack_auc", "tpr_at_fpr", "epsilon_lower_bound"])
                  & ("attack" not in f.columns))] for f in frames]
    table = table_of(*frames)
    # every row carries its run's columns (aggregate_metrics joins them): fill the attack rows'
    runs = table.dropna(subset=["mechanism"]).drop_duplicates("run").set_index("run")
    for column in ("mechanism", "target_epsilon", "seed", "accountant_epsilon", "accountant_delta"):
        table[column] = table["run"].map(runs[column])
    table["loss_diverged"] = table["run"] == BROKEN
    table["loss_divergence_reason"] = np.where(table["run"] == BROKEN, "training loss diverged: final 3e4", None)
    return table


def test_one_row_per_rung_and_each_value_is_its_metrics_row(table):
    rows = LD.ladder_rows(table)
    assert not rows.duplicated(["dataset", "run", "rung"]).any()
    assert set(rows["run"]) == {DPSGD, BASELINE, LINEAR, BROKEN}
    for _, rung in rows[~rows["derived"]].iterrows():
        select = json.loads(rung["select"])
        match = table[(table["run"] == rung["run"]) & (table["family"] == rung["family"])
                      & (table["metric"] == rung["metric"])]
        for column, wanted in select.items():
            match = match[match[column] == wanted]
        assert len(match) == 1, (rung["rung"], rung["run"])
        source = match.iloc[0]
        np.testing.assert_equal(rung["value"], source["value"])
        if not pd.isna(rung["interval_source"]):
            low, high = rung["interval_source"].split(",")
            assert (rung["low"], rung["high"]) == (source[low], source[high])
        if not pd.isna(rung["ceiling_source"]):
            assert rung["ceiling"] == source[rung["ceiling_source"]]
            # ceiling_max is the audit's best case and wins over the chosen guess count's ceiling
            if not pd.isna(source.get("ceiling_max")):
                assert rung["ceiling_source"] == "ceiling_max"
    assert rows.loc[(rows["run"] == BASELINE) & (rows["rung"] == "promise"), "value"].item() == math.inf
    linear = set(rows.loc[rows["run"] == LINEAR, "rung"])
    assert "canary_many_runs" in linear and "canary_one_run_white_box" not in linear


def test_the_derived_rung_is_ln_tpr_minus_delta_over_fpr_of_the_strongest_attack(table):
    rows = LD.ladder_rows(table)
    derived = rows[rows["derived"]]
    assert len(derived) == 4 and set(derived["rung"]) == {"strongest_attack"}
    for _, rung in derived.iterrows():
        # lira_online and rmia tie at AUC 0.61: the first in ATTACK_NAMES order wins
        assert rung["attack"] == "lira_online" and json.loads(rung["select"])["attack"] == "lira_online"
        delta = table.loc[table["run"] == rung["run"], "accountant_delta"].iloc[0]
        delta = 0.0 if pd.isna(delta) else float(delta)
        assert rung["source_value"] == 0.05 and rung["delta"] == delta and rung["fpr_realized"] == 0.01
        # oracle: (ε, δ)-DP bounds TPR ≤ e^ε FPR + δ, so ε ≥ ln((TPR − δ)/FPR) (closed form; tolerance 1e-12)
        assert rung["value"] == pytest.approx(max(0.0, math.log((0.05 - delta) / 0.01)), abs=1e-12)
        assert rung["low"] == pytest.approx(max(0.0, math.log((0.025 - delta) / 0.01)), abs=1e-12)
        assert rung["high"] == pytest.approx(max(0.0, math.log((0.075 - delta) / 0.01)), abs=1e-12)


def test_no_fpr_realized_leaves_the_derived_rung_undefined(table):
    other = table.copy()
    other.loc[other["metric"] == "tpr_at_fpr", "fpr_realized"] = 0.0
    derived = LD.ladder_rows(other).query("derived")
    assert derived["value"].isna().all()


@pytest.mark.parametrize("run", [BASELINE, DPSGD, LINEAR, BROKEN])
def test_each_kind_of_model_renders(table, run, tmp_path):
    rows = LD.ladder_rows(table)
    verdicts = LD.run_verdicts(table).set_index("run")
    mine = rows[rows["run"] == run]
    png, pdf = tmp_path / "ladder.png", tmp_path / "ladder.pdf"
    L.plot_ladder(mine, verdicts.loc[run], png, pdf)
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n") and png.read_bytes().endswith(b"IEND\xaeB`\x82")
    body = pdf.read_bytes()
    assert body.rstrip().endswith(b"%%EOF") and b"/FontFile2" in body and b"/Type3" not in body  # TrueType
    fig, ax = plt.subplots()
    keys = list(dict.fromkeys(mine["rung"]))
    L._draw(ax, mine, keys, L._x_top(mine), labels=True, small=False)
    texts = [t.get_text() for t in ax.texts]
    plt.close(fig)
    title, colour = L._title(mine.iloc[0], verdicts.loc[run])
    if run == BASELINE:
        # ε = ∞ said in words at the axis' end, never placed at a finite ε; no verdict to give
        assert "ε = ∞: no DP, nothing promised" in texts and "no promise to audit" in title
    else:
        assert any(re.fullmatch(r"ε = [0-9.]+", t) for t in texts)
    if run == BROKEN:
        assert title.startswith("DID NOT TRAIN") and colour == "#b00020" and "measured above the promise" in title
    if run == DPSGD:
        assert "consistent with the promise" in title and colour == "#1a7f37"


def test_small_multiples_render_every_model(table, tmp_path):
    rows = LD.ladder_rows(table)
    L.plot_ladder_grid(rows, LD.run_verdicts(table), tmp_path / "grid.png", tmp_path / "grid.pdf")
    assert (tmp_path / "grid.png").stat().st_size > 10_000 and b"/Type3" not in (tmp_path / "grid.pdf").read_bytes()


def test_largest_certified_bound_and_its_ceiling(table):
    bounds = O.certified_bounds(table).set_index("run")
    # the above-promise model's one-run bound 5.5 (ceiling_max 5.0 of model_rows) beats every attack bound
    assert bounds.loc[BROKEN, "value"] == 5.5 and bounds.loc[BROKEN, "metric"] == "epsilon_lb_one_run"
    assert bounds.loc[BROKEN, "ceiling"] == 5.0 and bounds.loc[BROKEN, "ceiling_source"] == "ceiling_max"
    # the baseline has no canary bound: its largest is an attack's, with no ceiling recorded
    assert bounds.loc[BASELINE, "family"] == "mia" and math.isnan(bounds.loc[BASELINE, "ceiling"])
    brute = table[table["metric"].isin(["epsilon_lb_one_run", "epsilon_lb_many_runs", "epsilon_lb_many_trials",
                                        "epsilon_lower_bound", "dp_region_epsilon_lower_bound"])]
    np.testing.assert_array_equal(bounds["value"].sort_index(), brute.groupby("run")["value"].max().sort_index())


def test_overview_has_one_row_per_model_verdict_order_and_dossier_links(table):
    html = O.build_overview(table)
    rows = re.findall(r'<tr( class="dnt")? data-dataset="toy" data-run="([^"]+)">(.*?)</tr>', html)
    assert sorted(r[1] for r in rows) == sorted({DPSGD, BASELINE, LINEAR, BROKEN})
    assert [r[1] for r in rows if r[0]] == [BROKEN]
    for _, run, cells in rows:
        assert f'href="dossiers/toy/{run}.html"' in cells
    verdict_sort = {run: re.findall(r'<td data-sort="([^"]*)">', cells)[4] for _, run, cells in rows}
    # did not train first, then above the promise, too weak, consistent, no promise
    assert verdict_sort[BROKEN] == "-1" and verdict_sort[DPSGD] == "2" and verdict_sort[BASELINE] == "3"
    assert O.HEADING in html and "<script>" in html and "http" not in html.split("<body>")[1].split("<script>")[0]
    assert "no DP: nothing promised" in html and "—" in html


# ------------------------------------------------------------------ the mechanism checks (issue 32)

NOISE_FAILED = "dense/kernel: variance; dense/bias: variance; dense_1/kernel: kurtosis"


def mechanism_rows(run: str, *, noise, accounting, twin_noise=True, ratio=0.98, noise_note=None,
                   sampler=True) -> pd.DataFrame:
    """The canary rows dpaudit.metrics.canary.mechanism writes: per checked model a noise_check_passed
    (value_bool NA when not certified) with its noise_variance_ratio_min, a sampler_check_passed
    (``sampler`` None: a table written before the sampler check) and an accounting_reproduced."""
    rows = []
    for model, passed in (("released", noise), ("twin", twin_noise)):
        rows.append({"metric": "noise_check_passed", "checked_model": model, "value": np.nan, "value_bool": passed,
                     "applicable": passed is not pd.NA, "note": noise_note if model == "released" else None,
                     "failed": None if passed is pd.NA or passed else NOISE_FAILED})
        if passed is not pd.NA:
            rows.append({"metric": "noise_variance_ratio_min", "checked_model": model, "value": ratio})
    if sampler is not None:
        rows.append({"metric": "sampler_check_passed", "checked_model": "released", "value": np.nan,
                     "value_bool": sampler, "applicable": True,
                     "failed": None if sampler else "all rows: counts_dispersion"})
    rows.append({"metric": "accounting_reproduced", "checked_model": "released", "value": np.nan,
                 "value_bool": accounting, "applicable": True, "failed": None if accounting else "steps: 10 ≠ 12"})
    frame = pd.DataFrame(rows)
    frame["family"], frame["dataset"], frame["run"] = "canary", DATASET, run
    return frame


@pytest.fixture(scope="module")
def checked(table) -> pd.DataFrame:
    """The table with the checks of the two DP-SGD runs: DPSGD passes both; BROKEN's released model
    fails its noise certificate, which decides its verdict."""
    out = with_checks(table, mechanism_rows(DPSGD, noise=True, accounting=True),
                      mechanism_rows(BROKEN, noise=False, accounting=True, ratio=0.41))
    flag = (out["run"] == BROKEN) & (out["metric"] == "measured_above_promise")
    out.loc[flag, "decided_by"], out.loc[flag, "checked_model"] = "noise_check", "released"
    return out


def with_checks(table: pd.DataFrame, *checks: pd.DataFrame) -> pd.DataFrame:
    """``table`` with mechanism rows, each carrying its run's columns (as aggregate_metrics joins them)."""
    out = table_of(table, *checks)
    runs = table.dropna(subset=["mechanism"]).drop_duplicates("run").set_index("run")
    for column in ("mechanism", "target_epsilon", "seed", "accountant_epsilon", "accountant_delta", "loss_diverged"):
        out[column] = out["run"].map(runs[column])
    return out


def test_mechanism_checks_are_the_rows_of_each_checked_model(checked):
    checks = LD.mechanism_checks(checked).set_index("run")
    # oracle: the rows themselves, looked up one by one
    for run in (DPSGD, BROKEN):
        for check, (metric, _, _) in LD.MECHANISM_CHECKS.items():
            for model in LD.CHECKED_MODELS:
                row = checked[(checked["run"] == run) & (checked["metric"] == metric)
                              & (checked["checked_model"] == model)]
                if len(row):
                    assert checks.loc[run, f"{check}_{model}"] == row["value_bool"].item()
                    assert checks.loc[run, f"{check}_{model}_row"]
                else:
                    assert pd.isna(checks.loc[run, f"{check}_{model}"]) and not checks.loc[run, f"{check}_{model}_row"]
    assert checks.loc[BROKEN, "noise_released_failed"] == NOISE_FAILED and checks.loc[BROKEN, "noise_ratio"] == 0.41
    assert not checks.loc[[BASELINE, LINEAR], [f"{c}_{m}_row" for c in LD.MECHANISM_CHECKS
                                                for m in LD.CHECKED_MODELS]].to_numpy().any()
    assert checks.loc[[BASELINE, LINEAR, DPSGD], "has_canary"].all()


def test_a_failed_check_is_said_in_the_ladder_the_grid_and_the_verdict(checked, tmp_path):
    verdicts = LD.run_verdicts(checked).set_index("run")
    title, colour = L._title(LD.ladder_rows(checked).query("run == @BROKEN").iloc[0], verdicts.loc[BROKEN])
    assert "measured above the promise (decided by the noise certificate of the released model)" in title
    assert LD.checks_line(verdicts.loc[BROKEN]) == ("mechanism checks of the released model: noise certificate FAILED, "
                                                   "sampler check passed, accounting check passed")
    assert LD.checks_line(verdicts.loc[DPSGD]).endswith("noise certificate passed, sampler check passed, "
                                                       "accounting check passed")
    assert LD.checks_line(verdicts.loc[BASELINE]) is None and LD.checks_line(verdicts.loc[LINEAR]) is None
    assert LD.decided_words("accounting_check", "twin") == "decided by the accounting check of its audit twin"
    assert LD.decided_words("sampler_check", "released") == "decided by the sampler check of the released model"
    assert LD.decided_words("claim_curve_test") == "decided by the claim-curve test"
    rows = LD.ladder_rows(checked)
    L.plot_ladder(rows[rows["run"] == BROKEN], verdicts.loc[BROKEN], tmp_path / "l.png", tmp_path / "l.pdf")
    L.plot_ladder_grid(rows, LD.run_verdicts(checked), tmp_path / "g.png")
    assert (tmp_path / "l.png").read_bytes().startswith(b"\x89PNG") and (tmp_path / "g.png").stat().st_size > 10_000


def test_dossier_section_one_says_what_each_check_read(checked):
    # issue 45: the promise section names what each mechanism check read of the training
    from dpaudit.report.dossier import _mechanism_lines
    from dpaudit.report.run_view import RunView

    lines = {line.what: line for line in _mechanism_lines(RunView(checked, DATASET, BROKEN))}
    assert [lines[k].value for k in ("noise certificate passed", "sampler check passed", "accounting reproduced")] == [
        "FAILED", "passed", "passed"]
    assert lines["noise certificate passed"].meaning.startswith("Read: the noise: the update handed to the optimizer")
    assert lines["sampler check passed"].meaning.startswith("Read: the rows: the positions every sampler call drew")
    assert lines["accounting reproduced"].meaning.startswith("Read: the accountant&#x27;s inputs")


def _cells(html: str) -> dict[str, list[str]]:
    rows = re.findall(r'<tr(?: class="dnt")? data-dataset="toy" data-run="([^"]+)">(.*?)</tr>', html)
    return {run: re.findall(r'<td data-sort="([^"]*)">(.*?)</td>', cells) for run, cells in rows}


def test_overview_mechanism_checks_column(checked):
    html = O.build_overview(checked)
    column = O.COLUMNS.index("mechanism checks")
    assert column == O.COLUMNS.index("verdict (canary audit)") + 1
    cells = _cells(html)
    sort = {run: c[column][0] for run, c in cells.items()}
    text = {run: c[column][1] for run, c in cells.items()}
    assert text[DPSGD].startswith('<span class="pass">passed</span> (noise certificate, sampler check, '
                                  'accounting check)')
    # what the checks read (issue 45)
    assert "read: noise, weights, clipped sums, rows, accountant&#x27;s inputs" in text[DPSGD]
    assert 'data-metric="noise_variance_ratio_min"' in text[DPSGD] and 'data-value="0.98"' in text[DPSGD]
    assert text[BROKEN].startswith('<strong class="fail">FAILED</strong> (noise certificate); '
                                   '<span class="pass">passed</span> (sampler check, accounting check)')
    # the first two of three failures, and how many more
    assert "noise certificate: dense/kernel: variance; dense/bias: variance; … (+1 more, in the dossier)" in text[BROKEN]
    assert "—" in text[BASELINE] and "no DP: nothing to check" in text[BASELINE]
    assert "not DP-SGD: the checks read the DP-SGD training loop" in text[LINEAR]
    assert (sort[BROKEN], sort[DPSGD], sort[BASELINE], sort[LINEAR]) == ("0", "2", "", "")
    verdict = cells[BROKEN][O.COLUMNS.index("verdict (canary audit)")][1]
    assert "decided by the noise certificate of the released model" in verdict


def test_overview_check_not_run_and_a_failed_twin(checked):
    # DPSGD's released noise certificate not run (its note says why), its twin's failed
    extra = with_checks(checked[~((checked["run"] == DPSGD) & checked["checked_model"].notna())],
                        mechanism_rows(DPSGD, noise=pd.NA, accounting=True, twin_noise=False,
                                       noise_note="not certified: σ = 0"))
    cell = _cells(O.build_overview(extra))[DPSGD][O.COLUMNS.index("mechanism checks")]
    assert cell[0] == "0"  # the twin's failure sorts first
    assert "noise certificate — <span class=\"why\">not certified: σ = 0</span>" in cell[1]
    assert 'audit twin: <strong class="fail">FAILED</strong> (noise certificate)' in cell[1]
    # without any canary row the reason is the family switched off
    no_canary = checked[~((checked["family"] == "canary") & (checked["run"] == DPSGD))]
    cell = _cells(O.build_overview(no_canary))[DPSGD][O.COLUMNS.index("mechanism checks")]
    assert "not recorded: the canary family is off" in cell[1]


def test_overview_rows_follow_the_figures_dataset_order(checked, tmp_path):
    other = checked.assign(dataset="aaa_first_alphabetically")
    both = pd.concat([checked, other], ignore_index=True)
    png = tmp_path / "g.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n")
    datasets = re.findall(r'<tr(?: class="dnt")? data-dataset="([^"]+)"', O.build_overview(both, {"toy": png,
                                                                                                "aaa_first_alphabetically": png}))
    assert datasets == ["toy"] * 4 + ["aaa_first_alphabetically"] * 4
    assert re.findall(r'<tr(?: class="dnt")? data-dataset="([^"]+)"', O.build_overview(both))[0] == "aaa_first_alphabetically"


def test_the_audits_reach_is_the_largest_ceiling_of_a_certified_bound(table):
    rows = LD.ladder_rows(table)
    reach = L.audit_reach(rows)
    # oracle: per run, the max over the metrics rows of the bound rungs of ceiling_max, else ceiling
    for run in (DPSGD, LINEAR, BROKEN):
        sources = table[(table["run"] == run) & table["metric"].isin(
            [r.metric for r in LD.LADDER_RUNGS if r.family == "canary" and r.kind == "bound"])]
        ceilings = sources["ceiling_max"].astype(float).fillna(sources["ceiling"].astype(float))
        assert reach[run] == ceilings.max()
    # the GDP estimate's ceiling (4.321 in model_rows) is an estimate's, never the reach
    assert reach[DPSGD] == 5.0 and BASELINE not in reach.index


def test_an_estimate_rung_says_its_raised_flags():
    # Issue 46: an ε* at its finite-sample resolution or outside its own bootstrap interval says so on its
    # rung (the flag rows of the same loss and estimator in metrics.parquet); a rung without flags says nothing.
    run = {"dataset": "d", "run": "r", "mechanism": "dpsgd", "target_epsilon": 1.0, "seed": 0,
           "accountant_epsilon": 1.0, "accountant_delta": 1e-5}
    star = {"family": "epsilon_star", "loss": "logit"}
    table = pd.DataFrame([
        {**run, **star, "metric": "epsilon_star", "estimator": "empirical", "value": 0.7, "boot_low": 0.9,
         "boot_high": 2.0},
        {**run, **star, "metric": "at_resolution", "estimator": "empirical", "value": np.nan, "value_bool": True},
        {**run, **star, "metric": "outside_bootstrap_interval", "estimator": "empirical", "value": np.nan,
         "value_bool": True},
        {**run, **star, "metric": "within_permutation_null", "estimator": "empirical", "value": np.nan,
         "value_bool": True},
        {**run, **star, "metric": "epsilon_star", "estimator": "parametric", "value": 0.3, "boot_low": 0.1,
         "boot_high": 2.0},
        {**run, **star, "metric": "at_resolution", "estimator": "parametric", "value": np.nan, "value_bool": False},
        {**run, "family": "mia", "metric": "accountant_epsilon", "value": 1.0},
    ])
    rows = LD.ladder_rows(table).set_index("rung")
    assert rows.loc["epsilon_star_empirical", "flags"] == ("at the sample's resolution, outside its interval, "
                                                          "within the no-signal null")
    assert pd.isna(rows.loc["epsilon_star_parametric", "flags"]) and pd.isna(rows.loc["promise", "flags"])
