# Two commands a user needs: `make run` and `make test`. Both create .venv from
# requirements.lock when it is missing or older than the lock file.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.dpaudit-installed
CONFIG ?= config/config.yaml
SNAKEMAKE_ARGS ?=
# Jobs run side by side only while the memory they declare (dpaudit.resources) fits in what
# this machine has free at the start: two 5 GB extractions on a busy 8 GB laptop wait for
# each other instead of being killed. MEM_MB=0 lifts the limit; a job declaring more than
# the limit still runs, alone (Snakemake caps it).
MEM_MB ?= $(shell awk '/^MemAvailable:/ {printf "%d", $$2 / 1024}' /proc/meminfo 2>/dev/null)
MEMORY_LIMIT = $(if $(filter-out 0,$(MEM_MB)),--resources mem_mb=$(MEM_MB))

.PHONY: all setup run dry-run unlock test lint bench clean-results clean-orphans

all: run

$(STAMP): requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# --no-deps: tensorflow-privacy's metadata pins packages that block the verified set (docs/stack.md, Pinned packages)
	$(BIN)/python -m pip install --quiet --no-deps -r requirements.lock
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

setup: $(STAMP)

# The config file is checked first (dpaudit.configfile): a missing, empty, all-default
# or badly indented file stops here with one line naming it (and the line), no traceback.
CHECK_CONFIG = @$(BIN)/python -m dpaudit.configfile $(CONFIG)

run: $(STAMP)
	$(CHECK_CONFIG)
	$(BIN)/snakemake --configfile $(CONFIG) --report results/report.html --report-after-run $(MEMORY_LIMIT) $(SNAKEMAKE_ARGS)

dry-run: $(STAMP)
	$(CHECK_CONFIG)
	$(BIN)/snakemake -n --configfile $(CONFIG) $(SNAKEMAKE_ARGS)

# After a killed run (kill -9, power loss) Snakemake's lock stays in .snakemake/locks
# and the next run refuses to start; this removes it (same config as `make run`).
unlock: $(STAMP)
	$(CHECK_CONFIG)
	$(BIN)/snakemake --unlock --configfile $(CONFIG) $(SNAKEMAKE_ARGS)

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# Fails on any ruff finding and on any `snakemake --lint` finding but the accepted one
# (no conda environment per rule: one locked venv), read from the lint's JSON (dpaudit.lint).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m dpaudit.lint --snakefile Snakefile --configfile $(CONFIG)

bench: $(STAMP)
	$(BIN)/python bench/run_all.py

clean-results:
	rm -rf results logs benchmarks .snakemake

# Files under results/, logs/ and benchmarks/ that no target of CONFIG produces (runs,
# datasets or families removed from the config): listed; removed with CONFIRM=1.
clean-orphans: $(STAMP)
	$(CHECK_CONFIG)
	@$(BIN)/python -m dpaudit.orphans $(if $(CONFIRM),--remove) -- \
		$(BIN)/snakemake --list-untracked --configfile $(CONFIG) $(SNAKEMAKE_ARGS)
