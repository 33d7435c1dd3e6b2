"""The words that figures and pages share for the same thing: each attack's label and a run's label
from its grid values (issue 43: a page reads them here, never from plots/)."""

from __future__ import annotations

import math
from collections.abc import Mapping

from dpaudit.contract.mechanisms import MECHANISM_SHORT_LABELS

__all__ = ["ATTACK_LABELS", "run_label", "target_epsilon"]

ATTACK_LABELS = {"loss": "loss threshold", "lira_online": "LiRA online", "lira_offline": "LiRA offline",
                 "rmia": "RMIA"}


def run_label(params: Mapping) -> str:
    """'DP-SGD ε = 4 · seed 1' / 'baseline (ε = ∞) · seed 0' from a run's grid values."""
    mechanism = params["mechanism"]
    eps = params.get("target_epsilon")
    has_eps = eps is not None and not (isinstance(eps, float) and math.isnan(eps))
    text = MECHANISM_SHORT_LABELS.get(mechanism, mechanism) + (f" ε = {float(eps):g}" if has_eps else " (ε = ∞)")
    seed = params.get("seed")
    return text if seed is None else f"{text} · seed {seed}"


def target_epsilon(params: Mapping) -> float:
    """A run's target ε from its grid values: +∞ for a baseline (no DP) or no target."""
    eps = params.get("target_epsilon")
    if params["mechanism"] == "baseline" or eps is None or (isinstance(eps, float) and math.isnan(eps)):
        return math.inf
    return float(eps)
