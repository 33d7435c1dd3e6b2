"""The red "did not train" banner of a run whose loss broke (issues 26, 35, 46), the box of a run
that shows no skill above the majority rate, and the milder notes of one that learned with a
caveat (overconfident, or trained unstably).

One wording for every page that shows one model (its privacy card, its dossier): the flags,
their reasons and the notes come from its train.json (``dpaudit.training.divergence``).
"""

from __future__ import annotations

import html
from collections.abc import Mapping

DID_NOT_TRAIN = "this model did not train; its privacy numbers describe a broken model"
NO_SKILL = "no skill shown above the majority rate"
NOTE_STYLE = "background:#fff8e1;border-left:4px solid #f9a825;padding:0.5em 0.8em;margin:0.5em 0"
NO_SKILL_STYLE = "background:#fff3e0;border-left:4px solid #e65100;padding:0.5em 0.8em;margin:0.5em 0"
BANNER_STYLE = ("color:#fff;background:#b00020;padding:0.6em 0.8em;margin:0.5em 0;font-weight:bold;"
                "border-radius:3px")
# train.json's notes (not flags), in the order shown: (heading, what it means for the numbers)
NOTES = {"training_note": ("Training note", "the model learned; its privacy numbers stand"),
         "instability_note": ("Unstable training", "its privacy numbers describe the released, last epoch's model")}

# the train.json keys a page's banner reads (the metrics table carries a copy of each)
TRAINING_FLAGS = ("loss_diverged", "loss_divergence_reason", "no_skill", "no_skill_reason", *NOTES)


def _flag(value) -> bool:
    return value is not None and value is not False and str(value) not in ("<NA>", "nan", "False")


def _lr(train: Mapping) -> str:
    lr = train.get("learning_rate")
    return f" (learning rate {float(lr):g})" if isinstance(lr, (int, float)) else ""


def did_not_train_banner(train: Mapping) -> str:
    """A red HTML banner when train.json flags ``loss_diverged`` (a non-finite or exploding loss), else ''."""
    if not _flag(train.get("loss_diverged")):
        return ""
    reason = train.get("loss_divergence_reason") or "training loss diverged"
    return (f"<div class='did-not-train' role='alert' style='{BANNER_STYLE}'>{html.escape(DID_NOT_TRAIN)}. "
            f"<span style='font-weight:normal'>Why: {html.escape(str(reason))}{html.escape(_lr(train))}. Lower the "
            "learning rate or train longer, and rerun before reading its privacy numbers.</span></div>")


def no_skill_box(train: Mapping) -> str:
    """The box of a model whose held-out accuracy is not significantly above the majority-class
    rate (train.json's ``no_skill``), saying what was measured, else ''."""
    if not _flag(train.get("no_skill")):
        return ""
    reason = train.get("no_skill_reason") or NO_SKILL
    return (f"<div class='no-skill' role='note' style='{NO_SKILL_STYLE}'><b>{html.escape(str(reason)[:1].upper() + str(reason)[1:])}"
            f"</b>{html.escape(_lr(train))}. Its accuracy is not significantly above always predicting the most "
            "frequent class (one-sided exact binomial test at level 0.05): the model may have learned nothing, or "
            "all these features allow. Its privacy numbers describe this model; compare its accuracy with a simple "
            "model's on the same features before reading them as those of a useful one.</div>")


def note_boxes(train: Mapping) -> str:
    """The notes of a model that learned with a caveat (``NOTES``), one box each, else ''."""
    return "".join(
        f"<div class='training-note' role='note' style='{NOTE_STYLE}'><b>{heading}</b> ({aside}): "
        f"{html.escape(str(train[key]))}.</div>"
        for key, (heading, aside) in NOTES.items() if _flag(train.get(key)))


def model_banner(train: Mapping) -> str:
    """The red banner of a model that did not train, else the no-skill box and the notes of one
    that trained with a caveat, else ''."""
    return did_not_train_banner(train) or (no_skill_box(train) + note_boxes(train))
