"""The canary family's rows of the mechanism measured whole (issue 32): the noise
certificate and the accounting check that training recorded (train.json of the released
model, audit.json of its twin), read, never recomputed.

* ``noise_check_passed``: the noise certificate (``dpaudit.dp.noise_certificate``) of the
  released model's training (``checked_model`` = released) and of its audit twin (twin), or of
  a linear mechanism's many-runs releases certified in aggregate (releases);
* ``noise_variance_ratio_min``: the smallest measured variance over σ²C² of a variable;
* ``accounting_reproduced``: the accountant's inputs against the loop, ε recomputed by code
  independent of the calibration (``dpaudit.dp.accounting_check``);
* ``sampler_check_passed``: the rows every step drew against the sampler's claimed law, row
  by row (``dpaudit.dp.sampler_check``, issue 45).

A failed certificate or check makes the run's verdict ``above_promise``, ``decided_by`` =
``noise_check``, ``sampler_check`` or ``accounting_check``, in that order
(``dpaudit.metrics.canary.rows.verdict``): the sampler's law is tested at the sampler's own
rate, so a sampler that draws other rows than it claims is named as such, and an accountant
given other numbers than the loop's by the accounting check.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["MECHANISM_ORDER", "MECHANISM_ROW_DTYPES", "READS", "failure_sentence", "frame_rows", "mechanism_failure", "mechanism_rows"]

PRIVACY_KEY = "_privacy_failure"
MECHANISM_ROW_DTYPES = {
    "checked_model": "string",
    "coordinates": "Int64",
    "steps": "Int64",
    "tests": "Int64",
    "family_alpha": "float64",
    "failed": "string",
    "recomputed_epsilon": "float64",
    "accounted_q": "float64",
    "realized_q": "float64",
    "accounted_steps": "Int64",
    "executed_steps": "Int64",
}


def _noise_rows(check: Mapping[str, Any] | None, checked_model: str) -> list[dict[str, Any]]:
    from dpaudit.dp.noise_certificate import summary_sentence

    base = {"checked_model": checked_model, "applicable": True, "note": summary_sentence(check)}
    if not check or not check.get("certified"):
        return [{**base, "metric": "noise_check_passed", "applicable": False}]
    failed = "; ".join(f"{f['variable']}: {f['test']}" for f in check.get("failures", [])) or None
    keys = {**base, "coordinates": int(check["coordinates"]), "steps": int(check["steps"]),
            "tests": int(check["tests"]), "family_alpha": float(check["family_alpha"]),
            "confidence": 1.0 - float(check["family_alpha"]), "failed": failed}
    # whether a failure voids the privacy claim (too much noise alone does not): read by
    # mechanism_failure, dropped before the rows become a frame
    privacy = bool(check.get("privacy_failure", not check["passed"]))
    return [{**keys, "metric": "noise_check_passed", "value_bool": bool(check["passed"]), PRIVACY_KEY: privacy},
            {**keys, "metric": "noise_variance_ratio_min", "value": float(check["variance_ratio_min"])}]


def _accounting_row(check: Mapping[str, Any] | None, checked_model: str) -> dict[str, Any]:
    from dpaudit.dp.accounting_check import summary_sentence

    base = {"metric": "accounting_reproduced", "checked_model": checked_model, "note": summary_sentence(check)}
    if not check:
        return {**base, "applicable": False}
    inputs = check["accountant_inputs"]
    return {**base, "applicable": True, "value_bool": bool(check["reproduced"]),
            # records written before the recomputation used the run's own accountant kept the RDP value apart
            "recomputed_epsilon": (float(check["recomputed_epsilon"]) if check["recomputed_epsilon"] is not None
                                   else check.get("recomputed_epsilon_same_accountant")),
            "claimed_epsilon": float(check["published_epsilon"]), "delta": float(check["delta"]),
            "accounted_q": float(inputs["sampling_probability"]), "realized_q": float(check["realized_rate"]),
            "accounted_steps": int(inputs["steps"]), "executed_steps": int(check["steps_executed"]),
            "confidence": 1.0 - float(check["rate_alpha"]),
            "failed": "; ".join(check["problems"]) or None}


def _sampler_row(check: Mapping[str, Any] | None, checked_model: str) -> dict[str, Any]:
    from dpaudit.dp.sampler_check import summary_sentence

    base = {"metric": "sampler_check_passed", "checked_model": checked_model, "note": summary_sentence(check)}
    if not check or not check.get("checked"):
        return {**base, "applicable": False}
    failed = "; ".join(f"{f['group']}: {f['test']}" for f in check.get("failures", [])) or None
    return {**base, "applicable": True, "value_bool": bool(check["passed"]),
            "steps": int(max((g["steps"] for g in check.get("groups", [])), default=0)),
            "tests": int(check["tests"]), "family_alpha": float(check["family_alpha"]),
            "confidence": 1.0 - float(check["family_alpha"]), "failed": failed,
            PRIVACY_KEY: bool(check.get("privacy_failure", not check["passed"]))}


def mechanism_rows(train: Mapping[str, Any], record: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The rows of a DP-SGD or linear run from its train.json and its twin's audit.json (None: no twin)."""
    rows = _noise_rows(train.get("noise_check"), "released")
    if train.get("mechanism") == "dpsgd":  # a linear mechanism's ε is its formula's, no accountant's loop
        rows.append(_sampler_row(train.get("sampler_check"), "released"))
        rows.append(_accounting_row(train.get("accounting_check"), "released"))
    if record is not None and "noise_check" in record:
        if train.get("mechanism") != "dpsgd":  # a linear mechanism's many-runs releases (issue 45)
            rows.extend(_noise_rows(record.get("noise_check"), "releases"))
            return rows
        rows.extend(_noise_rows(record.get("noise_check"), "twin"))
        rows.append(_sampler_row(record.get("sampler_check"), "twin"))
        rows.append(_accounting_row(record.get("accounting_check"), "twin"))
    return rows


# What each check read of the training (issue 45), (short, long): the overview and the dossier say it.
READS = {
    "noise_check_passed": ("noise, weights, clipped sums", "the noise: the update handed to the optimizer times "
                                    "its divisor minus the clipped sum, on every coordinate at every step; the "
                                    "weights: every variable and optimizer state before every optimizer call and "
                                    "after the last, against the optimizer's rule on that update, the start "
                                    "against a build from the seed alone and the saved model file against the "
                                    "last; the clipped sum, its norms and its batch "
                                    "at 16 random steps (Σ min(1, C/‖g_i‖)·g_i on the step's tape, the rows drawn)"),
    "sampler_check_passed": ("rows", "the rows: the positions every sampler call drew, every step (and the twin's "
                                     "canary rows)"),
    "accounting_reproduced": ("accountant's inputs", "the accountant's inputs (σ, q, T, δ) against the σ, rate and "
                                                     "steps the loop ran"),
}
# (metric, decided_by) of the mechanism's checks, in the order they decide
MECHANISM_ORDER = (("noise_check_passed", "noise_check"), ("sampler_check_passed", "sampler_check"),
                   ("accounting_reproduced", "accounting_check"))


def mechanism_failure(rows: list[Mapping[str, Any]]) -> tuple[str | None, str | None]:
    """(decided_by, which model) of the first failed check that voids the claim: noise first
    (a certificate failed only by more noise than claimed does not), then the sampler (a shuffle
    sampler's permutation alone does not), then accounting."""
    for metric, decided_by in MECHANISM_ORDER:
        for row in rows:
            if row["metric"] == metric and row.get("applicable") and row.get("value_bool") is False and row.get(
                    PRIVACY_KEY, True):
                return decided_by, str(row["checked_model"])
    return None, None


def frame_rows(rows: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rows without the keys only ``mechanism_failure`` reads."""
    return [{k: v for k, v in row.items() if k != PRIVACY_KEY} for row in rows]


def failure_sentence(rows: list[Mapping[str, Any]]) -> str | None:
    """What failed, in words, for the verdict's sentence."""
    decided_by, model = mechanism_failure(rows)
    if decided_by is None:
        return None
    metric = next(m for m, d in MECHANISM_ORDER if d == decided_by)
    row = next(r for r in rows if r["metric"] == metric and r["checked_model"] == model)
    note = row.get("note")
    return f"{'the released model' if model == 'released' else 'its audit twin'}: {note}" if note else None

