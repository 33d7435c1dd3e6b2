# Every family's per-run rows joined to the grid (metrics.parquet, runs.html), and the
# figures over every model of a dataset.

# Per-dataset figures over all models of a dataset (issue 8): output name -> report label.
MODEL_FIGURES = {
    "roc": "attack ROCs (log–log)",
    "tpr_at_low_fpr": "TPR at FPR 1e-3 and 1e-2",
    "loss_histograms": "member vs non-member losses",
    "training_curves": "training curves",
    "utility": "utility across seeds",
}


@intermediates
def metric_files():
    """Every per-run metric file of every enabled family (FAMILIES), the rows aggregate_metrics joins, and
    the canary rows (the verdict) of the models trained elsewhere when that family is disabled (issue 44)."""
    return [
        P.METRIC.format(family=family, dataset=dataset, run=run)
        for family in FAMILIES
        for dataset in DATASETS
        for run in RUNS[dataset]
    ] + ([] if "canary" in FAMILIES else [P.metric("canary").format(dataset=dataset, run=run)
                                          for dataset in DATASETS for run in EXTERNAL[dataset]])


def landscape_figures():
    if "epsilon_star" not in FAMILIES:
        return []
    return [P.LANDSCAPE_FIGURE.format(dataset=dataset) for dataset in DATASETS]


def report_figures():
    return [
        P.DATASET_FIGURE.format(name=name, dataset=dataset)
        for name in ["audit", *MODEL_FIGURES]
        for dataset in DATASETS
    ]


rule aggregate_metrics:
    input:
        metrics=metric_files(),
        dataset_metrics=profile_metric_files(),
        attack_metrics=attack_metric_files(),
        train=all_runs(P.TRAIN_INFO),
    output:
        table=P.METRICS_TABLE,
        runs=report(
            P.RUNS_PAGE,
            caption="../workflow/report/runs.rst",
            category="Tables",
        ),
    params:
        runs=RUNS,
        run_keys=RUN_KEYS,
        code=CODE["aggregate_metrics"],
    localrule: True
    log:
        P.log("aggregate_metrics"),
    script:
        "../scripts/aggregate_metrics.py"


rule plot_privacy_utility:
    input:
        P.METRICS_TABLE,
    output:
        png=report(
            P.PRIVACY_UTILITY_FIGURE,
            caption="../workflow/report/privacy_utility.rst",
            category="Privacy–utility",
        ),
        pdf=P.beside(P.PRIVACY_UTILITY_FIGURE, "pdf"),
    params:
        code=CODE["plot_privacy_utility"],
    localrule: True
    log:
        P.log("plot_privacy_utility"),
    script:
        "../scripts/plot_privacy_utility.py"


rule plot_epsilon_star_landscape:
    input:
        table=P.METRICS_TABLE,
        info=P.DATASET_INFO,
    output:
        png=report(
            P.LANDSCAPE_FIGURE,
            caption="../workflow/report/epsilon_star_landscape.rst",
            category="Epsilon*",
            labels={"dataset": "{dataset}", "figure": "landscape"},
        ),
        pdf=P.beside(P.LANDSCAPE_FIGURE, "pdf"),
        strategies=P.EPSILON_STAR_STRATEGIES,
        runs=P.EPSILON_STAR_RUNS,
        runs_html=report(
            P.EPSILON_STAR_RUNS_PAGE,
            caption="../workflow/report/epsilon_star_runs.rst",
            category="Epsilon*",
            labels={"dataset": "{dataset}", "figure": "per-model table"},
        ),
    params:
        code=CODE["plot_epsilon_star_landscape"],
    localrule: True
    log:
        P.log("plot_epsilon_star_landscape", P.DATASET_KEY),
    script:
        "../scripts/plot_epsilon_star_landscape.py"


rule plot_audit:
    input:
        table=P.METRICS_TABLE,
    output:
        png=report(
            P.fill(P.DATASET_FIGURE, name="audit"),
            caption="../workflow/report/audit.rst",
            category="Audit: promised vs measured ε",
            labels={"dataset": "{dataset}", "figure": "audit"},
        ),
        pdf=P.beside(P.fill(P.DATASET_FIGURE, name="audit"), "pdf"),
        data=P.beside(P.fill(P.DATASET_FIGURE, name="audit"), "parquet"),
    params:
        code=CODE["plot_audit"],
    localrule: True
    log:
        P.log("plot_audit", P.DATASET_KEY),
    script:
        "../scripts/plot_audit.py"


rule plot_model_figures:
    input:
        table=P.METRICS_TABLE,
        outputs=dataset_runs(P.OUTPUTS),
        train=dataset_runs(P.TRAIN_INFO),
        info=P.DATASET_INFO,
    output:
        **{
            name: report(
                P.fill(P.DATASET_FIGURE, name=name),
                caption=f"../workflow/report/{name}.rst",
                category="Attacks and training",
                subcategory="{dataset}",
                labels={"dataset": "{dataset}", "figure": label},
            )
            for name, label in MODEL_FIGURES.items()
        },
        **{f"{name}_pdf": P.beside(P.fill(P.DATASET_FIGURE, name=name), "pdf") for name in MODEL_FIGURES},
    params:
        runs=dataset_run_names,
        loss=config["metrics"]["mia"]["loss"],
        code=CODE["plot_model_figures"],
    localrule: True
    log:
        P.log("plot_model_figures", P.DATASET_KEY),
    script:
        "../scripts/plot_model_figures.py"
