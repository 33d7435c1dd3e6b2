"""Per-example losses from pre-activation logits, in float64 (numpy only).

``loss_logit`` is the attack score of Negoescu et al. (Negoescu et al. 2023, footnote 1):
ℓ = log(1 − p_y) − log p_y = logsumexp_{j≠y} z_j − z_y, computed from logits so it
stays finite when p_y rounds to 1 (where log(1 − p_y) would be −inf).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special


def _logsumexp(z: np.ndarray) -> np.ndarray:
    m = np.max(z, axis=1)
    # Rows that are all -inf (only possible for the masked "other classes") stay -inf.
    safe = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return safe + np.log(np.sum(np.exp(z - safe[:, None]), axis=1))


def per_example_losses(
    logits: np.ndarray, labels: np.ndarray, example_ids: np.ndarray
) -> dict[str, np.ndarray]:
    """Return ``loss_ce``, ``loss_logit``, ``p_true`` (float64) and ``correct`` (bool).

    ``logits`` is N×K (K ≥ 2, softmax model); NaN/inf logits raise ValueError
    naming the example ids, since every downstream metric would silently absorb them.
    """
    z = np.asarray(logits, dtype=np.float64)
    y = np.asarray(labels)
    ids = np.asarray(example_ids)
    if z.ndim != 2 or z.shape[1] < 2:
        raise ValueError(f"logits must be N x K with K >= 2, got shape {z.shape}")
    n, k = z.shape
    if y.shape != (n,) or ids.shape != (n,):
        raise ValueError(f"labels {y.shape} and example_ids {ids.shape} must have shape ({n},)")
    if not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"labels must be integers, got dtype {y.dtype}")
    if n and (y.min() < 0 or y.max() >= k):
        raise ValueError(f"labels must lie in [0, {k}), got range [{y.min()}, {y.max()}]")
    bad = ~np.isfinite(z).all(axis=1)
    if bad.any():
        shown = ids[bad][:20].tolist()
        raise ValueError(
            f"non-finite logits for {int(bad.sum())} example(s), example_id: {shown}"
            + (" ..." if bad.sum() > 20 else "")
        )
    rows = np.arange(n)
    z_true = z[rows, y]
    others = z.copy()
    others[rows, y] = -np.inf
    lse_other = _logsumexp(others)
    loss_logit = lse_other - z_true
    # CE = logsumexp_j z_j − z_y = log(1 + e^ℓ); via logaddexp it keeps the tiny CE
    # of confident examples (log-sum-exp over all classes rounds it to exactly 0).
    loss_ce = np.logaddexp(0.0, loss_logit)
    p_true = np.exp(-loss_ce)
    correct = np.argmax(z, axis=1) == y
    return {
        "loss_ce": loss_ce,
        "loss_logit": loss_logit,
        "p_true": p_true,
        "correct": correct,
    }


def logit_confidence(logits, labels, temperature: float = 1.0) -> np.ndarray:
    """φ = log p_y − log Σ_{y′≠y} p_{y′} of softmax(logits / T), from logits (float64): minus
    ``loss_logit`` at T = 1, the signal of the reference-model attacks (``dpaudit.metrics.attacks``).

    ``logits`` [..., n, C] (any leading axes, e.g. K models), ``labels`` [n] ints.
    Computed as z_y − logsumexp_{y′≠y} z_{y′}: exact at p_y = 1 − 1e-12 and beyond,
    where forming p_y first would round φ to +inf.
    """
    z = np.asarray(logits, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    if z.ndim < 2 or z.shape[-1] < 2:
        raise ValueError(f"logits must be [..., n, C] with C >= 2, got shape {z.shape}")
    if labels.shape != z.shape[-2:-1]:
        raise ValueError(f"labels must have shape {z.shape[-2:-1]}, got {labels.shape}")
    if np.any((labels < 0) | (labels >= z.shape[-1])):
        raise ValueError("labels must lie in 0..C-1")
    temperature = float(temperature)
    if not (temperature > 0 and math.isfinite(temperature)):
        raise ValueError(f"temperature must be finite and > 0, got {temperature}")
    z = z / temperature
    at = np.broadcast_to(labels[:, None], z.shape[:-1] + (1,))
    true = np.take_along_axis(z, at, axis=-1)[..., 0]
    others = z.copy()
    np.put_along_axis(others, at, -np.inf, axis=-1)
    return true - special.logsumexp(others, axis=-1)


def losses_from_probabilities(probs: np.ndarray, labels: np.ndarray, example_ids: np.ndarray) -> dict[str, np.ndarray]:
    """``per_example_losses``' columns from class probabilities (a model trained elsewhere, issue 44).

    ``loss_ce`` = −log p_y and ``loss_logit`` = log Σ_{j≠y} p_j − log p_y (the same ℓ as from
    logits, taken from the other classes' mass so it stays finite when p_y rounds to 1); a zero
    probability of the label (an infinite loss) raises ValueError naming the example ids.
    """
    p = np.asarray(probs, dtype=np.float64)
    y = np.asarray(labels, dtype=np.int64)
    ids = np.asarray(example_ids)
    rows = np.arange(p.shape[0])
    p_true = p[rows, y]
    zero = p_true <= 0
    if zero.any():
        raise ValueError(f"probability 0 of the label for {int(zero.sum())} example(s), example_id: "
                         f"{ids[zero][:20].tolist()} (an infinite loss); write logits instead")
    others = p.sum(axis=1) - p_true
    with np.errstate(divide="ignore"):
        loss_logit = np.log(np.maximum(others, 0.0)) - np.log(p_true)
    return {"loss_ce": -np.log(p_true), "loss_logit": loss_logit, "p_true": p_true,
            "correct": np.argmax(p, axis=1) == y}


def losses_from_loss(loss: np.ndarray, correct: np.ndarray) -> dict[str, np.ndarray]:
    """``per_example_losses``' columns from the cross-entropy alone (issue 44): p_y = e^(−loss) and
    ``loss_logit`` = log(e^loss − 1), the ℓ with log(1 + e^ℓ) = loss; ``correct`` is given."""
    loss = np.asarray(loss, dtype=np.float64)
    with np.errstate(divide="ignore"):
        loss_logit = np.log(np.expm1(loss))
    return {"loss_ce": loss, "loss_logit": loss_logit, "p_true": np.exp(-loss), "correct": np.asarray(correct, bool)}
