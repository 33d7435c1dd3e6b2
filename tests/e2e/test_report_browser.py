"""The tiny run's report.html opened in headless Chromium, as a reader would.

Finds every result category the rules declare, opens one privacy card and one
table, and fails on any console error or uncaught exception. Screenshots stay in
the test's temporary folder (pytest keeps the last runs' folders).
"""

import json
import re
import time

import pytest

from tests.e2e.browser import Browser

# make test's xdist workers (--dist loadgroup): every test of the shared fixture on one worker
pytestmark = pytest.mark.xdist_group("tiny_run")

CLICK_BY_TEXT = """(() => {{
  const link = [...document.querySelectorAll('#app a')].find(a => a.innerText.trim() === {text});
  if (!link) return false;
  link.click();
  return true;
}})()"""
OPEN_RESULT = "app.setView({{content: 'html', contentPath: results[{key}].data_uri, resultPath: {key}}}); true"


def _declared_categories(project, workdir) -> set[str]:
    """Report categories of the rules that ran in this run (a disabled family's rules write no log)."""
    ran = {path.name.removesuffix(".log") for path in (workdir / "logs").iterdir()}
    categories = set()
    for path in (project / "rules").glob("*.smk"):
        for block in re.split(r"^rule ", path.read_text(), flags=re.MULTILINE)[1:]:
            name = block.split(":", 1)[0].strip()
            if name in ran:
                categories |= set(re.findall(r'(?<!sub)category="([^"]+)"', block))
    return categories


def _open_in_iframe(browser, key: str, what: str) -> tuple[str, int]:
    """Open one report result as its view button does; return the iframe's visible text and context."""
    before = set(browser.frame_contexts().values())
    browser.evaluate(OPEN_RESULT.format(key=json.dumps(key)))
    browser.wait_for("document.querySelector('iframe') !== null", f"the {what} iframe")

    def iframe_text():
        for context in set(browser.frame_contexts().values()) - before:
            try:
                text = browser.evaluate("document.readyState === 'complete' && document.body.innerText", context)
            except RuntimeError:
                continue  # a context that has gone away
            if text:
                return text, context
        browser.send("Runtime.evaluate", {"expression": "1"})  # pump pending events
        return "", None

    deadline = time.monotonic() + browser.timeout
    while time.monotonic() < deadline:
        text, context = iframe_text()
        if text:
            return text, context
        time.sleep(0.3)
    raise AssertionError(f"the {what} iframe showed no text")


def test_report_in_headless_chromium(tiny_run, tmp_path):
    report = tiny_run["workdir"] / "results" / "report.html"
    browser = Browser(tmp_path / "chromium-profile")
    shots = tmp_path / "screenshots"
    shots.mkdir()
    try:
        browser.open(report.as_uri())
        browser.wait_for("typeof categories !== 'undefined' && document.querySelector('#app').innerText.length > 0",
                         "the report app to render")
        browser.screenshot(shots / "01_start.png")

        declared = _declared_categories(tiny_run["project"], tiny_run["workdir"])
        assert len(declared) >= 7, declared
        in_page = set(browser.evaluate("Object.keys(categories)"))
        assert declared <= in_page, f"categories missing from the report: {sorted(declared - in_page)}"
        sidebar = browser.evaluate("document.querySelector('#app').innerText")
        for category in declared:
            assert category in sidebar, f"category {category!r} not shown in the report's menu"

        assert browser.evaluate(CLICK_BY_TEXT.format(text=json.dumps("Privacy cards")))
        # two datasets (the tiny run's synthetic data and its table, issue 25): the category
        # lists its subcategories, one per dataset, before the cards
        browser.wait_for("document.querySelector('#app').innerText.includes('tiny_table')",
                         "the Privacy cards category to list its datasets")
        assert browser.evaluate(CLICK_BY_TEXT.format(text=json.dumps("synthetic")))
        browser.wait_for("document.querySelector('#app').innerText.includes('DP-SGD')",
                         "the Privacy cards category to list its cards by short label")
        browser.screenshot(shots / "02_privacy_cards.png")
        listed = browser.evaluate("document.querySelector('#app').innerText")
        assert "mechanism~" not in listed, "cards are listed under raw run strings, not short labels"

        keys = browser.evaluate("Object.keys(results)")
        card = next(k for k in keys if "/cards/" in k or k.startswith("results/cards/"))
        card_text, _ = _open_in_iframe(browser, card, "privacy card")
        assert "ε" in card_text and "δ" in card_text, card_text[:500]
        browser.screenshot(shots / "03_card.png")

        table = next(k for k in keys if k.endswith("runs.html"))
        table_text, context = _open_in_iframe(browser, table, "runs table")
        assert "synthetic" in table_text, table_text[:500]
        # itables turned it into a DataTable; clicking a header sorts it
        browser.wait_for("document.querySelector('table.dataTable thead th') !== null",
                         "the runs table to become interactive", context)
        # itables sorts from the header's order icon (the title text stays selectable)
        browser.evaluate("document.querySelector('thead th .dt-column-order').click(); true", context)
        browser.wait_for("document.querySelector('th.dt-ordering-asc, th.dt-ordering-desc') !== null",
                         "the runs table to sort by its first column", context)
        assert "<NA>" not in table_text and "Glossary" in table_text
        browser.screenshot(shots / "04_runs_table.png")

        assert browser.errors == [], "console errors in the report:\n" + "\n".join(browser.errors)
    finally:
        browser.close()
    print(f"screenshots in {shots}")
