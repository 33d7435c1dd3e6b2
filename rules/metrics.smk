# One rule per metric family; none imports TensorFlow.


rule metric_mia:
    input:
        outputs=P.OUTPUTS,
        info=P.DATASET_INFO,
        train=P.TRAIN_INFO,
    output:
        P.metric("mia"),
    params:
        mia=config["metrics"]["mia"],
        code=CODE["metric_mia"],
    resources:
        **job_resources("metric_mia"),
    log:
        P.log("metric_mia", P.RUN_KEY),
    benchmark:
        P.benchmark("metric_mia", P.RUN_KEY)
    script:
        "../scripts/metric_mia.py"


rule metric_epsilon_star:
    input:
        outputs=P.OUTPUTS,
        info=P.DATASET_INFO,
        train=P.TRAIN_INFO,
    output:
        P.metric("epsilon_star"),
    params:
        options=config["metrics"]["epsilon_star"],
        code=CODE["metric_epsilon_star"],
    resources:
        **job_resources("metric_epsilon_star"),
    log:
        P.log("metric_epsilon_star", P.RUN_KEY),
    benchmark:
        P.benchmark("metric_epsilon_star", P.RUN_KEY)
    script:
        "../scripts/metric_epsilon_star.py"
