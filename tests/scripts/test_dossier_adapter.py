"""The dossier job of one dataset (issue 23): every model's page and the guidance page, one process."""

import pandas as pd

from dpaudit.data.datasets import TEXT_IDS
from dpaudit.io import read_parquet, write_json, write_parquet
from tests.scripts.fake import FakeSnakemake, named, run_script
from tests.unit.test_dossier import DATASET, model_rows, run_name, table_of


def add_ladder_outputs(output, tmp_path, runs):
    """The rule's ladder outputs (issue 34): per run a PNG and Parquet, and the dataset's grid (PNG, PDF, Parquet)."""
    for name, ext in (("ladders", "png"), ("ladder_data", "parquet")):
        start = len(output)
        output.extend(str(tmp_path / f"ladder{i}.{ext}") for i in range(len(runs)))
        output._set_name(name, start, len(output))
    for name, ext in (("ladder_grid", "png"), ("ladder_grid_pdf", "pdf"), ("ladder_grid_data", "parquet")):
        output.append(str(tmp_path / f"grid.{ext}"))
        output._set_name(name, len(output) - 1)


def test_one_job_writes_every_models_dossier_and_the_guidance_page(tmp_path):
    runs = [run_name("dpsgd", 1.0, 0), run_name("dpsgd", 2.0, 0), run_name("baseline", "NA", 0)]
    table = table_of(model_rows("dpsgd", 1.0, 0), model_rows("dpsgd", 2.0, 0), model_rows("baseline", "NA", 0))
    write_parquet(tmp_path / "metrics.parquet", table)
    write_parquet(tmp_path / "ledger.parquet",
                  pd.DataFrame({"dataset": [DATASET] * 3, "run": runs, "private": [True, True, False],
                                "epsilon": [1.0, 2.0, float("inf")], "delta": [1e-5, 1e-5, 0.0]}))
    write_json(tmp_path / "dataset.json",
               {"n": 8, "d": 2, "classes": 2, "splits": {"members": "train", "nonmembers": "holdout"}})
    outputs = pd.DataFrame({"example_id": range(8), "split": ["train"] * 4 + ["holdout"] * 4,
                            "label": [0, 1] * 4, "loss_ce": [0.01, 0.2, 0.5, 0.9, 0.1, 0.3, 0.6, 1.2]})
    write_parquet(tmp_path / "outputs.parquet", outputs)
    write_json(tmp_path / "train.json", {"neighbouring_relation": "add_or_remove_one"})
    pages = [tmp_path / f"page{i}.html" for i in range(len(runs))]
    guidance = {"guidance": tmp_path / "guidance.html", "guidance_png": tmp_path / "guidance.png",
                "guidance_pdf": tmp_path / "guidance.pdf"}
    write_parquet(tmp_path / "ids.parquet", pd.DataFrame({"example_id": range(8), "id": [str(i) for i in range(8)]}))
    inputs = named(table=tmp_path / "metrics.parquet", ledger=tmp_path / "ledger.parquet",
                   info=tmp_path / "dataset.json", ids=tmp_path / "ids.parquet")
    # the named lists of the rule: a train.json and an outputs table per run, no canary record
    for name, path in (("train", tmp_path / "train.json"), ("outputs", tmp_path / "outputs.parquet")):
        start = len(inputs)
        inputs.extend([str(path)] * len(runs))
        inputs._set_name(name, start, len(inputs))
    inputs._set_name("records", len(inputs), len(inputs))
    inputs._set_name("scores", len(inputs), len(inputs))  # metrics.attacks off: no scores, no DI audit
    inputs._set_name("audit_runs", len(inputs), len(inputs))
    output = named(**guidance)
    start = len(output)
    output.extend(map(str, pages))
    output._set_name("pages", start, len(output))
    add_ladder_outputs(output, tmp_path, runs)
    fake = FakeSnakemake("dossier", input=inputs, output=output, wildcards={"dataset": DATASET},
                         params={"runs": runs, "audited": [], "attacked": [], "loss": "loss_ce", "targets": {}},
                         log=[tmp_path / "dossier.log"])
    run_script("dossier", fake)
    for run, page in zip(runs, pages, strict=True):
        text = page.read_text()
        assert f'<meta name="dpaudit-run" content="{run}">' in text and text.rstrip().endswith("</html>")
    assert guidance["guidance"].read_text().rstrip().endswith("</html>")
    assert "This is the <strong>loss ranking</strong>" in pages[0].read_text()
    assert guidance["guidance_png"].stat().st_size > 0 and guidance["guidance_pdf"].stat().st_size > 0
    log = (tmp_path / "dossier.log").read_text()
    assert f"{len(runs)} dossiers with ladders and the guidance written" in log
    # issue 34: every dossier opens with its ladder figure, written beside the others
    for i, page in enumerate(pages):
        assert page.read_text().count('<img class="ladder"') == 1
        assert (tmp_path / f"ladder{i}.png").read_bytes().startswith(b"\x89PNG")
        assert len(read_parquet(tmp_path / f"ladder{i}.parquet").query("run == @runs[@i]")) > 0
    assert (tmp_path / "grid.png").stat().st_size > 0 and (tmp_path / "grid.parquet").stat().st_size > 0
    assert (tmp_path / "grid.pdf").read_bytes().rstrip().endswith(b"%%EOF")


def test_with_attack_scores_the_dossier_ranks_by_the_strongest_attack_and_flags_the_audit_row(tmp_path):
    # issue 24: the dossier job reads the attacked runs' scores (params.attacked, input.scores) and the
    # identifiability audit's runs table (x*); unattacked runs keep the loss ranking
    runs = [run_name("dpsgd", 1.0, 0), run_name("baseline", "NA", 0)]
    attack_rows = pd.DataFrame({"dataset": DATASET, "run": runs[0], "family": "mia", "metric": "attack_auc",
                                "attack": ["loss", "lira_online", "rmia"], "value": [0.51, 0.58, 0.55],
                                "ci_lower": [0.45, 0.53, 0.5], "ci_upper": [0.57, 0.63, 0.6]})
    table = table_of(model_rows("dpsgd", 1.0, 0), model_rows("baseline", "NA", 0), attack_rows)
    write_parquet(tmp_path / "metrics.parquet", table)
    write_parquet(tmp_path / "ledger.parquet", pd.DataFrame({"dataset": [DATASET] * 2, "run": runs,
                                                             "private": [True, False], "epsilon": [1.0, float("inf")],
                                                             "delta": [1e-5, 0.0]}))
    # issue 35: a table with text ids; the ranking shows the user's own id beside example_id
    write_json(tmp_path / "dataset.json", {"n": 8, "splits": {"members": "train", "nonmembers": "holdout"},
                                           "ids": {"kind": TEXT_IDS}})
    write_parquet(tmp_path / "ids.parquet", pd.DataFrame({"example_id": range(8), "id": [f"u{i:02d}" for i in range(8)]}))
    outputs = pd.DataFrame({"example_id": range(8), "split": ["train"] * 4 + ["holdout"] * 4,
                            "label": [0, 1] * 4, "loss_ce": [0.01, 0.2, 0.5, 0.9, 0.1, 0.3, 0.6, 1.2]})
    write_parquet(tmp_path / "outputs.parquet", outputs)
    write_json(tmp_path / "train.json", {})
    scores = pd.DataFrame({"example_id": range(8), "is_member": [True] * 4 + [False] * 4, "label": [0, 1] * 4,
                           "loss": 0.0, "lira_online": [0.5, 3.0, 1.0, 2.0, 0.1, 2.5, 0.2, 0.3], "rmia": 0.5})
    write_parquet(tmp_path / "scores.parquet", scores)
    write_parquet(tmp_path / "audit_runs.parquet", pd.DataFrame({"dataset": [DATASET, "other"], "pair": "max1",
                                                                 "example_id_xstar": [3, 1], "rho": 0.5}))
    pages = [tmp_path / f"page{i}.html" for i in range(len(runs))]
    inputs = named(table=tmp_path / "metrics.parquet", ledger=tmp_path / "ledger.parquet",
                   info=tmp_path / "dataset.json", ids=tmp_path / "ids.parquet")
    for name, paths in (("train", [tmp_path / "train.json"] * 2), ("outputs", [tmp_path / "outputs.parquet"] * 2),
                        ("records", []), ("scores", [tmp_path / "scores.parquet"]),
                        ("audit_runs", [tmp_path / "audit_runs.parquet"])):
        start = len(inputs)
        inputs.extend(map(str, paths))
        inputs._set_name(name, start, len(inputs))
    output = named(guidance=tmp_path / "g.html", guidance_png=tmp_path / "g.png", guidance_pdf=tmp_path / "g.pdf")
    start = len(output)
    output.extend(map(str, pages))
    output._set_name("pages", start, len(output))
    add_ladder_outputs(output, tmp_path, runs)
    fake = FakeSnakemake("dossier", input=inputs, output=output, wildcards={"dataset": DATASET},
                         params={"runs": runs, "audited": [], "attacked": [runs[0]], "loss": "loss_ce",
                                 "targets": {}}, log=[tmp_path / "dossier.log"])
    run_script("dossier", fake)
    attacked, baseline = pages[0].read_text(), pages[1].read_text()
    assert "Ranked by <strong>LiRA online</strong>, the strongest attack" in attacked
    # example 1 (score 3.0) first, above every non-member; example 3 (2.0) below one non-member (2.5)
    assert "example 1, scores above every non-member" in attacked
    assert '<td data-h="your id">u01</td>' in attacked
    assert "<td data-h=\"also singled out by\">x* of the identifiability audit (pair max1)</td>" in attacked
    assert "loss ranking" in baseline and "x* of the identifiability audit" in baseline
    assert "1 flagged rows" in (tmp_path / "dossier.log").read_text()
