# Privacy dossiers (issue 18): every family's answer for one model on one page, and the
# guidance page per dataset to choose ε. Both read the metrics table through the metric
# vocabulary (dpaudit.report.dossier) and are standalone HTML files.
#
# One job per dataset writes every model's dossier and the dataset's guidance page (issue
# 23). Every page reads metrics.parquet, which changes whenever any run's metrics do, so a
# job per model never spared a rerun: it only paid the interpreter's and pandas' start
# once per model. Snakemake's outputs cannot vary in number with a wildcard, so the rule is
# declared once per dataset, dossier_<dataset>, with {dataset} pinned to that dataset: each
# page is still a declared output (a target of its own, a report entry with its caption).
import re
from types import SimpleNamespace


def dossier_rule_name(dataset):
    """dossier_<dataset>, the dataset name made an identifier ('-', '.', '+' become '_')."""
    return "dossier_" + re.sub(r"\W", "_", dataset)


_dossier_rules = {}
for _dataset in DATASETS:
    _dossier_rules.setdefault(dossier_rule_name(_dataset), []).append(_dataset)
if any(len(datasets) > 1 for datasets in _dossier_rules.values()):
    refuse_config("config.datasets: datasets whose dossier rules share a name (rename one): "
                        + "; ".join(" and ".join(d) for d in _dossier_rules.values() if len(d) > 1))


def dossier_audited(wildcards):
    """Params function: the runs whose canary audit record the dossier reads (the many-runs
    audit's worst-case neighbour of a linear mechanism), in dossier_records() order."""
    if "canary" not in FAMILIES:
        return []
    return [run for run, params in RUNS[wildcards.dataset].items()
            if params["mechanism"] in dpconfig.LINEAR_MECHANISMS]


def dossier_records(wildcards):
    return [P.CANARY_AUDIT.format(dataset=wildcards.dataset, run=run) for run in dossier_audited(wildcards)]


def dossier_attacked(wildcards):
    """Params function: the runs whose attack scores section 4 ranks by (issue 24; none with
    metrics.attacks off: the dossier keeps the loss ranking), in dossier_attack_scores() order."""
    return attacked_runs(wildcards) if ATTACKS["enabled"] else []


def dossier_attack_scores(wildcards):
    return [P.ATTACK_SCORES.format(dataset=wildcards.dataset, run=run) for run in dossier_attacked(wildcards)]


def dossier_audit_runs(wildcards):
    """The identifiability audit's runs table when the audit ran on this dataset (its x* is flagged)."""
    return [P.AUDIT_RUNS] if wildcards.dataset in AUDIT_DATASETS else []


def exposed_datasets():
    """Datasets with attacked runs (the exposed-rows page needs attack scores)."""
    return [dataset for dataset in DATASETS if RECIPES[dataset]] if ATTACKS["enabled"] else []


# Issue 34: the category of the overview and the ladder small multiples. The report's menu sorts
# categories alphabetically (no order can be declared): "Answer" comes before "Attacks", first.
OVERVIEW_CATEGORY = "Answer: every model at a glance"


def dossier_targets():
    """Every model's dossier, each dataset's guidance page (with its figure) and, with the
    attacks on, its exposed-rows page."""
    return all_runs(P.DOSSIER) + [
        path for dataset in DATASETS
        for path in (P.fill(P.GUIDANCE, dataset=dataset), P.fill(P.beside(P.GUIDANCE, "png"), dataset=dataset))
    ] + [P.EXPOSED_ROWS.format(dataset=dataset) for dataset in exposed_datasets()]


for _dataset in DATASETS:

    rule:
        name:
            dossier_rule_name(_dataset)
        input:
            table=rules.aggregate_metrics.output.table,
            ledger=rules.budget_ledger.output.runs,
            info=P.DATASET_INFO,
            ids=P.IDS,
            train=dataset_runs(P.TRAIN_INFO),
            outputs=dataset_runs(P.OUTPUTS),
            records=dossier_records,
            scores=dossier_attack_scores,
            audit_runs=dossier_audit_runs,
        output:
            # one page per run of the dataset, in dataset_run_names() order
            pages=[
                report(
                    P.fill(P.DOSSIER, run=run),
                    caption="../workflow/report/dossier.rst",
                    category="Dossiers",
                    subcategory="{dataset}",
                    labels=card_labels(SimpleNamespace(dataset=_dataset, run=run)),
                )
                for run in RUNS[_dataset]
            ],
            guidance=report(
                P.GUIDANCE,
                caption="../workflow/report/dossier_guidance.rst",
                category="Dossiers",
                subcategory="{dataset}",
                labels={"model": "guidance: choosing ε"},
            ),
            guidance_png=report(
                P.beside(P.GUIDANCE, "png"),
                caption="../workflow/report/dossier_guidance_figure.rst",
                category="Dossiers",
                subcategory="{dataset}",
                labels={"model": "guidance: privacy–utility frontier"},
            ),
            guidance_pdf=P.beside(P.GUIDANCE, "pdf"),
            # issue 34: each model's ladder figure, which its dossier opens with (the Parquet of its
            # rungs beside), and the dataset's small multiples the overview shows, with the PDF: a
            # PDF per model cost ~0.8 s each (font subsetting), most of the ladders' job time
            ladders=[P.fill(P.LADDER_FIGURE, run=run) for run in RUNS[_dataset]],
            ladder_data=[P.fill(P.beside(P.LADDER_FIGURE, "parquet"), run=run) for run in RUNS[_dataset]],
            ladder_grid=report(
                P.LADDER_GRID_FIGURE,
                caption="../workflow/report/ladder.rst",
                category=OVERVIEW_CATEGORY,
                labels={"dataset": "{dataset}", "page": "ladder of every model"},
            ),
            ladder_grid_pdf=P.beside(P.LADDER_GRID_FIGURE, "pdf"),
            ladder_grid_data=P.beside(P.LADDER_GRID_FIGURE, "parquet"),
        wildcard_constraints:
            dataset=re.escape(_dataset),
        params:
            runs=dataset_run_names,
            audited=dossier_audited,
            attacked=dossier_attacked,
            loss=config["metrics"]["mia"]["loss"],
            targets=config["guidance"],
            code=CODE["dossier"],
        localrule: True
        log:
            P.log("dossier", P.DATASET_KEY),
        benchmark:
            P.benchmark("dossier", P.DATASET_KEY)
        script:
            "../scripts/dossier.py"


# The rows the attacks single out across the dataset's grid (issue 24): one page per dataset
# with the attacks on, beside the dossiers (dpaudit.report.exposed_page).
rule exposed_rows:
    input:
        table=rules.aggregate_metrics.output.table,
        scores=attack_dataset_files(P.ATTACK_SCORES),
        records=dossier_records,
        audit_runs=dossier_audit_runs,
    output:
        page=report(
            P.EXPOSED_ROWS,
            caption="../workflow/report/exposed_rows.rst",
            category="Dossiers",
            subcategory="{dataset}",
            labels={"model": "exposed rows across the grid"},
        ),
        png=report(
            P.beside(P.EXPOSED_ROWS, "png"),
            caption="../workflow/report/exposed_rows_figure.rst",
            category="Dossiers",
            subcategory="{dataset}",
            labels={"model": "exposed rows against ε"},
        ),
        pdf=P.beside(P.EXPOSED_ROWS, "pdf"),
    params:
        runs=attacked_runs,
        run_params=attacked_run_params,
        audited=dossier_audited,
        code=CODE["exposed_rows"],
    localrule: True
    log:
        P.log("exposed_rows", P.DATASET_KEY),
    benchmark:
        P.benchmark("exposed_rows", P.DATASET_KEY)
    script:
        "../scripts/exposed_rows.py"


# The overview (issue 34): one row per model with its verdict, strongest attack, largest certified
# bound and ε*, linking to its dossier, under each dataset's ladder small multiples; and the same
# page as the report's landing view (workflow/report/workflow.rst includes P.OVERVIEW_LANDING).
rule overview:
    input:
        table=rules.aggregate_metrics.output.table,
        figures=[P.LADDER_GRID_FIGURE.format(dataset=dataset) for dataset in DATASETS],
    output:
        page=report(
            P.OVERVIEW,
            caption="../workflow/report/overview.rst",
            category=OVERVIEW_CATEGORY,
            labels={"dataset": "all", "page": "overview: is each model as private as promised?"},
        ),
        landing=P.OVERVIEW_LANDING,
    params:
        datasets=list(DATASETS),
        code=CODE["overview"],
    localrule: True
    log:
        P.log("overview"),
    benchmark:
        P.benchmark("overview")
    script:
        "../scripts/overview.py"
