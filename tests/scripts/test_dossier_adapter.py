"""The dossier job of one dataset (issue 23): every model's page and the guidance page, one process."""

import pandas as pd

from dpaudit.io import write_json, write_parquet
from tests.scripts.fake import FakeSnakemake, named, run_script
from tests.unit.test_dossier import DATASET, model_rows, run_name, table_of


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
    inputs = named(table=tmp_path / "metrics.parquet", ledger=tmp_path / "ledger.parquet",
                   info=tmp_path / "dataset.json")
    # the named lists of the rule: a train.json and an outputs table per run, no canary record
    for name, path in (("train", tmp_path / "train.json"), ("outputs", tmp_path / "outputs.parquet")):
        start = len(inputs)
        inputs.extend([str(path)] * len(runs))
        inputs._set_name(name, start, len(inputs))
    inputs._set_name("records", len(inputs), len(inputs))
    output = named(**guidance)
    start = len(output)
    output.extend(map(str, pages))
    output._set_name("pages", start, len(output))
    fake = FakeSnakemake("dossier", input=inputs, output=output, wildcards={"dataset": DATASET},
                         params={"runs": runs, "audited": [], "loss": "loss_ce", "targets": {}},
                         log=[tmp_path / "dossier.log"])
    run_script("dossier", fake)
    for run, page in zip(runs, pages, strict=True):
        text = page.read_text()
        assert f'<meta name="dpaudit-run" content="{run}">' in text and text.rstrip().endswith("</html>")
    assert guidance["guidance"].read_text().rstrip().endswith("</html>")
    assert guidance["guidance_png"].stat().st_size > 0 and guidance["guidance_pdf"].stat().st_size > 0
    log = (tmp_path / "dossier.log").read_text()
    assert log.count("dossier of") == len(runs) and "guidance written" in log
