"""Collect per-run metric files into the long metrics table and a per-run summary."""

from __future__ import annotations

import html
import math
import posixpath
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from dpaudit.config import GRID_COLUMNS
from dpaudit.contract import metrics as vocabulary
from dpaudit.contract import paths
from dpaudit.contract.mechanisms import MECHANISM_LABELS
from dpaudit.io import read_json, read_parquet

KEY_COLUMNS = list(vocabulary.KEY_COLUMNS)
# Families measured once per dataset rather than per trained run (no run key).
DATASET_LEVEL_FAMILIES = frozenset(f.name for f in vocabulary.FAMILIES.values() if f.level == "dataset")
TRAIN_COLUMNS = {
    "accountant_epsilon": "epsilon",
    "accountant_delta": "delta",
    "noise_multiplier": "noise_multiplier",
    "accountant": "accountant",
    "sampling": "sampling",
    # True when the run did not train (dpaudit.training.divergence.divergence_reason: a
    # non-finite loss, or a last epoch above 2x the first and the constant predictor's loss),
    # with the reason; no_skill when its held-out accuracy is not significantly above the
    # majority-class rate, with the words saying so (issue 46); the milder notes of a model
    # that learned but is overconfident or trained unstably: every metric row of the run
    # carries them, runs.html shows them.
    "loss_diverged": "loss_diverged",
    "loss_divergence_reason": "loss_divergence_reason",
    "no_skill": "no_skill",
    "no_skill_reason": "no_skill_reason",
    "training_note": "training_note",
    "instability_note": "instability_note",
}
FLOAT_TRAIN_COLUMNS = ("accountant_epsilon", "accountant_delta", "noise_multiplier")
RUN_COLUMNS = ["dataset", "run", *GRID_COLUMNS, *TRAIN_COLUMNS]
# Summary column -> the metric rows it takes its value from (column == value filters).
SUMMARY_METRICS = {
    "test_accuracy": {"family": "mia", "metric": "test_accuracy"},
    "train_accuracy": {"family": "mia", "metric": "train_accuracy"},
    "generalization_gap": {"family": "mia", "metric": "generalization_gap"},
    "attack_auc": {"family": "mia", "metric": "attack_auc", "attack": "loss"},
    "attack_advantage": {"family": "mia", "metric": "attack_advantage", "attack": "loss"},
    "epsilon_lower_bound": {"family": "mia", "metric": "epsilon_lower_bound", "attack": "loss"},
    "epsilon_star": {"family": "epsilon_star", "metric": "epsilon_star", "estimator": "parametric", "loss": "logit"},
    "epsilon_star_empirical": {"family": "epsilon_star", "metric": "epsilon_star", "estimator": "empirical",
                               "loss": "logit"},
    "landscape_utility": {"family": "epsilon_star", "metric": "landscape_utility"},
}


def _as_float(value) -> float:
    if value is None:
        return math.nan
    if isinstance(value, str):
        return float(value)  # JSON stores inf as the string "inf"
    return float(value)


def runs_frame(runs: Mapping[str, Mapping[str, Mapping]], train_infos: Mapping[tuple[str, str], Mapping]) -> pd.DataFrame:
    """One typed row per run: the grid columns plus what training recorded."""
    rows = []
    for dataset, lookup in runs.items():
        for run, params in lookup.items():
            info = train_infos[(dataset, run)]
            row = {"dataset": dataset, "run": run, **{c: params.get(c) for c in GRID_COLUMNS}}
            for column, key in TRAIN_COLUMNS.items():
                value = info.get(key)
                row[column] = _as_float(value) if column in FLOAT_TRAIN_COLUMNS else value
            row["loss_diverged"] = bool(info.get("loss_diverged", False))
            row["loss_divergence_reason"] = info.get("loss_divergence_reason") if row["loss_diverged"] else None
            row["no_skill"] = bool(info.get("no_skill", False))
            rows.append(row)
    frame = pd.DataFrame(rows)
    frame = frame.astype({**GRID_COLUMNS, "dataset": "string", "run": "string",
                          "accountant_epsilon": "float64", "accountant_delta": "float64",
                          "noise_multiplier": "float64", "accountant": "string", "sampling": "string",
                          "loss_diverged": "boolean", "loss_divergence_reason": "string", "no_skill": "boolean",
                          "no_skill_reason": "string", "training_note": "string", "instability_note": "string"})
    baseline = frame["mechanism"] == "baseline"
    if frame.loc[baseline, "accountant_epsilon"].lt(math.inf).any():
        raise ValueError("a baseline run has a finite accountant ε; non-private models must carry +inf")
    return frame


def collect_metrics(metric_files: Sequence[str | Path], runs: pd.DataFrame) -> pd.DataFrame:
    """Concatenate long metric files and join each row with its run's grid values.

    Rows of dataset-level families (``DATASET_LEVEL_FAMILIES``, e.g. the privacy profile of a
    numeric view) have no run: they keep an empty run key and empty grid columns.
    """
    if not metric_files:
        raise ValueError("no metric files to aggregate (empty grid?)")
    frames = [read_parquet(path) for path in metric_files]
    long = pd.concat(frames, ignore_index=True)
    missing = [c for c in KEY_COLUMNS if c not in long.columns]
    if missing:
        raise ValueError(f"metric files lack key column(s) {missing}")
    vocabulary.check_metric_table(long)
    dataset_level = long["family"].isin(DATASET_LEVEL_FAMILIES).to_numpy()
    for column in KEY_COLUMNS:
        absent = long[column].isna().to_numpy(copy=True)
        if column == "run":
            if (dataset_level & ~absent).any():
                raise ValueError(f"dataset-level families {sorted(DATASET_LEVEL_FAMILIES)} must not carry a run")
            absent &= ~dataset_level
        if absent.any():
            raise ValueError(f"metric rows with a missing {column!r} key")
    long = long.astype({c: "string" for c in KEY_COLUMNS})
    # A metric's own parameter may share a name with a run column (the attack's
    # split seed vs the training seed): keep both, the metric's as metric_<name>.
    clashes = (set(long.columns) & set(runs.columns)) - {"dataset", "run"}
    long = long.rename(columns={c: f"metric_{c}" for c in clashes})
    table = long.merge(runs, on=["dataset", "run"], how="left", validate="many_to_one")
    unknown = table["mechanism"].isna().to_numpy() & ~dataset_level
    if unknown.any():
        bad = table.loc[unknown, ["dataset", "run"]].drop_duplicates().to_records(index=False)
        raise ValueError(f"metric rows for runs not in the grid: {list(bad)}")
    return table


def summary_frame(table: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """One row per run with the headline numbers (used by the report and the figures)."""
    columns = []
    for name, where in SUMMARY_METRICS.items():
        if not set(where) <= set(table.columns):
            continue
        chosen = np.ones(len(table), dtype=bool)
        for column, value in where.items():
            chosen &= (table[column] == value).fillna(False).to_numpy(dtype=bool)
        picked = table.loc[chosen, ["dataset", "run", "value"]]
        if picked.duplicated(["dataset", "run"]).any():
            raise ValueError(f"summary column {name!r} matches several rows per run: {where}")
        columns.append(picked.set_index(["dataset", "run"])["value"].rename(name))
    tpr = vocabulary.loss_attack_rows(table[table["metric"] == "tpr_at_fpr"])
    if len(tpr):
        tpr_wide = tpr.pivot_table(index=["dataset", "run"], columns="fpr_target", values="value", aggfunc="first")
        tpr_wide.columns = [f"tpr_at_fpr_{target:g}" for target in tpr_wide.columns]
        columns.append(tpr_wide)
    wide = pd.concat(columns, axis=1).reset_index().astype({"dataset": "string", "run": "string"})
    summary = runs.merge(wide, on=["dataset", "run"], how="left")
    return summary.sort_values(["dataset", "mechanism", "target_epsilon", "seed"], na_position="first",
                               ignore_index=True)


def _metric_entry(column: str) -> tuple[str, str, str]:
    """Glossary triple of a summary column taken from a metric: the vocabulary's, plus the row filter."""
    where = dict(SUMMARY_METRICS[column])
    label, unit, meaning = vocabulary.glossary_entry(where.pop("family"), where.pop("metric"))
    if where:
        label = f"{label} ({', '.join(str(v) for v in where.values())})"
        meaning = f"{meaning} Rows with {', '.join(f'{k} = {v}' for k, v in where.items())}."
    return label, unit, meaning


def _tpr_entry(target: float) -> tuple[str, str, str]:
    label, unit, meaning = vocabulary.glossary_entry("mia", "tpr_at_fpr")
    return f"{label} {target:g}", unit, meaning.replace("fpr_target", f"{target:g}")


def _mechanism_meaning() -> str:
    return "; ".join(f"{name} = {label}" for name, label in MECHANISM_LABELS.items())


# Summary column -> (header, unit, meaning): the runs table shows these, in this order.
# Metric columns take their header, unit and meaning from dpaudit.contract.metrics.
RUNS_GLOSSARY = {
    "dataset": ("dataset", "—", "dataset the model was trained on"),
    "mechanism": ("mechanism", "—", _mechanism_meaning()),
    "target_epsilon": ("target ε", "nats", "ε the noise multiplier was calibrated for; the exact ε of output / "
                       "objective perturbation (— for baselines)"),
    "seed": ("seed", "—", "training seed (initialisation and batch sampling)"),
    "model": ("model", "—", "the model's architecture (training.model or the grid's model: mlp, cnn or a user's "
              "keras:package.module:function; — for the linear mechanisms)"),
    "loss_diverged": ("did not train", "yes / no", "yes: the training loss broke (it became non-finite, or its "
                      "last epoch's loss exceeded twice its first and the loss of predicting the class frequencies); "
                      "its privacy numbers describe a broken model. Type yes in the box under the column to show "
                      "only these runs"),
    "loss_divergence_reason": ("why it did not train", "—", "the rule that flagged the run, with its losses "
                               "(— for a run that trained)"),
    "no_skill": ("no skill shown", "yes / no", "yes: the held-out accuracy is not significantly above the "
                 "majority-class rate (one-sided exact binomial test at level 0.05): the model may have learned "
                 "nothing, or all its features allow"),
    "no_skill_reason": ("accuracy vs majority", "—", "the accuracy, the majority-class rate and the rows behind "
                        "“no skill shown” (— when the model shows skill)"),
    "training_note": ("training note", "—", "a model that learned but whose mean training loss is above the "
                      "constant predictor's, because of a few confident errors (— when none); not a flag"),
    "instability_note": ("unstable training", "—", "the training loss spiked or the held-out accuracy fell during "
                         "training; the released model is the last epoch's (— when neither); not a flag"),
    "accountant_epsilon": vocabulary.glossary_entry("mia", "accountant_epsilon"),
    "accountant_delta": ("δ", "probability", "δ of the guarantee (auto = 1/(n ln n), n = training examples)"),
    "accountant": ("accountant", "—", "privacy accountant (rdp = Rényi DP, pld = privacy loss distributions, "
                   "pure = the mechanism's own pure ε-DP theorem, δ = 0)"),
    "sampling": ("sampling", "—", "batch sampling the accountant assumes (poisson or shuffle)"),
    "noise_multiplier": ("noise multiplier σ", "× clip norm", "std of the Gaussian noise / clipping norm"),
    "clip_norm": ("clip norm C", "L2 norm", "per-example gradient clipping norm"),
    "microbatches": ("microbatches", "count", "clipping groups per batch (— = per-example clipping)"),
    "epochs": ("epochs", "count", "passes over the training data"),
    "batch_size": ("batch size", "examples", "expected batch size (Poisson: sampling rate × n)"),
    "learning_rate": ("learning rate", "—", "optimizer step size"),
    **{c: _metric_entry(c) for c in ("test_accuracy", "train_accuracy", "generalization_gap", "attack_auc",
                                     "attack_advantage")},
    **{f"tpr_at_fpr_{t:g}": _tpr_entry(t) for t in (0.001, 0.01, 0.1)},
    **{c: _metric_entry(c) for c in ("epsilon_lower_bound", "epsilon_star", "epsilon_star_empirical",
                                     "landscape_utility")},
    "run": ("run", "—", "the run's full parameter string (paths under results/ use it)"),
}


def runs_glossary(columns) -> dict[str, tuple[str, str, str]]:
    """The glossary of the runs table's columns, in RUNS_GLOSSARY order (other TPR targets appended)."""
    glossary = {c: v for c, v in RUNS_GLOSSARY.items() if c in columns}
    for column in columns:
        if column.startswith("tpr_at_fpr_") and column not in glossary:
            glossary[column] = _tpr_entry(float(column.removeprefix("tpr_at_fpr_")))
    return glossary


def summary_html(summary: pd.DataFrame) -> str:
    """The runs table as a sortable, filterable page (itables, offline) with a glossary."""
    from dpaudit.report import tables
    from dpaudit.report.pages import page

    glossary = runs_glossary(summary.columns)
    overview = posixpath.relpath(paths.OVERVIEW, posixpath.dirname(paths.RUNS_PAGE))
    intro = (
        f"<p style='font-size:1.1em'><strong>Which models keep their promise?</strong> The overview answers it "
        f"(verdict, strongest attack, largest certified bound, ε*, a link to each dossier): <a href='{overview}'>"
        "results/index.html</a>. This table lists every run's hyperparameters and headline numbers.</p>"
        "<h3>Runs</h3><p>One row per trained model. ε = ∞ marks non-private baselines; the attack is the "
        "loss-threshold membership-inference attack on members (training split) vs non-members (holdout split). "
        "Click a header to sort, type in the search box or in the boxes under the columns to filter. Numbers: 4 significant digits; "
        "— = not applicable or not computed.</p>"
    )
    diverged = summary[summary["loss_diverged"].fillna(False).astype(bool)] if "loss_diverged" in summary else []
    if len(diverged):
        names = ", ".join(html.escape(f"{d}/{r}") for d, r in zip(diverged["dataset"], diverged["run"], strict=True))
        intro += (f"<p style='color:#b00020;font-weight:bold'>{len(diverged)} run(s) did not train (column "
                  f"“did not train” = yes); their privacy numbers describe a broken model: {names}</p>")
    unskilled = summary[summary["no_skill"].fillna(False).astype(bool)] if "no_skill" in summary else []
    if len(unskilled):
        names = ", ".join(html.escape(f"{d}/{r}") for d, r in zip(unskilled["dataset"], unskilled["run"], strict=True))
        intro += (f"<p style='color:#e65100;font-weight:bold'>{len(unskilled)} run(s) show no skill above the "
                  f"majority rate (column “no skill shown” = yes; their held-out accuracy is not significantly above "
                  f"always predicting the most frequent class): {names}</p>")
    noted = summary[summary["training_note"].notna()] if "training_note" in summary else []
    if len(noted):
        names = ", ".join(html.escape(f"{d}/{r}") for d, r in zip(noted["dataset"], noted["run"], strict=True))
        intro += (f"<p>{len(noted)} run(s) learned but carry a training note (column “training note”: mean "
                  f"training loss above the constant predictor's because of confident errors): {names}</p>")
    unstable = summary[summary["instability_note"].notna()] if "instability_note" in summary else []
    if len(unstable):
        names = ", ".join(html.escape(f"{d}/{r}") for d, r in zip(unstable["dataset"], unstable["run"], strict=True))
        intro += (f"<p>{len(unstable)} run(s) trained unstably (column “unstable training”: a loss spike or a "
                  f"falling held-out accuracy; the released model is the last epoch's): {names}</p>")
    body = intro + tables.interactive_table(summary, glossary, table_id="dpaudit-runs") + tables.glossary_html(glossary)
    return page("dpaudit runs", body, style=tables.PAGE_STYLE, head=tables.offline_bundle())


def load_train_infos(
    paths: Sequence[str | Path], run_keys: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], dict]:
    """Read train.json files, one per (dataset, run) key of ``run_keys`` (same order).

    The keys come from the workflow (the rule's ``params``), never from the paths.
    """
    if len(paths) != len(run_keys):
        raise ValueError(f"{len(paths)} train.json files for {len(run_keys)} runs")
    return {(str(dataset), str(run)): read_json(path) for path, (dataset, run) in zip(paths, run_keys, strict=True)}


def summary_from_table(table: pd.DataFrame) -> pd.DataFrame:
    """The per-run summary rebuilt from the metrics table alone (what the figure reads)."""
    per_run = table[table["run"].notna()]
    # (a table written before a run column existed, e.g. loss_divergence_reason, lacks it)
    runs = per_run[[c for c in RUN_COLUMNS if c in per_run.columns]].drop_duplicates(["dataset", "run"],
                                                                                     ignore_index=True)
    return summary_frame(table, runs)


def flagged_model_lines(run_keys: Sequence[tuple[str, str]], train_info: str) -> list[str]:
    """One terminal line per model of ``run_keys`` whose train.json (``train_info``, a path with
    {dataset} and {run}) flags it as not trained or as showing no skill, then one per note
    (training note, instability note); runs not trained in this invocation (no train.json
    yet) are skipped."""
    flagged, noted = [], []
    for dataset, run in run_keys:
        path = Path(train_info.format(dataset=dataset, run=run))
        if not path.is_file():
            continue
        info = read_json(path)
        if info.get("loss_diverged"):
            flagged.append(f"dpaudit: DID NOT TRAIN {dataset}/{run}: {info.get('loss_divergence_reason')} "
                           f"(its privacy numbers describe a broken model; see {path})")
        else:
            if info.get("no_skill"):
                flagged.append(f"dpaudit: NO SKILL {dataset}/{run}: {info.get('no_skill_reason')} (see {path})")
            noted.extend(f"dpaudit: note {dataset}/{run}: {info[key]}" for key in ("training_note", "instability_note")
                         if info.get(key))
    return flagged + noted
