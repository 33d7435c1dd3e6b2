rule train_model:
    input:
        examples="results/data/{dataset}/examples.parquet",
        info="results/data/{dataset}/dataset.json",
    output:
        model="results/models/{dataset}/{run}/model.keras",
        info="results/models/{dataset}/{run}/train.json",
        **pmp_train_outputs(),
    params:
        run=run_params,
        training=training_params,
        **pmp_train_params(),
        code=CODE["train_model"],
    threads: 1
    resources:
        **job_resources("train_model"),
    log:
        "logs/train_model/{dataset}/{run}.log",
    benchmark:
        "benchmarks/train_model/{dataset}/{run}.tsv"
    script:
        "../scripts/train_model.py"
