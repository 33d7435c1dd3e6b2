"""The canary family's rows of the mechanism measured whole (issue 32): the noise
certificate and the accounting check that training recorded (train.json of the released
model, audit.json of its twin), read, never recomputed.

* ``noise_check_passed``: the noise certificate (``dpaudit.dp.noise_certificate``) of the
  released model's training (``checked_model`` = released) and of its audit twin (twin);
* ``noise_variance_ratio_min``: the smallest measured variance over σ²C² of a variable;
* ``accounting_reproduced``: the accountant's inputs against the loop, ε recomputed by a
  second accountant (``dpaudit.dp.accounting_check``).

A failed certificate or check makes the run's verdict ``above_promise``, ``decided_by`` =
``noise_check`` or ``accounting_check`` (``dpaudit.metrics.canary.rows.verdict``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["MECHANISM_ROW_DTYPES", "failure_sentence", "frame_rows", "mechanism_failure", "mechanism_rows"]

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
            "recomputed_epsilon": (float(check["recomputed_epsilon"]) if check["recomputed_epsilon"] is not None
                                   else check.get("recomputed_epsilon_same_accountant")),
            "claimed_epsilon": float(check["published_epsilon"]), "delta": float(check["delta"]),
            "accounted_q": float(inputs["sampling_probability"]), "realized_q": float(check["realized_rate"]),
            "accounted_steps": int(inputs["steps"]), "executed_steps": int(check["steps_executed"]),
            "confidence": 1.0 - float(check["rate_alpha"]),
            "failed": "; ".join(check["problems"]) or None}


def mechanism_rows(train: Mapping[str, Any], record: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The rows of a DP-SGD or linear run from its train.json and its twin's audit.json (None: no twin)."""
    rows = _noise_rows(train.get("noise_check"), "released")
    if train.get("mechanism") == "dpsgd":  # a linear mechanism's ε is its formula's, no accountant's loop
        rows.append(_accounting_row(train.get("accounting_check"), "released"))
    if record is not None and "noise_check" in record:
        rows.extend(_noise_rows(record.get("noise_check"), "twin"))
        rows.append(_accounting_row(record.get("accounting_check"), "twin"))
    return rows


def mechanism_failure(rows: list[Mapping[str, Any]]) -> tuple[str | None, str | None]:
    """(decided_by, which model) of the first failed check that voids the claim: noise first
    (a certificate failed only by more noise than claimed does not), then accounting."""
    for metric, decided_by in (("noise_check_passed", "noise_check"), ("accounting_reproduced", "accounting_check")):
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
    metric = "noise_check_passed" if decided_by == "noise_check" else "accounting_reproduced"
    row = next(r for r in rows if r["metric"] == metric and r["checked_model"] == model)
    note = row.get("note")
    return f"{'the released model' if model == 'released' else 'its audit twin'}: {note}" if note else None

