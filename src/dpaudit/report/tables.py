"""Interactive report tables: itables (DataTables) in offline mode, with a glossary.

The DataTables bundle is inlined in the page (no network when the report is
opened). Every number is shown with 4 significant digits, +inf as ∞, a missing
value as "—"; sorting uses the full float value. Column headers are readable
names; the glossary under the table says what each one means and its unit.
"""

from __future__ import annotations

import html
from collections.abc import Mapping

import pandas as pd

MISSING = "—"
# DataTables render hook: display text only; sorting and filtering keep the float.
_FLOAT_RENDER = (
    "function (data, type) { if (type !== 'display' && type !== 'filter') return data;"
    " if (data === null || data === undefined || Number.isNaN(data)) return '" + MISSING + "';"
    " if (data === Infinity) return '∞'; if (data === -Infinity) return '−∞';"
    " return String(Number(Number(data).toPrecision(4))); }"
)
PAGE_STYLE = (
    "body{font:13px sans-serif;margin:0.8em}table.dataTable td,table.dataTable th{white-space:nowrap}"
    "table.glossary{border-collapse:collapse;margin-top:1em}table.glossary td,table.glossary th{"
    "text-align:left;vertical-align:top;padding:2px 10px 2px 0;border-bottom:1px solid #eee}"
    "td.wrap{white-space:normal;min-width:24em}"
)


def display_frame(frame: pd.DataFrame, columns: Mapping[str, tuple[str, str, str]]) -> pd.DataFrame:
    """Keep and rename the glossary's columns (in its order); numbers as float64, text with "—" for missing."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"table lacks the glossary column(s) {missing}")
    shown = frame[list(columns)].copy()
    for column in shown.columns:
        if pd.api.types.is_bool_dtype(shown[column]):
            shown[column] = shown[column].map({True: "yes", False: "no"}).astype("object").fillna(MISSING)
        elif pd.api.types.is_numeric_dtype(shown[column]):
            shown[column] = shown[column].astype("float64")
        else:
            shown[column] = shown[column].astype("object").where(shown[column].notna(), MISSING).astype(str)
    return shown.rename(columns={c: header for c, (header, _, _) in columns.items()})


def glossary_html(columns: Mapping[str, tuple[str, str, str]]) -> str:
    rows = "".join(
        f"<tr><th>{html.escape(header)}</th><td><code>{html.escape(name)}</code></td><td>{html.escape(unit)}</td>"
        f"<td>{html.escape(meaning)}</td></tr>"
        for name, (header, unit, meaning) in columns.items()
    )
    return ("<h4>Glossary</h4><table class='glossary'><tr><th>column</th><th>name in the Parquet table</th>"
            f"<th>unit</th><th>meaning</th></tr>{rows}</table>")


def interactive_table(frame: pd.DataFrame, columns: Mapping[str, tuple[str, str, str]], *, table_id: str) -> str:
    """One sortable, filterable table (HTML fragment; its page needs ``offline_bundle()``)."""
    from itables import to_html_datatable

    shown = display_frame(frame, columns)
    floats = [i for i, c in enumerate(shown.columns) if shown[c].dtype.kind == "f"]
    defs = [{"render": _javascript(_FLOAT_RENDER), "targets": floats}] if floats else []
    return to_html_datatable(
        shown, connected=False, display_logo_when_loading=False, showIndex=False, table_id=table_id,
        format_floats_in_python=False, columnDefs=defs, column_filters="footer", maxBytes=0, scrollX=True,
        lengthMenu=[10, 25, 100, -1], pageLength=25, classes="display compact cell-border",
        layout={"topStart": "pageLength", "topEnd": "search", "bottomStart": "info", "bottomEnd": "paging"},
    )


def _javascript(code: str):
    from itables import JavascriptFunction

    return JavascriptFunction(code)


def offline_bundle() -> str:
    """The DataTables bundle inlined, for ``dpaudit.report.pages.page(..., head=...)`` (works offline)."""
    from itables import options
    from itables.javascript import generate_init_offline_itables_html

    return generate_init_offline_itables_html(options.dt_bundle)
