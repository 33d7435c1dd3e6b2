"""Snakemake adapter: base model, per-example arrays and worst-case neighbours of one view."""

from dpaudit.io import write_json, write_parquet
from dpaudit.logs import job_logging
from dpaudit.profile.data import load_view
from dpaudit.profile.study import base_artifacts

sm = snakemake  # noqa: F821
with job_logging(sm) as log:
    view = load_view(sm.params.view, sm.input.get("raw"), sm.wildcards.view)
    artifacts = base_artifacts(view, sm.params.lam)
    for name in ("data", "per_example", "worst_case"):
        write_parquet(sm.output[name], artifacts[name])
    write_json(sm.output.base, artifacts["base"])
    log.info("n=%d A(x)=%s y_max row %d, δ_max %.4g", artifacts["base"]["n"],
             [artifacts["base"][f"w_{k}"] for k in range(artifacts["base"]["d"])],
             artifacts["base"]["y_max_row_id"], artifacts["base"]["delta_max"])
