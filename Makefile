# Every target creates .venv and installs what it needs, so a fresh clone needs nothing else.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin

.PHONY: test demo demo-loaded lint typecheck unit browser focus-validate checkov bench-intake bench-checkpoint bench-cost-report bench-gpu-step bench-cost-per-video bench-gpu-features bench-warm-models bench-worker-flood bench-markets bench-planner-error schema clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# torch is pinned for the dev/CI install: a CPU build lies on the CI machine's disk, and an
# unpinned resolve would pull a multi-GB CUDA build.
# The producers' client (client/) is a distribution of its own, without the server's
# dependencies; the CLI's API mode uses it.
$(VENV)/.dev-installed: pyproject.toml client/pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e ".[dev]" -e ./client
	touch $@

# tools/house_rules.py: modules of at most 400 lines as the formatter writes them, and the
# formatter turned off only beneath a reason.
lint: $(VENV)/.dev-installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/python -m tools.house_rules

typecheck: $(VENV)/.dev-installed
	$(BIN)/mypy

# Two workers, each taking the next test when it is free (the whole-system demo test takes
# minutes; the rest fill the other worker meanwhile).
# After the suite: every AWS action it saw the code call against infra/'s IAM policies.
unit: $(VENV)/.dev-installed
	$(BIN)/pytest -n 2 --dist worksteal --durations=10
	$(BIN)/python -m tests.support.iam_check .aws-actions.jsonl

# `make demo` on a loaded machine: both cores kept busy by two loops, five minutes at most
# (tests/framefleet/test_demo.py). Alone, after the suite; every AWS call its processes make must be
# granted by infra/'s IAM policies, as the suite's are.
demo-loaded: $(VENV)/.dev-installed
	FRAMEFLEET_AWS_ACTIONS_LOG=$(CURDIR)/.aws-actions-demo.jsonl $(BIN)/pytest -m loaded_machine tests/framefleet/test_demo.py
	$(BIN)/python -m tests.support.iam_check --calls-only .aws-actions-demo.jsonl

# The console's browser tests (Playwright driving Debian's Chromium), in a pytest of their own:
# Playwright's sync API keeps an event loop running in its process while the browser lives,
# which the asyncio tests cannot share. Their AWS calls are the demo's, which `unit` checks.
browser: $(VENV)/.dev-installed
	FRAMEFLEET_AWS_ACTIONS_LOG=$(CURDIR)/.aws-actions-browser.jsonl $(BIN)/pytest tests/orchestrator/console --durations=5

# The type check (one core, a minute) runs beside the tests, which wait on processes and
# brokers as much as they compute.
test: lint
	$(MAKE) --no-print-directory -j2 typecheck unit focus-validate checkov browser
	$(MAKE) --no-print-directory demo-loaded

# The FinOps Foundation's FOCUS validator, in a venv of its own: it needs numpy<2 and pandas<3,
# which the product's environment has outgrown. It checks the FOCUS export of a simulated two
# days on the real traces; it exits 0 either way, so its verdict is read from what it prints.
# Its rules that still check column names from before FOCUS 1.0 was final are listed, with
# the reason, in benchmarks/focus-overrides.yaml.
FOCUS_VENV := .venv-focus
$(FOCUS_VENV)/bin/focus-validator:
	$(PYTHON) -m venv $(FOCUS_VENV)
	$(FOCUS_VENV)/bin/pip install -q "focus-validator==1.0.0" "multimethod<1.11"

# checkov (Prisma Cloud's policy-as-code scanner) on infra/ and the Dockerfile, in a venv of its
# own (its pins are its own); --skip-download: it runs offline. Each skip is justified in place.
CHECKOV_VENV := .venv-checkov
$(CHECKOV_VENV)/bin/checkov:
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install -q "checkov>=3.2"

checkov: $(CHECKOV_VENV)/bin/checkov
	$(CHECKOV_VENV)/bin/checkov -d infra --framework terraform --quiet --compact --skip-download
	$(CHECKOV_VENV)/bin/checkov -f Dockerfile -f infra/mosquitto/Dockerfile --framework dockerfile --quiet --compact --skip-download

focus-validate: $(VENV)/.dev-installed $(FOCUS_VENV)/bin/focus-validator
	$(BIN)/python -m benchmarks.cost_report --jobs 8 --days 2 --out .focus-check
	cd "$$($(FOCUS_VENV)/bin/python -c 'import focus_validator, pathlib; print(pathlib.Path(focus_validator.__file__).parents[1])')" && \
	  "$(CURDIR)/$(FOCUS_VENV)/bin/focus-validator" --validate-version 1.0 \
	    --data-file "$(CURDIR)/.focus-check/focus.csv" \
	    --override-file "$(CURDIR)/benchmarks/focus-overrides.yaml" > "$(CURDIR)/.focus-check/validation.txt" 2>&1
	cat .focus-check/validation.txt
	grep -q "^Validation succeeded" .focus-check/validation.txt

# The demo renders video with the worker agent, so it needs the same install as the tests.
demo: $(VENV)/.dev-installed
	$(BIN)/framefleet demo

bench-intake: $(VENV)/.dev-installed
	$(BIN)/python -m benchmarks.intake

bench-checkpoint: $(VENV)/.dev-installed
	$(BIN)/python -m benchmarks.checkpoint

bench-cost-report: $(VENV)/.dev-installed
	$(BIN)/python -m benchmarks.cost_report

# On a GPU: FrameFleet's step against plain diffusers, bf16 against fp32, warm starts, resume.
bench-gpu-step: $(VENV)/.dev-installed
	$(BIN)/python -m benchmarks.gpu_step

bench-cost-per-video: $(VENV)/.dev-installed
	$(BIN)/python -m benchmarks.cost_per_video

# Cost per video with GPU sharing, spanning and stages each on and off, and the lower bound.
bench-gpu-features: $(VENV)/.dev-installed
	$(BIN)/python -m benchmarks.gpu_features

bench-warm-models: $(VENV)/.dev-installed
	$(BIN)/python -m benchmarks.warm_models

# FrameFleet against Greedy any zone with back to spot on every kind of market (hours on 2 cores).
bench-markets: $(VENV)/.dev-installed
	$(BIN)/python -m benchmarks.cost --sections d

# The spot planner's claimed savings against what its moves realized: the guard's margin.
bench-planner-error: $(VENV)/.dev-installed
	$(BIN)/python -m benchmarks.planner_error

bench-worker-flood: $(VENV)/.dev-installed
	$(BIN)/python -m benchmarks.worker_flood
	$(BIN)/python -m benchmarks.worker_flood --useless
	$(BIN)/python -m benchmarks.worker_flood --unbudgeted
	$(BIN)/python -m benchmarks.worker_flood --useless --unbudgeted

schema: $(VENV)/.dev-installed
	$(BIN)/framefleet schema --output docs/job.schema.json
	$(BIN)/framefleet schema --of trace --output docs/trace-format.schema.json
	$(BIN)/framefleet schema --of openapi --output docs/openapi.json

clean:
	rm -rf $(VENV) $(FOCUS_VENV) $(CHECKOV_VENV) .focus-check .pytest_cache .mypy_cache .ruff_cache .demo
