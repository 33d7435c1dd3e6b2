"""Snakemake adapter: the per-example outputs and the record of a batch's models trained elsewhere (issue 44)."""

from dpaudit.batching import run_jobs
from dpaudit.external.gradients import external_gradients
from dpaudit.external.importer import external_outputs, external_references
from dpaudit.io import read_json, read_parquet, write_json, write_parquet
from dpaudit.logs import job_logging

for job in run_jobs(snakemake):  # noqa: F821
    with job_logging(job) as log:
        examples = read_parquet(job.input.examples, columns=["example_id", "label",
                                                             *(["x"] if "model" in job.params.entry else [])])
        info, ids = read_json(job.input.info), read_parquet(job.input.ids)
        frame, record = external_outputs(
            job.params.entry, name=job.wildcards.run, dataset=job.wildcards.dataset, examples=examples,
            ids=ids, dataset_info=info, delta=job.params.delta,
            allow_large_delta=job.params.allow_large_delta, pmp="pmp" in job.params.keys(),
            dataset_params=job.params.dataset_params, threads=job.threads)
        if job.output.get("gradients"):  # a model file of Dense layers: its gradients at its final weights
            gradients = external_gradients(job.params.entry, frame, examples, record,
                                           where=f"config.external_models.{job.wildcards.run}", splits=info["splits"],
                                           pmp=job.params.get("pmp"), pairs_path=job.output.get("pmp_pairs") or None)
            write_parquet(job.output.gradients, gradients)
        write_parquet(job.output.outputs, frame)
        write_json(job.output.info, record)
        if job.output.get("pool"):  # LiRA's convention: K reference models' outputs with inclusion bits
            pool, pool_info = external_references(job.params.entry, name=job.wildcards.run,
                                                  dataset=job.wildcards.dataset, ids=ids, outputs=frame)
            write_parquet(job.output.pool, pool)
            write_json(job.output.pool_info, pool_info)
        log.info("%s: %d members, %d held out (%s from %s); promise: %s", job.wildcards.run,
                 record["membership"]["n_members"], record["membership"]["n_held_out"],
                 record["source"]["outputs_kind"], record["source"]["path"], record["promise"]["sentence"])
