"""The one HTML helper of dpaudit.report: ``page()`` (every standalone page of the report),
escaping, and the shown numbers of the dossier and the guidance page.

A shown number is a ``<span class="num">`` whose data attributes carry its exact value and
where it came from (family, metric and the parameter values that select its row, or the run
column, or the per-example file), so a test can check every number on a page against the table.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

SIG = ".4g"  # significant digits of every number shown

# The dossier's and the guidance page's style (phones included).
DOSSIER_STYLE = """
*{box-sizing:border-box}
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;max-width:62em;margin:0 auto;padding:0.8em;color:#1b1b1b}
h1{font-size:1.35em;margin:0.2em 0 0.1em;overflow-wrap:anywhere}
h2{font-size:1.12em;margin:1.3em 0 0.3em;border-bottom:1px solid #ccc}
p,li{overflow-wrap:anywhere}
.sub{color:#555;margin:0 0 0.6em;overflow-wrap:anywhere}
table{border-collapse:collapse;width:100%;margin:0.4em 0}
th,td{text-align:left;vertical-align:top;padding:4px 8px;border-bottom:1px solid #e4e4e4;overflow-wrap:anywhere}
thead th{font-weight:600;background:#f4f4f4;overflow-wrap:normal}
td.v{white-space:nowrap;font-variant-numeric:tabular-nums}
.kind{display:inline-block;font-size:0.78em;color:#333;background:#eef;border-radius:3px;padding:0 4px;margin-left:4px}
.flag{color:#8a5a00}
.verdict{padding:0.5em 0.7em;border-left:4px solid #2a7;background:#effaf3;margin:0.6em 0}
.verdict.bad{border-color:#c00;background:#fdeeee;color:#a00;font-weight:600}
.verdict.weak{border-color:#c90;background:#fff8e6}
.missing{color:#666;font-style:italic}
img{max-width:100%;height:auto;display:block;margin:0.5em 0}
@media (max-width:640px){
 body{font-size:14px;padding:0.5em}
 table.dossier-rows,.dossier-rows thead,.dossier-rows tbody,.dossier-rows tr,.dossier-rows th,.dossier-rows td{display:block;width:100%}
 .dossier-rows thead{display:none}
 .dossier-rows tr{border:1px solid #ddd;border-radius:4px;margin:0 0 0.6em;padding:0.3em 0.4em}
 .dossier-rows td,.dossier-rows th{border:none;padding:2px 0}
 .dossier-rows td.v{white-space:normal;font-size:1.1em}
 th,td{padding:3px 4px}
 thead th{overflow-wrap:anywhere}
 td.v{white-space:normal}
 td[data-h]::before{content:attr(data-h) ": ";color:#666;font-size:0.85em}
}
"""


def fmt(value, spec: str = SIG) -> str:
    """How the dossier writes a number: ∞ for infinities, — for missing, a true minus sign."""
    if value is None or value is pd.NA:
        return "—"
    value = float(value)
    if math.isnan(value):
        return "—"
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    return format(value, spec).replace("-", "−")


def plain_value(value):
    """A JSON-able plain value of a table cell (numpy scalars, NA)."""
    if value is None or value is pd.NA:
        return None
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return None if math.isnan(value) else float(value)
    return str(value) if not isinstance(value, (int, str)) else value


def is_missing(value) -> bool:
    if value is None or value is pd.NA:
        return True
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def esc(text) -> str:
    return html.escape(str(text), quote=True)


def number(value, spec: str = SIG, *, scale: float = 1.0, **attrs) -> str:
    """A shown number: its text and, in data attributes, its exact value and where it came from.

    ``scale`` shows value × scale (100 for a percentage); data-value keeps the table's value.
    """
    plain = plain_value(value)
    shown = fmt(plain * scale if plain is not None else math.nan, spec)
    if plain is None:
        return f'<span class="num missing-value" data-value="nan">{shown}</span>'
    attrs = {**attrs, **({"data_scale": repr(scale)} if scale != 1.0 else {})}
    data = " ".join(f'{k.replace("_", "-")}="{esc(v)}"' for k, v in attrs.items())
    return f'<span class="num" data-value="{esc(repr(float(plain)))}" data-fmt="{spec}" {data}>{shown}</span>'


@dataclass
class Line:
    """One row of a section table."""

    what: str
    value: str
    confidence: str
    meaning: str
    kind: str = ""


def rows_table(lines: Sequence[Line]) -> str:
    if not lines:
        return ""
    head = ("<thead><tr><th>quantity</th><th>value</th><th>confidence / flag</th>"
            "<th>what it means</th></tr></thead>")
    body = "".join(
        f'<tr><th scope="row">{line.what}'
        + (f'<span class="kind">{esc(line.kind)}</span>' if line.kind else "")
        + f'</th><td class="v" data-h="value">{line.value}</td>'
        f'<td data-h="confidence / flag">{line.confidence or "—"}</td>'
        f'<td data-h="means">{line.meaning}</td></tr>'
        for line in lines)
    return f'<table class="dossier-rows">{head}<tbody>{body}</tbody></table>'


def missing_p(text: str) -> str:
    return f'<p class="missing">{esc(text)}</p>'


def page(title: str, body: str, *, style: str, meta: Mapping[str, str] | None = None, head: str = "",
         lang: str | None = None, viewport: bool = False) -> str:
    """A standalone HTML page: ``style`` inlined, ``meta`` as ``<meta name content>`` tags,
    ``head`` (a script bundle) after the style; ``lang`` and ``viewport`` for the pages read on phones."""
    metas = "".join(f'<meta name="{esc(k)}" content="{esc(v)}">' for k, v in (meta or {}).items())
    return ("<!DOCTYPE html>" + (f"<html lang='{lang}'>" if lang else "<html>") + "<head><meta charset='utf-8'>"
            + ("<meta name='viewport' content='width=device-width, initial-scale=1'>" if viewport else "")
            + f"{metas}<title>{esc(title)}</title><style>{style}</style>{head}</head><body>{body}</body></html>\n")
