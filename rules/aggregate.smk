rule aggregate_metrics:
    input:
        metrics=[
            path
            for family in FAMILIES
            for path in all_runs("results/metrics/" + family + "/{dataset}/{run}.parquet")
        ],
        train=all_runs("results/models/{dataset}/{run}/train.json"),
    output:
        table="results/tables/metrics.parquet",
        runs=report(
            "results/tables/runs.html",
            caption="../workflow/report/runs.rst",
            category="Tables",
        ),
    params:
        runs=RUNS,
        code=CODE["aggregate_metrics"],
    log:
        "logs/aggregate_metrics.log",
    script:
        "../scripts/aggregate_metrics.py"


rule plot_privacy_utility:
    input:
        "results/tables/metrics.parquet",
    output:
        png=report(
            "results/figures/privacy_utility.png",
            caption="../workflow/report/privacy_utility.rst",
            category="Privacy–utility",
        ),
        pdf="results/figures/privacy_utility.pdf",
    params:
        code=CODE["plot_privacy_utility"],
    log:
        "logs/plot_privacy_utility.log",
    script:
        "../scripts/plot_privacy_utility.py"
