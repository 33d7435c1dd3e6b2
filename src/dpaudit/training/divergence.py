"""Whether a trained model learned: the "did not train" flag of train.json (issue 26).

``train_model`` (``dpaudit.training.train``) calls ``loss_divergence`` once the model is trained;
the flag and its reason reach every metric row (``dpaudit.aggregate``), the privacy card and the
dossier's banner (``dpaudit.report.banner``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["LOSS_DIVERGENCE_RATIO", "constant_predictor_loss", "divergence_reason", "loss_divergence"]

# A run "did not train" (``loss_diverged`` in train.json, with its reason and a
# warning) when (issue 26):
# - an epoch's mean training loss is non-finite (train_model refuses such a run before
#   it writes a model, so a finished run meets this rule only through another history);
# - its last epoch's mean loss exceeds LOSS_DIVERGENCE_RATIO × its first epoch's AND the
#   loss of the constant predictor of the members' class frequencies (the entropy of the
#   label frequencies, ``constant_predictor_loss``): the first epoch's mean already
#   includes the untrained model's losses (≈ ln C), so ending at twice that is worse than
#   not training, not noise, even for DP-SGD at small ε;
# - its final training loss (the released model's mean cross-entropy on the members,
#   after the last step) exceeds the constant predictor's: a model worse on its own
#   training data than predicting the class frequencies. This rule catches a one-epoch run.
LOSS_DIVERGENCE_RATIO = 2.0


def constant_predictor_loss(labels: np.ndarray, n_classes: int | None = None) -> float:
    """Mean cross-entropy (nats) of always predicting the labels' own frequencies: their entropy."""
    labels = np.asarray(labels, dtype=np.int64)
    if labels.size == 0:
        return math.nan
    counts = np.bincount(labels, minlength=int(n_classes or 0)).astype(np.float64)
    freq = counts[counts > 0] / counts.sum()
    return float(-(freq * np.log(freq)).sum())


def divergence_reason(history: list[dict[str, Any]], *, constant_loss: float | None = None,
                      final_loss: float | None = None) -> str | None:
    """Why a run did not train (the rules above), or None when it trained."""
    for record in history:
        loss = record.get("loss", math.nan)
        if record.get("examples_seen", 1) and not math.isfinite(loss):
            return f"training loss became non-finite ({loss}) at epoch {record.get('epoch', '?')}"
    losses = [record["loss"] for record in history if math.isfinite(record.get("loss", math.nan))]
    known = constant_loss is not None and math.isfinite(constant_loss)
    if len(losses) >= 2 and losses[-1] > LOSS_DIVERGENCE_RATIO * losses[0]:
        if not known:  # (a history without the labels: the ratio rule alone)
            return (f"training loss diverged: final epoch {losses[-1]:.4g} > {LOSS_DIVERGENCE_RATIO:g} x first "
                    f"epoch {losses[0]:.4g}")
        if losses[-1] > constant_loss:
            return (f"training loss diverged: final epoch {losses[-1]:.4g} > {LOSS_DIVERGENCE_RATIO:g} x first "
                    f"epoch {losses[0]:.4g} and > {constant_loss:.4g}, the loss of predicting the class frequencies")
    if final_loss is not None and not math.isfinite(final_loss):
        return f"final training loss is non-finite ({final_loss})"
    if known and final_loss is not None and final_loss > constant_loss:
        return (f"final training loss {final_loss:.4g} > {constant_loss:.4g}, the loss of predicting the class "
                "frequencies: the model fits its own training data worse than a constant")
    return None


def loss_divergence(history: list[dict[str, Any]], learning_rate: float, run: str | None = None, *,
                    constant_loss: float | None = None,
                    final_loss: float | None = None) -> tuple[bool, str | None]:
    """(diverged, warning) by ``divergence_reason``'s rules; the warning names the run and the learning rate."""
    reason = divergence_reason(history, constant_loss=constant_loss, final_loss=final_loss)
    if reason is None:
        return False, None
    label = f"run {run!r}" if run is not None else "this run"
    return True, (f"{label}: {reason} at learning_rate={learning_rate:g}; this model did not train, its privacy "
                  "metrics describe a broken model")
