rule aggregate_metrics:
    input:
        metrics=metric_files(),
        dataset_metrics=profile_metric_files(),
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


rule plot_epsilon_star_landscape:
    input:
        table="results/tables/metrics.parquet",
        info="results/data/{dataset}/dataset.json",
    output:
        png=report(
            "results/figures/epsilon_star_landscape_{dataset}.png",
            caption="../workflow/report/epsilon_star_landscape.rst",
            category="Epsilon*",
            labels={"dataset": "{dataset}", "figure": "landscape"},
        ),
        pdf="results/figures/epsilon_star_landscape_{dataset}.pdf",
        strategies="results/tables/epsilon_star_strategies_{dataset}.parquet",
        runs="results/tables/epsilon_star_runs_{dataset}.parquet",
        runs_html=report(
            "results/tables/epsilon_star_runs_{dataset}.html",
            caption="../workflow/report/epsilon_star_runs.rst",
            category="Epsilon*",
            labels={"dataset": "{dataset}", "figure": "per-model table"},
        ),
    params:
        code=CODE["plot_epsilon_star_landscape"],
    log:
        "logs/plot_epsilon_star_landscape/{dataset}.log",
    script:
        "../scripts/plot_epsilon_star_landscape.py"


rule plot_audit:
    input:
        table="results/tables/metrics.parquet",
    output:
        png=report(
            "results/figures/audit_{dataset}.png",
            caption="../workflow/report/audit.rst",
            category="Audit: promised vs measured ε",
            labels={"dataset": "{dataset}", "figure": "audit"},
        ),
        pdf="results/figures/audit_{dataset}.pdf",
        data="results/figures/audit_{dataset}.parquet",
    params:
        code=CODE["plot_audit"],
    log:
        "logs/plot_audit/{dataset}.log",
    script:
        "../scripts/plot_audit.py"


rule plot_model_figures:
    input:
        table="results/tables/metrics.parquet",
        outputs=dataset_runs("results/per_example/{dataset}/{run}/outputs.parquet"),
        train=dataset_runs("results/models/{dataset}/{run}/train.json"),
        info="results/data/{dataset}/dataset.json",
    output:
        **{
            name: report(
                f"results/figures/{name}_{{dataset}}.png",
                caption=f"../workflow/report/{name}.rst",
                category="Attacks and training",
                subcategory="{dataset}",
                labels={"dataset": "{dataset}", "figure": label},
            )
            for name, label in MODEL_FIGURES.items()
        },
        **{f"{name}_pdf": f"results/figures/{name}_{{dataset}}.pdf" for name in MODEL_FIGURES},
    params:
        loss=config["metrics"]["mia"]["loss"],
        code=CODE["plot_model_figures"],
    log:
        "logs/plot_model_figures/{dataset}.log",
    script:
        "../scripts/plot_model_figures.py"
