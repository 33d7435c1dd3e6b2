"""Utility of a trained model on its utility split, as Negoescu et al. 2023 measure it.

Binary tasks: AUROC of the predicted P(y = 1) (Negoescu et al. 2023, Sec. 4); more classes:
top-1 accuracy. Computed from the per-example outputs (p_true, label, correct). The AUROC is
the project's rank statistic (``dpaudit.dp.roc``: P(positive scored higher) + ½·P(tie), exact
counts), the value sklearn's ``roc_auc_score`` computes (the tests hold it as the oracle).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpaudit.dp.roc import roc_auc, roc_curve


def utility(outputs: pd.DataFrame, *, utility_split: str, classes: int) -> dict:
    """Return {'utility': value, 'utility_kind': 'auroc'|'accuracy', 'n_utility': n}."""
    rows = outputs[outputs["split"] == utility_split]
    if rows.empty:
        raise ValueError(f"no examples in utility split {utility_split!r}")
    if classes == 2:
        label = rows["label"].to_numpy()
        p_true = rows["p_true"].to_numpy(dtype=np.float64)
        p_positive = np.where(label == 1, p_true, 1.0 - p_true)
        if np.unique(label).size < 2:
            raise ValueError(f"utility split {utility_split!r} holds one class only; AUROC undefined")
        # "member iff loss ≤ τ" with loss = −P(y = 1): the positives are the members
        auroc = roc_auc(roc_curve(-p_positive[label == 1], -p_positive[label != 1]))
        return {"utility": float(auroc), "utility_kind": "auroc",
                "n_utility": int(len(rows))}
    return {"utility": float(rows["correct"].mean()), "utility_kind": "accuracy", "n_utility": int(len(rows))}
