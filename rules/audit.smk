# Source 004 (Bernau et al. 2021, identifiability): bounds for every trained DP-SGD run,
# and the DI adversary's audit of full-batch DP-SGD with its own training loop.


rule metric_identifiability:
    input:
        train="results/models/{dataset}/{run}/train.json",
    output:
        "results/metrics/identifiability/{dataset}/{run}.parquet",
    params:
        code=CODE["metric_identifiability"],
    log:
        "logs/metric_identifiability/{dataset}/{run}.log",
    script:
        "../scripts/metric_identifiability.py"
