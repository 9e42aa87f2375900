# Every target creates .venv and installs what it needs, so a fresh clone needs nothing else.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin

.PHONY: test demo lint typecheck unit bench-intake bench-checkpoint schema clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# torch is pinned for the dev/CI install: a CPU build lies on the CI machine's disk, and an
# unpinned resolve would pull a multi-GB CUDA build.
$(VENV)/.dev-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e ".[dev]"
	touch $@

lint: $(VENV)/.dev-installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: $(VENV)/.dev-installed
	$(BIN)/mypy

# Two workers, each taking the next test when it is free (the whole-system demo test takes
# minutes; the rest fill the other worker meanwhile).
unit: $(VENV)/.dev-installed
	$(BIN)/pytest -n 2 --dist worksteal --durations=10

# The type check (one core, a minute) runs beside the tests, which wait on processes and
# brokers as much as they compute.
test: lint
	$(MAKE) --no-print-directory -j2 typecheck unit

# The demo renders video with the worker agent, so it needs the same install as the tests.
demo: $(VENV)/.dev-installed
	$(BIN)/framefleet demo

bench-intake: $(VENV)/.dev-installed
	$(BIN)/python -m benchmarks.intake

bench-checkpoint: $(VENV)/.dev-installed
	$(BIN)/python -m benchmarks.checkpoint

schema: $(VENV)/.dev-installed
	$(BIN)/framefleet schema --output docs/job.schema.json

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .demo
