"""Models trained outside dpaudit (issue 44): the words every layer uses for them, declared once.

An ``external_models`` entry of the config is a run of its dataset whose grid values are NA
but ``mechanism = "external"``. Its job (``rules/external.smk``) writes the same per-example
outputs table and a train.json-like record as a trained run, so the families that need only
outputs read it unchanged; the families that need the training itself read ``is_external``
and write not-applicable rows with ``TRAINED_OUTSIDE`` as their reason.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["EXTERNAL", "NOT_CHECKED", "PMP_RECIPE_B", "SAME_MODEL_AS", "TRAINED_OUTSIDE", "is_external", "run_splits"]

# The mechanism of a model trained elsewhere (its grid row and its record's ``mechanism``).
EXTERNAL = "external"
# The reason of every not-applicable row of a family that needs the training itself.
TRAINED_OUTSIDE = "trained outside dpaudit"
# The config key of an entry (and the key of its record and of its budget-ledger row) naming another entry
# that audits the same trained model (its model file beside its outputs): the ledger composes the model once.
SAME_MODEL_AS = "same_model_as"


def is_external(train: Mapping) -> bool:
    """Whether a run's record (train.json) is a model trained outside dpaudit."""
    return train.get("mechanism") == EXTERNAL


def run_splits(dataset_info: Mapping, train: Mapping) -> dict[str, str]:
    """The split names of one run: the dataset's, with the run's own overrides (an external
    model without a separate utility set measures test accuracy on its held-out rows)."""
    return {**dataset_info["splits"], **(train.get("splits") or {})}


# What an audit of a model trained elsewhere cannot check: each needs the training itself (the
# dossier's section 1 lists them; the families write not-applicable rows with TRAINED_OUTSIDE).
NOT_CHECKED = (
    "the canary audit twin (gradient and input canaries inserted into a retraining)",
    "the noise certificate (the noise the training loop added, measured step by step)",
    "the accounting check (the sampler's realized rate and steps against the accountant's inputs)",
    "PMP Recipes A and B (per-example gradients at the final weights and along the training trajectory)",
)
# What stays not checked of PMP when Recipe A ran at a model file's final weights (dpaudit.external.gradients).
PMP_RECIPE_B = "PMP Recipe B (per-example gradients along the training trajectory)"
