"""Snakemake adapter: per-example losses and gradient norms of one model (numpy for an MLP; TensorFlow for other models)."""

from threadpoolctl import threadpool_limits

from dpaudit.extract.extract import write_per_example
from dpaudit.io import read_json
from dpaudit.logs import job_logging

sm = snakemake  # noqa: F821
with job_logging(sm) as log, threadpool_limits(limits=sm.threads):
    dataset = read_json(sm.input.info)
    pmp_pairs = None
    if "pmp_pairs" in sm.output.keys():  # what the pmp family's Recipes A and B need, same process
        pmp_pairs = {"path": sm.output.pmp_pairs, "train": read_json(sm.input.train),
                     "checkpoints_path": sm.input.checkpoints, "parent": sm.params.pmp}
    count = write_per_example(
        sm.input.model,
        sm.input.examples,
        dataset["splits"],
        sm.output.outputs,
        sm.output.gradients,
        clip_norm=sm.params.run["clip_norm"],
        full_gradients=sm.params.extract["full_gradients"],
        pmp_pairs=pmp_pairs,
        threads=sm.threads,
    )
    log.info("wrote %d examples", count)
