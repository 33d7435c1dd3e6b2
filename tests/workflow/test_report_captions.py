"""Every report caption renders the way Snakemake's report renders it, without a docutils message.

Snakemake 9 (``snakemake.report.FileRecord.render``) reads the caption, appends its hyperlink
targets (``rst_links``), renders the text as a jinja2 template (``Environment(trim_blocks=True,
lstrip_blocks=True)``) with ``snakemake`` (input, output, params, wildcards, config, ...),
``categories`` and ``files``, then calls ``docutils.core.publish_parts(caption,
writer_name="html")``. Docutils reports problems (for example ``|l|``, which reStructuredText
reads as a substitution reference) as system messages on stderr and as red boxes in the report,
not as exceptions. Here the template gets StrictUndefined (an unknown config key or wildcard
fails) and docutils writes its messages at level ≥ 2 (warning) to a buffer that must stay empty.
"""

from __future__ import annotations

import io
import textwrap
from pathlib import Path
from types import SimpleNamespace

import jinja2
import pytest
import yaml
from docutils.core import publish_parts

from dpaudit.config import validate_config

ROOT = Path(__file__).resolve().parents[2]
CAPTIONS = sorted((ROOT / "workflow" / "report").glob("*.rst"))
CONFIGS = [ROOT / "config" / "config.yaml", *sorted((ROOT / "config" / "paper").glob("*.yaml"))]
# The static part of Snakemake's rst_links (the per-category and per-file targets need a real DAG).
RST_LINKS = textwrap.dedent("""

    .. _Workflow: javascript:show_panel('workflow')
    .. _Statistics: javascript:show_panel('statistics')
    """)
# Snakemake calls publish_parts(..., writer_name="html"), which Docutils ≥ 0.22 marks for removal in 2.0.
pytestmark = pytest.mark.filterwarnings("ignore:Argument \"writer_name\" will be removed:PendingDeprecationWarning")
WILDCARDS = SimpleNamespace(dataset="breast_cancer", run="dpsgd~1.0~1.0~1~1~64~0.1~0", view="bc2")


def render_caption(text: str, config: dict) -> tuple[str, str]:
    """(HTML body, docutils messages) of one caption, the Snakemake way."""
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    snakemake = SimpleNamespace(input=[], output=[], params={}, wildcards=WILDCARDS, threads=1, resources={},
                                log=[], config=config, rule="caption_test")
    rst = env.from_string(text + RST_LINKS).render(snakemake=snakemake, categories={}, files=[])
    messages = io.StringIO()
    body = publish_parts(rst, writer_name="html", settings_overrides={
        "warning_stream": messages, "report_level": 2, "halt_level": 5})["body"]
    return body, messages.getvalue()


@pytest.fixture(scope="module")
def configs():
    return {path.relative_to(ROOT).as_posix(): validate_config(yaml.safe_load(path.read_text()))
            for path in CONFIGS}


def test_there_are_captions():
    assert len(CAPTIONS) > 30


@pytest.mark.parametrize("caption", CAPTIONS, ids=lambda p: p.name)
def test_caption_renders_without_docutils_messages(caption, configs):
    for name, config in configs.items():
        body, messages = render_caption(caption.read_text(encoding="utf-8"), config)
        assert messages == "", f"{caption.name} under {name}:\n{messages}"
        assert "system-message" not in body and "problematic" not in body, (caption.name, name)
        assert body.strip(), caption.name


def test_the_check_sees_the_substitution_error():
    # The oracle of the test above: |l| as Snakemake renders it is an error, the escaped form is not.
    _, messages = render_caption("mean |l| per row", {})
    assert "Undefined substitution referenced" in messages
    body, messages = render_caption(r"mean \|l\| per row", {})
    assert messages == "" and "|l|" in body
