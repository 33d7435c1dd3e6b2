"""The red "did not train" banner of a run that did not learn (issues 26, 35), and the milder
note of one that learned but is overconfident.

One wording for every page that shows one model (its privacy card, its dossier): the flag,
its reason and the note come from its train.json (``dpaudit.training.divergence``).
"""

from __future__ import annotations

import html
from collections.abc import Mapping

DID_NOT_TRAIN = "this model did not train; its privacy numbers describe a broken model"
NOTE_STYLE = "background:#fff8e1;border-left:4px solid #f9a825;padding:0.5em 0.8em;margin:0.5em 0"
BANNER_STYLE = ("color:#fff;background:#b00020;padding:0.6em 0.8em;margin:0.5em 0;font-weight:bold;"
                "border-radius:3px")


def did_not_train_banner(train: Mapping) -> str:
    """A red HTML banner when train.json flags ``loss_diverged``, else ''."""
    if not train.get("loss_diverged"):
        return ""
    reason = train.get("loss_divergence_reason") or "training loss diverged"
    lr = train.get("learning_rate")
    at = f" (learning rate {float(lr):g})" if isinstance(lr, (int, float)) else ""
    return (f"<div class='did-not-train' role='alert' style='{BANNER_STYLE}'>{html.escape(DID_NOT_TRAIN)}. "
            f"<span style='font-weight:normal'>Why: {html.escape(str(reason))}{html.escape(at)}. Lower the learning "
            "rate or train longer, and rerun before reading its privacy numbers.</span></div>")


def model_banner(train: Mapping) -> str:
    """The red banner of a model that did not train, else the note of one that trained with a
    caveat (train.json's ``training_note``), else ''."""
    banner = did_not_train_banner(train)
    if banner or not train.get("training_note"):
        return banner
    return (f"<div class='training-note' role='note' style='{NOTE_STYLE}'><b>Training note</b> (the model learned; "
            f"its privacy numbers stand): {html.escape(str(train['training_note']))}.</div>")
