# dsched's front door. `make run` and `make test` are the README's two commands; both set up first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python
STAMP  := $(VENV)/.installed

.PHONY: deps setup proto proto-check lint typecheck test test-fast run standalone bench buf-lint check clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

proto: setup
	PY=$(PY) scripts/genproto

# CI: regenerating must reproduce the committed code byte for byte.
proto-check: proto
	git diff --exit-code -- clients/python/dsched/v1 || (echo "generated code is stale: run make proto" >&2; exit 1)
	test -z "$$(git status --porcelain -- clients/python/dsched/v1)" || (echo "untracked generated files" >&2; exit 1)

buf-lint:
	scripts/buf lint

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	scripts/dupscan

typecheck: setup
	$(BIN)/mypy clients/python/dsched server/dsched_server worker/dsched_worker tests

# System packages the tests need (ZooKeeper, Go and protoc for the Go/TypeScript clients, npm ci).
deps:
	scripts/deps

test: deps setup
	scripts/test

test-fast: setup
	$(BIN)/pytest -q -x tests/unit

check: lint typecheck proto-check buf-lint test

run: setup
	scripts/demo

standalone: setup
	$(BIN)/dsched standalone

# Benchmarks are modules of tests.bench (they share tests/bench/common.py), run from the repo root.
# `bench` measures a standalone, then a local cluster, and prints them side by side.
bench: setup
	$(PY) -m tests.bench.standalone_bench --cluster

# Issue 10's cron storm (10,000 schedules firing at once, then idle CPU): about 3 min, too long
# for `make bench`'s table, so its own target and table (tests/bench/cron_storm.py).
.PHONY: bench-storm
bench-storm: setup
	$(PY) -m tests.bench.cron_storm $(if $(REPEAT),--repeat $(REPEAT))

# PYTHON task overhead against `python -c pass` spawned directly (issue 11); REPEAT=3 for three
# fresh servers (tests/bench/python_bench.py).
.PHONY: bench-python
bench-python: setup
	$(PY) -m tests.bench.python_bench $(if $(REPEAT),--repeat $(REPEAT))

# Issue 11: what dsched adds around a SPARK task (dispatch -> spark-submit start, application end
# -> SUCCEEDED) next to the job's own run time (tests/bench/spark_bench.py).
.PHONY: bench-spark
bench-spark: setup
	$(PY) -m tests.bench.spark_bench $(if $(REPEAT),--repeat $(REPEAT))

.PHONY: bench-cluster
bench-cluster: setup
	$(PY) -m tests.bench.cluster_bench

# 50,000 one-task runs (about a quarter of an hour); RUNS=2000 for a quick look.
.PHONY: bench-scale
bench-scale: setup
	$(PY) -m tests.bench.scale_bench $(if $(RUNS),--runs $(RUNS))

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache .pytest_cache
