"""Snakemake adapter: the K reference models of one training recipe, trained together on halves of P."""

from dpaudit.io import read_json, read_parquet, write_json, write_parquet
from dpaudit.logs import job_logging
from dpaudit.training.reference_pool import build_reference_pool

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    dataset = read_json(sm.input.info)
    params = {**sm.params.training, **sm.params.recipe, "delta": dataset["delta"]["resolved"],
              "n_classes": int(dataset["classes"])}
    frame, info = build_reference_pool(read_parquet(sm.input.examples), dataset["splits"], params,
                                       count=sm.params.reference_models, seed=sm.params.seed, threads=sm.threads,
                                       runs=list(sm.params.runs), recorded=read_json(sm.input.train), log=log)
    info.update(dataset=sm.wildcards.dataset, recipe_name=sm.wildcards.recipe)
    write_parquet(sm.output.outputs, frame)
    write_json(sm.output.info, info)
    log.info("%d reference models on %d examples (%s)", info["reference_models"], info["n_population"],
             "stacked" if info["vectorized"] else f"loop: {info['fallback_reason']}")
