"""Privacy dossier and guidance page (issue 18): numbers from the table, sentences from the numbers."""

from __future__ import annotations

import json
import math
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest

from dpaudit.plots.guidance import draw_guidance
from dpaudit.report import dossier as D
from dpaudit.report import guidance as G
from dpaudit.report import pages

DATASET = "toy"


def run_name(mechanism, eps, seed):
    return f"mechanism~{mechanism}_target_epsilon~{eps}_seed~{seed}"


def grid(mechanism, eps, seed, accountant_eps=None):
    private = mechanism != "baseline"
    return {"mechanism": mechanism, "target_epsilon": float(eps) if private else np.nan, "clip_norm": 1.0,
            "microbatches": np.nan, "epochs": 2.0, "batch_size": 32.0, "learning_rate": 0.05, "seed": seed,
            "accountant_epsilon": (accountant_eps if accountant_eps is not None else float(eps)) if private else math.inf,
            "accountant_delta": 1e-3 if mechanism == "dpsgd" else (0.0 if private else np.nan),
            "accountant": "rdp" if mechanism == "dpsgd" else ("pure" if private else None),
            "sampling": "poisson" if mechanism == "dpsgd" else None}


def model_rows(mechanism="dpsgd", eps=1.0, seed=0, *, verdict="consistent", one_run=0.3, ceiling_max=5.0,
               families=("mia", "privacy_card", "canary", "epsilon_star", "identifiability", "pmp"),
               rho_beta=None, advantage=None, epsilon_pmp=None, accuracy=0.8, accountant_eps=None):
    run = run_name(mechanism, eps, seed)
    acc_eps = accountant_eps if accountant_eps is not None else (float(eps) if mechanism != "baseline" else math.inf)
    rows = []

    def add(family, metric, value=np.nan, **params):
        rows.append({"family": family, "metric": metric, "value": value, **params})

    if "mia" in families:
        add("mia", "accountant_epsilon", acc_eps, delta=1e-3)
        add("mia", "attack_auc", 0.5123, n_members=200, n_nonmembers=100, loss="loss_ce")
        for target, tpr in ((0.001, 0.0123), (0.01, 0.0456)):
            add("mia", "tpr_at_fpr", tpr, fpr_target=target, n_members=200, n_nonmembers=100, loss="loss_ce")
        add("mia", "epsilon_lower_bound", 0.0789, alpha=0.05, ci_method="split", delta=1e-3)
        add("mia", "test_accuracy", accuracy)
    if "privacy_card" in families and math.isfinite(acc_eps):
        add("privacy_card", "exp_epsilon", math.exp(acc_eps), delta=1e-3)
        add("privacy_card", "max_attack_accuracy_bound", 0.7311, delta=1e-3)
    if "canary" in families:
        if mechanism == "baseline":
            rows.append({"family": "canary", "metric": "measured_above_promise", "value": np.nan,
                         "value_bool": pd.NA, "applicable": False, "note": "not applicable: no canary audit"})
        elif mechanism == "dpsgd":
            for metric, value in (("epsilon_gdp_estimate", 0.2345), ("epsilon_lb_one_run_fdp", 0.3456),
                                  ("epsilon_lb_one_run", one_run)):
                add("canary", metric, value, threat_model="white_box", score_kind="llr", confidence=0.95,
                    ceiling=4.321, ceiling_max=ceiling_max if metric != "epsilon_gdp_estimate" else np.nan,
                    canaries=500)
            add("canary", "epsilon_lb_one_run", 0.0, threat_model="white_box", score_kind="sum", confidence=0.95,
                ceiling=3.1, ceiling_max=3.2, canaries=500)
            add("canary", "epsilon_lb_one_run", 0.0, threat_model="black_box", score_kind="neg_loss",
                confidence=0.95, ceiling=0.4129, ceiling_max=1.267, canaries=20)
        else:
            add("canary", "epsilon_lb_many_runs", one_run, threat_model="many_runs", score_kind="log_density_ratio",
                confidence=0.95, ceiling=5.6006, ceiling_max=ceiling_max, canaries=2000)
        if mechanism != "baseline":
            rows.append({"family": "canary", "metric": "measured_above_promise", "value": np.nan,
                         "value_bool": verdict == "above_promise", "verdict": verdict, "ceiling_max": ceiling_max,
                         "confidence": 0.95, "applicable": True})
    if "epsilon_star" in families:
        for estimator, value in (("empirical", 1.338), ("parametric", 0.194)):
            add("epsilon_star", "epsilon_star", value, estimator=estimator, loss="ce", boot_low=value / 2,
                boot_high=value * 2, boot_level=0.95, at_ceiling=estimator == "empirical", on_boundary=False,
                argmax_count=3.0, ceiling=1.338)
    if "identifiability" in families and math.isfinite(acc_eps):
        add("identifiability", "rho_beta", rho_beta if rho_beta is not None else 0.7311, applicable=True)
        add("identifiability", "rho_alpha_thm2", 0.1049, applicable=True)
        add("identifiability", "advantage_bound_any_dp", advantage if advantage is not None else 0.4626,
            applicable=True)
    if "pmp" in families and mechanism == "dpsgd":
        add("pmp", "epsilon_pmp", 2.318, method="gauss_single_step", status="ok",
            label="upper bound for one full-batch step")
        add("pmp", "epsilon_pmp", epsilon_pmp if epsilon_pmp is not None else 1.369, method="dpsgd_clt",
            status="ok", label="whole-training heuristic")
        add("pmp", "empirical_epsilon_lower_bound", np.nan, method="empirical_lira", status="not_computed",
            note="metrics.pmp.recipe_c = false")
    frame = pd.DataFrame(rows)
    frame["dataset"], frame["run"] = DATASET, run
    for key, value in grid(mechanism, eps, seed, accountant_eps).items():
        frame[key] = value
    return frame


def table_of(*frames):
    table = pd.concat(frames, ignore_index=True)
    if "value_bool" not in table.columns:
        table["value_bool"] = pd.NA
    table["value_bool"] = table["value_bool"].astype("boolean")
    return table


class Spans(HTMLParser):
    def __init__(self):
        super().__init__()
        self.spans, self.meta, self._open, self.text = [], {}, None, []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "meta" and "name" in attrs:
            self.meta[attrs["name"]] = attrs.get("content")
        if tag == "span" and "num" in (attrs.get("class") or "").split():
            self._open = {**attrs, "text": ""}

    def handle_data(self, data):
        self.text.append(data)
        if self._open is not None:
            self._open["text"] += data

    def handle_endtag(self, tag):
        if tag == "span" and self._open is not None:
            self.spans.append(self._open)
            self._open = None


def parse(html):
    parser = Spans()
    parser.feed(html)
    return parser


def shown_number(text):
    text = text.replace("−", "-")
    return {"∞": math.inf, "-∞": -math.inf, "—": math.nan}.get(text, None) if text in ("∞", "-∞", "—") \
        else float(text)


def check_numbers(html, table):
    """Every table-backed number on the page equals its row's value and is shown at 4 significant digits."""
    page = parse(html)
    run = page.meta.get("dpaudit-run")
    checked = 0
    for span in page.spans:
        if span.get("data-value") == "nan":
            assert span["text"] == "—"
            continue
        value = float(span["data-value"])
        if "data-family" in span:
            rows = table[(table["dataset"] == page.meta["dpaudit-dataset"])
                         & (table["family"] == span["data-family"]) & (table["metric"] == span["data-metric"])]
            if span["data-family"] != "profile":
                rows = rows[rows["run"] == span.get("data-run", run)]
            for column, wanted in json.loads(span.get("data-select", "{}")).items():
                if isinstance(wanted, float):
                    rows = rows[np.isclose(rows[column].astype(float), wanted)]
                else:
                    rows = rows[rows[column].astype("string") == str(wanted)]
            assert len(rows) == 1, (span, len(rows))
            expected = float(rows[span.get("data-field", "value")].iloc[0])
        elif "data-column" in span:
            expected = float(table.loc[table["run"] == run, span["data-column"]].iloc[0])
        else:
            continue  # per-example outputs, audit record, ledger: not in the metrics table
        assert value == expected or (math.isnan(value) and math.isnan(expected)), span
        scale = float(span.get("data-scale", 1.0))
        assert span["text"] == pages.fmt(expected * scale, span["data-fmt"]), span
        shown = shown_number(span["text"])
        if math.isfinite(expected) and expected != 0:
            assert abs(shown - expected * scale) <= 5e-3 * abs(expected * scale), span
        checked += 1
    return checked


def full_table():
    return table_of(model_rows("dpsgd", 1.0, 0), model_rows("dpsgd", 1.0, 1, accuracy=0.76),
                    model_rows("dpsgd", 4.0, 0, accountant_eps=3.9966, rho_beta=0.982, advantage=0.9639,
                               epsilon_pmp=4.448, accuracy=0.83),
                    model_rows("baseline", "NA", 0, accuracy=0.85))


def test_every_number_on_a_dossier_is_the_tables_value():
    table = full_table()
    for run in table["run"].unique():
        page = D.build_dossier(table, DATASET, run, train={"neighbouring_relation": "add_or_remove_one"})
        assert check_numbers(page, table) >= (20 if "dpsgd" in run else 5)


def test_title_uses_short_labels_in_place_of_the_run_string():
    table = full_table()
    page = D.build_dossier(table, DATASET, run_name("dpsgd", 4.0, 0))
    title = page.split("<title>")[1].split("</title>")[0]
    assert title == "Dossier: DP-SGD · target ε = 4 · seed 0 · toy"
    assert "<h1>Privacy dossier: DP-SGD · target ε = 4 · seed 0 · toy</h1>" in page
    baseline = D.build_dossier(table, DATASET, run_name("baseline", "NA", 0))
    assert "non-private (ε = ∞) · seed 0 · toy" in baseline


def test_verdict_above_promise_is_red_and_quotes_the_bound():
    table = table_of(model_rows("dpsgd", 1.0, 0, verdict="above_promise", one_run=2.5))
    page = D.build_dossier(table, DATASET, run_name("dpsgd", 1.0, 0))
    assert 'class="verdict bad" data-verdict="above_promise"' in page
    assert "measured above the promise" in page
    assert ">2.5</span> against the promise ε = 1" in page
    check_numbers(page, table)


def test_verdict_consistent_and_too_weak():
    consistent = D.build_dossier(table_of(model_rows("dpsgd", 1.0, 0, verdict="consistent", one_run=0.3)),
                                 DATASET, run_name("dpsgd", 1.0, 0))
    assert 'data-verdict="consistent"' in consistent and "consistent with the promise" in consistent
    assert "verdict bad" not in consistent
    weak = D.build_dossier(table_of(model_rows("dpsgd", 4.0, 0, verdict="too_weak", one_run=0.0, ceiling_max=1.267)),
                           DATASET, run_name("dpsgd", 4.0, 0))
    assert 'data-verdict="too_weak"' in weak and "audit too weak to say" in weak
    assert ">1.267</span>; the measured bound is ε ≥" in weak and "below the accountant&#x27;s ε" in weak


def test_verdict_of_a_baseline_says_there_is_no_promise():
    page = D.build_dossier(full_table(), DATASET, run_name("baseline", "NA", 0))
    assert "Verdict: no promise to audit" in page
    assert "Trained without differential privacy" in page


def test_missing_families_are_named_not_crashed_on():
    table = table_of(model_rows("dpsgd", 1.0, 0, families=("mia", "privacy_card")))
    page = D.build_dossier(table, DATASET, run_name("dpsgd", 1.0, 0))
    for family in ("canary", "epsilon_star", "pmp", "identifiability"):
        assert f"not computed in this run (family {family} disabled)" in page
    assert "Per-example outputs not given" in page
    assert "Budget ledger: not available" in page
    check_numbers(page, table)


def test_utility_spread_across_seeds_lists_every_seed():
    table = full_table()
    page = D.build_dossier(table, DATASET, run_name("dpsgd", 1.0, 0))
    assert "range over 2 seeds" in page
    assert "this configuration's 2 seeds give" in page


def test_most_exposed_members_rank_by_nonmember_share_below_their_loss():
    outputs = pd.DataFrame({
        "example_id": [1, 2, 3, 4, 5, 6], "split": ["train", "train", "train", "holdout", "holdout", "holdout"],
        "label": [0, 1, 0, 0, 1, 1], "loss_ce": [0.5, 0.01, 0.2, 0.1, 0.3, 0.6]})
    top = D.most_exposed(outputs, {"members": "train", "nonmembers": "holdout"}, top=3)
    assert top["example_id"].tolist() == [2, 3, 1]
    assert top["nonmember_fraction_below"].tolist() == pytest.approx([0.0, 1 / 3, 2 / 3])
    table = table_of(model_rows("dpsgd", 1.0, 0))
    page = D.build_dossier(table, DATASET, run_name("dpsgd", 1.0, 0), outputs=outputs,
                           splits={"members": "train", "nonmembers": "holdout"})
    assert "example 2, has a loss below every non-member's" in page


def test_linear_model_shows_worst_case_neighbour_and_profile_regime():
    linear = model_rows("output_perturbation", 2.0, 0)
    profile = pd.DataFrame([
        {"dataset": DATASET, "run": pd.NA, "family": "profile", "metric": "epsilon_low", "value": 1.0, "view": "v"},
        {"dataset": DATASET, "run": pd.NA, "family": "profile", "metric": "epsilon_high", "value": 10.0, "view": "v"},
    ])
    table = table_of(linear, profile)
    record = {"row": 75, "example_id": 152, "shift_norm": 0.0035089505867347726}
    page = D.build_dossier(table, DATASET, run_name("output_perturbation", 2.0, 0), canary_record=record)
    assert "Row <span" in page and ">0.003509</span>" in page
    assert "between ε_low and ε_high" in page
    check_numbers(page, table)
    no_profile = D.build_dossier(table_of(linear), DATASET, run_name("output_perturbation", 2.0, 0))
    assert "Profile regime: not computed in this run (family profile disabled)" in no_profile
    assert "no canary audit record" in no_profile


def test_guidance_picks_the_largest_grid_epsilon_that_every_seed_meets(tmp_path):
    frames = []
    # ρ_β per (ε, seed): ε = 2 fails the 0.75 limit on seed 1, so the answer is ε = 1 (not 2)
    for eps, seeds in ((1.0, (0.70, 0.72)), (2.0, (0.74, 0.80)), (4.0, (0.98, 0.97))):
        for seed, rho in enumerate(seeds):
            frames.append(model_rows("dpsgd", eps, seed, rho_beta=rho, advantage=0.1 * eps, epsilon_pmp=0.5 * eps,
                                     accuracy=0.7 + 0.02 * eps + 0.01 * seed))
    frames.append(model_rows("baseline", "NA", 0, accuracy=0.9))
    table = table_of(*frames)
    choices = {c.target.name: c for c in G.guidance_choices(table, DATASET)}
    assert choices["rho_beta"].epsilon == 1.0
    assert choices["advantage"].epsilon == 2.0  # 0.1 ε ≤ 0.25
    assert choices["epsilon_pmp"].epsilon == 2.0  # 0.5 ε ≤ 1
    assert choices["low_regime"].epsilon is None
    assert "not computed in this run (family profile disabled)" in choices["low_regime"].sentence
    draw_guidance(table, DATASET, G.guidance_choices(table, DATASET), tmp_path / "g.png")
    page = G.build_guidance(table, DATASET, png=tmp_path / "g.png")
    assert (tmp_path / "g.png").stat().st_size > 1000 and "data:image/png;base64," in page
    assert "ε = 1 is the largest grid ε with ρ_β" in page and "the next, ε = 2, gives" in page
    check_numbers(page, table)
    strict = G.guidance_choices(table, DATASET, G.targets_from_config({"rho_beta": 0.5}))
    assert next(c for c in strict if c.target.name == "rho_beta").epsilon is None
    with pytest.raises(ValueError, match="unknown guidance target"):
        G.targets_from_config({"nope": 1})


def test_guidance_low_regime_for_linear_runs(tmp_path):
    frames = [model_rows("output_perturbation", eps, 0) for eps in (0.5, 1.0, 2.0)]
    frames.append(pd.DataFrame([{"dataset": DATASET, "run": pd.NA, "family": "profile", "metric": "epsilon_low",
                                 "value": 1.2, "view": "v"}]))
    choices = {c.target.name: c for c in G.guidance_choices(table_of(*frames), DATASET)}
    assert choices["low_regime"].epsilon == 1.0


def test_guidance_target_defaults_equal_the_schema_and_config_values_apply():
    from dpaudit.config import validate_config
    from dpaudit.report.guidance import DEFAULT_TARGETS, targets_from_config

    config = validate_config({"datasets": {"synthetic": {}}, "grid": [{"mechanism": ["baseline"]}]})
    limits = {t.name: t.limit for t in DEFAULT_TARGETS if t.limit is not None}
    assert config["guidance"] == limits
    changed = {t.name: t.limit for t in targets_from_config({**config["guidance"], "rho_beta": 0.6})}
    assert changed["rho_beta"] == 0.6 and changed["advantage"] == limits["advantage"]


def test_a_run_that_did_not_train_has_a_red_banner_at_the_top():
    from dpaudit.report.banner import DID_NOT_TRAIN

    table = full_table()
    run = run_name("dpsgd", 1.0, 0)
    reason = "final training loss 1.946e+04 > 0.6931, the loss of predicting the class frequencies"
    page = D.build_dossier(table, DATASET, run, train={"loss_diverged": True, "loss_divergence_reason": reason,
                                                       "learning_rate": 1000.0})
    head = page.split("<h2>1 Promise</h2>")[0]
    assert DID_NOT_TRAIN in head and "1.946e+04" in head and "background:#b00020" in head
    assert DID_NOT_TRAIN not in D.build_dossier(table, DATASET, run, train={"loss_diverged": False})
    # the metrics table's copy of the flag is enough (train.json not given)
    table["loss_diverged"] = pd.array([r == run for r in table["run"]], dtype="boolean")
    table["loss_divergence_reason"] = pd.array([reason if r == run else None for r in table["run"]], dtype="string")
    assert DID_NOT_TRAIN in D.build_dossier(table, DATASET, run).split("<h2>1 Promise</h2>")[0]
    assert DID_NOT_TRAIN not in D.build_dossier(table, DATASET, run_name("dpsgd", 1.0, 1))


def test_a_training_note_shows_without_the_red_banner():
    from dpaudit.report.banner import DID_NOT_TRAIN

    table = full_table()
    run = run_name("dpsgd", 1.0, 0)
    note = "mean training loss 2.5 is above the constant predictor's 0.69 because of confident errors (max loss 96.5)"
    head = D.build_dossier(table, DATASET, run, train={"loss_diverged": False, "training_note": note}).split(
        "<h2>1 Promise</h2>")[0]
    assert "Training note" in head and "max loss 96.5" in head
    assert DID_NOT_TRAIN not in head and "#b00020" not in head
    # from the metrics table's copy alone
    table["training_note"] = pd.array([note if r == run else None for r in table["run"]], dtype="string")
    assert "max loss 96.5" in D.build_dossier(table, DATASET, run).split("<h2>1 Promise</h2>")[0]


def test_text_ids_show_beside_the_example_ids_of_the_exposed_rows():
    from dpaudit.data.datasets import TEXT_IDS
    from dpaudit.report.exposure import user_ids_of

    outputs = pd.DataFrame({
        "example_id": [0, 1, 2, 3, 4, 5], "split": ["train", "train", "train", "holdout", "holdout", "holdout"],
        "label": [0, 1, 0, 0, 1, 1], "loss_ce": [0.5, 0.01, 0.2, 0.1, 0.3, 0.6]})
    ids = pd.DataFrame({"example_id": np.arange(6, dtype=np.int64), "id": [f"r{i:05d}" for i in range(6)]})
    assert user_ids_of(ids, {"ids": {"kind": "the example_id itself"}}) is None
    user_ids = user_ids_of(ids, {"ids": {"kind": TEXT_IDS}})
    table = table_of(model_rows("dpsgd", 1.0, 0))
    page = D.build_dossier(table, DATASET, run_name("dpsgd", 1.0, 0), outputs=outputs, user_ids=user_ids,
                           splits={"members": "train", "nonmembers": "holdout"})
    section = page.split("<h2>4 Exposure of individual rows</h2>")[1].split("<h2>")[0]
    assert "<th>your id</th>" in section and '<td data-h="your id">r00001</td>' in section
    plain = D.build_dossier(table, DATASET, run_name("dpsgd", 1.0, 0), outputs=outputs,
                            splits={"members": "train", "nonmembers": "holdout"})
    assert "your id" not in plain


def test_the_parametric_count_behind_the_ratio_is_called_expected():
    section = D.build_dossier(full_table(), DATASET, run_name("dpsgd", 1.0, 0)).split("<h3>Epsilon*</h3>")[1]
    section = section.split("<h3>")[0]
    parametric = next(row for row in section.split("<tr") if "parametric" in row)
    empirical = next(row for row in section.split("<tr") if "empirical" in row)
    assert "expected examples behind the ratio" in parametric and "argmax count" not in section
    assert "examples behind the ratio" in empirical and "expected examples" not in empirical


def test_the_mechanism_section_says_what_the_white_box_canaries_observe():
    # issue 45: the canaries keep a variable of their own; the dossier says what they observe
    run = run_name("dpsgd", 1.0, 0)
    rows = pd.DataFrame(model_rows("dpsgd", 1.0, 0))
    mechanism = pd.DataFrame([
        {"family": "canary", "metric": "noise_check_passed", "checked_model": "released", "value": np.nan,
         "value_bool": True, "applicable": True, "family_alpha": 1e-3, "note": "the noise actually added was measured"},
        {"family": "canary", "metric": "accounting_reproduced", "checked_model": "released", "value": np.nan,
         "value_bool": True, "applicable": True, "family_alpha": 1e-3, "note": "reproduced"}])
    mechanism["dataset"], mechanism["run"] = DATASET, run
    for key, value in grid("dpsgd", 1.0, 0).items():
        mechanism[key] = value
    table = pd.concat([rows, mechanism], ignore_index=True)
    page = D.build_dossier(table, DATASET, run)
    assert "what the white-box canaries observe" in page and "consecutive states with the optimizer" in page
    linear = pd.DataFrame(model_rows("output_perturbation", 1.0, 0))
    assert "what the white-box canaries observe" not in D.build_dossier(
        linear, DATASET, run_name("output_perturbation", 1.0, 0))
