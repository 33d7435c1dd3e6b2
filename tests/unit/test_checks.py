"""check_results (issue 26): a truncated final table or figure is named with the fix."""

import pandas as pd
import pytest

from dpaudit.checks import DamagedResultsError, check_results, file_problem
from dpaudit.io import write_bytes, write_parquet


def _figure(path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [0, 1])
    fig.savefig(path)
    fig.savefig(path.with_suffix(".pdf"))
    plt.close(fig)


@pytest.fixture
def outputs(tmp_path):
    write_parquet(tmp_path / "table.parquet", pd.DataFrame({"a": range(1000), "b": [0.5] * 1000}))
    _figure(tmp_path / "figure.png")
    write_bytes(tmp_path / "page.html", b"<!DOCTYPE html><html><body>x</body></html>\n")
    return [tmp_path / n for n in ("table.parquet", "figure.png", "figure.pdf", "page.html")]


def _cut(path, keep=0.5):
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def test_whole_outputs_pass(outputs):
    assert check_results(outputs) == {"checked": 4, "kinds": {"html": 1, "parquet": 1, "pdf": 1, "png": 1}}


@pytest.mark.parametrize(("index", "words"), [(0, "Parquet footer"), (1, "IEND"), (2, "%%EOF"), (3, "</html>")])
def test_each_kind_cut_in_half_is_named_with_the_fix(outputs, index, words):
    _cut(outputs[index])
    assert file_problem(outputs[index]) is not None and words in file_problem(outputs[index])
    with pytest.raises(DamagedResultsError) as error:
        check_results(outputs)
    message = str(error.value)
    assert f"  {outputs[index]}: " in message and words in message
    assert "delete it and run again" in message and f"rm {outputs[index]}" in message
    assert all(str(other) not in message for i, other in enumerate(outputs) if i != index)


def test_empty_missing_and_wrong_headers(outputs, tmp_path):
    outputs[0].write_bytes(b"")
    assert file_problem(outputs[0]) == "empty (0 bytes)"
    assert file_problem(tmp_path / "gone.parquet") == "missing"
    outputs[1].write_bytes(b"GIF89a" + b"\0" * 100 + b"IEND\xaeB`\x82")
    assert file_problem(outputs[1]).startswith("not a PNG")


def test_an_html_fragment_needs_its_closing_tag(tmp_path):
    fragment = tmp_path / "runs.html"
    fragment.write_text("<p>runs</p><table><tr><td>1</td></tr></table>\n")
    assert file_problem(fragment) is None
    _cut(fragment)
    assert "fragment" in file_problem(fragment)
