# Canary audits (issue 17): an audit twin per DP-SGD run (white- and black-box
# canaries), many releases per output/objective-perturbation run, and the canary
# rows of every run (baselines: a not-applicable row).


rule canary_scores:
    input:
        examples="results/data/{dataset}/examples.parquet",
        info="results/data/{dataset}/dataset.json",
        train="results/models/{dataset}/{run}/train.json",
    output:
        scores="results/canary/{dataset}/{run}/scores.parquet",
        record="results/canary/{dataset}/{run}/audit.json",
    params:
        run=run_params,
        training=training_params,
        options=config["metrics"]["canary"],
        code=CODE["canary_scores"],
    threads: 1
    resources:
        **job_resources("canary_scores"),
    log:
        "logs/canary_scores/{dataset}/{run}.log",
    benchmark:
        "benchmarks/canary_scores/{dataset}/{run}.tsv"
    script:
        "../scripts/canary_scores.py"


rule metric_canary:
    input:
        unpack(canary_metric_inputs),
    output:
        "results/metrics/canary/{dataset}/{run}.parquet",
    params:
        options=config["metrics"]["canary"],
        code=CODE["metric_canary"],
    log:
        "logs/metric_canary/{dataset}/{run}.log",
    script:
        "../scripts/metric_canary.py"


rule plot_canary:
    input:
        table="results/tables/metrics.parquet",
        scores=lambda wc: canary_dpsgd_files(wc, "scores.parquet"),
        records=lambda wc: canary_dpsgd_files(wc, "audit.json"),
    output:
        guesses=report(
            "results/figures/canary_guesses_{dataset}.png",
            caption="../workflow/report/canary_guesses.rst",
            category="Audit: promised vs measured ε",
            labels={"dataset": "{dataset}", "figure": "one-run bound vs guesses"},
        ),
        guesses_pdf="results/figures/canary_guesses_{dataset}.pdf",
        guesses_data="results/figures/canary_guesses_{dataset}.parquet",
        tradeoff=report(
            "results/figures/canary_tradeoff_{dataset}.png",
            caption="../workflow/report/canary_tradeoff.rst",
            category="Audit: promised vs measured ε",
            labels={"dataset": "{dataset}", "figure": "trade-off: accountant vs canaries"},
        ),
        tradeoff_pdf="results/figures/canary_tradeoff_{dataset}.pdf",
    params:
        alpha=1.0 - config["metrics"]["canary"]["confidence"],
        code=CODE["plot_canary"],
    log:
        "logs/plot_canary/{dataset}.log",
    script:
        "../scripts/plot_canary.py"
