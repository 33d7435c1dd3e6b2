"""The tiny run's overview (issue 34) in headless Chromium: results/index.html loads without a console
error, has one row per model, sorts by verdict, links every model to an existing dossier, and
report.html opens on it. Screenshots stay in the test's temporary folder."""

import json

import pandas as pd
import pytest

from dpaudit.report.overview import HEADING, STAR_CAPTION, build_overview
from tests.e2e.browser import Browser

# make test's xdist workers (--dist loadgroup): every test of the shared fixture on one worker
pytestmark = pytest.mark.xdist_group("tiny_run")

ROWS = "[...document.querySelectorAll('#overview tbody tr')]"


def star_cells(browser) -> list[dict]:
    """Per row with an ε*, its cell's caption text, tooltip and whether the caption is drawn."""
    return browser.evaluate(
        # its own scope: another evaluation on the same page declares `i` too
        "(() => { const i = [...document.querySelectorAll('#overview thead th')].findIndex("
        "th => th.innerText.startsWith('ε*'));"
        f"return {ROWS}.map(r => r.cells[i].querySelector('.star')).filter(Boolean).map(s => {{"
        " const c = s.querySelector('.star-caption'), box = c.getBoundingClientRect();"
        " return {caption: c.innerText, title: s.title, flags: [...s.querySelectorAll('.flag')].map(f => f.innerText),"
        " visible: box.width > 0 && box.height > 0}; }); })()")


def test_the_star_cell_says_what_it_is_and_shows_its_flags(tmp_path):
    """Issue 46 without the tiny run: the unit tests' two-architecture table, rendered and opened."""
    from tests.unit.test_models_told_apart import two_architecture_table

    page = tmp_path / "index.html"
    page.write_text(build_overview(two_architecture_table()))
    browser = Browser(tmp_path / "chromium-profile", width=1280, height=900)
    try:
        browser.open(page.as_uri())
        browser.screenshot(tmp_path / "star_cells.png")
        cells = star_cells(browser)
        assert len(cells) == 2 and all(c["caption"] == STAR_CAPTION and c["visible"] for c in cells), cells
        assert all("not a bound on the mechanism's ε" in c["title"] for c in cells)
        flagged = [c for c in cells if any("outside its bootstrap interval" in f for f in c["flags"])]
        assert len(flagged) == 1 and any("bias-corrected 0 [0, 0.484]" in f for f in flagged[0]["flags"]), flagged
        assert any("at the sample's resolution" in f for c in cells for f in c["flags"])
        assert browser.errors == [], browser.errors
    finally:
        browser.close()


def test_overview_page_sorts_filters_and_links_every_dossier(tiny_run, tmp_path):
    results = tiny_run["workdir"] / "results"
    table = pd.read_parquet(results / "tables" / "metrics.parquet")
    models = table[table["run"].notna()][["dataset", "run"]].drop_duplicates()
    browser = Browser(tmp_path / "chromium-profile", width=1280, height=900)
    try:
        browser.open((results / "index.html").as_uri())
        browser.screenshot(tmp_path / "index_1280.png")
        assert browser.evaluate("document.querySelector('h1').innerText") == HEADING
        shown = browser.evaluate(f"{ROWS}.map(r => r.dataset.dataset + '/' + r.dataset.run)")
        assert sorted(shown) == sorted(f"{d}/{r}" for d, r in models.itertuples(index=False))
        # every dossier link resolves to a file the run wrote
        hrefs = browser.evaluate("[...document.querySelectorAll('a.dossier')].map(a => a.href)")
        assert len(hrefs) == len(models)
        for href in hrefs:
            assert href.startswith("file://") and (results / href.split("/results/", 1)[1]).is_file(), href
        # sorting by verdict: the rows follow the verdict column's sort keys, both ways
        column = browser.evaluate("[...document.querySelectorAll('#overview thead th')].findIndex("
                                  "th => th.innerText.startsWith('verdict'))")
        assert column >= 0
        keys = f"{ROWS}.map(r => parseFloat(r.cells[{column}].dataset.sort))"
        for direction in ("ascending", "descending"):
            browser.evaluate(f"document.querySelectorAll('#overview thead th')[{column}].querySelector('button')"
                             ".click(); true")
            order = browser.evaluate(keys)
            assert order == sorted(order, reverse=direction == "descending"), (direction, order)
            assert browser.evaluate(f"document.querySelectorAll('#overview thead th')[{column}]"
                                    ".getAttribute('aria-sort')") == direction
        # the mechanism checks (issue 32) of each row say what the metrics table holds for its released model
        checks = browser.evaluate(
            "const i = [...document.querySelectorAll('#overview thead th')].findIndex("
            "th => th.innerText.startsWith('mechanism checks'));"
            f"Object.fromEntries({ROWS}.map(r => [r.dataset.run, r.cells[i].innerText]))")
        released = table[(table["metric"] == "noise_check_passed") & (table["checked_model"] == "released")]
        for _, row in models.iterrows():
            text = checks[row["run"]]
            noise = released[released["run"] == row["run"]]
            if noise.empty:
                assert text.startswith("—") and len(text) > 2, text  # "—" with its reason
            elif pd.isna(noise["value_bool"].iloc[0]):
                assert "noise certificate —" in text, text
            else:
                assert ("passed" if noise["value_bool"].iloc[0] else "FAILED") in text, text
        assert not released.empty  # the tiny run's DP-SGD model carries its checks
        # ε* as what it is (issue 46): each model's ε* cell carries the caption, visible, and the tooltip
        assert star_cells(browser) and all(cell["caption"] == STAR_CAPTION and "not a bound on the mechanism" in
                                           cell["title"] and cell["visible"] for cell in star_cells(browser))
        # filtering by a dataset's name leaves that dataset's rows
        browser.evaluate("const f = document.getElementById('filter'); f.value = 'tiny_table';"
                         "f.dispatchEvent(new Event('input')); true")
        visible = browser.evaluate(f"{ROWS}.filter(r => !r.hidden).map(r => r.dataset.dataset)")
        assert visible and set(visible) == {"tiny_table"}
        assert browser.errors == [], browser.errors
    finally:
        browser.close()


def test_the_report_opens_on_the_overview(tiny_run, tmp_path):
    report = tiny_run["workdir"] / "results" / "report.html"
    browser = Browser(tmp_path / "chromium-profile", width=1280, height=900)
    try:
        browser.open(report.as_uri())
        browser.wait_for("document.querySelector('#dpaudit-overview') !== null", "the overview on the first view")
        browser.screenshot(tmp_path / "report_first_view.png")
        # the iframe is the first thing in the content area: its top is on screen, left of the rule graph
        box = json.loads(browser.evaluate(
            "JSON.stringify(document.querySelector('#dpaudit-overview').getBoundingClientRect())"))
        assert 0 <= box["top"] < 100 and box["width"] > 700, box
        contexts = set(browser.frame_contexts().values())
        headings = []
        for context in contexts:
            try:
                headings.append(browser.evaluate("document.querySelector('h1') && document.querySelector('h1').innerText",
                                                 context))
            except RuntimeError:
                continue
        assert HEADING in headings, headings
        # in the report's ~930 px iframe the table's last column is inside its box, not cut off
        fits = []
        for context in contexts:
            try:
                fits.append(browser.evaluate(
                    "(() => { const t = document.getElementById('overview'); if (!t) return null;"
                    " const last = t.tHead.rows[0].cells[t.tHead.rows[0].cells.length - 1].getBoundingClientRect();"
                    " return last.right <= t.parentElement.getBoundingClientRect().right + 1"
                    " && last.right <= window.innerWidth; })()", context))
            except RuntimeError:
                continue
        assert True in fits and False not in fits, fits
        assert browser.errors == [], browser.errors
    finally:
        browser.close()
