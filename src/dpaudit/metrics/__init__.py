"""One module or package per metric family, each reading per-example tables and writing long-format rows; also the ladder's rungs and verdicts read from the metrics table."""
