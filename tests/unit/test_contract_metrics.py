"""The metric vocabulary (dpaudit.contract.metrics): one declaration per metric, one checked writer.

Oracles: the declarations themselves (every family's real row producer, run on tiny synthetic
inputs, may write only declared names), pyarrow reading the written file's key-value metadata,
the committed docs/metrics.md against its rendering, and metrics.mia's functions for the card.
"""

import logging
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from scipy.special import expit

from dpaudit.contract import metrics as vocabulary
from dpaudit.contract.metrics import (
    FAMILIES,
    METRICS,
    SCHEMA_VERSION,
    SCHEMA_VERSION_KEY,
    Metric,
    check_metric_table,
    declared,
    metric_rows,
    read_schema_version,
    write_metric_table,
)

ROOT = Path(__file__).resolve().parents[2]
SPLITS = {"members": "train", "nonmembers": "holdout", "utility": "test"}


def _declared_names(family: str) -> set[str]:
    return {m.name for m in METRICS if m.family == family}


def _outputs(seed=0, n=200, shift=0.7) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    split = np.repeat(["train", "holdout", "test"], n)
    loss = rng.exponential(1.0, split.size) * np.where(split == "train", 1.0 - shift / 2, 1.0)
    p_true = np.exp(-loss)
    return pd.DataFrame({"example_id": np.arange(split.size), "split": split, "is_member": split == "train",
                         "label": rng.integers(0, 2, split.size), "loss_ce": loss,
                         "loss_logit": np.log(np.expm1(loss)), "p_true": p_true, "correct": p_true > 0.5})


# ------------------------------------------------------------------ the writer


def test_writer_refuses_undeclared_and_foreign_metrics():
    with pytest.raises(ValueError, match="'auc' of family 'mia' is not declared"):
        metric_rows("mia", [{"metric": "auc", "value": 0.5}], dataset="d", run="r")
    with pytest.raises(ValueError, match="'epsilon_star' is declared for family 'epsilon_star', not 'mia'"):
        metric_rows("mia", [{"metric": "epsilon_star", "value": 0.5}], dataset="d", run="r")
    with pytest.raises(ValueError, match="unknown metric family 'nosuchfamily'"):
        metric_rows("nosuchfamily", [{"metric": "x", "value": 0.5}], dataset="d", run="r")
    with pytest.raises(ValueError, match=r"mia/attack_auc: declared parameter column\(s\) \['attack', 'n_members'"):
        metric_rows("mia", [{"metric": "attack_auc", "value": 0.5, "loss": "loss_ce"}], dataset="d", run="r")


def test_writer_keeps_numbers_and_flags_apart():
    test = {"delta": 1e-5, "alpha": 0.05, "loss": "loss_ce", "n_members": 3, "n_nonmembers": 3}
    rows = metric_rows("privacy_card", [
        {"metric": "roc_violations", "value": 2, **test},
        {"metric": "roc_inside_dp_region", "value": False, **test},
        {"metric": "roc_inside_dp_region", "value": None, **test},
    ], dataset="d", run="r")
    assert list(rows.columns[:6]) == ["dataset", "run", "family", "metric", "value", "value_bool"]
    assert rows["value"].dtype == np.float64 and str(rows["value_bool"].dtype) == "boolean"
    assert rows["value"].iloc[0] == 2.0 and pd.isna(rows["value_bool"].iloc[0])
    assert math.isnan(rows["value"].iloc[1]) and rows["value_bool"].iloc[1] == False  # noqa: E712
    assert pd.isna(rows["value_bool"].iloc[2]) and math.isnan(rows["value"].iloc[2])
    with pytest.raises(ValueError, match="roc_inside_dp_region is a flag"):
        metric_rows("privacy_card", [{"metric": "roc_inside_dp_region", "value": 1.0, **test}], dataset="d", run="r")
    with pytest.raises(ValueError, match="roc_violations is numeric"):
        metric_rows("privacy_card", [{"metric": "roc_violations", "value": True, **test}], dataset="d", run="r")


def test_writer_checks_the_run_key_against_the_family_level():
    with pytest.raises(ValueError, match="'profile' is dataset-level"):
        metric_rows("profile", [], dataset="adult", run="r")
    with pytest.raises(ValueError, match="'mia' is run-level"):
        metric_rows("mia", [], dataset="adult")
    with pytest.raises(ValueError, match="already carry key column"):
        metric_rows("mia", pd.DataFrame({"metric": ["train_accuracy"], "value": [1.0], "run": ["r"]}),
                    dataset="d", run="r")


# ------------------------------------------------------------- the declarations


def test_no_metric_is_declared_twice_and_every_family_is_known():
    names = [m.name for m in METRICS]
    assert len(names) == len(set(names))
    assert {m.family for m in METRICS} == set(FAMILIES)
    with pytest.raises(ValueError, match="'attack_auc' is declared twice"):
        vocabulary._index([*METRICS, Metric("epsilon_star", "attack_auc", "x", "Another meaning.", "fraction",
                                            "measurement")])


def test_declarations_refuse_baked_kinds_and_units():
    with pytest.raises(ValueError, match="kind 'metric' is not one of"):
        Metric("mia", "x", "x", "A thing.", "fraction", "metric")
    with pytest.raises(ValueError, match="unit"):
        Metric("mia", "x", "x", "A thing.", "percent", "measurement")
    with pytest.raises(ValueError, match="one sentence"):
        Metric("mia", "x", "x", "A thing. Another thing.", "fraction", "measurement")
    with pytest.raises(ValueError, match="key or value columns"):
        Metric("mia", "x", "x", "A thing.", "fraction", "measurement", ("value",))


def test_no_declared_name_bakes_in_a_parameter_or_an_eps_prefix():
    for m in METRICS:
        assert not m.name.startswith("eps_") and "_eps_" not in m.name, m.name
        assert not any(token.isdigit() for token in m.name.split("_")), m.name  # _0_001, _q50
        assert not m.name.endswith(("_x", "_X")), m.name


def test_old_names_are_refused_when_the_table_is_checked():
    old = pd.DataFrame({"dataset": ["d"], "run": ["r"], "family": ["epsilon_star"], "metric": ["eps_star"],
                        "value": [1.0], "value_bool": pd.array([None], dtype="boolean")})
    with pytest.raises(ValueError, match="'eps_star' of family 'epsilon_star' is not declared"):
        check_metric_table(old)
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['value_bool'\]"):
        check_metric_table(old.drop(columns="value_bool"))


def test_mechanisms_are_declared_once():
    from dpaudit import config
    from dpaudit.audit import linear_audit as canary_linear
    from dpaudit.contract import mechanisms
    from dpaudit.plots import landscape, privacy_utility
    from dpaudit.training import linear, params

    assert config.MECHANISMS is mechanisms.MECHANISMS and params.MECHANISMS is mechanisms.MECHANISMS
    assert config.LINEAR_MECHANISMS is mechanisms.LINEAR_MECHANISMS is linear.LINEAR_MECHANISMS
    assert canary_linear.MECHANISMS is mechanisms.LINEAR_MECHANISMS
    assert privacy_utility.MECHANISM_LABELS is landscape.MECHANISM_LABELS is mechanisms.MECHANISM_LABELS
    # the labels name every grid mechanism and a model trained elsewhere (issue 44), no grid mechanism
    from dpaudit.contract.external import EXTERNAL

    assert set(mechanisms.MECHANISM_LABELS) - {EXTERNAL} == set(mechanisms.MECHANISMS) == set(config.MECHANISM_COLUMNS)
    assert set(mechanisms.MECHANISM_SHORT_LABELS) == set(mechanisms.MECHANISM_LABELS)
    assert EXTERNAL not in mechanisms.MECHANISMS
    assert not hasattr(vocabulary, "MECHANISMS")  # the vocabulary holds metrics only


# ----------------------------------------------- every family's real producer


def test_mia_rows_are_declared():
    from dpaudit.metrics.mia import mia_metrics

    rows = mia_metrics(_outputs(), members_split="train", nonmembers_split="holdout", utility_split="test",
                       delta=1e-5, accountant_epsilon=2.0, seed=0)
    written = metric_rows("mia", rows, dataset="d", run="r")
    # the verdict against the accountant is the reference-model attacks' (tests/unit/test_attack_rows.py)
    assert set(written["metric"]) == _declared_names("mia") - {"epsilon_lower_bound_exceeds_accountant"}
    assert set(written["attack"].dropna()) == {"loss"}


def test_epsilon_star_rows_are_declared():
    from dpaudit.metrics.epsilon_star import epsilon_star_run_metrics

    rows = epsilon_star_run_metrics(_outputs(), members_split="train", nonmembers_split="holdout",
                                    utility_split="test", classes=2, delta=1e-3, grid_size=2_000,
                                    bootstrap={"resamples": 10, "seed": 0, "grid_size": 1_000},
                                    goodness_of_fit={"n_samples": 50, "repeats": 2, "alpha": 0.05, "seed": 0},
                                    null={"permutations": 20, "seed": 0})
    written = metric_rows("epsilon_star", rows, dataset="d", run="r")
    assert set(written["metric"]) == _declared_names("epsilon_star")


def test_identifiability_rows_are_declared():
    from dpaudit.metrics.identifiability import run_identifiability

    dpsgd = {"mechanism": "dpsgd", "epsilon": 2.0, "delta": 1e-5, "accountant": "rdp", "sampling": "poisson",
             "neighbouring_relation": "add_or_remove_one", "noise_multiplier": 1.1, "steps": 10,
             "sampling_probability": 1.0}
    baseline = {"mechanism": "baseline", "epsilon": math.inf, "delta": None}
    pure = {"mechanism": "output_perturbation", "epsilon": 1.0, "delta": 0.0, "accountant": "pure"}
    for train in (dpsgd, baseline, pure):
        written = metric_rows("identifiability", run_identifiability(train), dataset="d", run="r")
        assert set(written["metric"]) == _declared_names("identifiability")


def test_pmp_rows_of_a_run_without_dpsgd_noise_are_declared():
    # The DP-SGD path (Recipes A, B, C) is checked against the vocabulary in test_pmp.py.
    from dpaudit.metrics.pmp.run import pmp_run_metrics

    examples = pd.DataFrame({"example_id": np.arange(4), "split": ["train", "train", "holdout", "test"],
                             "label": [0, 1, 0, 1]})
    rows, _ = pmp_run_metrics(examples, SPLITS, {"mechanism": "baseline", "epsilon": math.inf, "delta": None},
                              gradients_path="absent.parquet", options={}, log=logging.getLogger("test"))
    written = metric_rows("pmp", rows, dataset="d", run="r")
    assert set(written["metric"]) <= _declared_names("pmp") and len(written)


def test_privacy_card_rows_are_declared_and_take_the_attack_from_metrics_mia(tmp_path):
    from dpaudit.metrics.mia import mia_metrics, roc_auc, roc_curve, tpr_at_fpr
    from dpaudit.report.cards import build_privacy_card

    outputs = _outputs(seed=1)
    mia = mia_metrics(outputs, members_split="train", nonmembers_split="holdout", utility_split="test",
                      delta=1e-5, accountant_epsilon=8.0, seed=0)
    train = {"dataset": "d", "run": "r", "mechanism": "dpsgd", "epsilon": 8.0, "delta": 1e-5,
             "accountant": "rdp", "neighbouring_relation": "add_or_remove_one", "sampling": "poisson"}
    page, rows = build_privacy_card(outputs, mia, train, {"splits": SPLITS}, tmp_path / "card.png",
                                    fail_on_violation=False)
    written = metric_rows("privacy_card", rows, dataset="d", run="r")
    assert set(written["metric"]) == _declared_names("privacy_card")
    bounds = written[written["metric"] == "tpr_bound_at_fpr"].set_index("fpr_target")["value"]
    # TPR ≤ e^ε·FPR + δ and TNR ≤ e^ε·FNR + δ, i.e. TPR ≤ 1 − e^−ε(1 − δ − FPR): the second binds at ε = 8
    for fpr in (0.001, 0.01):
        oracle = min(math.exp(8.0) * fpr + 1e-5, 1 - math.exp(-8.0) * (1 - 1e-5 - fpr))
        assert bounds[fpr] == pytest.approx(oracle, rel=1e-12)
    # the card's measured attack is metrics.mia's (one ROC, one TPR-at-FPR rule, one AUC)
    roc = roc_curve(outputs.loc[outputs["split"] == "train", "loss_ce"],
                    outputs.loc[outputs["split"] == "holdout", "loss_ce"])
    assert f"attack AUC</th><td>{roc_auc(roc):.4g}<" in page
    assert f"attack TPR at FPR 0.01</th><td>{tpr_at_fpr(roc, [0.01])[0.01].tpr:.4g}<" in page
    assert written.loc[written["metric"] == "roc_inside_dp_region", "value_bool"].item() == True  # noqa: E712
    # a run that did not train says so at the top of its card, in red (issue 26)
    from dpaudit.report.banner import DID_NOT_TRAIN

    assert DID_NOT_TRAIN not in page
    broken, _ = build_privacy_card(outputs, mia, {**train, "loss_diverged": True, "loss_divergence_reason": "x > y"},
                                   {"splits": SPLITS}, tmp_path / "card2.png", fail_on_violation=False)
    body = broken.split("<body>", 1)[1]
    assert body.startswith("<div class='did-not-train'") and DID_NOT_TRAIN in body and "x &gt; y" in body


def test_profile_rows_are_declared_with_the_view_as_a_column():
    from dpaudit.profile.study import typical_artifacts

    rng = np.random.default_rng(4)
    shifts = rng.normal(size=(30, 2)) * 1e-3
    worst = pd.DataFrame({"row_id": np.arange(1, 31), "Delta_0": shifts[:, 0], "Delta_1": shifts[:, 1],
                          "delta_norm": np.linalg.norm(shifts, axis=1)})
    out = typical_artifacts(worst, view_name="adult_two", dataset="adult", n=30, lam=0.5,
                            log10_epsilons=[-1, 0, 1, 2], draws=5, seed=0)
    metrics = out["metrics"]
    assert set(metrics["metric"]) == _declared_names("profile")
    assert set(metrics["dataset"]) == {"adult"} and set(metrics["view"]) == {"adult_two"}
    assert metrics["run"].isna().all()
    assert metrics.loc[metrics["metric"] == "delta_max", "y_max_row_id"].item() == out["thresholds"]["y_max_row_id"]
    check_metric_table(metrics)


# ------------------------------------------------------- the table and the docs


def test_metrics_table_carries_its_schema_version(tmp_path):
    rows = metric_rows("mia", [{"metric": "train_accuracy", "value": 0.75}], dataset="d", run="r")
    path = tmp_path / "metrics.parquet"
    write_metric_table(path, rows)
    metadata = pq.read_schema(path).metadata
    assert metadata[SCHEMA_VERSION_KEY] == str(SCHEMA_VERSION).encode() and b"pandas" in metadata
    assert read_schema_version(path) == SCHEMA_VERSION
    from dpaudit.io import read_parquet, write_parquet

    pd.testing.assert_frame_equal(read_parquet(path), rows)
    write_parquet(tmp_path / "plain.parquet", rows)
    assert read_schema_version(tmp_path / "plain.parquet") is None


def test_docs_metrics_md_is_the_rendered_vocabulary():
    committed = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
    from dpaudit.docs_gen import render_metrics_markdown

    assert committed == render_metrics_markdown(), (
        "docs/metrics.md differs from the vocabulary: run "
        "`PYTHONPATH=src .venv/bin/python -m dpaudit.docs_gen`")
    for m in METRICS:
        assert f"| `{m.name}` | {m.kind} |" in committed


def test_runs_glossary_takes_metric_entries_from_the_vocabulary():
    from dpaudit.aggregate import RUNS_GLOSSARY, SUMMARY_METRICS, runs_glossary

    for column, where in SUMMARY_METRICS.items():
        declared(where["family"], where["metric"])  # every summary column reads a declared metric
        assert RUNS_GLOSSARY[column][2].startswith(declared(where["family"], where["metric"]).meaning)
    assert runs_glossary(["tpr_at_fpr_0.05"])["tpr_at_fpr_0.05"][2].endswith("at most 0.05.")


def test_expit_of_the_card_bound_oracle():
    # closed form of max_attack_accuracy_bound at δ = 0: expit(ε)
    from dpaudit.dp.card import privacy_card

    assert privacy_card("r", 1.5, 0.0).row["max_attack_accuracy_bound"] == pytest.approx(expit(1.5), rel=1e-12)
