"""Per-dataset privacy budget ledger (Geambasu's DP lecture: every release of the grid spends budget).

Every model trained on a dataset spends budget on it, and releasing the best
model of a grid is not covered by that one run's ε. The ledger lists each run's
guarantee with its assumptions and what releasing the whole grid would cost:

- basic composition: (Σε, Σδ) over the private runs, valid whatever accountant
  produced each ε;
- RDP composition: the RDP curves of the runs are added at every order and
  converted once. A run contributes its RDP curve when it can be rebuilt: a
  Poisson-subsampled Gaussian (``noise_multiplier``, ``sampling_probability``,
  ``steps``; add/remove neighbours) or a pure ε-DP run (δ = 0). Other private
  runs are added to the RDP total by basic composition and counted in
  ``n_basic_fallback``.

Non-private runs (ε = +inf) make the release cost infinite; they are reported,
never dropped, and never stored as 0 or NaN.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpaudit.contract.external import SAME_MODEL_AS
from dpaudit.dp.composition import (
    LEDGER_RDP_ORDERS,
    rdp_poisson_subsampled_gaussian_int,
    rdp_pure_dp,
    rdp_to_dp,
)
from dpaudit.dp.hypothesis import max_advantage, max_attack_accuracy, tpr_bound

__all__ = ["Ledger", "build_ledger", "normalise_relation", "parse_float"]

RUN_COLUMNS = [
    "dataset", "run", "mechanism", "private", "epsilon", "delta", "exp_epsilon",
    "max_attack_accuracy", "max_advantage", "tpr_bound_at_fpr_0_001", "tpr_bound_at_fpr_0_01",
    "accountant", "neighbouring_relation", "unit_of_protection", "sampling",
    "noise_multiplier", "sampling_probability", "steps", "rdp_composition", "same_model_as", "counted_in_totals",
    "notes",
]

_RELATIONS = {
    "add_remove": "add_remove", "add_or_remove_one": "add_remove", "add/remove": "add_remove",
    "add-remove": "add_remove", "addremove": "add_remove", "unbounded": "add_remove",
    "replace_one": "replace_one", "replace": "replace_one", "modify": "replace_one",
    "substitute": "replace_one", "replace-one": "replace_one", "bounded": "replace_one",
}


def normalise_relation(value) -> str | None:
    """Map the many spellings of a neighbouring relation to add_remove / replace_one."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    key = str(value).strip().lower()
    if key not in _RELATIONS:
        raise ValueError(f"unknown neighbouring relation {value!r}")
    return _RELATIONS[key]


def parse_float(value, default=float("nan")) -> float:
    """float() that also reads the io.write_json encodings 'inf'/'-inf'/'nan' and None."""
    if value is None:
        return default
    return float(value)


@dataclass
class Ledger:
    """``runs``: one row per trained model (RUN_COLUMNS). ``totals``: one row per
    dataset with the cost of releasing the whole grid (see build_ledger)."""

    runs: pd.DataFrame
    totals: pd.DataFrame


def _run_row(info: Mapping, index: int) -> dict:
    mechanism = str(info.get("mechanism", "unknown"))
    eps = parse_float(info.get("epsilon"))
    if math.isnan(eps):
        if mechanism == "baseline":
            eps = math.inf
        else:
            raise ValueError(f"run {info.get('run', index)!r} ({mechanism}) has no epsilon")
    if eps < 0:
        raise ValueError(f"run {info.get('run', index)!r}: negative epsilon {eps}")
    private = math.isfinite(eps)
    delta = parse_float(info.get("delta"), default=0.0 if not private else float("nan"))
    if private and math.isnan(delta):
        raise ValueError(f"run {info.get('run', index)!r}: private run without delta")
    relation = normalise_relation(info.get("neighbouring_relation"))
    sampling = info.get("sampling")
    unit = info.get("unit_of_protection", "example" if private else None)
    notes = []
    if private and sampling is not None and str(sampling).lower() not in ("poisson", "full_batch"):
        notes.append(f"sampling '{sampling}' differs from the accountant's Poisson assumption")
    if private and unit is not None and str(unit).lower() not in ("example", "record", "event"):
        notes.append(f"unit '{unit}': example-level accounting needs group privacy for it")
    return {
        "dataset": str(info.get("dataset", "")),
        "run": str(info.get("run", info.get("run_id", index))),
        "mechanism": mechanism,
        "private": private,
        "epsilon": eps,
        "delta": delta,
        "accountant": info.get("accountant"),
        "neighbouring_relation": relation,
        "unit_of_protection": unit,
        "sampling": sampling,
        "noise_multiplier": parse_float(info.get("noise_multiplier")),
        "sampling_probability": parse_float(info.get("sampling_probability")),
        "steps": parse_float(info.get("steps")),
        SAME_MODEL_AS: info.get(SAME_MODEL_AS),
        "notes": notes,
    }


def _rdp_curve(row: dict, orders: np.ndarray):
    """RDP curve of one run, or (None, reason) when it cannot be rebuilt."""
    if not row["private"]:
        return None, "non-private"
    sigma, q, steps = row["noise_multiplier"], row["sampling_probability"], row["steps"]
    if all(math.isfinite(v) for v in (sigma, q, steps)) and sigma > 0:
        if row["neighbouring_relation"] not in (None, "add_remove"):
            return None, "subsampled-Gaussian RDP is only available for add/remove neighbours"
        return (rdp_poisson_subsampled_gaussian_int(q, sigma, orders, steps),
                "subsampled_gaussian")
    if row["delta"] == 0:
        return rdp_pure_dp(orders, row["epsilon"]), "pure_dp"
    return None, "no noise_multiplier/sampling_probability/steps"


def _join(values) -> str:
    vals = sorted({str(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))})
    return ",".join(vals)


def build_ledger(train_infos: Iterable[Mapping], delta: float | None = None,
                 conversion: str = "dp_accounting", orders=LEDGER_RDP_ORDERS,
                 dataset: str | None = None) -> Ledger:
    """Build the ledger from train-info dicts (one per trained model).

    Keys read (missing optional keys are allowed): ``dataset``, ``run`` (or
    ``run_id``), ``mechanism`` ('baseline' may omit ε), ``epsilon`` (float or the
    strings 'inf'/'nan' written by dpaudit.io), ``delta``, ``accountant``,
    ``neighbouring_relation``, ``unit_of_protection`` (default 'example'),
    ``sampling``, ``noise_multiplier``, ``sampling_probability``, ``steps``.
    ``dataset`` overrides the dicts' dataset key.

    ``delta``: the δ at which the RDP total is converted (default: the largest
    per-run δ of that dataset, so the grid is compared with one run at the same δ).
    ``conversion``: 'dp_accounting' (tight) or 'classic' (see rdp_to_dp).

    totals columns: dataset, n_runs, n_private, n_nonprivate, max_run_epsilon,
    basic_epsilon, basic_delta, rdp_epsilon, rdp_delta, rdp_order, n_rdp_composed,
    n_basic_fallback, release_all_epsilon (min of the two totals; +inf when the
    grid holds a non-private run), release_all_delta, accountants, relations,
    units, notes.
    """
    orders = np.asarray(orders, dtype=np.float64)
    rows = []
    for i, info in enumerate(train_infos):
        row = _run_row(info, i)
        if dataset is not None:
            row["dataset"] = dataset
        rows.append(row)

    _count_each_model_once(rows)
    curves = []
    for row in rows:
        curve, kind = _rdp_curve(row, orders)
        row["rdp_composition"] = kind if curve is not None else "basic_fallback" if row["private"] else "none"
        if curve is None and row["private"]:
            row["notes"].append(f"RDP total uses basic composition for this run ({kind})")
        curves.append(curve)

    runs = pd.DataFrame(rows)
    if runs.empty:
        runs = pd.DataFrame(columns=RUN_COLUMNS)
        return Ledger(runs=runs, totals=pd.DataFrame())
    eps = runs["epsilon"].to_numpy(dtype=np.float64)
    dl = runs["delta"].to_numpy(dtype=np.float64)
    runs["exp_epsilon"] = np.exp(eps)
    runs["max_attack_accuracy"] = max_attack_accuracy(eps, np.nan_to_num(dl))
    runs["max_advantage"] = max_advantage(eps, np.nan_to_num(dl))
    runs["tpr_bound_at_fpr_0_001"] = tpr_bound(1e-3, eps, np.nan_to_num(dl))
    runs["tpr_bound_at_fpr_0_01"] = tpr_bound(1e-2, eps, np.nan_to_num(dl))
    runs["notes"] = ["; ".join(n) for n in runs["notes"]]
    runs = runs[RUN_COLUMNS]

    totals = []
    for name, idx in runs.groupby("dataset", sort=True).indices.items():
        totals.append(_totals(name, runs.iloc[idx], [curves[i] for i in idx], orders, delta,
                              conversion))
    return Ledger(runs=runs.reset_index(drop=True), totals=pd.DataFrame(totals))


def _count_each_model_once(rows: list[dict]) -> None:
    """``counted_in_totals``: rows that audit one trained model (``same_model_as``, an external entry naming
    another of its dataset) are one release: the totals compose the model once, at its rows' largest ε
    (the first such row on a tie); the others are listed, not composed."""
    runs = {(row["dataset"], row["run"]) for row in rows}
    models: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        row["counted_in_totals"] = True
        other = row[SAME_MODEL_AS]
        key = (row["dataset"], other if other is not None and (row["dataset"], other) in runs else row["run"])
        models.setdefault(key, []).append(row)
    for same in models.values():
        if len(same) < 2:
            continue
        kept = max(same, key=lambda r: r["epsilon"])
        for row in same:
            if row is not kept:
                row["counted_in_totals"] = False
                row["notes"].append(f"the same trained model as {kept['run']!r} (same_model_as): the totals compose "
                                    f"it once, at ε = {kept['epsilon']:.4g}")


def _totals(name, runs: pd.DataFrame, curves, orders, delta, conversion) -> dict:
    counted = runs["counted_in_totals"].to_numpy(dtype=bool)
    n_listed = int(len(runs))
    runs = runs[counted]
    curves = [c for c, keep in zip(curves, counted, strict=True) if keep]
    private = runs["private"].to_numpy()
    eps = runs["epsilon"].to_numpy(dtype=np.float64)
    dl = runs["delta"].to_numpy(dtype=np.float64)
    n_private = int(private.sum())
    n_nonprivate = int((~private).sum())
    notes = []

    basic_eps = float(eps[private].sum()) if n_private else 0.0
    basic_delta = float(dl[private].sum()) if n_private else 0.0

    rdp_idx = [i for i, c in enumerate(curves) if c is not None]
    fb = private.copy()
    fb[rdp_idx] = False
    target = float(delta) if delta is not None else (float(dl[private].max()) if n_private else 0.0)
    rdp_eps, rdp_order = float(eps[fb].sum()), float("nan")
    rdp_delta = float(dl[fb].sum())
    if rdp_idx:
        if target <= 0:
            # Only pure-DP runs and no δ to spend: the RDP route cannot beat Σε.
            rdp_eps, rdp_order = basic_eps, float("nan")
            rdp_delta = basic_delta
        else:
            total_curve = np.sum([curves[i] for i in rdp_idx], axis=0)
            e, rdp_order = rdp_to_dp(orders, total_curve, target, conversion)
            rdp_eps += e
            rdp_delta += target
    if n_listed > len(runs):
        notes.append(f"{n_listed - len(runs)} row(s) audit a model another row already counts (same_model_as): "
                     "composed once")
    relations = set(runs.loc[private, "neighbouring_relation"].dropna())
    if len(relations) > 1:
        notes.append("runs use different neighbouring relations: each ε holds only for its own relation")
    if n_nonprivate:
        notes.append(f"{n_nonprivate} non-private run(s): releasing them costs epsilon = inf")
    release_eps = math.inf if n_nonprivate else min(basic_eps, rdp_eps)
    if n_nonprivate:
        # (∞, 0) holds for every mechanism; NaN would read as "unknown".
        release_delta = 0.0
    else:
        release_delta = basic_delta if basic_eps <= rdp_eps else rdp_delta
    return {
        "dataset": name,
        "n_runs": int(len(runs)),
        "n_private": n_private,
        "n_nonprivate": n_nonprivate,
        "max_run_epsilon": float(eps[private].max()) if n_private else float("nan"),
        "basic_epsilon": basic_eps,
        "basic_delta": basic_delta,
        "rdp_epsilon": rdp_eps,
        "rdp_delta": rdp_delta,
        "rdp_order": rdp_order,
        "n_rdp_composed": len(rdp_idx),
        "n_basic_fallback": int(fb.sum()),
        "release_all_epsilon": release_eps,
        "release_all_delta": release_delta,
        "accountants": _join(runs["accountant"]),
        "relations": _join(runs["neighbouring_relation"]),
        "units": _join(runs["unit_of_protection"]),
        "notes": "; ".join(notes),
    }
