"""A tiny real run of the whole DAG on synthetic data, in a throw-away copy of the project.

The copy has its own ``src/`` first on PYTHONPATH, so editing a library module in
it shows which jobs the code hashes in ``params:`` rerun.
"""

import base64
import re

import numpy as np
import pytest

from dpaudit.io import read_json, read_parquet
from tests.workflow.helpers import job_counts, run_counts, snakemake

# make test's xdist workers (--dist loadgroup): every test of the shared fixture on one worker
pytestmark = pytest.mark.xdist_group("tiny_run")


def test_metrics_table_has_every_run_and_no_nan_keys(tiny_run):
    table = read_parquet(tiny_run["workdir"] / "results" / "tables" / "metrics.parquet")
    assert table[["dataset", "run", "family", "metric"]].notna().all().all()
    runs = set(table["run"])
    assert len(runs) == 2
    epsilon = table.drop_duplicates("run").set_index("mechanism")["accountant_epsilon"]
    assert epsilon["baseline"] == np.inf
    assert 0 < epsilon["dpsgd"] <= 4.0 + 1e-6
    auc = table[table["metric"] == "attack_auc"]["value"]
    assert auc.between(0, 1).all()


def test_report_contains_every_run_and_the_figure(tiny_run):
    report = (tiny_run["workdir"] / "results" / "report.html").read_text()
    decoded = report
    for blob in re.findall(r"base64,([A-Za-z0-9+/=]{40,})", report):
        try:
            decoded += base64.b64decode(blob).decode("utf-8", errors="ignore")
        except ValueError:
            continue
    table = read_parquet(tiny_run["workdir"] / "results" / "tables" / "metrics.parquet")
    for run in set(table["run"]):
        assert run in decoded, f"run {run} not found in the report"
    assert "privacy_utility.png" in report
    assert (tiny_run["workdir"] / "results" / "figures" / "privacy_utility.pdf").stat().st_size > 0


def test_every_job_wrote_its_log(tiny_run):
    logs = list((tiny_run["workdir"] / "logs").rglob("*.log"))
    rules = {path.relative_to(tiny_run["workdir"] / "logs").parts[0].removesuffix(".log") for path in logs}
    assert {"prepare_dataset", "train_model", "extract_per_example", "metric_mia",
            "aggregate_metrics", "plot_privacy_utility"} <= rules
    train_logs = [p.read_text() for p in logs if "train_model" in p.parts]
    assert all("epoch 2/2" in text.lower() or "epoch 2 " in text.lower() for text in train_logs), train_logs[0][-2000:]
    # issue 37: with DPAUDIT_PROGRESS_SECONDS=0 (conftest) the DP-SGD extraction logs its progress:
    # done/total, rate and ETA of the gradients, and its PMP pairs job (issue 47) Recipe B's pilot chi sums
    extraction = [p.read_text() for p in logs if "extract_per_example" in p.parts and "dpsgd" in p.name]
    assert extraction and all(re.search(r"per-example gradients: \d+/\d+ rows \(\d+%\), .* rows/s, ETA ", text)
                              for text in extraction)
    pairs = [p.read_text() for p in logs if "pmp_pairs" in p.parts]
    assert len(pairs) == 1 and "dpsgd" in str([p for p in logs if "pmp_pairs" in p.parts][0])
    assert re.search(r"Recipe B pilot chi sums: \d+/\d+ blocks", pairs[0]), pairs[0][-2000:]
    # every run's log closes with its kernel peak (issue 47)
    assert all(re.search(r"peak resident memory \d+ MB \(kernel VmHWM\)", p.read_text().splitlines()[-1])
               for p in logs if "train_model" in p.parts or "metric_mia" in p.parts)


def test_library_change_reruns_exactly_the_affected_jobs(tiny_run):
    module = tiny_run["project"] / "src" / "dpaudit" / "metrics" / "mia.py"
    original = module.read_text()
    module.write_text(original + "\n# a change that only the metric_mia code hash sees\n")
    try:
        result = snakemake(tiny_run["workdir"], "-n", "--configfile", str(tiny_run["config"]),
                           env=tiny_run["env"], root=tiny_run["project"])
    finally:
        module.write_text(original)
    # metric_mia's code changed; privacy_card reads its output and reaches the same module;
    # budget_ledger's adapter reaches it too (dpaudit.report.cards imports metrics.mia), which
    # the hand-kept module list of earlier versions missed; everything downstream of the
    # metrics table follows. Training, extraction, ε* do not rerun.
    # metric_canary reaches it through the many-runs bound (dpaudit.metrics.canary.many_runs),
    # not the audit twin: canary_scores does not rerun; the dossiers read the metrics table.
    # The table dataset (one baseline run) adds its metric_mia, card, canary row, dossier and figures.
    # Each dataset's dossiers and guidance page are one job since issue 23 (was "dossier": 3, a job
    # per model, and "dossier_guidance": 2): one dossier_<dataset> job per dataset.
    # Counted per run (issue 36: a batched job counts once per run it holds): 3 runs in 2 batches.
    assert run_counts(result.stdout) == {
        "metric_mia": 3, "privacy_card": 3, "budget_ledger": 1, "aggregate_metrics": 1,
        "plot_privacy_utility": 1, "plot_epsilon_star_landscape": 2, "plot_audit": 2,
        "plot_model_figures": 2, "metric_canary": 3, "plot_canary": 1, "dossier_synthetic": 1,
        "dossier_tiny_table": 1,
        # issue 34: the overview reads the metrics table (and the dossier jobs' ladder figures)
        "overview": 1,
        "check_results": 1, "all": 1,
    }
    # The run was parsed in a fork of the tests' Snakemake server, whose children share one hash
    # seed; a parse in fresh interpreters under other seeds must find the same params, inputs and
    # code hashes (no set's iteration order in them): nothing to do.
    for seed in ("0", "1"):
        unchanged = snakemake(tiny_run["workdir"], "-n", "--configfile", str(tiny_run["config"]),
                              env={**tiny_run["env"], "PYTHONHASHSEED": seed}, root=tiny_run["project"],
                              fresh_interpreter=True)
        assert job_counts(unchanged.stdout) == {}, (seed, unchanged.stdout[-3000:])


def test_every_model_has_a_card_inside_its_dp_region(tiny_run):
    # Geambasu's DP lecture (hypothesis-testing reading): a measured attack outside the DP region means a bug or a wrong assumption;
    # the privacy_card job fails loudly in that case, and every card here records it.
    table = read_parquet(tiny_run["workdir"] / "results" / "tables" / "metrics.parquet")
    inside = table[(table["family"] == "privacy_card") & (table["metric"] == "roc_inside_dp_region")]
    assert len(inside) == 3 and (inside["value_bool"] == True).all() and inside["value"].isna().all()  # noqa: E712
    cards = list((tiny_run["workdir"] / "results" / "cards").rglob("*.html"))
    assert len(cards) == 3 and all("data:image/png;base64," in c.read_text() for c in cards)
    ledger = (tiny_run["workdir"] / "results" / "tables" / "budget_ledger.html").read_text()
    assert "release_all_epsilon" in ledger


def test_pmp_rows_for_every_run_with_the_recipe_pool(tiny_run):
    # Lowy et al. 2024: the DP-SGD run gets Recipes A, B and C; the baseline is not applicable.
    table = read_parquet(tiny_run["workdir"] / "results" / "tables" / "metrics.parquet")
    pmp = table[table["family"] == "pmp"]
    assert set(pmp["run"]) == set(table["run"])
    single = pmp["quantile"].isna() & (pmp["neighbouring_relation"].fillna("replace_one") == "replace_one")
    dp = pmp[(pmp["mechanism"] == "dpsgd") & single].set_index(["method", "metric"])["value"]
    for method in ("gauss_single_step", "dpsgd_clt"):
        assert 0 <= dp[(method, "epsilon_pmp")] <= dp[(method, "epsilon_global")]
    assert dp[("empirical_lira", "empirical_epsilon_lower_bound")] >= 0  # 4 reference models: computed (weak) bound
    base = pmp[pmp["mechanism"] == "baseline"]
    assert (base["status"] == "not_applicable").all() and base["value"].isna().all()
    bound = pmp[(pmp["metric"] == "empirical_epsilon_lower_bound") & pmp["quantile"].isna()]
    assert bound["n_reference_models"].dropna().tolist() == [4]
    pools = list((tiny_run["workdir"] / "results" / "attacks").rglob("reference_outputs.parquet"))
    assert len(pools) == 1 and "mechanism~dpsgd_" in str(pools[0])  # the DP-SGD recipe's pool only
    assert read_parquet(pools[0])["model"].nunique() == 4
    assert (tiny_run["workdir"] / "results" / "tables" / "pmp_runs.html").stat().st_size > 0


def test_canary_rows_ladder_and_figures_for_the_dp_run(tiny_run):
    # Issue 17: the DP-SGD run's audit twin gives white- and black-box rows with ceilings and a
    # verdict; the baseline gets a not-applicable row; the card shows the ladder.
    results = tiny_run["workdir"] / "results"
    table = read_parquet(results / "tables" / "metrics.parquet")
    canary = table[table["family"] == "canary"]
    dp = canary[canary["mechanism"] == "dpsgd"]
    assert {"epsilon_gdp_estimate", "epsilon_lb_one_run", "epsilon_lb_one_run_fdp", "measured_above_promise"} <= set(
        dp["metric"])
    assert set(dp["threat_model"].dropna()) == {"white_box", "black_box"}
    bounds = dp[dp["metric"].str.startswith("epsilon_lb")]
    assert (bounds["value"] <= bounds["ceiling"] + 1e-9).all() and bounds["ceiling"].notna().all()
    verdict = dp[dp["metric"] == "measured_above_promise"]
    assert len(verdict) == 1 and verdict["verdict"].iloc[0] in ("consistent", "too_weak")
    base = canary[canary["mechanism"] == "baseline"]
    assert len(base) == 2 and not base["applicable"].any()  # the synthetic and the table baseline
    scores = read_parquet(next((results / "canary").rglob("scores.parquet")))
    assert {"canary_id", "included", "score", "threat_model"} <= set(scores.columns)
    for kind in ("guesses", "tradeoff"):
        assert (results / "figures" / f"canary_{kind}_synthetic.png").stat().st_size > 0
    cards = [c.read_text() for c in (results / "cards").rglob("*.html")]
    assert any("ε ladder" in c and "Verdict:" in c for c in cards)


def test_the_dp_run_was_measured_whole_and_says_so(tiny_run):
    # Issue 32: the released DP-SGD model and its twin carry the noise certificate and the
    # accounting check in train.json / audit.json; their rows reach metrics.parquet and the dossier.
    from dpaudit.io import read_json

    results = tiny_run["workdir"] / "results"
    train = read_json(next(p for p in (results / "models" / "synthetic").rglob("train.json")
                           if read_json(p)["mechanism"] == "dpsgd"))
    assert train["noise_check"]["passed"] and train["accounting_check"]["reproduced"]
    assert train["noise_check"]["coordinates"] == 5 * 8 + 8 + 8 * 2 + 2
    assert train["sampler"]["steps_executed"] == train["accountant_inputs"]["steps"] == train["steps"]
    record = read_json(next((results / "canary").rglob("audit.json")))
    assert record["noise_check"]["passed"] and record["noise_check"]["coordinates"] == 5 * 8 + 8 + 8 * 2 + 2 + 300
    # issue 45: the weights (and the twin's canary coordinates) moved only by the optimizer's rule
    for checked in (train, record):
        weights = checked["noise_check"]["weights"]
        assert weights["passed"] and weights["updates"] == train["steps"] and weights["largest_deviation"] < 8
    assert record["noise_check"]["weights"]["coordinates"] == 5 * 8 + 8 + 8 * 2 + 2 + 300
    table = read_parquet(results / "tables" / "metrics.parquet")
    dp = table[(table["family"] == "canary") & (table["mechanism"] == "dpsgd")]
    for metric in ("noise_check_passed", "accounting_reproduced"):
        rows = dp[dp["metric"] == metric]
        assert set(rows["checked_model"]) == {"released", "twin"} and rows["value_bool"].all(), metric
    ratio = dp[(dp["metric"] == "noise_variance_ratio_min") & (dp["checked_model"] == "released")]["value"]
    assert 0.5 < float(ratio.iloc[0]) < 1.5  # the smallest of 4 variables' ratios, ≥ 20 values each
    page = next(p for p in (results / "dossiers" / "synthetic").glob("*.html") if "dpsgd" in p.name).read_text()
    assert "The noise actually added was measured on all 66 coordinates" in page
    assert "the weights moved only by the optimizer" in page and "what the white-box canaries observe" in page
    assert "The accountant&#x27;s inputs match the loop" in page or "The accountant's inputs match the loop" in page


def test_the_table_dataset_was_prepared_trained_and_carded(tiny_run):
    # Issue 25: the CSV read through the table source, its roles recorded, its model's dossier with the card.
    results = tiny_run["workdir"] / "results"
    info = read_json(results / "data" / "tiny_table" / "dataset.json")
    assert info["n"] == 400 and info["label_names"] == ["no", "yes"] and info["source"]["kind"] == "table"
    roles = {c["name"]: c["role"] for c in info["table"]["column_roles"]}
    assert roles == {"row_id": "id", "income": "numeric", "region": "categorical", "owner": "boolean",
                     "churned": "label"}
    table = read_parquet(results / "tables" / "metrics.parquet")
    assert (table[table["dataset"] == "tiny_table"]["metric"] == "attack_auc").any()
    dossiers = list((results / "dossiers" / "tiny_table").glob("*.html"))  # the guidance page is in results/guidance/
    assert len(dossiers) == 1 and (results / "guidance" / "tiny_table.html").is_file()
    text = dossiers[0].read_text()
    assert "fitted on the members" in text and "outside the DP guarantee" in text


def test_every_parquet_of_the_run_opens_with_plain_pandas(tiny_run):
    """pandas.read_parquet alone, as a user opens a result (issue 35): list columns come back
    as arrays, nothing needs dpaudit's reader."""
    import pandas as pd

    files = sorted((tiny_run["workdir"] / "results").rglob("*.parquet"))
    assert any(path.name == "outputs.parquet" for path in files), [str(p) for p in files][:20]
    unreadable = {}
    for path in files:
        try:
            pd.read_parquet(path)
        except Exception as error:  # noqa: BLE001 (every failure is reported, by file)
            unreadable[str(path.relative_to(tiny_run["workdir"]))] = f"{type(error).__name__}: {error}"
    assert not unreadable, unreadable
    outputs = pd.read_parquet(next(p for p in files if p.name == "outputs.parquet"))
    assert np.stack(outputs["logits"].to_numpy()).shape == (len(outputs), 2)


def test_text_ids_of_the_table_join_every_output_and_show_in_its_dossier(tiny_run):
    import pandas as pd

    results = tiny_run["workdir"] / "results"
    ids = pd.read_parquet(results / "data" / "tiny_table" / "ids.parquet")
    assert ids["example_id"].tolist() == list(range(400))
    assert ids["id"].tolist() == [f"r{i:05d}" for i in range(1000, 1400)]
    (outputs_path,) = (results / "per_example" / "tiny_table").glob("*/outputs.parquet")
    joined = pd.read_parquet(outputs_path).merge(ids, on="example_id", how="left", validate="one_to_one")
    assert joined["id"].notna().all() and joined["id"].str.fullmatch(r"r\d{5}").all()
    (dossier,) = (results / "dossiers" / "tiny_table").glob("*.html")
    section = dossier.read_text().split("<h2>4 Exposure of individual rows</h2>")[1]
    assert "<th>your id</th>" in section and re.search(r'data-h="your id">r\d{5}<', section)
    synthetic = pd.read_parquet(results / "data" / "synthetic" / "ids.parquet")
    assert synthetic["id"].tolist() == [str(i) for i in synthetic["example_id"]]
