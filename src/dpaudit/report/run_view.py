"""The metric rows of one trained model, read from ``results/tables/metrics.parquet``.

``RunView`` selects a (dataset, run)'s rows; ``Found`` is one of them with the parameter
values that select it, shown as a traceable number (``dpaudit.report.pages.number``).
Labels and kinds come from the vocabulary (``dpaudit.contract.metrics.declared``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpaudit.contract.metrics import declared
from dpaudit.report.pages import SIG, is_missing, number, plain_value

KIND_WORDS = {
    "guarantee": "guarantee", "bound": "bound", "estimate": "point estimate",
    "measurement": "measurement", "diagnostic": "diagnostic",
}
# Parameter columns that tell a family's rows of one run apart (a shown number names them).
IDENTITY = {"canary": ("threat_model", "score_kind"), "epsilon_star": ("estimator", "loss"),
            "pmp": ("method",), "mia": ("fpr_target",)}


def kind_of(family: str, metric: str) -> str:
    """How a page names the kind of a declared metric."""
    return KIND_WORDS[declared(family, metric).kind]


def label_of(family: str, metric: str) -> str:
    """The vocabulary's label of a declared metric."""
    return declared(family, metric).label


@dataclass
class Found:
    """One metric row of the run and the parameter values that select it."""

    family: str
    metric: str
    row: pd.Series
    select: dict

    @property
    def value(self) -> float:
        return float(self.row["value"])

    def get(self, column, default=None):
        value = self.row.get(column, default)
        return default if is_missing(value) else value

    def num(self, field: str = "value", spec: str = SIG, scale: float = 1.0) -> str:
        """The value (or a parameter column) as a traceable number."""
        value = self.row.get(field)
        attrs = {"data-family": self.family, "data-metric": self.metric,
                 "data-select": json.dumps(self.select, sort_keys=True)}
        if field != "value":
            attrs["data-field"] = field
        return number(value, spec, scale=scale, **attrs)


class RunView:
    """The metric rows of one (dataset, run) of the joined table, and what the table holds."""

    def __init__(self, table: pd.DataFrame, dataset: str, run: str):
        self.table = table
        self.dataset, self.run = dataset, run
        self.rows = table[(table["dataset"] == dataset) & (table["run"] == run)]
        if self.rows.empty:
            raise ValueError(f"metrics table has no rows of {dataset}/{run}")
        self.families = set(table["family"].dropna().unique())
        self.first = self.rows.iloc[0]

    def column(self, name: str):
        value = self.first.get(name)
        return None if is_missing(value) else value

    def column_num(self, name: str, spec: str = SIG) -> str:
        return number(self.first.get(name), spec, data_column=name)

    def find_all(self, family: str, metric: str, **select) -> list[Found]:
        declared(family, metric)  # a name the vocabulary does not know is a bug here
        rows = self.rows[(self.rows["family"] == family) & (self.rows["metric"] == metric)]
        for column, wanted in select.items():
            if column not in rows.columns:
                return []
            cells = rows[column]
            if isinstance(wanted, float):
                rows = rows[np.isclose(pd.to_numeric(cells, errors="coerce").astype(float), wanted)]
            else:
                rows = rows[cells.astype("string") == str(wanted)]
        out = []
        for _, row in rows.iterrows():
            chosen = {k: plain_value(v) for k, v in select.items()}
            for column in IDENTITY.get(family, ()):
                if column in row.index and not is_missing(row[column]):
                    chosen[column] = plain_value(row[column])
            out.append(Found(family, metric, row, chosen))
        return out

    def find(self, family: str, metric: str, **select) -> Found | None:
        found = self.find_all(family, metric, **select)
        return found[0] if found else None

    def family_rows(self, family: str) -> pd.DataFrame:
        return self.rows[self.rows["family"] == family]

    def missing_family(self, family: str) -> str | None:
        """Why a family has nothing to say for this model, or None when it has rows (a model trained
        elsewhere has its canary rows, the verdict, even with that family disabled: issue 44)."""
        if (self.rows["family"] == family).any():
            return None
        if family not in self.families:
            return f"not computed in this run (family {family} disabled)"
        return f"no rows for this model (family {family} wrote none for it)"
