# Canary audits (issue 17): an audit twin per DP-SGD run (white- and black-box
# canaries), many releases per output/objective-perturbation run, and the canary
# rows of every run (baselines: a not-applicable row).

from dpaudit.contract import job_options

CANARY_MECHANISMS = ("dpsgd", *dpconfig.LINEAR_MECHANISMS)
CANARY = config["metrics"]["canary"]


def canary_audited(wildcards):
    return run_params(wildcards)["mechanism"] in CANARY_MECHANISMS


def canary_metric_inputs(wildcards):
    keys = {"dataset": wildcards.dataset, "run": wildcards.run}
    inputs = {"train": P.TRAIN_INFO.format(**keys)}
    if wildcards.run in EXTERNAL[wildcards.dataset]:  # issue 44: its verdict from the black-box bound
        inputs["mia"] = P.metric("mia").format(**keys)
    if canary_audited(wildcards):
        inputs["scores"] = P.CANARY_SCORES.format(**keys)
        inputs["record"] = P.CANARY_AUDIT.format(**keys)
    return inputs


def canary_dpsgd_files(pattern):
    """Input function: a dataset's audit-twin files (``pattern``: DP-SGD runs only), in grid order."""

    def files(wildcards):
        return [
            pattern.format(dataset=wildcards.dataset, run=run)
            for run, params in RUNS[wildcards.dataset].items()
            if params["mechanism"] == "dpsgd"
        ]

    return files


def canary_figures():
    if "canary" not in FAMILIES:
        return []
    datasets = [d for d in DATASETS if any(p["mechanism"] == "dpsgd" for p in RUNS[d].values())]
    return [P.CANARY_FIGURE.format(kind=kind, dataset=d) for d in datasets for kind in ("guesses", "tradeoff")]


@intermediates
def canary_score_files():
    if "canary" not in FAMILIES:
        return []
    return [P.CANARY_SCORES.format(dataset=dataset, run=run) for dataset in DATASETS
            for run, params in RUNS[dataset].items() if params["mechanism"] in CANARY_MECHANISMS]


def canary_scores_params(wildcards):
    """A run's grid values and training settings, and the canary options its scores read: the twin's
    for a DP-SGD run, the releases' for a linear one (issue 47: the rows' own options, such as the
    GDP thresholds of a twin's rows, rerun no twin)."""
    dpsgd = run_params(wildcards)["mechanism"] == "dpsgd"
    keys = job_options.CANARY_TWIN if dpsgd else job_options.CANARY_LINEAR
    return {"run": run_params(wildcards), "training": training_params(wildcards),
            "options": job_options.subset(CANARY, keys)}


def canary_metric_params(wildcards):
    """The options an audited run's rows read (none for a run without an audit)."""
    return {"options": job_options.subset(CANARY, job_options.CANARY_ROWS)} if canary_audited(wildcards) else {}


def canary_runs():
    """The runs of each dataset the canary audit trains a twin of or releases many times."""
    return {dataset: [run for run, params in RUNS[dataset].items() if params["mechanism"] in CANARY_MECHANISMS]
            for dataset in DATASETS}


# The audit twins, in batches of whole recipes (issue 36): one TensorFlow process per batch.
for _batch in run_batches("canary_scores", canary_runs(), whole_recipes=True):
    _files = batch_files(_batch, input={"examples": P.EXAMPLES, "info": P.DATASET_INFO, "train": P.TRAIN_INFO},
                         output={"scores": P.CANARY_SCORES, "record": P.CANARY_AUDIT},
                         log=P.log("canary_scores", P.RUN_KEY), params=canary_scores_params)

    rule:
        name:
            _batch.rule
        input:
            _files.input,
        output:
            _files.output,
        params:
            jobs=_files.jobs,
            code=CODE["canary_scores"],
        threads: 1
        resources:
            **batch_resources("canary_scores", _batch),
        log:
            _files.log,
        benchmark:
            P.benchmark("canary_scores", _batch.key)
        script:
            "../scripts/canary_scores.py"


# With the family disabled the models trained elsewhere keep their canary rows (issue 44): no audit runs
# for them anyway, and their verdict, the certified black-box bound against the promise, costs nothing.
CANARY_ROW_RUNS = None if "canary" in FAMILIES else {dataset: list(EXTERNAL[dataset]) for dataset in DATASETS}

for _batch in run_batches("metric_canary", CANARY_ROW_RUNS):
    _files = batch_files(_batch, unpack=canary_metric_inputs, output=P.metric("canary"),
                         log=P.log("metric_canary", P.RUN_KEY), params=canary_metric_params)

    rule:
        name:
            _batch.rule
        input:
            _files.input,
        output:
            _files.output,
        params:
            jobs=_files.jobs,
            code=CODE["metric_canary"],
        localrule: True
        log:
            _files.log,
        benchmark:
            P.benchmark("metric_canary", _batch.key)
        script:
            "../scripts/metric_canary.py"


rule plot_canary:
    input:
        table=P.METRICS_TABLE,
        scores=canary_dpsgd_files(P.CANARY_SCORES),
        records=canary_dpsgd_files(P.CANARY_AUDIT),
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
        alpha=1.0 - CANARY["confidence"],
        code=CODE["plot_canary"],
    localrule: True
    log:
        P.log("plot_canary", P.DATASET_KEY),
    script:
        "../scripts/plot_canary.py"
