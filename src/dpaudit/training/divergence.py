"""Whether a trained model learned: the flags and notes of train.json (issues 26, 35, 46).

``train_model`` (``dpaudit.training.train``) calls ``training_verdict`` once the model is trained;
the flags, their reasons and the notes reach every metric row (``dpaudit.aggregate``), the
privacy card and the dossier's banner (``dpaudit.report.banner``), the overview and the ladders:

* ``loss_diverged`` ("did not train", the red banner): the training loss became non-finite or
  exploded;
* ``no_skill``: the held-out accuracy is not significantly above the majority-class rate, said
  as what was measured ("no skill shown above the majority rate (accuracy a vs majority m, n
  rows)"), not as a broken model: a model at 0.61 against a 0.58 majority rate on 236 rows may
  have learned all the features allow;
* ``training_note``: a model that learned but whose mean training loss sits above the constant
  predictor's (overconfident);
* ``instability_note``: a model whose training loss spiked or whose held-out accuracy fell during
  training (the released model is the last epoch's).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpaudit.dp.hypothesis import clopper_pearson_lower

__all__ = [
    "ACCURACY_DROP",
    "LOSS_DIVERGENCE_RATIO",
    "LOSS_SPIKE_RATIO",
    "MAJORITY_TEST_LEVEL",
    "MIN_DROP_ROWS",
    "constant_predictor_loss",
    "divergence_reason",
    "instability_note",
    "loss_divergence",
    "majority_rate",
    "no_skill_reason",
    "per_example_losses",
    "training_verdict",
]

# A run "did not train" (``loss_diverged`` in train.json, with its reason and a
# warning) when (issues 26, 35 and 46):
# - an epoch's mean training loss, or the released model's loss on its training data, is
#   non-finite (train_model refuses a non-finite epoch before it writes a model);
# - its last epoch's mean loss exceeds LOSS_DIVERGENCE_RATIO × its first epoch's AND the
#   loss of the constant predictor of the members' class frequencies (the entropy of the
#   label frequencies, ``constant_predictor_loss``): the first epoch's mean already
#   includes the untrained model's losses (≈ ln C), so ending at twice that is worse than
#   not training, not noise, even for DP-SGD at small ε.
# A run shows "no skill" (``no_skill``, with ``no_skill_reason`` and a warning) when its
# held-out accuracy (the utility split; the members when that split is empty) is not better
# than the majority-class rate of those rows (``majority_rate``: the share of their most
# frequent class, the best any constant prediction scores there): the one-sided exact
# binomial test at level MAJORITY_TEST_LEVEL, i.e. the one-sided Clopper-Pearson lower bound
# of the accuracy (k correct of n) is at or below that rate. This catches a model predicting
# one class, whatever its loss; it also fires on a model that learned what little the
# features allow, so it says what was measured (issue 46), not that the model is broken.
# A final training loss above the constant predictor's is NOT a flag on its own: an
# overconfident model that learned (accuracy well above the majority rate) can have a few
# rows with huge losses that lift the mean; it gets ``training_note`` instead.
LOSS_DIVERGENCE_RATIO = 2.0
MAJORITY_TEST_LEVEL = 0.05
# The instability note (issue 46; a note, not a flag): an epoch's mean training loss above
# LOSS_SPIKE_RATIO × the lowest of the epochs before it and above the constant predictor's
# loss (a rise from 0.01 to 0.04 stays noise; a rise past what predicting the class frequencies
# costs does not), or a held-out accuracy that ends ACCURACY_DROP (absolute, and at
# least MIN_DROP_ROWS rows of the split) below its best epoch's: the released model is the
# last epoch's, not the best one seen.
LOSS_SPIKE_RATIO = 3.0
ACCURACY_DROP = 0.05
MIN_DROP_ROWS = 3


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


def no_skill_reason(correct: int, n: int, majority: float, level: float = MAJORITY_TEST_LEVEL,
                    where: str = "held-out") -> str | None:
    """The no-skill words (what was measured), or None when the accuracy beats the majority rate
    at ``level`` (one-sided exact binomial test: the Clopper-Pearson lower bound)."""
    if not n or majority is None or not math.isfinite(majority):
        return None
    if clopper_pearson_lower(int(correct), int(n), level) > majority:
        return None
    return (f"no skill shown above the majority rate (accuracy {correct / n:.3g} vs majority {majority:.3g}, "
            f"{int(n)} {where} rows)")


def divergence_reason(history: list[dict[str, Any]], *, constant_loss: float | None = None,
                      final_loss: float | None = None) -> str | None:
    """Why a run did not train (a non-finite or exploding loss, the rules above), or None."""
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
    return None


def instability_note(history: list[dict[str, Any]], constant_loss: float, n_utility: int = 0) -> str | None:
    """The note of a run whose training loss spiked or whose held-out accuracy fell (the rule
    above), or None. ``history``: train.json's epochs (``loss``, ``utility_accuracy``)."""
    parts = []
    epochs = [(r.get("epoch", i + 1), float(r.get("loss", math.nan))) for i, r in enumerate(history)]
    lowest = None  # (epoch, loss) of the lowest finite loss so far
    worst = None  # (ratio, epoch, loss, (epoch, loss) before it) of the largest spike
    for epoch, loss in epochs:
        if not math.isfinite(loss):
            continue
        if lowest is not None and loss > LOSS_SPIKE_RATIO * lowest[1] and not loss <= constant_loss:
            ratio = loss / max(lowest[1], 1e-300)
            if worst is None or ratio > worst[0]:
                worst = (ratio, epoch, loss, lowest)
        if lowest is None or loss < lowest[1]:
            lowest = (epoch, loss)
    if worst is not None:
        _, epoch, loss, (before, low) = worst
        parts.append(f"the mean training loss spiked to {loss:.3g} at epoch {epoch} (from {low:.3g} at epoch "
                     f"{before}; last epoch {epochs[-1][1]:.3g})")
    accuracy = [(r.get("epoch", i + 1), float(r["utility_accuracy"])) for i, r in enumerate(history)
                if math.isfinite(float(r.get("utility_accuracy", math.nan)))]
    if len(accuracy) >= 2:
        best = max(accuracy, key=lambda item: item[1])
        drop = best[1] - accuracy[-1][1]
        if drop >= ACCURACY_DROP and drop * n_utility >= MIN_DROP_ROWS - 1e-9:
            parts.append(f"held-out accuracy fell from {best[1]:.3g} at epoch {best[0]} to {accuracy[-1][1]:.3g} at "
                         f"the last epoch ({n_utility} rows)")
    if not parts:
        return None
    return ("training was unstable: " + "; ".join(parts)
            + ": the released model is the last epoch's, not the best one seen; a lower learning rate may train "
              "it steadily")


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
    """The train.json keys of the flags, their reasons, the notes and the numbers they rest on.

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
    reason = divergence_reason(history, constant_loss=constant, final_loss=final_loss)
    diverged, warning = _warning(reason, learning_rate, run)
    skill = no_skill_reason(correct, int(labels.size), majority, level, "held-out" if held_out else "training")
    warnings = [] if warning is None else [warning]
    if skill is not None:
        label = f"run {run!r}" if run is not None else "this run"
        warnings.append(f"{label}: {skill} at learning_rate={learning_rate:g}: its held-out accuracy is not "
                        f"significantly above always predicting the most frequent class (one-sided exact binomial "
                        f"test at {level:g})")
    accuracy = correct / labels.size if labels.size else math.nan
    finite = losses[np.isfinite(losses)]
    max_loss = float(finite.max()) if finite.size else math.nan
    note = None
    if not diverged and skill is None and math.isfinite(constant) and final_loss > constant:
        median = float(np.median(finite))
        # a median below the constant predictor's loss: most rows fit, a tail of confident errors lifts the mean
        why = "because of confident errors" if median <= constant else "with most rows above it too"
        note = (f"mean training loss {final_loss:.3g} is above the constant predictor's {constant:.3g} {why} "
                f"(max loss {max_loss:.3g}, median {median:.3g}); {where} accuracy {accuracy:.3g} vs "
                f"{majority:.3g} majority: the model learned but is overconfident")
    unstable = None if diverged else instability_note(history, constant, len(utility_labels) if held_out else 0)
    return {
        "loss_diverged": diverged,
        "loss_divergence_reason": reason,
        "loss_divergence_ratio": LOSS_DIVERGENCE_RATIO,
        "no_skill": skill is not None,
        "no_skill_reason": skill,
        "final_train_loss": final_loss,
        "max_train_loss": max_loss,
        "constant_predictor_loss": constant,
        "majority_test": {"split": "utility" if held_out else "members", "accuracy": accuracy, "correct": correct,
                          "n": int(labels.size), "majority_rate": majority, "level": level,
                          "accuracy_lower_bound": (clopper_pearson_lower(correct, labels.size, level)
                                                   if labels.size else math.nan)},
        "training_note": note,
        "instability_note": unstable,
        "warnings": warnings,
    }
