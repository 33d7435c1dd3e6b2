"""Whether a trained model learned: the "did not train" flag of train.json (issues 26, 35).

``train_model`` (``dpaudit.training.train``) calls ``training_verdict`` once the model is trained;
the flag and its reason reach every metric row (``dpaudit.aggregate``), the privacy card and the
dossier's banner (``dpaudit.report.banner``); a model that learned but whose mean training loss
sits above the constant predictor's gets the milder ``training_note`` instead.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpaudit.dp.hypothesis import clopper_pearson_lower

__all__ = [
    "LOSS_DIVERGENCE_RATIO",
    "MAJORITY_TEST_LEVEL",
    "constant_predictor_loss",
    "divergence_reason",
    "loss_divergence",
    "majority_rate",
    "per_example_losses",
    "training_verdict",
]

# A run "did not train" (``loss_diverged`` in train.json, with its reason and a
# warning) when (issues 26 and 35):
# - an epoch's mean training loss, or the released model's loss on its training data, is
#   non-finite (train_model refuses a non-finite epoch before it writes a model);
# - its last epoch's mean loss exceeds LOSS_DIVERGENCE_RATIO × its first epoch's AND the
#   loss of the constant predictor of the members' class frequencies (the entropy of the
#   label frequencies, ``constant_predictor_loss``): the first epoch's mean already
#   includes the untrained model's losses (≈ ln C), so ending at twice that is worse than
#   not training, not noise, even for DP-SGD at small ε;
# - its held-out accuracy (the utility split; the members when that split is empty) is
#   not better than the majority-class rate of those rows (``majority_rate``: the share of
#   their most frequent class, the best any constant prediction scores there): the
#   one-sided exact binomial test at level MAJORITY_TEST_LEVEL, i.e. the one-sided
#   Clopper-Pearson lower bound of the accuracy (k correct of n) is at or below that rate.
#   This is the rule that catches a model predicting one class, whatever its loss.
# A final training loss above the constant predictor's is NOT a flag on its own: an
# overconfident model that learned (accuracy well above the majority rate) can have a few
# rows with huge losses that lift the mean; it gets ``training_note`` instead.
LOSS_DIVERGENCE_RATIO = 2.0
MAJORITY_TEST_LEVEL = 0.05


def constant_predictor_loss(labels: np.ndarray, n_classes: int | None = None) -> float:
    """Mean cross-entropy (nats) of always predicting the labels' own frequencies: their entropy."""
    labels = np.asarray(labels, dtype=np.int64)
    if labels.size == 0:
        return math.nan
    counts = np.bincount(labels, minlength=int(n_classes or 0)).astype(np.float64)
    freq = counts[counts > 0] / counts.sum()
    return float(-(freq * np.log(freq)).sum())


def majority_rate(labels: np.ndarray) -> float:
    """Share of the most frequent class among ``labels`` (NaN when empty)."""
    labels = np.asarray(labels, dtype=np.int64)
    if labels.size == 0:
        return math.nan
    return float(np.bincount(labels).max() / labels.size)


def per_example_losses(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Cross-entropy (nats, float64) of each row: logsumexp(z) − z_label (non-finite logits stay non-finite)."""
    z = np.asarray(logits, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    with np.errstate(invalid="ignore", over="ignore"):
        return np.logaddexp.reduce(z, axis=1) - z[np.arange(len(labels)), labels]


def _accuracy_reason(correct: int, n: int, majority: float, level: float, where: str) -> str | None:
    """The majority rule's reason, or None when the accuracy beats the majority rate at ``level``."""
    lower = clopper_pearson_lower(correct, n, level)
    if lower > majority:
        return None
    return (f"{where} accuracy {correct / n:.4g} ({correct} of {n}) is not better than the majority-class rate "
            f"{majority:.4g} (one-sided {1 - level:.0%} Clopper-Pearson lower bound {lower:.4g} <= {majority:.4g})")


def divergence_reason(history: list[dict[str, Any]], *, constant_loss: float | None = None,
                      final_loss: float | None = None, correct: int | None = None, n_scored: int | None = None,
                      majority: float | None = None, level: float = MAJORITY_TEST_LEVEL,
                      where: str = "held-out") -> str | None:
    """Why a run did not train (the rules above), or None when it trained.

    ``correct`` of ``n_scored`` rows predicted right, against ``majority`` (their majority-class
    rate), feed the accuracy rule; without them only the loss rules apply.
    """
    for record in history:
        loss = record.get("loss", math.nan)
        if record.get("examples_seen", 1) and not math.isfinite(loss):
            return f"training loss became non-finite ({loss}) at epoch {record.get('epoch', '?')}"
    if final_loss is not None and not math.isfinite(final_loss):
        return f"final training loss is non-finite ({final_loss})"
    losses = [record["loss"] for record in history if math.isfinite(record.get("loss", math.nan))]
    known = constant_loss is not None and math.isfinite(constant_loss)
    if len(losses) >= 2 and losses[-1] > LOSS_DIVERGENCE_RATIO * losses[0]:
        if not known:  # (a history without the labels: the ratio rule alone)
            return (f"training loss diverged: final epoch {losses[-1]:.4g} > {LOSS_DIVERGENCE_RATIO:g} x first "
                    f"epoch {losses[0]:.4g}")
        if losses[-1] > constant_loss:
            return (f"training loss diverged: final epoch {losses[-1]:.4g} > {LOSS_DIVERGENCE_RATIO:g} x first "
                    f"epoch {losses[0]:.4g} and > {constant_loss:.4g}, the loss of predicting the class frequencies")
    if correct is not None and n_scored and majority is not None and math.isfinite(majority):
        return _accuracy_reason(int(correct), int(n_scored), float(majority), level, where)
    return None


def loss_divergence(history: list[dict[str, Any]], learning_rate: float, run: str | None = None,
                    **rules: Any) -> tuple[bool, str | None]:
    """(diverged, warning) by ``divergence_reason``'s rules (``rules`` are its keywords); the
    warning names the run and the learning rate."""
    return _warning(divergence_reason(history, **rules), learning_rate, run)


def _warning(reason: str | None, learning_rate: float, run: str | None) -> tuple[bool, str | None]:
    if reason is None:
        return False, None
    label = f"run {run!r}" if run is not None else "this run"
    return True, (f"{label}: {reason} at learning_rate={learning_rate:g}; this model did not train, its privacy "
                  "metrics describe a broken model")


def training_verdict(history: list[dict[str, Any]], train_labels: np.ndarray, train_logits: np.ndarray,
                     utility_labels: np.ndarray, utility_logits: np.ndarray | None, *, learning_rate: float,
                     run: str | None = None, n_classes: int | None = None,
                     level: float = MAJORITY_TEST_LEVEL) -> dict[str, Any]:
    """The train.json keys of the flag, its reason, the milder note and the numbers they rest on.

    ``train_logits`` are the released model's logits on its training rows (``train_labels``),
    ``utility_logits`` on the utility split (None or empty when it has no rows: the accuracy
    rule then scores the training rows).
    """
    losses = per_example_losses(train_logits, train_labels)
    final_loss = float(np.mean(losses)) if losses.size else math.nan
    constant = constant_predictor_loss(train_labels, n_classes)
    held_out = utility_logits is not None and len(utility_labels) > 0
    labels, logits = (utility_labels, utility_logits) if held_out else (train_labels, train_logits)
    labels = np.asarray(labels, dtype=np.int64)
    correct = int(np.sum(np.argmax(np.asarray(logits), axis=1) == labels)) if labels.size else 0
    majority = majority_rate(labels)
    where = "held-out (utility split)" if held_out else "training (no utility rows)"
    reason = divergence_reason(history, constant_loss=constant, final_loss=final_loss, correct=correct,
                               n_scored=int(labels.size), majority=majority, level=level, where=where)
    diverged, warning = _warning(reason, learning_rate, run)
    accuracy = correct / labels.size if labels.size else math.nan
    finite = losses[np.isfinite(losses)]
    max_loss = float(finite.max()) if finite.size else math.nan
    note = None
    if not diverged and math.isfinite(constant) and final_loss > constant:
        median = float(np.median(finite))
        # a median below the constant predictor's loss: most rows fit, a tail of confident errors lifts the mean
        why = "because of confident errors" if median <= constant else "with most rows above it too"
        note = (f"mean training loss {final_loss:.3g} is above the constant predictor's {constant:.3g} {why} "
                f"(max loss {max_loss:.3g}, median {median:.3g}); {where} accuracy {accuracy:.3g} vs "
                f"{majority:.3g} majority: the model learned but is overconfident")
    return {
        "loss_diverged": diverged,
        "loss_divergence_reason": reason,
        "loss_divergence_ratio": LOSS_DIVERGENCE_RATIO,
        "final_train_loss": final_loss,
        "max_train_loss": max_loss,
        "constant_predictor_loss": constant,
        "majority_test": {"split": "utility" if held_out else "members", "accuracy": accuracy, "correct": correct,
                          "n": int(labels.size), "majority_rate": majority, "level": level,
                          "accuracy_lower_bound": (clopper_pearson_lower(correct, labels.size, level)
                                                   if labels.size else math.nan)},
        "training_note": note,
        "warnings": [] if warning is None else [warning],
    }
