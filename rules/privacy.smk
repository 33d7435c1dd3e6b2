# Geambasu's DP lecture: a privacy card per model, the budget ledger, teaching figures.


rule privacy_card:
    input:
        outputs="results/per_example/{dataset}/{run}/outputs.parquet",
        mia="results/metrics/mia/{dataset}/{run}.parquet",
        train="results/models/{dataset}/{run}/train.json",
        info="results/data/{dataset}/dataset.json",
        **canary_card_input(),
    output:
        card=report(
            "results/cards/{dataset}/{run}.html",
            caption="../workflow/report/privacy_card.rst",
            category="Privacy cards",
            subcategory="{dataset}",
            labels=card_labels,
        ),
        figure="results/cards/{dataset}/{run}.png",
        metrics="results/metrics/privacy_card/{dataset}/{run}.parquet",
    params:
        alpha=config["metrics"]["mia"]["alpha"],
        loss=config["metrics"]["mia"]["loss"],
        code=CODE["privacy_card"],
    log:
        "logs/privacy_card/{dataset}/{run}.log",
    script:
        "../scripts/privacy_card.py"


rule budget_ledger:
    input:
        train=all_runs("results/models/{dataset}/{run}/train.json"),
    output:
        runs="results/tables/budget_ledger.parquet",
        totals="results/tables/budget_totals.parquet",
        html=report(
            "results/tables/budget_ledger.html",
            caption="../workflow/report/budget_ledger.rst",
            category="Tables",
        ),
    params:
        run_keys=[(dataset, run) for dataset in DATASETS for run in RUNS[dataset]],
        code=CODE["budget_ledger"],
    log:
        "logs/budget_ledger.log",
    script:
        "../scripts/budget_ledger.py"


rule teaching_figures:
    output:
        **{
            name: report(
                f"results/figures/teaching_{name}.png",
                caption=f"../workflow/report/teaching_{name}.rst",
                category="DP foundations",
                labels={"figure": label},
            )
            for name, label in TEACHING_FIGURES.items()
        },
        pdfs=[f"results/figures/teaching_{name}.pdf" for name in TEACHING_FIGURES],
    params:
        code=CODE["teaching_figures"],
    log:
        "logs/teaching_figures.log",
    script:
        "../scripts/teaching_figures.py"
