"""How pages and figures name a run's model architecture, and when (issue 46).

A grid may train several architectures on one dataset (``model``: mlp, cnn, a user's
``keras:package.module:function``). Where a dataset's runs have more than one, every place that
lists or draws models (the overview, the ladders, the privacy–utility figure, the dossier's
title) adds the architecture to the model's name, else two models read "DP-SGD · ε = 1 · seed 0"
alike; with one architecture the names stay as they were. The runs table always has a model
column. The linear mechanisms have no ``model`` (NA): their mechanism names them.
"""

from __future__ import annotations

import pandas as pd

__all__ = ["KERAS_PREFIX", "architecture_label", "shown_architectures"]

KERAS_PREFIX = "keras:"


def architecture_label(model) -> str | None:
    """The short name of a ``model`` value (None for NA): mlp, cnn, or keras:function for a user's
    builder (its module path dropped; the runs table and the run name keep the whole value)."""
    if model is None or model is pd.NA or (isinstance(model, float) and model != model):
        return None
    model = str(model)
    if model.startswith(KERAS_PREFIX):
        return KERAS_PREFIX + model.rsplit(":", 1)[-1]
    return model


def shown_architectures(runs: pd.DataFrame) -> pd.Series:
    """Per row of ``runs`` (columns dataset and model, one row per run or more), the architecture's
    label where the row's dataset has runs of more than one architecture, else NA."""
    if "model" not in runs.columns or runs.empty:
        return pd.Series(pd.NA, index=runs.index, dtype="string")
    labels = runs["model"].map(architecture_label).astype("string")
    kinds = labels.groupby(runs["dataset"].astype("string")).transform("nunique")
    return labels.where(kinds.gt(1).to_numpy(bool), pd.NA).astype("string")
