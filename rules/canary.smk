# Canary audits (issue 17): an audit twin per DP-SGD run (white- and black-box
# canaries), many releases per output/objective-perturbation run, and the canary
# rows of every run (baselines: a not-applicable row).


rule canary_scores:
    input:
        examples=P.EXAMPLES,
        info=P.DATASET_INFO,
        train=P.TRAIN_INFO,
    output:
        scores=P.CANARY_SCORES,
        record=P.CANARY_AUDIT,
    params:
        run=run_params,
        training=training_params,
        options=config["metrics"]["canary"],
        code=CODE["canary_scores"],
    threads: 1
    resources:
        **job_resources("canary_scores"),
    log:
        P.log("canary_scores", P.RUN_KEY),
    benchmark:
        P.benchmark("canary_scores", P.RUN_KEY)
    script:
        "../scripts/canary_scores.py"


rule metric_canary:
    input:
        unpack(canary_metric_inputs),
    output:
        P.metric("canary"),
    params:
        options=config["metrics"]["canary"],
        code=CODE["metric_canary"],
    log:
        P.log("metric_canary", P.RUN_KEY),
    script:
        "../scripts/metric_canary.py"


rule plot_canary:
    input:
        table=P.METRICS_TABLE,
        scores=lambda wc: canary_dpsgd_files(wc, P.CANARY_SCORES),
        records=lambda wc: canary_dpsgd_files(wc, P.CANARY_AUDIT),
    output:
        guesses=report(
            P.fill(P.CANARY_FIGURE, kind="guesses"),
            caption="../workflow/report/canary_guesses.rst",
            category="Audit: promised vs measured ε",
            labels={"dataset": "{dataset}", "figure": "one-run bound vs guesses"},
        ),
        guesses_pdf=P.beside(P.fill(P.CANARY_FIGURE, kind="guesses"), "pdf"),
        guesses_data=P.beside(P.fill(P.CANARY_FIGURE, kind="guesses"), "parquet"),
        tradeoff=report(
            P.fill(P.CANARY_FIGURE, kind="tradeoff"),
            caption="../workflow/report/canary_tradeoff.rst",
            category="Audit: promised vs measured ε",
            labels={"dataset": "{dataset}", "figure": "trade-off: accountant vs canaries"},
        ),
        tradeoff_pdf=P.beside(P.fill(P.CANARY_FIGURE, kind="tradeoff"), "pdf"),
    params:
        alpha=1.0 - config["metrics"]["canary"]["confidence"],
        code=CODE["plot_canary"],
    log:
        P.log("plot_canary", P.DATASET_KEY),
    script:
        "../scripts/plot_canary.py"
