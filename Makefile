# webserver-operator: the front door. `make help` lists every target.
include hack/versions.env

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TOOLS_BIN = $(shell hack/tools.sh bindir)
KUBECTL = $(TOOLS_BIN)/kubectl
HELM = $(TOOLS_BIN)/helm
# Test backends: local (the control plane built here, started on demand), existing (KUBE_CONTEXT=<name> of a
# cluster you own; the suites install cluster-scoped objects), kind (needs a Docker engine).
CLUSTER ?= local
export CLUSTER
PYTEST_ARGS ?=
IMG ?= ghcr.io/webserver-operator/webserver-operator:0.1.0

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

.PHONY: venv
venv: $(VENV)/.installed ## Create .venv with the package and its dev tools.

.PHONY: fmt
fmt: venv ## Format the code (ruff format + import sorting).
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --select I --fix .

.PHONY: lint
lint: venv ## Lint: ruff (style + format check), mypy --strict, import-linter layer contracts.
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

.PHONY: manifests
manifests: venv ## Generate the CRD (config/crd, chart) from the pydantic models.
	$(VENV)/bin/webserver-operator manifests

##@ Tests

.PHONY: test-unit
test-unit: venv ## Unit tests only (pure, no cluster).
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

.PHONY: test-integration
test-integration: venv tools ## Integration tests against the local control plane (started on demand).
	$(PY) -m pytest tests/integration $(PYTEST_ARGS)

.PHONY: test-e2e
test-e2e: venv tools ## End-to-end tests (installed Helm chart) on CLUSTER=local|existing|kind.
	$(PY) -m pytest tests/e2e $(PYTEST_ARGS)

.PHONY: e2e-kind
e2e-kind: venv ## e2e suite on a kind cluster with the real image (needs a Docker engine; builds kind on demand).
	CLUSTER=kind $(PY) -m pytest tests/e2e $(PYTEST_ARGS)

.PHONY: test
test: lint tools ## Everything CI runs: lint, unit, integration and e2e tests on the local control plane.
	$(PY) -m pytest tests $(PYTEST_ARGS)

##@ Reliability

CHAOS_ARGS ?=

.PHONY: chaos
chaos: venv tools ## Chaos run (not in `make test`): 200 WebServers under churn while etcd, the API server, the network and the operator fail; writes docs/reliability.md. CHAOS_ARGS="--faults a,b" for a subset.
	chaos/tools.sh build
	$(PY) -m chaos $(CHAOS_ARGS)

##@ Local control plane

.PHONY: tools
tools: ## Build kube-apiserver/-controller-manager/-scheduler, kubectl, etcd, kwok, helm into the tools cache.
	hack/tools.sh build

.PHONY: kind-tools
kind-tools: ## Also build kind (only useful where a Docker engine runs).
	hack/tools.sh build kind

.PHONY: cluster-up
cluster-up: tools ## Start the local control plane with a Ready kwok node (reuses a running one).
	hack/cluster.sh up

.PHONY: cluster-down
cluster-down: ## Stop the local control plane and remove its state.
	hack/cluster.sh down

.PHONY: cluster-status
cluster-status: ## Show the local cluster's nodes.
	hack/cluster.sh status

.PHONY: kubeconfig
kubeconfig: ## Print the admin kubeconfig path of the local cluster (use with make -s).
	@hack/cluster.sh kubeconfig

##@ Build

.PHONY: image-recipe
image-recipe: venv ## Run the Dockerfile's steps on the host (wheel, clean venv, import check): CI does, no Docker needed.
	hack/image-recipe.sh

.PHONY: docker-build
docker-build: ## Build the container image (needs a Docker engine). IMG=<name:tag> to override.
	docker build -t $(IMG) .

##@ Run

.PHONY: run
run: venv ## Run the operator on this machine against the current kubeconfig.
	$(VENV)/bin/webserver-operator run

.PHONY: demo
demo: venv tools ## Local cluster + CRD + operator + a Ready sample WebServer, then how to play with it.
	hack/demo.sh
