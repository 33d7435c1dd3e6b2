"""The canary family's rows of a model trained outside dpaudit (issue 44).

No audit twin can be trained, no noise certificate or accounting check read: those rows are
not applicable, with the reason ``TRAINED_OUTSIDE``. The verdict (``measured_above_promise``)
says what the audit could see: the strongest certified black-box bound against the promise,
the loss-threshold attack's Clopper–Pearson bound of the mia family (``epsilon_lower_bound``,
attack = loss, and any reference-model attack's bound among the rows given) judged with
``dpaudit.metrics.canary.rows.verdict``: above the promise when a bound exceeds it, "too weak"
when even perfect separation of the attack's evaluation counts (its ceiling,
``dpaudit.dp.hypothesis.epsilon_from_counts`` at TP = members, FP = 0, at the row's α and δ;
the split method's evaluation half, an upper bound on a Bonferroni bound's ceiling) could not
reach the promise, consistent otherwise. ``decided_by`` is ``black_box_bound`` or
``black_box_ceiling``. Without a promise (ε = ∞) there is nothing to judge: no verdict.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from dpaudit.contract.external import TRAINED_OUTSIDE
from dpaudit.contract.metrics import typed_frame

__all__ = ["outside_rows"]


def _ceiling(row: Mapping) -> float:
    from dpaudit.dp.hypothesis import epsilon_from_counts

    n_m, n_n = int(row["n_members"]), int(row["n_nonmembers"])
    return float(epsilon_from_counts(n_m, 0, n_m, n_n, delta=float(row["delta"]), alpha=float(row["alpha"])))


def outside_rows(train: Mapping, mia: pd.DataFrame) -> pd.DataFrame:
    """The canary rows of a model trained elsewhere from its record and its mia rows (module docstring)."""
    from dpaudit.metrics.canary.rows import ROW_DTYPES, verdict

    not_run = [{"metric": "noise_check_passed", "checked_model": "released", "applicable": False,
                "note": f"not applicable: {TRAINED_OUTSIDE} (the noise its training loop added was not measured)"},
               {"metric": "accounting_reproduced", "checked_model": "released", "applicable": False,
                "note": f"not applicable: {TRAINED_OUTSIDE} (its sampler's rate and steps were not counted)"}]
    claim = float(train["epsilon"])
    bounds = mia[(mia["metric"] == "epsilon_lower_bound").to_numpy(bool)]
    if not math.isfinite(claim):
        return typed_frame([*not_run, {"metric": "measured_above_promise", "applicable": False,
                                       "note": f"no verdict: {TRAINED_OUTSIDE} and no promise stated (ε = ∞)"}],
                           ROW_DTYPES)
    triples = [(float(row["value"]), _ceiling(row), claim) for _, row in bounds.iterrows()]
    outcome, decided = verdict(triples)
    decided = {"distribution_free_bound": "black_box_bound", "ceilings": "black_box_ceiling"}.get(decided, decided)
    best = max(triples, default=(math.nan, math.nan, claim))
    note = (f"{TRAINED_OUTSIDE}: no canary audit could run, so the verdict rests on the certified black-box "
            f"bound of the loss-threshold attack (largest {best[0]:.3g}, ceiling {max(t[1] for t in triples):.3g}) "
            f"against the promise ε = {claim:.4g}" if triples else
            f"{TRAINED_OUTSIDE}: no certified black-box bound to judge the promise by")
    flag = {"metric": "measured_above_promise", "value_bool": outcome == "above_promise", "verdict": outcome,
            "decided_by": decided, "checked_model": "released", "applicable": True, "claimed_epsilon": claim,
            "delta": float(train["delta"]), "ceiling_max": max((t[1] for t in triples), default=np.nan),
            "note": note}
    return typed_frame([*not_run, flag], ROW_DTYPES)
