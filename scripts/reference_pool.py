"""Snakemake adapter: the K reference models of each recipe of a batch, trained together on halves of P."""

from dpaudit.batching import run_jobs
from dpaudit.io import read_json, read_parquet, write_json, write_parquet
from dpaudit.logs import job_logging
from dpaudit.reference.pool import build_reference_pool

for job in run_jobs(snakemake):  # noqa: F821
    with job_logging(job) as log:
        dataset = read_json(job.input.info)
        # a model trained elsewhere's recipe (issue 44) brings its promise's δ and its own P, and its
        # record is no train.json of the recipe (σ is the promise's)
        params = {**job.params.training, "delta": dataset["delta"]["resolved"], **job.params.recipe,
                  "n_classes": int(dataset["classes"])}
        population = read_parquet(job.input.population) if job.input.get("population") else None
        frame, info = build_reference_pool(read_parquet(job.input.examples), dataset["splits"], params,
                                           count=job.params.reference_models, seed=job.params.seed,
                                           threads=job.threads,
                                           recorded=None if population is not None else read_json(job.input.train),
                                           population=population, log=log)
        # the recipe names the pool, not its runs: a seed added to the recipe leaves the pool as it is (issue 47)
        info.pop("runs", None)
        info.update(dataset=job.wildcards.dataset, recipe_name=job.wildcards.recipe)
        write_parquet(job.output.outputs, frame)
        write_json(job.output.info, info)
        log.info("%d reference models on %d examples (%s)", info["reference_models"], info["n_population"],
                 "stacked" if info["vectorized"] else f"loop: {info['fallback_reason']}")
