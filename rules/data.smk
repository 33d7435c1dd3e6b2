# Datasets: the raw files (downloaded and pinned, or the user's table) and the prepared
# examples every run of a dataset trains on.
from dpaudit.data.registry import known_files, known_sources

RAW_FILES = {dataset: known_files(dataset) for dataset in DATASETS}
# A table dataset's one input is its file (issue 25): a changed file reruns what depends on it.
# A table path that is a raw file the workflow downloads (config/own_table.yaml reads
# resources/raw/adult/adult.data) is made by download_dataset.
TABLES = {dataset: config["datasets"][dataset]["path"] for dataset in DATASETS
          if config["datasets"][dataset].get("source") == "table"}
# An arrays dataset's one input is its .npz file (dpaudit.data.arrays), like a table's.
ARRAYS = {dataset: config["datasets"][dataset]["path"] for dataset in DATASETS
          if config["datasets"][dataset].get("source") == "arrays"}
DOWNLOADED = sorted({*DATASETS, *(found[0] for path in TABLES.values() if (found := dpconfig.table_download(path)))})


def download_sources(wildcards):
    return known_sources(wildcards.dataset, wildcards.filename)


def raw_inputs(wildcards):
    if wildcards.dataset in TABLES:
        return {"table": TABLES[wildcards.dataset]}
    if wildcards.dataset in ARRAYS:
        return {"arrays": ARRAYS[wildcards.dataset]}
    return {
        name: ancient(P.RAW_FILE.format(dataset=wildcards.dataset, filename=name))
        for name in RAW_FILES[wildcards.dataset]
    }


def dataset_params(wildcards):
    return config["datasets"][wildcards.dataset]


def table_sketch(wildcards, size):
    """A table dataset's parse-time inspection (its file exists when the job is scheduled)."""
    if wildcards.dataset not in TABLES:
        return {}
    return {"table_sketch": dpconfig.table_sketch(wildcards.dataset, config["datasets"][wildcards.dataset])}


# The raw file is pinned by its sha256, so the download carries no code hash: a
# library change must not fetch the same bytes again.
rule download_dataset:
    output:
        P.RAW_FILE,
    params:
        sources=download_sources,
    wildcard_constraints:
        dataset="|".join(DOWNLOADED),
    localrule: True
    log:
        P.log("download_dataset", "{dataset}/{filename}"),
    benchmark:
        P.benchmark("download_dataset", "{dataset}/{filename}")
    retries: 1
    script:
        "../scripts/download_dataset.py"


rule prepare_dataset:
    input:
        unpack(raw_inputs),
    output:
        examples=P.EXAMPLES,
        info=P.DATASET_INFO,
        ids=P.IDS,
    params:
        dataset=dataset_params,
        delta=config["training"]["delta"],
        allow_large_delta=config["training"]["allow_large_delta"],
        code=CODE["prepare_dataset"],
    resources:
        **job_resources("prepare_dataset", sizes=table_sketch),
    log:
        P.log("prepare_dataset", P.DATASET_KEY),
    benchmark:
        P.benchmark("prepare_dataset", P.DATASET_KEY)
    script:
        "../scripts/prepare_dataset.py"


@intermediates
def dataset_files():
    return [f for dataset in DATASETS for f in expand(rules.prepare_dataset.output, dataset=dataset)]
