rule extract_per_example:
    input:
        examples="results/data/{dataset}/examples.parquet",
        info="results/data/{dataset}/dataset.json",
        model="results/models/{dataset}/{run}/model.keras",
        train="results/models/{dataset}/{run}/train.json",
        **pmp_extract_inputs(),
    output:
        outputs="results/per_example/{dataset}/{run}/outputs.parquet",
        gradients="results/per_example/{dataset}/{run}/gradients.parquet",
        **pmp_extract_outputs(),
    params:
        run=run_params,
        extract=config["extract"],
        **pmp_extract_params(),
        code=CODE["extract_per_example"],
    threads: 1
    resources:
        **job_resources("extract_per_example"),
    log:
        "logs/extract_per_example/{dataset}/{run}.log",
    benchmark:
        "benchmarks/extract_per_example/{dataset}/{run}.tsv"
    script:
        "../scripts/extract_per_example.py"
