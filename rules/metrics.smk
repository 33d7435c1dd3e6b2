# The loss-threshold MIA and Epsilon* families, in batches of runs (issue 36); none imports TensorFlow.

for _batch in run_batches("metric_mia"):
    _files = batch_files(_batch, input={"outputs": P.OUTPUTS, "info": P.DATASET_INFO, "train": P.TRAIN_INFO},
                         output=P.metric("mia"), log=P.log("metric_mia", P.RUN_KEY))

    rule:
        name:
            _batch.rule
        input:
            _files.input,
        output:
            _files.output,
        params:
            jobs=_files.jobs,
            mia=config["metrics"]["mia"],
            code=CODE["metric_mia"],
        resources:
            **batch_resources("metric_mia", _batch),
        log:
            _files.log,
        benchmark:
            P.benchmark("metric_mia", _batch.key)
        script:
            "../scripts/metric_mia.py"


for _batch in run_batches("metric_epsilon_star"):
    _files = batch_files(_batch, input={"outputs": P.OUTPUTS, "info": P.DATASET_INFO, "train": P.TRAIN_INFO},
                         output=P.metric("epsilon_star"), log=P.log("metric_epsilon_star", P.RUN_KEY))

    rule:
        name:
            _batch.rule
        input:
            _files.input,
        output:
            _files.output,
        params:
            jobs=_files.jobs,
            options=config["metrics"]["epsilon_star"],
            code=CODE["metric_epsilon_star"],
        resources:
            **batch_resources("metric_epsilon_star", _batch),
        log:
            _files.log,
        benchmark:
            P.benchmark("metric_epsilon_star", _batch.key)
        script:
            "../scripts/metric_epsilon_star.py"
