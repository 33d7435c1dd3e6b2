"""A dossier and a guidance page, built from a small synthetic metrics table, in headless Chromium.

Needs no workflow run: the pages come from ``dpaudit.report.dossier`` and ``dpaudit.report.guidance`` on the unit tests'
table. At 1280 px (the report's width) and 400 px (a phone) the page must not scroll
horizontally and must log no console error. Screenshots stay in the test's tmp folder.
"""

import base64

import pandas as pd
import pytest

from dpaudit.plots.guidance import draw_guidance
from dpaudit.report import dossier as D
from dpaudit.report import guidance as G
from tests.e2e.browser import Browser
from tests.unit.test_dossier import DATASET, model_rows, run_name, table_of

# make test's xdist workers (--dist loadgroup): every test of the shared fixture on one worker
pytestmark = pytest.mark.xdist_group("dossier_browser")

WIDTHS = (1280, 400)


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dossiers")
    frames = [model_rows("dpsgd", eps, seed, rho_beta=0.6 + 0.1 * eps, accuracy=0.7 + 0.02 * eps)
              for eps in (1.0, 2.0) for seed in (0, 1)]
    frames.append(model_rows("dpsgd", 4.0, 0, verdict="above_promise", one_run=5.5))
    frames.append(model_rows("baseline", "NA", 0))
    table = table_of(*frames)
    outputs = pd.DataFrame({"example_id": range(8), "split": ["train"] * 4 + ["holdout"] * 4,
                            "label": [0, 1] * 4, "loss_ce": [0.01, 0.2, 0.5, 0.9, 0.1, 0.3, 0.6, 1.2]})
    splits = {"members": "train", "nonmembers": "holdout"}
    files = {}
    for name, run in (("above", run_name("dpsgd", 4.0, 0)), ("baseline", run_name("baseline", "NA", 0))):
        html = D.build_dossier(table, DATASET, run, train={"neighbouring_relation": "add_or_remove_one"},
                               outputs=outputs, splits=splits)
        files[name] = folder / f"{name}.html"
        files[name].write_text(html, encoding="utf-8")
    files["guidance"] = folder / "guidance.html"
    draw_guidance(table, DATASET, G.guidance_choices(table, DATASET), folder / "guidance.png")
    files["guidance"].write_text(G.build_guidance(table, DATASET, png=folder / "guidance.png"), encoding="utf-8")
    return files


@pytest.mark.parametrize("name", ["above", "baseline", "guidance"])
def test_dossier_pages_fit_every_width_without_console_errors(pages, name, tmp_path):
    for width in WIDTHS:
        browser = Browser(tmp_path / f"profile-{width}", width=width, height=900)
        try:
            browser.open(pages[name].as_uri())
            height = browser.evaluate("document.documentElement.scrollHeight")
            shot = browser.send("Page.captureScreenshot", {
                "format": "png", "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": width, "height": min(height, 8000), "scale": 1}})
            (tmp_path / f"{name}_{width}.png").write_bytes(base64.b64decode(shot["data"]))
            overflow = browser.evaluate(
                "document.documentElement.scrollWidth - document.documentElement.clientWidth")
            assert overflow <= 0, f"{name} scrolls horizontally by {overflow} px at {width} px"
            assert browser.evaluate("document.querySelectorAll('img').length") == (1 if name == "guidance" else 0)
            if name == "guidance":
                assert browser.evaluate("document.querySelector('img').naturalWidth") > 100
            if name == "above":
                colour = browser.evaluate("getComputedStyle(document.querySelector('.verdict')).color")
                assert colour == "rgb(170, 0, 0)", colour  # measured above the promise is red
            assert not browser.errors, browser.errors
        finally:
            browser.close()
