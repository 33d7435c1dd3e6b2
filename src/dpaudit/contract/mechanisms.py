"""The training mechanisms and their display names, declared once.

``dpaudit.config`` (the grid's allowed values), ``rules/common.smk``, the training code,
the figures and the report import them from here.
"""

from __future__ import annotations

__all__ = ["LINEAR_MECHANISMS", "MECHANISMS", "MECHANISM_LABELS", "MECHANISM_SHORT_LABELS"]

# Output and objective perturbation of L2-regularized logistic regression (source
# 000, Chaudhuri et al. 2011): one exact fit, no epochs, batches or clipping.
LINEAR_MECHANISMS: tuple[str, ...] = ("output_perturbation", "objective_perturbation")
MECHANISMS: tuple[str, ...] = ("baseline", "dpsgd", *LINEAR_MECHANISMS)
# How figures and tables name each mechanism.
MECHANISM_LABELS: dict[str, str] = {
    "baseline": "non-private (ε = ∞)",
    "dpsgd": "DP-SGD",
    "output_perturbation": "output perturbation (logistic regression)",
    "objective_perturbation": "objective perturbation (logistic regression)",
    # a model trained outside dpaudit (issue 44, dpaudit.contract.external): not a grid mechanism
    "external": "trained elsewhere",
}
# Where space is short (the report's privacy-card labels).
MECHANISM_SHORT_LABELS: dict[str, str] = {
    "baseline": "baseline",
    "dpsgd": "DP-SGD",
    "output_perturbation": "output perturbation",
    "objective_perturbation": "objective perturbation",
    "external": "trained elsewhere",
}
