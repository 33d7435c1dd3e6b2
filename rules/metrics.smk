# One rule per metric family; none imports TensorFlow.


rule metric_mia:
    input:
        outputs="results/per_example/{dataset}/{run}/outputs.parquet",
        info="results/data/{dataset}/dataset.json",
        train="results/models/{dataset}/{run}/train.json",
    output:
        "results/metrics/mia/{dataset}/{run}.parquet",
    params:
        mia=config["metrics"]["mia"],
        code=CODE["metric_mia"],
    resources:
        **job_resources("metric_mia"),
    log:
        "logs/metric_mia/{dataset}/{run}.log",
    benchmark:
        "benchmarks/metric_mia/{dataset}/{run}.tsv"
    script:
        "../scripts/metric_mia.py"


rule metric_epsilon_star:
    input:
        outputs="results/per_example/{dataset}/{run}/outputs.parquet",
        info="results/data/{dataset}/dataset.json",
        train="results/models/{dataset}/{run}/train.json",
    output:
        "results/metrics/epsilon_star/{dataset}/{run}.parquet",
    params:
        options=config["metrics"]["epsilon_star"],
        code=CODE["metric_epsilon_star"],
    resources:
        **job_resources("metric_epsilon_star"),
    log:
        "logs/metric_epsilon_star/{dataset}/{run}.log",
    benchmark:
        "benchmarks/metric_epsilon_star/{dataset}/{run}.tsv"
    script:
        "../scripts/metric_epsilon_star.py"
