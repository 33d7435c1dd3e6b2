# The raw file is pinned by its sha256, so the download carries no code hash: a
# library change must not fetch the same bytes again.
rule download_dataset:
    output:
        "resources/raw/{dataset}/{filename}",
    params:
        sources=download_sources,
    log:
        "logs/download_dataset/{dataset}/{filename}.log",
    retries: 1
    script:
        "../scripts/download_dataset.py"


rule prepare_dataset:
    input:
        unpack(raw_inputs),
    output:
        examples="results/data/{dataset}/examples.parquet",
        info="results/data/{dataset}/dataset.json",
    params:
        dataset=dataset_params,
        delta=config["training"]["delta"],
        allow_large_delta=config["training"]["allow_large_delta"],
        code=CODE["prepare_dataset"],
    log:
        "logs/prepare_dataset/{dataset}.log",
    benchmark:
        "benchmarks/prepare_dataset/{dataset}.tsv"
    script:
        "../scripts/prepare_dataset.py"
