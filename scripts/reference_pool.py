"""Snakemake adapter: the K reference models of each recipe of a batch, trained together on halves of P."""

from dpaudit.batching import run_jobs
from dpaudit.io import read_json, read_parquet, write_json, write_parquet
from dpaudit.logs import job_logging
from dpaudit.reference.pool import build_reference_pool

for job in run_jobs(snakemake):  # noqa: F821
    with job_logging(job) as log:
        dataset = read_json(job.input.info)
        params = {**job.params.training, **job.params.recipe, "delta": dataset["delta"]["resolved"],
                  "n_classes": int(dataset["classes"])}
        frame, info = build_reference_pool(read_parquet(job.input.examples), dataset["splits"], params,
                                           count=job.params.reference_models, seed=job.params.seed,
                                           threads=job.threads, recorded=read_json(job.input.train), log=log)
        # the recipe names the pool, not its runs: a seed added to the recipe leaves the pool as it is (issue 47)
        info.pop("runs", None)
        info.update(dataset=job.wildcards.dataset, recipe_name=job.wildcards.recipe)
        write_parquet(job.output.outputs, frame)
        write_json(job.output.info, info)
        log.info("%d reference models on %d examples (%s)", info["reference_models"], info["n_population"],
                 "stacked" if info["vectorized"] else f"loop: {info['fallback_reason']}")
