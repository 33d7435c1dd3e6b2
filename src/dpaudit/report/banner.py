"""The red "did not train" banner of a run whose training diverged (issue 26).

One wording for every page that shows one model (its privacy card, its dossier):
the flag and the reason come from its train.json (``dpaudit.training.divergence.divergence_reason``).
"""

from __future__ import annotations

import html
from collections.abc import Mapping

DID_NOT_TRAIN = "this model did not train; its privacy numbers describe a broken model"
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
