# The raw file is pinned by its sha256, so the download carries no code hash: a
# library change must not fetch the same bytes again.
rule download_dataset:
    output:
        P.RAW_FILE,
    params:
        sources=download_sources,
    log:
        P.log("download_dataset", "{dataset}/{filename}"),
    retries: 1
    script:
        "../scripts/download_dataset.py"


rule prepare_dataset:
    input:
        unpack(raw_inputs),
    output:
        examples=P.EXAMPLES,
        info=P.DATASET_INFO,
    params:
        dataset=dataset_params,
        delta=config["training"]["delta"],
        allow_large_delta=config["training"]["allow_large_delta"],
        code=CODE["prepare_dataset"],
    resources:
        **job_resources("prepare_dataset"),
    log:
        P.log("prepare_dataset", P.DATASET_KEY),
    benchmark:
        P.benchmark("prepare_dataset", P.DATASET_KEY)
    script:
        "../scripts/prepare_dataset.py"
